"""h5chunk on hf:// files without a mount: h5chunk.File("hf://...") and `h5chunk read|info hf://...`
read through hubfs's reader and cache in-process, from the bundled local Hub server (127.0.0.1,
started here). Results equal h5py's of the local file; errors are hubfs.open's."""

import json
import os
import signal
import subprocess
import threading

import h5py
import numpy as np
import pytest

import h5chunk
import hubfs
from conftest import PYTHON_DIR
from local_hub import control, local_hub  # tests/python/local_hub.py

URL = "hf://datasets/lab/h5"


@pytest.fixture(scope="module")
def hub(tmp_path_factory):
    root = tmp_path_factory.mktemp("hub")
    repo = root / "datasets" / "lab" / "h5"
    repo.mkdir(parents=True)
    (repo / "README.md").write_text("# h5\n")
    # 24 frames of 512 KiB, one chunk each: tens of the reader's 1 MiB blocks.
    frames = (np.random.default_rng(7).normal(size=(24, 8, 128, 128)) * 50).astype("float32")
    with h5py.File(repo / "scan.hdf5", "w") as f:
        f.create_dataset("data/raw_data", data=frames, chunks=(1, 8, 128, 128), compression="gzip",
                         compression_opts=1, shuffle=True)
        f.create_dataset("meta/contiguous", data=np.arange(5000, dtype="int64"))
        f.create_dataset("meta/names", data=["a", "bc"], dtype=h5py.string_dtype())
    gated = root / "datasets" / "lab" / "gated"
    (gated / "snapshots" / "c1").mkdir(parents=True)
    (gated / "hub.json").write_text(json.dumps({"refs": {"main": "c1"},
                                                "commits": {"c1": {"date": "2024-01-01T00:00:00Z"}},
                                                "gated": True}))
    with h5py.File(gated / "snapshots" / "c1" / "x.hdf5", "w") as f:
        f.create_dataset("x", data=np.arange(10))
    with local_hub(str(root)) as endpoint:
        yield {"endpoint": endpoint, "frames": frames}


@pytest.fixture
def opts(hub, tmp_path):
    return {"endpoint": hub["endpoint"], "cache_dir": str(tmp_path / "cache"), "token": False}


def test_reads_equal_h5py_on_every_route(hub, opts):
    frames = hub["frames"]
    with h5chunk.File(f"{URL}/scan.hdf5", **opts) as f:
        assert f.filename == f"{URL}/scan.hdf5"
        assert f.datasets() == ["/data/raw_data", "/meta/contiguous", "/meta/names"]
        ds = f["data/raw_data"]
        got, stats = ds.read(np.s_[3:19], return_stats=True)
        assert stats.fast_path and stats.chunks == 16
        np.testing.assert_array_equal(got, frames[3:19])
        np.testing.assert_array_equal(ds[[20, 2, 2], ::-3, 5], frames[[20, 2, 2], ::-3, 5])
        np.testing.assert_array_equal(ds.read(np.s_[0:2], route="h5dread"), frames[0:2])
        np.testing.assert_array_equal(f["meta/contiguous"][100:4000], np.arange(100, 4000))
        # A dtype only h5py reads: h5py over hubfs.open of the same URL, with a warning.
        with pytest.warns(h5chunk.FallbackWarning):
            assert list(f["meta/names"][:]) == [b"a", b"bc"]
    assert f.closed


def test_a_hubfs_open_file_is_accepted(hub, opts):
    with hubfs.open(f"{URL}/scan.hdf5", **opts) as raw, h5chunk.File(raw) as f:
        np.testing.assert_array_equal(f["data/raw_data"][5:9], hub["frames"][5:9])


def test_a_second_read_with_the_same_cache_fetches_no_data(hub, opts):
    code = ("import sys; sys.path.insert(0, sys.argv[1]); import h5chunk\n"
            "with h5chunk.File(sys.argv[2], endpoint=sys.argv[3], cache_dir=sys.argv[4], token=False) as f:\n"
            "    print(float(f['data/raw_data'][0:10].sum()))\n")
    args = ["/usr/bin/python3", "-c", code, PYTHON_DIR, f"{URL}/scan.hdf5", opts["endpoint"], opts["cache_dir"]]
    first = subprocess.run(args, capture_output=True, text=True)
    assert first.returncode == 0, first.stderr
    control(opts["endpoint"], "POST", "/_hubfs/reset", {})
    second = subprocess.run(args, capture_output=True, text=True)
    assert second.returncode == 0, second.stderr
    assert second.stdout == first.stdout
    s = control(opts["endpoint"], "GET", "/_hubfs/stats")
    # No data: at most the branch name is resolved again (no request touches the file's bytes).
    assert s["cdn_requests"] == 0 and s["range_requests"] == 0, s


def test_errors_are_hubfs_exceptions_with_the_cause(hub, opts):
    with pytest.raises(FileNotFoundError, match="nope.hdf5"):
        h5chunk.File(f"{URL}/nope.hdf5", **opts)
    with pytest.raises(FileNotFoundError):
        h5chunk.File("hf://datasets/lab/missing/x.hdf5", **opts)
    with pytest.raises(PermissionError):
        h5chunk.File("hf://datasets/lab/gated/x.hdf5", **opts)
    with pytest.raises(OSError, match="is not an HDF5 file"):
        h5chunk.File(f"{URL}/README.md", **opts)
    with pytest.raises(TypeError, match="unknown option"):
        h5chunk.File(f"{URL}/scan.hdf5", cache_sise="1G", **opts)
    with pytest.raises(TypeError, match="hf:// files only"):
        h5chunk.File("/nonexistent.h5", endpoint="http://x")


def test_ctrl_c_interrupts_a_stalled_read(hub, tmp_path):
    endpoint = hub["endpoint"]
    opts = {"endpoint": endpoint, "cache_dir": str(tmp_path / "stall"), "token": False, "read_timeout": 60}
    f = h5chunk.File(f"{URL}/scan.hdf5", **opts)
    ds = f["data/raw_data"]  # the metadata (chunk index included: it precedes the chunks) is read
    control(endpoint, "POST", "/_hubfs/faults", {"mode": "stall", "path_contains": "/blobs/", "count": 1000})
    timer = threading.Timer(0.3, os.kill, (os.getpid(), signal.SIGINT))
    try:
        timer.start()
        with pytest.raises(KeyboardInterrupt):
            ds[16:24]  # no chunk read yet: it waits on the stalled Hub until Ctrl-C
    finally:
        timer.cancel()
        control(endpoint, "DELETE", "/_hubfs/faults")
        f.close()


def _h5chunk_bin():
    return os.path.join(os.path.dirname(PYTHON_DIR), "bin", "h5chunk")


@pytest.mark.parametrize("inherited", ["default", "ignored"])
@pytest.mark.parametrize("command", ["read", "info", "bench"])
def test_cli_ctrl_c_ends_a_stalled_read_with_130_and_no_output(hub, tmp_path, command, inherited):
    """SIGINT while the CLI waits on a stalled CDN: status 130 long before the stall ends, and no
    output file. Also when SIGINT comes inherited as ignored (a script's background job)."""
    endpoint = hub["endpoint"]
    stall_ms = 60000
    control(endpoint, "POST", "/_hubfs/faults",
            {"mode": "stall", "stall_ms": stall_ms, "path_contains": "/blobs/", "count": 1000})
    control(endpoint, "POST", "/_hubfs/reset", {})
    out = tmp_path / "out" / "frames.bin"
    out.parent.mkdir()
    args = {"read": ["read", f"{URL}/scan.hdf5", "/data/raw_data", "-o", str(out)],
            "info": ["info", f"{URL}/scan.hdf5"],
            "bench": ["bench", f"{URL}/scan.hdf5", "/data/raw_data", "--repeat", "1"]}[command]
    env = {**os.environ, "HF_HUB_DISABLE_IMPLICIT_TOKEN": "1"}
    preexec = (lambda: signal.signal(signal.SIGINT, signal.SIG_IGN)) if inherited == "ignored" else None
    proc = subprocess.Popen([_h5chunk_bin(), *args, "--endpoint", endpoint, "--cache-dir", str(tmp_path / "cache")],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env, preexec_fn=preexec)
    try:
        # Interrupt once the CLI is reading: its first file request is held by the stall.
        while control(endpoint, "GET", "/_hubfs/stats")["faults_injected"] == 0:
            assert proc.poll() is None, proc.communicate()
            threading.Event().wait(0.02)
        proc.send_signal(signal.SIGINT)
        _, err = proc.communicate(timeout=stall_ms / 2000)  # ended by the signal, not the stall
    finally:
        proc.kill()
        proc.wait()
        control(endpoint, "DELETE", "/_hubfs/faults")
    assert proc.returncode == 130, err
    assert "interrupted" in err
    assert list(out.parent.iterdir()) == []  # neither the output nor a partial file


def test_cli_read_and_info(hub, tmp_path):
    frames = hub["frames"]
    common = ["--endpoint", hub["endpoint"], "--cache-dir", str(tmp_path / "cache")]
    env = {**os.environ, "HF_HUB_DISABLE_IMPLICIT_TOKEN": "1"}
    out = tmp_path / "frames.bin"
    r = subprocess.run([_h5chunk_bin(), "read", f"{URL}/scan.hdf5", "/data/raw_data", "2:7", "-o", str(out),
                        *common], capture_output=True, text=True, env=env)
    assert r.returncode == 0, r.stderr
    line = json.loads(r.stdout)
    assert line["fast_path"] and line["shape"] == [5, 8, 128, 128]
    np.testing.assert_array_equal(np.fromfile(out, dtype="float32").reshape(5, 8, 128, 128), frames[2:7])
    r = subprocess.run([_h5chunk_bin(), "info", f"{URL}/scan.hdf5", "--json", *common],
                       capture_output=True, text=True, env=env)
    assert r.returncode == 0, r.stderr
    infos = [json.loads(x) for x in r.stdout.splitlines()]
    assert [i["path"] for i in infos] == ["/data/raw_data", "/meta/contiguous", "/meta/names"]
    assert infos[0]["chunks"] == 24
    r = subprocess.run([_h5chunk_bin(), "read", f"{URL}/nope.hdf5", "/x", *common], capture_output=True,
                       text=True, env=env)
    assert r.returncode == 1 and "nope.hdf5" in r.stderr
