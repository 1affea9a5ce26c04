"""hubfs and h5chunk objects across processes: made in a parent that has read through them over
hf:// (sessions, connections and threads running), then used in forked children (multiprocessing's
"fork" context and os.fork) and, pickled, in spawned ones. Every child runs under a join timeout:
a hang fails the test instead of stalling the suite. Bytes are compared with the local files."""

import hashlib
import json
import multiprocessing
import os
import pickle
import urllib.request

import h5py
import numpy as np
import pytest

import h5chunk
import hubfs
from local_hub import local_hub

URL = "hf://datasets/lab/frames"
# Long enough for a loaded 2-core machine to start a spawned interpreter and read; a hang is
# forever, so any bound tells the two apart.
CHILD_TIMEOUT = 60


@pytest.fixture(scope="module")
def hub(tmp_path_factory):
    root = tmp_path_factory.mktemp("hub")
    repo = root / "datasets" / "lab" / "frames"
    repo.mkdir(parents=True)
    frames = {}
    for i in range(2):
        # 8 frames of 128 KiB, one chunk each: several of the reader's 1 MiB blocks per file.
        data = (np.random.default_rng(i).normal(size=(8, 4, 128, 128)) * 300).astype("int16")
        with h5py.File(repo / f"rec{i}.hdf5", "w") as f:
            f.create_dataset("data/raw_data", data=data, chunks=(1, 4, 128, 128), compression="gzip",
                             compression_opts=1)
        frames[f"rec{i}.hdf5"] = data
    with local_hub(str(root)) as endpoint:
        yield {"endpoint": endpoint, "frames": frames, "dir": str(repo)}


@pytest.fixture
def opts(hub, tmp_path):
    return {"endpoint": hub["endpoint"], "cache_dir": str(tmp_path / "cache"), "token": False}


def _digest(a) -> str:
    return hashlib.sha256(np.ascontiguousarray(a).tobytes()).hexdigest()


def _run_children(ctx, target, args_list):
    """Runs target(queue, *args) in one child per args, each bounded by CHILD_TIMEOUT; returns
    what each put on the queue (small: it is read after the joins). A child still running then is
    killed and fails the test."""
    queue = ctx.Queue()
    children = [ctx.Process(target=target, args=(queue, *args)) for args in args_list]
    for c in children:
        c.start()
    hung = []
    for c in children:
        c.join(CHILD_TIMEOUT)
        if c.exitcode is None:
            hung.append(c.pid)
            c.kill()
            c.join()
    assert not hung, f"children {hung} hung"
    assert all(c.exitcode == 0 for c in children), [c.exitcode for c in children]
    return [queue.get(timeout=CHILD_TIMEOUT) for _ in children]


def _read_frames(queue, ds, indices):
    queue.put([(i, _digest(ds[i])) for i in indices])


def _read_bytes(queue, f, offset, n):
    f.seek(offset)
    queue.put(hashlib.sha256(f.read(n)).hexdigest())


def test_h5chunk_dataset_made_before_fork_reads_in_forked_children(hub, opts):
    frames = hub["frames"]["rec0.hdf5"]
    with h5chunk.File(f"{URL}/rec0.hdf5", **opts) as f:
        ds = f["data/raw_data"]
        np.testing.assert_array_equal(ds[0], frames[0])  # the session's threads are running
        got = _run_children(multiprocessing.get_context("fork"), _read_frames,
                            [(ds, [1, 5]), (ds, [2, 7, 3])])
        # The parent goes on reading after its children did.
        np.testing.assert_array_equal(ds[4], frames[4])
    assert sorted(got) == sorted([[(i, _digest(frames[i])) for i in idx] for idx in ([1, 5], [2, 7, 3])])


def test_hubfs_file_opened_before_fork_reads_new_bytes_in_a_child(hub, opts):
    local = open(os.path.join(hub["dir"], "rec1.hdf5"), "rb").read()
    with hubfs.open(f"{URL}/rec1.hdf5", **opts) as f:
        assert f.read(4096) == local[:4096]
        # Bytes the parent never read, so the child must fetch them.
        offset, n = len(local) - 300_000, 200_000
        got = _run_children(multiprocessing.get_context("fork"), _read_bytes, [(f, offset, n)])
    assert got == [hashlib.sha256(local[offset:offset + n]).hexdigest()]


def test_os_fork_child_reads_and_the_parents_objects_raise_a_clear_error(hub, opts):
    frames = hub["frames"]["rec1.hdf5"]
    f = h5chunk.File(f"{URL}/rec1.hdf5", **opts)
    ds = f["data/raw_data"]
    np.testing.assert_array_equal(ds[0], frames[0])
    raw = hubfs.open(f"{URL}/rec0.hdf5", **opts)
    raw.read(100)
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: report, never return into pytest
        code = 1
        try:
            ok = _digest(ds[6]) == _digest(frames[6])
            # The extension's own objects of the parent are not usable here, with a clear error.
            try:
                raw._f.readinto(bytearray(10), 0)
                clear = False
            except OSError as e:
                clear = "another process" in str(e)
            f.close()
            raw.close()
            os.write(w, b"ok" if ok and clear else b"bad %d %d" % (ok, clear))
            code = 0
        finally:
            os._exit(code)
    os.close(w)
    try:
        status = _wait(pid)
        assert os.read(r, 100) == b"ok"
        assert os.waitstatus_to_exitcode(status) == 0
    finally:
        os.close(r)
        f.close()
        raw.close()


def _wait(pid):
    """waitpid with CHILD_TIMEOUT: a child still running then is killed and fails the test."""
    import time
    deadline = time.monotonic() + CHILD_TIMEOUT
    while time.monotonic() < deadline:
        done, status = os.waitpid(pid, os.WNOHANG)
        if done:
            return status
        time.sleep(0.05)
    os.kill(pid, 9)
    os.waitpid(pid, 0)
    pytest.fail("the forked child hung")


def test_objects_pickle_by_url_options_and_position(hub, opts):
    frames = hub["frames"]["rec0.hdf5"]
    with h5chunk.File(f"{URL}/rec0.hdf5", **opts) as f, hubfs.open(f"{URL}/rec0.hdf5", **opts) as raw:
        raw.seek(1234)
        raw2 = pickle.loads(pickle.dumps(raw))
        assert (raw2.name, raw2.tell(), raw2.commit) == (raw.name, 1234, raw.commit)
        assert raw2.read(500) == raw.read(500)
        raw2.close()
        ds2 = pickle.loads(pickle.dumps(f["data/raw_data"]))
        np.testing.assert_array_equal(ds2[3], frames[3])
        ds2.file.close()
    with pytest.raises(ValueError, match="closed"):
        pickle.dumps(f)
    with pytest.raises(ValueError, match="closed"):
        pickle.dumps(raw)


def test_spawned_children_read_pickled_objects(hub, opts):
    frames = hub["frames"]["rec1.hdf5"]
    local = open(os.path.join(hub["dir"], "rec1.hdf5"), "rb").read()
    ctx = multiprocessing.get_context("spawn")
    with h5chunk.File(f"{URL}/rec1.hdf5", **opts) as f, hubfs.open(f"{URL}/rec1.hdf5", **opts) as raw:
        ds = f["data/raw_data"]
        ds[0]
        got = _run_children(ctx, _read_both, [(ds, raw, [2, 6], 5000, 70_000)])
    assert got == [([(i, _digest(frames[i])) for i in (2, 6)], hashlib.sha256(local[5000:75_000]).hexdigest())]


def _read_both(queue, ds, f, indices, offset, n):
    f.seek(offset)
    queue.put(([(i, _digest(ds[i])) for i in indices], hashlib.sha256(f.read(n)).hexdigest()))


def test_local_files_made_before_fork_read_in_children(hub):
    frames = hub["frames"]["rec0.hdf5"]
    with h5chunk.File(os.path.join(hub["dir"], "rec0.hdf5")) as f:
        ds = f["data/raw_data"]
        ds[0]
        got = _run_children(multiprocessing.get_context("fork"), _read_frames, [(ds, [3, 1])])
    assert got == [[(i, _digest(frames[i])) for i in (3, 1)]]


def _memory_rule(queue, f):
    from hubfs import _remote
    f.read(10)
    queue.put(_remote._one_of_many)


def test_a_forked_child_of_an_hf_user_keeps_a_small_memory_tier(hub, opts, monkeypatch):
    from hubfs import _remote
    monkeypatch.setattr(_remote, "_one_of_many", False)
    with hubfs.open(f"{URL}/rec0.hdf5", **opts) as f:
        pickle.loads(pickle.dumps(f)).close()  # a copy in the same process is not a worker
        assert not _remote._one_of_many  # this process is on its own: 256 MiB
        got = _run_children(multiprocessing.get_context("fork"), _memory_rule, [(f,)])
    assert got == [True]  # each worker: 8 MiB beside the disk tier they share


def test_pickled_objects_read_the_commit_they_were_opened_at_without_a_pin(tmp_path):
    """A worker handed a file, dataset or FrameDataset made on a branch reads the commit the parent
    read, though the branch moved since (every worker of an epoch reads one commit), and asks the
    Hub for no pin (a commit sha never moves). Here the copies are unpickled in this process: a
    session at the commit is a new one, as in a spawned worker."""
    root = tmp_path / "hub"
    repo = root / "datasets" / "lab" / "moving"
    frames = {}
    for commit, seed in (("c1", 1), ("c2", 2)):
        (repo / "snapshots" / commit).mkdir(parents=True)
        frames[commit] = (np.random.default_rng(seed).normal(size=(4, 2, 64, 64)) * 300).astype("int16")
        with h5py.File(repo / "snapshots" / commit / "rec.hdf5", "w") as f:
            f.create_dataset("data/raw_data", data=frames[commit], chunks=(1, 2, 64, 64))

    def point_main_at(commit):
        (repo / "hub.json").write_text(json.dumps({
            "refs": {"main": commit},
            "commits": {"c1": {"date": "2024-01-01T00:00:00Z"}, "c2": {"date": "2024-02-01T00:00:00Z"}}}))

    def pins(endpoint):
        with urllib.request.urlopen(endpoint + "/_hubfs/stats", timeout=10) as r:
            by_path = json.load(r)["by_path"]
        return sum(n for path, n in by_path.items() if "/revision/" in path)

    point_main_at("c1")
    url = "hf://datasets/lab/moving/rec.hdf5"
    with local_hub(str(root)) as endpoint:
        opts = {"endpoint": endpoint, "cache_dir": str(tmp_path / "cache"), "token": False}
        with h5chunk.File(url, **opts) as f, hubfs.open(url, **opts) as raw:
            ds = f["data/raw_data"]
            np.testing.assert_array_equal(ds[0], frames["c1"][0])
            frame_ds = h5chunk.FrameDataset([url], "data/raw_data", **opts)
            np.testing.assert_array_equal(frame_ds[1], frames["c1"][1])
            commit = raw.commit
            pickled = [pickle.dumps(o) for o in (raw, ds, frame_ds)]
            frame_ds.close()
        # As in a spawned worker, no session of the parent's is left: a copy that carried the
        # branch alone would pin it again, and read c2.
        hubfs.close_sessions()
        point_main_at("c2")
        pinned_before = pins(endpoint)
        raw2, ds2, frame_ds2 = (pickle.loads(p) for p in pickled)
        assert raw2.commit == commit
        assert raw2.read() == (repo / "snapshots" / "c1" / "rec.hdf5").read_bytes()
        np.testing.assert_array_equal(ds2[3], frames["c1"][3])
        np.testing.assert_array_equal(frame_ds2[2], frames["c1"][2])
        assert pins(endpoint) == pinned_before, "a copy at a commit pins nothing"
        raw2.close()
        ds2.file.close()
        frame_ds2.close()
        # The branch opened afresh is pinned again, at its new commit.
        hubfs.close_sessions()
        with h5chunk.File(url, **opts) as f:
            np.testing.assert_array_equal(f["data/raw_data"][3], frames["c2"][3])
        assert pins(endpoint) > pinned_before
