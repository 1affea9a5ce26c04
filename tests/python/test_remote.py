"""hubfs.open and friends: hf:// files without a mount, read from the bundled local Hub server
(127.0.0.1, started here) through the mount's reader and cache, in this process."""

import hashlib
import io
import json
import os
import signal
import subprocess
import sys
import tarfile
import tempfile
import threading
import time
import zipfile

import h5py
import numpy as np
import pytest

import hubfs
from conftest import PYTHON_DIR
from local_hub import control, local_hub  # tests/python/local_hub.py

TOKEN = "hf_remotetoken"
BIG_SIZE = 2_500_000  # LFS (served by the CDN origin): three 1 MiB blocks


@pytest.fixture(scope="module")
def hub(tmp_path_factory):
    root = tmp_path_factory.mktemp("hub")
    repo = root / "datasets" / "lab" / "remote"
    (repo / "data" / "deep").mkdir(parents=True)
    (repo / "README.md").write_text("# remote\n")
    big = np.random.default_rng(5).integers(0, 256, BIG_SIZE, dtype=np.uint8).tobytes()
    (repo / "data" / "big.bin").write_bytes(big)
    # Read by the `hubfs cp` test alone: other tests leave reads of big.bin in flight (an
    # interrupted read's fetch goes on to its deadline), which must not count against it.
    copy = np.random.default_rng(6).integers(0, 256, BIG_SIZE, dtype=np.uint8).tobytes()
    (repo / "data" / "copy.bin").write_bytes(copy)
    (repo / "data" / "deep" / "note.txt").write_text("deep\n")
    frames = (np.random.default_rng(3).normal(size=(6, 4, 64, 32)) * 50).astype("float32")
    with h5py.File(repo / "scan.hdf5", "w") as f:
        f.create_dataset("data/raw_data", data=frames, chunks=(1, 4, 64, 32), compression="gzip")
    array = np.arange(1000, dtype="int32").reshape(10, 100)
    np.save(repo / "array.npy", array)
    with zipfile.ZipFile(repo / "files.zip", "w", compression=zipfile.ZIP_DEFLATED) as z:
        z.writestr("a.txt", "alpha\n" * 100)
        z.writestr("dir/b.txt", "beta\n")
    with tarfile.open(repo / "files.tar", "w") as t:
        payload = b"gamma\n" * 1000
        ti = tarfile.TarInfo("c.txt")
        ti.size = len(payload)
        t.addfile(ti, io.BytesIO(payload))
    secret = root / "datasets" / "lab" / "secret"
    (secret / "snapshots" / "c1").mkdir(parents=True)
    (secret / "hub.json").write_text(json.dumps({"refs": {"main": "c1"},
                                                 "commits": {"c1": {"date": "2024-01-01T00:00:00Z"}},
                                                 "private": True}))
    (secret / "snapshots" / "c1" / "x.txt").write_text("secret\n")
    gated = root / "datasets" / "lab" / "gated"
    (gated / "snapshots" / "c1").mkdir(parents=True)
    (gated / "hub.json").write_text(json.dumps({"refs": {"main": "c1"},
                                                "commits": {"c1": {"date": "2024-01-01T00:00:00Z"}},
                                                "gated": True}))
    (gated / "snapshots" / "c1" / "x.txt").write_text("gated\n")
    # stdin stays a pipe we hold: the server exits when this process does, even on a crash.
    with local_hub(str(root), "--token", TOKEN) as endpoint:
        yield {"endpoint": endpoint, "big": big, "copy": copy, "frames": frames, "array": array}


def stats(endpoint):
    return control(endpoint, "GET", "/_hubfs/stats")


def reset(endpoint):
    control(endpoint, "POST", "/_hubfs/reset", {})


@pytest.fixture
def opts(hub, tmp_path):
    # token=False: the environment's token (if any) is not this test's business.
    return {"endpoint": hub["endpoint"], "cache_dir": str(tmp_path / "cache"), "token": False}


URL = "hf://datasets/lab/remote"


def test_an_open_and_its_h5py_reads_ask_the_process_id_of_the_kernel_not_once(hub, opts, monkeypatch):
    # A file is its process's (a forked child opens it again): each read compares ids, and
    # os.getpid() is a system call. The id is kept by the module and renewed at os.fork().
    with hubfs.open(f"{URL}/scan.hdf5", **opts) as f, h5py.File(f, "r") as h5:  # the session, warm
        want = h5["data/raw_data"][0:2]
    asked = []
    real = os.getpid
    monkeypatch.setattr(os, "getpid", lambda: asked.append(1) or real())
    with hubfs.open(f"{URL}/scan.hdf5", **opts) as f, h5py.File(f, "r") as h5:
        assert np.array_equal(h5["data/raw_data"][0:2], want)
        assert f.tell() > 0
    assert asked == []


# Counts getpid() calls on the main thread (an LD_PRELOAD shim): the extension's objects check,
# at every call, that they are in the process that made them.
_GETPID_SHIM = r"""
#define _GNU_SOURCE
#include <dlfcn.h>
#include <sys/syscall.h>
#include <unistd.h>
static long calls;
long counted_getpid_calls(void) { return calls; }
pid_t getpid(void) {
  static pid_t (*real)(void);
  if (!real) real = (pid_t (*)(void))dlsym(RTLD_NEXT, "getpid");
  pid_t pid = real();
  if (syscall(SYS_gettid) == pid) ++calls;
  return pid;
}
"""


def test_an_open_and_its_h5py_reads_make_no_getpid_system_call(hub, opts, tmp_path):
    # The extension keeps its process's id and renews it in a forked child (pthread_atfork); it
    # asked the kernel ~14 times per h5py open of a file (a system call, ~1.5 us here).
    (tmp_path / "shim.c").write_text(_GETPID_SHIM)
    shim = tmp_path / "shim.so"
    subprocess.run(["cc", "-shared", "-fPIC", "-o", str(shim), str(tmp_path / "shim.c"), "-ldl"], check=True)
    code = ("import ctypes, json, sys; sys.path.insert(0, sys.argv[3]); import h5py, hubfs\n"
            "opts, url = json.loads(sys.argv[1]), sys.argv[2]\n"
            "def read():\n"
            "    with hubfs.open(url, **opts) as f, h5py.File(f, 'r') as h5: return h5['data/raw_data'][0:2].sum()\n"
            "read()  # the session, warm\n"
            "count = ctypes.CDLL(None).counted_getpid_calls\n"
            "count.restype = ctypes.c_long\n"
            "before = count()\n"
            "read()\n"
            "print(count() - before)\n")
    env = dict(os.environ, LD_PRELOAD=str(shim))
    r = subprocess.run([sys.executable, "-c", code, json.dumps(opts), f"{URL}/scan.hdf5", PYTHON_DIR],
                       capture_output=True, text=True, env=env, timeout=120)
    assert r.returncode == 0, r.stderr
    assert r.stdout.split() == ["0"], r.stdout


def test_reads_exact_bytes_with_seek_tell_and_readinto(hub, opts):
    big = hub["big"]
    with hubfs.open(f"{URL}/data/big.bin", **opts) as f:
        assert isinstance(f, io.RawIOBase) and f.readable() and f.seekable() and not f.writable()
        assert f.size == BIG_SIZE and f.name == f"{URL}/data/big.bin"
        assert f.read(10) == big[:10] and f.tell() == 10
        assert f.seek(1_048_570) == 1_048_570
        buf = bytearray(100_000)
        assert f.readinto(buf) == 100_000 and bytes(buf) == big[1_048_570:1_148_570]
        f.seek(-5, io.SEEK_END)
        assert f.read() == big[-5:] and f.read(1) == b""
        f.seek(0)
        assert f.read() == big
        assert f.hint([(0, 100), (2_000_000, 300_000)]) >= 0
    assert f.closed
    with pytest.raises(ValueError):
        f.read(1)
    with pytest.raises(ValueError, match="read-only"):
        hubfs.open(f"{URL}/data/big.bin", "w", **opts)


def test_concurrent_reads_from_threads(hub, opts):
    big = hub["big"]
    bad = []

    def worker(i):
        with hubfs.open(f"{URL}/data/big.bin", **opts) as f:
            for k in range(5):
                off = (i * 300_007 + k * 170_003) % BIG_SIZE
                f.seek(off)
                if f.read(60_000) != big[off:off + 60_000]:
                    bad.append(off)

    threads = [threading.Thread(target=worker, args=(i,)) for i in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert bad == []


def test_h5py_numpy_zipfile_tarfile_read_it(hub, opts):
    with hubfs.open(f"{URL}/scan.hdf5", **opts) as f, h5py.File(f, "r") as h5:
        np.testing.assert_array_equal(h5["data/raw_data"][1:4], hub["frames"][1:4])
    with hubfs.open(f"{URL}/array.npy", **opts) as f:
        np.testing.assert_array_equal(np.load(f), hub["array"])
    with hubfs.open(f"{URL}/files.zip", **opts) as f, zipfile.ZipFile(f) as z:
        assert sorted(z.namelist()) == ["a.txt", "dir/b.txt"]
        assert z.read("a.txt") == b"alpha\n" * 100 and z.read("dir/b.txt") == b"beta\n"
    with hubfs.open(f"{URL}/files.tar", **opts) as f, tarfile.open(fileobj=f) as t:
        assert t.extractfile("c.txt").read() == b"gamma\n" * 1000


def test_errors_are_python_exceptions_with_the_cause(hub, opts):
    with pytest.raises(FileNotFoundError, match="data/nope.bin") as e:
        hubfs.open(f"{URL}/data/nope.bin", **opts)
    assert e.value.errno == 2
    with pytest.raises(FileNotFoundError):
        hubfs.open("hf://datasets/lab/missing/x.bin", **opts)
    with pytest.raises(FileNotFoundError, match="revision"):
        hubfs.open(f"{URL}@v9/data/big.bin", **opts)
    # As the Hub: a private repo is not found without its token, a gated repo's files are refused.
    with pytest.raises(FileNotFoundError, match="HF_TOKEN"):
        hubfs.open("hf://datasets/lab/secret/x.txt", **opts)
    with hubfs.open("hf://datasets/lab/gated/x.txt", **opts) as f:
        with pytest.raises(PermissionError) as e:
            f.read()
    assert e.value.errno == 13
    with hubfs.open("hf://datasets/lab/secret/x.txt", **{**opts, "token": TOKEN}) as f:
        assert f.read() == b"secret\n"
    with pytest.raises(ValueError):
        hubfs.open("hf://datasets/lab/remote/a/../b", **opts)
    with pytest.raises(IsADirectoryError, match="directory"):
        hubfs.open(f"{URL}/data", **opts)
    with pytest.raises(IsADirectoryError):
        hubfs.open(URL, **opts)
    with pytest.raises(TypeError, match="unknown option"):
        hubfs.open(f"{URL}/README.md", cache_sise="1G", **opts)


def test_listing_ls_info_glob_walk(hub, opts):
    assert hubfs.ls(URL, **opts) == [f"{URL}/README.md", f"{URL}/array.npy", f"{URL}/data",
                                     f"{URL}/files.tar", f"{URL}/files.zip", f"{URL}/scan.hdf5"]
    detail = hubfs.ls(f"{URL}/data", detail=True, **opts)
    assert detail == [{"name": f"{URL}/data/big.bin", "size": BIG_SIZE, "type": "file"},
                      {"name": f"{URL}/data/copy.bin", "size": BIG_SIZE, "type": "file"},
                      {"name": f"{URL}/data/deep", "size": 0, "type": "directory"}]
    assert hubfs.info(f"{URL}/data/big.bin", **opts)["size"] == BIG_SIZE
    assert hubfs.info(f"{URL}/data", **opts)["type"] == "directory"
    assert hubfs.exists(f"{URL}/data/deep/note.txt", **opts)
    assert not hubfs.exists(f"{URL}/data/deep/none.txt", **opts)
    assert hubfs.glob(f"{URL}/*.hdf5", **opts) == [f"{URL}/scan.hdf5"]
    assert hubfs.glob(f"{URL}/**/*.txt", **opts) == [f"{URL}/data/deep/note.txt"]
    assert hubfs.glob(f"{URL}/data/*", **opts) == [f"{URL}/data/big.bin", f"{URL}/data/copy.bin", f"{URL}/data/deep"]
    walked = list(hubfs.walk(f"{URL}/data", **opts))
    assert walked == [(f"{URL}/data", ["deep"], ["big.bin", "copy.bin"]), (f"{URL}/data/deep", [], ["note.txt"])]


def test_sessions_are_shared_and_reopening_costs_no_request(hub, opts):
    endpoint = hub["endpoint"]
    hubfs._remote._core().close_sessions()  # counted from none (earlier tests left idle ones)
    with hubfs.open(f"{URL}/README.md", **opts) as f:
        assert f.read() == b"# remote\n"
    before = hubfs._remote._core().session_count()
    reset(endpoint)
    for _ in range(200):
        with hubfs.open(f"{URL}/README.md", **opts) as f:
            assert f.read(2) == b"# "
    assert hubfs._remote._core().session_count() == before
    assert stats(endpoint)["requests"] == 0
    with hubfs.open(f"{URL}@main/README.md", **{**opts, "max_requests": 4}):
        pass
    assert hubfs._remote._core().session_count() == before + 1


def test_idle_sessions_are_bounded_and_open_files_keep_theirs(hub, opts):
    # Each option set is a session of its own, with its memory cache, connections and threads:
    # of those no open file holds, only the few used last are kept.
    core = hubfs._remote._core()
    core.close_sessions()
    held = hubfs.open(f"{URL}/README.md", **{**opts, "max_requests": 3})
    for n in range(4, 4 + core.IDLE_SESSIONS + 3):
        with hubfs.open(f"{URL}/README.md", **{**opts, "max_requests": n}) as f:
            assert f.read() == b"# remote\n"
        # Trimmed when a session is made: the idle ones kept, the held one, and the one just
        # used (idle since its file closed, trimmed at the next).
        assert core.session_count() <= core.IDLE_SESSIONS + 2, n
    assert core.session_count() == core.IDLE_SESSIONS + 2
    # The held file's session was never dropped: it still reads, and so does a new open with
    # its options (a session kept, or built again from the warm cache).
    assert held.read() == b"# remote\n"
    held.close()
    with hubfs.open(f"{URL}/README.md", **{**opts, "max_requests": 3}) as f:
        assert f.read() == b"# remote\n"
    assert core.session_count() <= core.IDLE_SESSIONS + 2
    hubfs.close_sessions()  # the public door: every idle session ends
    assert core.session_count() == 0


def _read_through_mount(endpoint, cache_dir, mnt, path):
    with hubfs.mount("datasets/lab/remote", mnt, endpoint=endpoint, cache_dir=cache_dir):
        with open(os.path.join(mnt, path), "rb") as f:
            return f.read()


def test_mount_and_open_share_the_cache_both_ways(hub, tmp_path):
    endpoint, big = hub["endpoint"], hub["big"]
    mnt = tmp_path / "mnt"
    mnt.mkdir()
    # Mount first: hubfs.open on the same cache directory fetches no byte.
    cache_a = str(tmp_path / "a")
    assert _read_through_mount(endpoint, cache_a, mnt, "data/big.bin") == big
    reset(endpoint)
    with hubfs.open(f"{URL}/data/big.bin", endpoint=endpoint, cache_dir=cache_a, token=False) as f:
        assert f.read() == big
    s = stats(endpoint)
    assert s["cdn_requests"] == 0 and s["resolve_requests"] == 0, s
    # hubfs.open first: then the mount fetches no byte.
    cache_b = str(tmp_path / "b")
    with hubfs.open(f"{URL}/data/big.bin", endpoint=endpoint, cache_dir=cache_b, token=False) as f:
        assert f.read() == big
    hubfs._remote._core().close_sessions()  # as at exit: the cache's queued writes are done
    reset(endpoint)
    assert _read_through_mount(endpoint, cache_b, mnt, "data/big.bin") == big
    s = stats(endpoint)
    assert s["cdn_requests"] == 0 and s["resolve_requests"] == 0, s


def test_fsspec_protocol(hub, opts):
    import fsspec  # Debian's python3-fsspec (scripts/deps.sh installs it)
    with fsspec.open("hubfs://datasets/lab/remote/data/big.bin", "rb", **opts) as f:
        f.seek(1000)
        assert f.read(5000) == hub["big"][1000:6000]
    fs = fsspec.filesystem("hubfs", **opts)
    assert fs.ls("datasets/lab/remote/data", detail=False) == ["datasets/lab/remote/data/big.bin",
                                                               "datasets/lab/remote/data/copy.bin",
                                                               "datasets/lab/remote/data/deep"]
    assert fs.size("hubfs://datasets/lab/remote/data/big.bin") == BIG_SIZE
    assert fs.cat_file("datasets/lab/remote/README.md") == b"# remote\n"
    assert fs.cat_file("datasets/lab/remote/data/big.bin", start=-3) == hub["big"][-3:]
    with fs.open("datasets/lab/remote/data/deep/note.txt", "rb") as f:
        assert f.read() == b"deep\n"


def test_ctrl_c_interrupts_a_stalled_read(hub, tmp_path):
    endpoint = hub["endpoint"]
    opts = {"endpoint": endpoint, "cache_dir": str(tmp_path / "stall"), "token": False, "read_timeout": 60}
    f = hubfs.open(f"{URL}/data/big.bin", **opts)
    # Every data request stalls: the read waits until the signal arrives.
    control(endpoint, "POST", "/_hubfs/faults", {"mode": "stall", "path_contains": "/blobs/", "count": 1000})
    timer = threading.Timer(0.3, os.kill, (os.getpid(), signal.SIGINT))
    try:
        timer.start()
        with pytest.raises(KeyboardInterrupt):
            f.read(1000)
    finally:
        timer.cancel()
        control(endpoint, "DELETE", "/_hubfs/faults")
        f.close()


def test_reads_as_nobody_without_dev_fuse(hub):
    """A container without /dev/fuse: a mount namespace whose /dev is a tmpfs holding only null,
    zero and urandom, and a non-root user. Making the namespace needs root (as the mount tests)."""
    assert os.geteuid() == 0, "run as root: the test makes a mount namespace, then drops to nobody"
    work = tempfile.mkdtemp(prefix="hubfs-nofuse-")
    os.chmod(work, 0o777)
    script = (
        "import hashlib, os, sys; sys.path.insert(0, sys.argv[1]); import hubfs\n"
        "assert not os.path.exists('/dev/fuse') and os.geteuid() != 0\n"
        "with hubfs.open('hf://datasets/lab/remote/data/big.bin', endpoint=sys.argv[2],"
        " cache_dir=sys.argv[3], token=False) as f:\n"
        "    print(hashlib.sha256(f.read()).hexdigest())\n")
    shell = ("set -e; mount -t tmpfs -o mode=755 none /dev; "
             "mknod -m 666 /dev/null c 1 3; mknod -m 666 /dev/zero c 1 5; mknod -m 666 /dev/urandom c 1 9; "
             'exec setpriv --reuid=nobody --regid=nogroup --clear-groups env HOME="$4" '
             '/usr/bin/python3 -c "$0" "$1" "$2" "$3"')
    try:
        r = subprocess.run(["unshare", "-m", "--propagation", "private", "sh", "-c", shell, script,
                            PYTHON_DIR, hub["endpoint"], os.path.join(work, "cache"), work],
                           capture_output=True, text=True, timeout=120)
    finally:
        subprocess.run(["rm", "-rf", work])
    assert r.returncode == 0, r.stderr
    import hashlib
    assert r.stdout.strip() == hashlib.sha256(hub["big"]).hexdigest()


def _hubfs_bin():
    return os.path.join(os.path.dirname(PYTHON_DIR), "bin", "hubfs")


def test_cli_cat_and_cp(hub, tmp_path):
    endpoint, copy = hub["endpoint"], hub["copy"]
    common = ["--endpoint", endpoint, "--cache-dir", str(tmp_path / "cache")]
    env = {**os.environ, "HF_HUB_DISABLE_IMPLICIT_TOKEN": "1"}
    r = subprocess.run([_hubfs_bin(), "cat", f"{URL}/data/deep/note.txt", *common], capture_output=True, env=env)
    assert r.returncode == 0, r.stderr
    assert r.stdout == b"deep\n"
    # Into a directory, then onto a file name; stderr is no tty: no progress bar.
    out = tmp_path / "out"
    out.mkdir()
    r = subprocess.run([_hubfs_bin(), "cp", f"{URL}/data/copy.bin", str(out), *common], capture_output=True, env=env)
    assert r.returncode == 0, r.stderr
    assert (out / "copy.bin").read_bytes() == copy and b"\r" not in r.stderr
    # A second copy comes from the cache: no resolve of copy.bin and no request for its bytes.
    # (Counted by path: the server also sees what other tests' sessions still have in flight.)
    reset(endpoint)
    r = subprocess.run([_hubfs_bin(), "cp", f"{URL}/data/copy.bin", str(out / "again.bin"), *common],
                       capture_output=True, env=env)
    assert r.returncode == 0, r.stderr
    assert (out / "again.bin").read_bytes() == copy
    blob = hashlib.sha256(copy).hexdigest()
    paths = stats(endpoint)["by_path"]
    assert not [p for p in paths if "copy.bin" in p or blob in p], paths
    # A failure leaves no DEST and no temp file, and says why.
    r = subprocess.run([_hubfs_bin(), "cp", f"{URL}/data/nope.bin", str(out / "nope.bin"), *common],
                       capture_output=True, text=True, env=env)
    assert r.returncode == 1 and "nope.bin" in r.stderr
    assert sorted(os.listdir(out)) == ["again.bin", "copy.bin"]
    # A DEST that is a pipe (or a device: /dev/null) is written directly, not replaced by a
    # renamed temp file (which left its reader waiting and, for /dev/null, a file in /dev).
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    with open(tmp_path / "piped", "wb") as sink:
        reader = subprocess.Popen(["cat", str(fifo)], stdout=sink)
        try:
            r = subprocess.run([_hubfs_bin(), "cp", f"{URL}/data/copy.bin", str(fifo), *common],
                               capture_output=True, env=env, timeout=60)
            reader.wait(timeout=30)
        finally:
            reader.kill()
    assert r.returncode == 0, r.stderr
    assert (tmp_path / "piped").read_bytes() == copy
    assert sorted(os.listdir(tmp_path)) == ["cache", "out", "pipe", "piped"], os.listdir(tmp_path)


def test_cli_cp_starts_over_once_after_a_failed_hash(hub, tmp_path):
    """A byte flipped on the wire fails the file's hash at its end; `hubfs cp` into a file
    truncates its temp file and copies once more (its blocks fetched afresh): exact, exit 0."""
    endpoint, copy = hub["endpoint"], hub["copy"]
    blob = hashlib.sha256(copy).hexdigest()
    out = tmp_path / "out"
    out.mkdir()
    control(endpoint, "POST", "/_hubfs/faults", {"mode": "flip_byte", "path_contains": blob, "count": 1})
    try:
        r = subprocess.run([_hubfs_bin(), "cp", f"{URL}/data/copy.bin", str(out / "copy.bin"), "--endpoint", endpoint,
                            "--cache-dir", str(tmp_path / "cache")], capture_output=True, text=True,
                           env={**os.environ, "HF_HUB_DISABLE_IMPLICIT_TOKEN": "1"}, timeout=120)
    finally:
        control(endpoint, "DELETE", "/_hubfs/faults")
    assert r.returncode == 0, r.stderr
    assert "copying it once more" in r.stderr, r.stderr
    assert (out / "copy.bin").read_bytes() == copy
    assert os.listdir(out) == ["copy.bin"], "no temp file left"


def test_cli_cp_interrupted_leaves_nothing_and_exits_130(hub, tmp_path):
    endpoint = hub["endpoint"]
    out = tmp_path / "out"
    out.mkdir()
    control(endpoint, "POST", "/_hubfs/faults", {"mode": "stall", "path_contains": "/blobs/", "count": 1000})
    try:
        p = subprocess.Popen([_hubfs_bin(), "cp", f"{URL}/data/big.bin", str(out / "big.bin"), "--endpoint", endpoint,
                              "--cache-dir", str(tmp_path / "cache")], stderr=subprocess.PIPE, text=True,
                             env={**os.environ, "HF_HUB_DISABLE_IMPLICIT_TOKEN": "1"})
        # Interrupted once the copy has begun (its temp file exists), while its reads stall.
        while not os.listdir(out) and p.poll() is None:
            threading.Event().wait(0.05)
        p.send_signal(signal.SIGINT)
        _, err = p.communicate(timeout=120)
    finally:
        control(endpoint, "DELETE", "/_hubfs/faults")
    assert p.returncode == 130, err
    assert "interrupted" in err
    assert os.listdir(out) == []


def test_a_smaller_block_fetches_less_for_a_small_read_and_reads_the_same_bytes(hub, opts):
    # block_size: a reader of pieces much smaller than a MiB (a training loop's random frames)
    # fetches the blocks it touches whole; a 256 KiB block fetches a quarter of what 1 MiB does.
    big, endpoint = hub["big"], hub["endpoint"]
    sent = {}
    for size in ("256K", 1 << 20):
        reset(endpoint)
        with hubfs.open(f"{URL}/data/big.bin", **{**opts, "block_size": size}) as f:
            raw = f._core_file()
            block = 256 << 10 if size == "256K" else 1 << 20
            assert raw.block_size == block
            # Counted in the file's own blocks: none of this size cached yet (the other size's
            # blocks, read first, are not these).
            assert raw.uncached_blocks([(0, BIG_SIZE)]) == list(range(-(-BIG_SIZE // block)))
            before = stats(endpoint)["bytes_sent"]
            f.seek(1_100_000)
            assert f.read(100) == big[1_100_000:1_100_100]
            sent[size] = stats(endpoint)["bytes_sent"] - before
            f.seek(0)
            assert f.read() == big  # both sizes in one cache directory: each its own blocks
    assert sent["256K"] <= 256 << 10 < sent[1 << 20]


def test_read_ahead_caps_what_a_stream_fetches_past_its_reads(hub, opts):
    # read_ahead (the mount's --read-ahead): reading the first 1.5 MiB of the 3-block file front to
    # back reaches block 1, which earns read-ahead from the file's start (its first 16 MiB: here
    # the whole file). With read_ahead=0 only the two blocks read are fetched; the bytes are the
    # same either way.
    # Counted as the bytes the data requests' ranges cover, each byte once: under load the
    # transport may send a slow request a second time (a hedge, or a retry), which bytes_sent
    # counted twice (1 MiB more in 2 of about 20 full pytest runs).
    big, endpoint = hub["big"], hub["endpoint"]
    sent = {}
    def quiet():  # read-ahead lands after the read returned (an earlier test's too)
        for _ in range(250):
            if stats(endpoint)["in_flight"] == 0:
                return
            time.sleep(0.02)

    def covered():  # bytes covered by the ranges asked since the last reset, per path, summed
        spans = {}
        for r in control(endpoint, "GET", "/_hubfs/trace"):
            if r.get("range") and r.get("kind") in ("cdn", "plain"):  # bodies of file bytes
                first, last = r["range"].split("=", 1)[1].split("-")
                spans.setdefault(r["path"], []).append((int(first), int(last) + 1))
        total = 0
        for ranges in spans.values():
            end = 0
            for a, b in sorted(ranges):
                total += max(0, b - max(a, end))
                end = max(end, b)
        return total

    for i, cap in enumerate((None, 0, "0")):
        quiet()
        reset(endpoint)
        extra = {} if cap is None else {"read_ahead": cap}
        cache = os.path.join(opts["cache_dir"], "read-ahead-%d" % i)  # cold each time
        with hubfs.open(f"{URL}/data/big.bin", **{**opts, "cache_dir": cache, **extra}) as f:
            got = b"".join(f.read(64 << 10) for _ in range(24))
            assert got == big[:24 << 16]
            quiet()
            sent[cap] = covered()
    assert sent[None] == BIG_SIZE, sent
    assert sent[0] == sent["0"] == 2 << 20, sent
    for bad in (-1, "lots"):
        with pytest.raises(ValueError):
            hubfs.open(f"{URL}/data/big.bin", **{**opts, "read_ahead": bad})


def test_a_block_size_not_taken_is_refused_with_the_rule(hub, opts):
    for bad in (300_000, "32K", "2M", 0):
        with pytest.raises(ValueError, match="power of two from 64K to 1M"):
            hubfs.open(f"{URL}/README.md", **{**opts, "block_size": bad})
