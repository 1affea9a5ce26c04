"""`h5chunk read` runs an H5Dread that libhdf5 might crash on (scale-offset, n-bit, --route h5dread ...)
in a helper process (tools/h5chunk_helper.h): its bytes equal h5py's, locally and over hf:// (where
the helper reads through the same cache, fetching nothing again); a crash or an exit of the helper is
an error naming the dataset; Ctrl-C ends the command and its helper with 130."""

import json
import os
import signal
import subprocess
import threading

import h5py
import numpy as np
import pytest

from conftest import PYTHON_DIR
from local_hub import control, local_hub  # tests/python/local_hub.py

URL = "hf://datasets/lab/helper"
ENV = {**os.environ, "HF_HUB_DISABLE_IMPLICIT_TOKEN": "1"}


def _h5chunk_bin():
    return os.path.join(os.path.dirname(PYTHON_DIR), "bin", "h5chunk")


@pytest.fixture(scope="module")
def hub(tmp_path_factory):
    root = tmp_path_factory.mktemp("hub")
    repo = root / "datasets" / "lab" / "helper"
    repo.mkdir(parents=True)
    rng = np.random.default_rng(3)
    ints = rng.integers(-500, 4000, size=(60, 40)).astype("int32")
    floats = (rng.normal(size=(60, 40)) * 100).astype("float32")
    with h5py.File(repo / "so.h5", "w") as f:
        f.create_dataset("ints", data=ints, chunks=(8, 40), scaleoffset=0)
        f.create_dataset("floats", data=floats, chunks=(16, 10), scaleoffset=2, shuffle=True, compression="gzip")
        f.create_dataset("gzip", data=ints, chunks=(8, 40), compression="gzip")
    with local_hub(str(root)) as endpoint:
        yield {"endpoint": endpoint, "local": repo / "so.h5"}


def _orthogonal(a, selection):
    """numpy text applied per axis, as h5chunk (and h5py) index: an integer drops its axis."""
    items = eval(f"np.s_[{selection}]", {"np": np})
    axis = 0
    for item in items if isinstance(items, tuple) else (items,):
        index = [slice(None)] * a.ndim
        index[axis] = item
        a = a[tuple(index)]
        axis += not isinstance(item, int)
    return a


def _read(target, dataset, selection, out, *extra, env=ENV):
    return subprocess.run([_h5chunk_bin(), "read", str(target), dataset, selection, "-o", str(out), *extra],
                          capture_output=True, text=True, env=env)


@pytest.mark.parametrize("dataset,selection", [("ints", ":"), ("ints", "3:50:4, ::-3"), ("floats", "5"),
                                               ("floats", "[9,2,9], 7:30")])
def test_helper_bytes_equal_h5py_locally_and_over_hf(hub, tmp_path, dataset, selection):
    with h5py.File(hub["local"], "r") as f:
        want = _orthogonal(f[dataset][...], selection)
    common = ["--endpoint", hub["endpoint"], "--cache-dir", str(tmp_path / "cache")]
    for target, extra in ((hub["local"], []), (f"{URL}/so.h5", common)):
        out = tmp_path / "out.bin"
        r = _read(target, "/" + dataset, selection, out, *extra)
        assert r.returncode == 0, r.stderr
        line = json.loads(r.stdout)
        assert "scale-offset" in line["helper_process"], line
        np.testing.assert_array_equal(np.fromfile(out, dtype=want.dtype).reshape(want.shape), want)


def test_the_helper_fetches_nothing_the_command_fetched(hub, tmp_path):
    """Over hf://, the helper reopens the file through the command's cache: a read through the
    helper sends as many range requests as one without it (each in a fresh cache)."""
    counts = {}
    for dataset in ("gzip", "ints"):
        control(hub["endpoint"], "POST", "/_hubfs/reset", {})
        r = _read(f"{URL}/so.h5", "/" + dataset, ":", tmp_path / f"{dataset}.bin", "--endpoint", hub["endpoint"],
                  "--cache-dir", str(tmp_path / f"cache-{dataset}"))
        assert r.returncode == 0, r.stderr
        assert ("helper_process" in json.loads(r.stdout)) == (dataset == "ints")
        counts[dataset] = control(hub["endpoint"], "GET", "/_hubfs/stats")["range_requests"]
    assert counts["gzip"] > 0
    assert counts["ints"] == counts["gzip"], counts


@pytest.mark.parametrize("where", ["local", "hf"])
def test_a_crash_of_the_helper_is_a_named_error(hub, tmp_path, where):
    target = hub["local"] if where == "local" else f"{URL}/so.h5"
    extra = [] if where == "local" else ["--endpoint", hub["endpoint"], "--cache-dir", str(tmp_path / "cache")]
    out = tmp_path / "out.bin"
    r = _read(target, "/ints", ":", out, *extra, env={**ENV, "H5CHUNK_HELPER_TEST_FAULT": "segv"})
    assert r.returncode == 1, r.stderr
    assert "dataset '/ints': libhdf5 crashed reading it (signal 11, SIGSEGV)" in r.stderr
    assert r.stdout == ""
    assert not out.exists()


def _children(pid):
    try:
        with open(f"/proc/{pid}/task/{pid}/children") as f:
            return [int(x) for x in f.read().split()]
    except FileNotFoundError:
        return []


def _alive(pid):
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().split(")")[-1].split()[0] != "Z"
    except FileNotFoundError:
        return False


def test_ctrl_c_ends_the_command_and_its_helper_with_130(hub, tmp_path):
    out_dir = tmp_path / "out"
    out_dir.mkdir()
    env = {**ENV, "H5CHUNK_HELPER_TEST_FAULT": "hang"}  # the helper never answers
    proc = subprocess.Popen([_h5chunk_bin(), "read", f"{URL}/so.h5", "/ints", "-o", str(out_dir / "x.bin"),
                             "--endpoint", hub["endpoint"], "--cache-dir", str(tmp_path / "cache")],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    try:
        while not _children(proc.pid):  # the helper has started
            assert proc.poll() is None, proc.communicate()
            threading.Event().wait(0.02)
        helper = _children(proc.pid)[0]
        proc.send_signal(signal.SIGINT)
        _, err = proc.communicate(timeout=30)  # a hang detector: the helper never ends by itself
    finally:
        proc.kill()
        proc.wait()
    assert proc.returncode == 130, err
    assert "interrupted" in err
    assert list(out_dir.iterdir()) == []
    for _ in range(1500):  # the helper was killed (it is reaped by whoever inherits it)
        if not _alive(helper):
            break
        threading.Event().wait(0.02)
    assert not _alive(helper)
