"""In-flight markers (h5chunk._inflight): a worker that needs a block a planner has on its way
waits for it instead of fetching it too; a dead planner's markers hold nobody; a live planner that
never lets go holds a worker only until its deadline. Over hf:// (the bundled local Hub server on
127.0.0.1, started here); frames are compared with the local files' h5py reads."""

import multiprocessing
import os
import signal
import time

import h5py
import numpy as np
import pytest

import h5chunk
from h5chunk import _inflight
from local_hub import control, local_hub

URL = "hf://datasets/lab/marks"
FILES = 2
FRAMES = 4
# A hang is forever: any bound tells it from a slow loaded machine.
CHILD_TIMEOUT = 120
FRAME = 5  # the frame the tests mark: in the second file


@pytest.fixture(scope="module")
def hub(tmp_path_factory):
    root = tmp_path_factory.mktemp("hub")
    repo = root / "datasets" / "lab" / "marks"
    repo.mkdir(parents=True)
    frames = []
    for i in range(FILES):
        # Frames of about 1 MiB stored (noise barely compresses): most of a file's blocks are
        # not the first one, which a FrameDataset hints when it is made.
        data = np.random.default_rng(i).integers(-2000, 2000, size=(FRAMES, 8, 256, 256)).astype("int16")
        with h5py.File(repo / f"m{i}.hdf5", "w") as f:
            f.create_dataset("data/raw_data", data=data, chunks=(1, 8, 256, 256), compression="gzip",
                             compression_opts=1)
        frames.append(data)
    with local_hub(str(root)) as endpoint:
        yield {"endpoint": endpoint, "frames": np.concatenate(frames)}


@pytest.fixture
def ds(hub, tmp_path):
    d = h5chunk.FrameDataset([f"{URL}/m{i}.hdf5" for i in range(FILES)], "data/raw_data",
                             endpoint=hub["endpoint"], cache_dir=str(tmp_path / "cache"), token=False)
    yield d
    d.close()


def _locks_on(path):
    """The record locks any process holds on the file at path (/proc/locks)."""
    inode = os.stat(path).st_ino
    with open("/proc/locks") as f:
        return sum(1 for line in f if int(line.split()[5].split(":")[2]) == inode)


def _marked(ds):
    """(markers, file key, blocks) of FRAME."""
    k, ranges = ds.frame_ranges(FRAME)
    return _inflight.markers(ds._marker_dir), ds._marker_keys[k], _inflight.blocks_of(ranges, ds._blocks[k])


def _worker(queue, ds, key, blocks, wait_seconds):
    try:
        if wait_seconds is not None:
            _inflight.WAIT_SECONDS = wait_seconds
        waited = _inflight.markers(ds._marker_dir).wait(key, blocks, on_wait=lambda: queue.put("waiting"))
        queue.put(("read", waited, ds[FRAME]))
    except BaseException as e:  # noqa: BLE001 (reported to the test)
        queue.put(("error", repr(e), None))


def _start(ds, key, blocks, wait_seconds=None):
    ctx = multiprocessing.get_context("fork")
    queue = ctx.Queue()
    p = ctx.Process(target=_worker, args=(queue, ds, key, blocks, wait_seconds))
    p.start()
    return p, queue


def _finish(p, queue):
    kind, waited, frame = queue.get(timeout=CHILD_TIMEOUT)
    p.join(CHILD_TIMEOUT)
    assert kind == "read", waited
    return waited, frame


def test_a_worker_waits_for_a_block_the_planner_has_on_its_way(hub, ds):
    markers, key, blocks = _marked(ds)
    names = markers.hold(key, blocks)
    assert len(names) == len(blocks) and names
    p, queue = _start(ds, key, blocks)
    try:
        # The worker found the planner's marker and is waiting: only now is it released.
        assert queue.get(timeout=CHILD_TIMEOUT) == "waiting"
    finally:
        markers.release(names)
    waited, frame = _finish(p, queue)
    assert waited >= 1
    np.testing.assert_array_equal(frame, hub["frames"][FRAME])
    assert markers.held() == 0
    assert _locks_on(markers.path(key)) == 0  # released: the kernel holds no lock of ours there


def _hold_and_die(conn, marker_dir, key, blocks):
    names = _inflight.markers(marker_dir).hold(key, blocks)
    conn.send(names)  # sent before it returns (a Queue's feeder thread would die unsent)
    os.kill(os.getpid(), signal.SIGKILL)  # no release, no cleanup: a planner that crashed


def test_a_dead_planners_markers_hold_no_worker(hub, ds):
    _, key, blocks = _marked(ds)
    ctx = multiprocessing.get_context("fork")
    ours, theirs = ctx.Pipe()
    planner = ctx.Process(target=_hold_and_die, args=(theirs, ds._marker_dir, key, blocks))
    planner.start()
    assert ours.poll(CHILD_TIMEOUT)
    names = ours.recv()
    planner.join(CHILD_TIMEOUT)
    assert planner.exitcode == -signal.SIGKILL
    assert names and os.path.exists(_inflight.markers(ds._marker_dir).path(key))  # left behind
    # The kernel dropped the dead planner's locks: the worker sees nothing held and reads.
    p, q = _start(ds, key, blocks)
    waited, frame = _finish(p, q)
    assert waited == 0
    np.testing.assert_array_equal(frame, hub["frames"][FRAME])


def test_a_worker_stops_waiting_for_a_planner_that_never_lets_go(hub, ds):
    markers, key, blocks = _marked(ds)
    names = markers.hold(key, blocks)
    try:
        # A live planner that never releases: past its (here short) deadline the worker fetches
        # the frame itself, through its own reader.
        p, queue = _start(ds, key, blocks, wait_seconds=0.05)
        assert queue.get(timeout=CHILD_TIMEOUT) == "waiting"
        waited, frame = _finish(p, queue)
    finally:
        markers.release(names)
    assert waited >= 1
    np.testing.assert_array_equal(frame, hub["frames"][FRAME])


def _uncached(ds, i):
    k, ranges = ds.frame_ranges(i)
    return ds._dataset(k).file._hub_file._core_file().uncached_blocks(ranges)


def test_a_finished_plan_leaves_no_marker_held(hub, ds):
    order = list(range(len(ds)))[::-1]
    assert any(_uncached(ds, i) for i in order)  # what the plan has to fetch (and mark)
    plan = ds.plan(order, ahead=4, lead=0)
    assert list(plan) == order
    assert plan.hinted_bytes > 0
    assert os.path.isdir(ds._marker_dir)  # the plan marked blocks on their way
    assert _inflight.markers(ds._marker_dir).held() == 0
    # One marker file per file planned, none per block, and not one of them still locked.
    left = os.listdir(ds._marker_dir)
    assert left and set(left) <= set(ds._marker_keys)
    assert sum(_locks_on(os.path.join(ds._marker_dir, n)) for n in left) == 0
    # Every frame it hinted (all but the first, the workers' own) is in the disk cache, without a
    # read of it: the next epoch hints none of them.
    assert not any(_uncached(ds, i) for i in order[1:])
    for i in order:
        np.testing.assert_array_equal(ds[i], hub["frames"][i])


def test_a_forked_child_holds_none_of_its_parents_markers(hub, ds):
    markers, key, blocks = _marked(ds)
    names = markers.hold(key, blocks)
    try:
        ctx = multiprocessing.get_context("fork")
        queue = ctx.Queue()
        p = ctx.Process(target=_held_in_child, args=(queue, ds._marker_dir))
        p.start()
        held = queue.get(timeout=CHILD_TIMEOUT)
        p.join(CHILD_TIMEOUT)
    finally:
        markers.release(names)
    assert held == 0


def _held_in_child(queue, marker_dir):
    queue.put(_inflight.markers(marker_dir).held())


def test_a_plan_marks_a_files_blocks_in_one_file_made_once(hub, ds):
    # Making and unlinking a file per block was most of the plan's own CPU (docs/benchmarks.md,
    # session 32): a file's markers are bytes of one file, opened once by each process.
    markers, key, blocks = _marked(ds)
    more = [b + 100 for b in range(8)]
    names = markers.hold(key, blocks + more)
    assert len(names) == len(blocks) + len(more)
    path = markers.path(key)
    assert os.listdir(ds._marker_dir) == [key]
    inode = os.stat(path).st_ino
    assert _locks_on(path) >= 1
    markers.release(names)
    assert markers.held() == 0 and _locks_on(path) == 0
    again = markers.hold(key, more)
    assert len(again) == len(more)
    assert os.listdir(ds._marker_dir) == [key] and os.stat(path).st_ino == inode
    markers.release(again)


def _hold_until_told(conn, marker_dir, key, blocks):
    conn.send(_inflight.markers(marker_dir).hold(key, blocks))
    conn.recv()  # held until the test says


def _hold_in_child(marker_dir, key, blocks):
    ctx = multiprocessing.get_context("fork")
    ours, theirs = ctx.Pipe()
    p = ctx.Process(target=_hold_until_told, args=(theirs, marker_dir, key, blocks))
    p.start()
    assert ours.poll(CHILD_TIMEOUT)
    return p, ours, ours.recv()


def _waited_in_child(queue, marker_dir, key, blocks):
    queue.put(_inflight.markers(marker_dir).wait(key, blocks, seconds=0.05))


def _waited_elsewhere(marker_dir, key, blocks):
    ctx = multiprocessing.get_context("fork")
    queue = ctx.Queue()
    p = ctx.Process(target=_waited_in_child, args=(queue, marker_dir, key, blocks))
    p.start()
    waited = queue.get(timeout=CHILD_TIMEOUT)
    p.join(CHILD_TIMEOUT)
    return waited


def test_a_block_held_elsewhere_is_skipped_and_the_rest_of_its_run_taken(hub, ds):
    markers, key, _ = _marked(ds)
    other, conn, theirs = _hold_in_child(ds._marker_dir, key, [2])
    try:
        assert theirs == [(key, 2)]
        # A run of blocks with one held by another live planner: the others are taken.
        assert markers.hold(key, [1, 2, 3]) == [(key, 1), (key, 3)]
    finally:
        conn.send("go")
        other.join(CHILD_TIMEOUT)
    try:
        assert _waited_elsewhere(ds._marker_dir, key, [1, 2, 3]) == 2  # 1 and 3: ours, 2: free now
    finally:
        markers.release([(key, 1), (key, 3)])


def test_waiting_on_a_file_keeps_this_process_markers_on_it(hub, ds):
    # A process's record locks on a file all go when it closes any descriptor of that file: a
    # wait that opened and closed the marker file would drop this process's own markers there.
    markers, key, _ = _marked(ds)
    mine = markers.hold(key, [0])
    assert mine == [(key, 0)]
    other, conn, theirs = _hold_in_child(ds._marker_dir, key, [1])
    try:
        assert theirs == [(key, 1)]
        assert markers.wait(key, [1], seconds=0.05) == 1
        assert markers.wait(key, [0], seconds=0.05) == 0  # this process's own: never waited on
        assert _waited_elsewhere(ds._marker_dir, key, [0]) == 1  # still held, seen elsewhere
    finally:
        conn.send("go")
        other.join(CHILD_TIMEOUT)
        markers.release(mine)
    assert _waited_elsewhere(ds._marker_dir, key, [0, 1]) == 0


def test_a_plan_hints_only_the_blocks_the_disk_cache_lacks(hub, ds, monkeypatch):
    # A frame's block already on disk (shared with a frame fetched before), hinted, was read back
    # whole into the planner's memory for nothing (the workers read it from disk): a tenth of
    # the planner's samples in a cold epoch (docs/benchmarks.md, session 32).
    from h5chunk import _frames
    k, ranges = ds.frame_ranges(FRAME)
    block = ds._blocks[k]
    blocks = _inflight.blocks_of(ranges, block)
    assert len(blocks) >= 2
    lacking = set(blocks[1:])  # as if the frame's first block were on disk
    monkeypatch.setattr(_frames._Arrivals, "missing",
                        lambda self, kk, rr: [b for b in _inflight.blocks_of(rr, block) if kk == k and b in lacking])
    sent = []
    file_type = type(ds._dataset(k).file)
    hint = file_type._hint

    def recorded(f, rr, **options):
        sent.extend(rr)
        return hint(f, rr, **options)
    monkeypatch.setattr(file_type, "_hint", recorded)
    assert list(ds.plan([FRAME], ahead=1, lead=0)) == [FRAME]
    assert sent and set(_inflight.blocks_of(sent, block)) == lacking
    # Exactly the frame's bytes in the lacking blocks, nothing before them.
    first = min(lacking) * block
    want = sum(max(0, o + n - max(o, first)) for o, n in ranges)
    assert sum(n for _, n in sent) == want
    np.testing.assert_array_equal(ds[FRAME], hub["frames"][FRAME])


def test_within_blocks_cuts_ranges_to_blocks():
    from h5chunk._frames import _within_blocks
    mib = 1 << 20
    assert _within_blocks([(10, 3 * mib)], [0, 1, 2, 3], mib) == [(10, 3 * mib)]
    assert _within_blocks([(10, 3 * mib)], [1, 3], mib) == [(mib, mib), (3 * mib, 10)]
    assert _within_blocks([(10, 3 * mib)], [1, 2], mib) == [(mib, 2 * mib)]
    assert _within_blocks([(0, 5), (mib + 5, 5)], [1], mib) == [(mib + 5, 5)]
    assert _within_blocks([(0, 5)], [], mib) == []
    q = mib // 4  # a file read in quarter-MiB blocks: the same bytes cut at its own blocks
    assert _within_blocks([(10, 3 * q)], [1, 3], q) == [(q, q), (3 * q, 10)]


def _open_marker_files(marker_dir):
    """How many descriptors this process has open on files in marker_dir."""
    n = 0
    for fd in os.listdir("/proc/self/fd"):
        try:
            if os.path.dirname(os.readlink(f"/proc/self/fd/{fd}")) == os.path.realpath(marker_dir):
                n += 1
        except OSError:
            pass
    return n


def test_a_process_keeps_few_marker_files_open_and_never_one_it_holds_markers_on(hub, ds, monkeypatch):
    # A plan over thousands of files must not keep a descriptor per file for the process's life
    # (a worker would run out of them): files it holds nothing on are closed past MAX_IDLE_FILES,
    # the ones used longest ago first; a file it holds a marker on stays open, its lock kept.
    monkeypatch.setattr(_inflight, "MAX_IDLE_FILES", 2)
    markers = _inflight.markers(ds._marker_dir)
    kept = markers.hold("held-file", [7])
    assert kept == [("held-file", 7)]
    for i in range(6):
        markers.release(markers.hold(f"file-{i}", [0, 1]))
    assert _open_marker_files(ds._marker_dir) == 3  # the held one and the 2 used last
    assert _locks_on(markers.path("held-file")) == 1  # closing the others dropped nothing of it
    assert _waited_elsewhere(ds._marker_dir, "held-file", [7]) == 1
    assert markers.wait("file-0", [0], seconds=0.05) == 0  # reopened to look, closed again after
    assert _open_marker_files(ds._marker_dir) == 3
    markers.release(kept)
    assert _open_marker_files(ds._marker_dir) == 2


def test_a_plan_makes_the_marker_directory_again_after_a_cache_clear(hub, ds):
    # `hubfs cache clear` removes CACHE_DIR/inflight (one marker file per file ever planned would
    # pile up): a plan running on makes it again for the files it opens anew.
    import shutil
    markers = _inflight.markers(ds._marker_dir)
    first = markers.hold("before-clear", [0])
    assert first == [("before-clear", 0)]
    markers.release(first)
    shutil.rmtree(ds._marker_dir)
    again = markers.hold("after-clear", [3])
    assert again == [("after-clear", 3)]
    assert os.path.exists(markers.path("after-clear")) and _locks_on(markers.path("after-clear")) == 1
    markers.release(again)


def _frame_of(args):
    ds, i = args
    return i, ds[i]


def test_a_planned_epoch_with_forked_workers_fetches_each_block_once(hub, tmp_path):
    # Over hf:// a FrameDataset reads in blocks of FRAME_BLOCK (a random frame fetches about one
    # block more than its bytes: less with smaller blocks). The plan and the workers are separate
    # processes: the plan's markers, named in those blocks, keep the workers from fetching what
    # the plan has on its way. Counted at the Hub, in the same blocks.
    from h5chunk import _frames
    d = h5chunk.FrameDataset([f"{URL}/m{i}.hdf5" for i in range(FILES)], "data/raw_data",
                             endpoint=hub["endpoint"], cache_dir=str(tmp_path / "cache"), token=False)
    try:
        assert d._blocks == [_frames.FRAME_BLOCK] * FILES
        assert all(d._dataset(k).file._hub_file._core_file().block_size == _frames.FRAME_BLOCK
                   for k in range(FILES))
        # The first MiB each file's hint brought when the dataset was made is not marked: let it
        # land before the epoch, so only the epoch's fetches are counted.
        deadline = time.monotonic() + CHILD_TIMEOUT
        while any(d._dataset(k).file._hub_file._core_file().uncached_blocks([(0, _frames.FIRST_BLOCK)])
                  for k in range(FILES)) and time.monotonic() < deadline:
            time.sleep(0.01)
        control(hub["endpoint"], "POST", "/_hubfs/reset", {})
        order = list(range(len(d)))[::-1]
        ctx = multiprocessing.get_context("fork")
        with ctx.Pool(2) as pool:
            got = dict(pool.imap_unordered(_frame_of, [(d, i) for i in d.plan(order, ahead=4)]))
        assert sorted(got) == sorted(order)
        for i in order:
            np.testing.assert_array_equal(got[i], hub["frames"][i])
        trace = control(hub["endpoint"], "GET", "/_hubfs/trace")
    finally:
        d.close()
    fetched = []
    for t in trace:
        if t.get("range"):
            lo, hi = (int(x) for x in t["range"].split("=")[1].split("-"))
            fetched += [(t["path"], b) for b in range(lo // _frames.FRAME_BLOCK, hi // _frames.FRAME_BLOCK + 1)]
    assert fetched and len(fetched) == len(set(fetched))


def test_a_plans_hints_ask_for_each_frames_blocks_in_one_request(hub, tmp_path, monkeypatch):
    # A plan hints frame after frame at once. Spread over the connections still idle, its first
    # frames went out as a request per block, a round trip each; a plan's hints ask for each run
    # of blocks whole. Frames of the two files in turn: each hint is one frame, one run of blocks
    # (a few, under the reader's 32 per request), so the Hub sees at most a request per hint.
    from h5chunk import _frames
    d = h5chunk.FrameDataset([f"{URL}/m{i}.hdf5" for i in range(FILES)], "data/raw_data",
                             endpoint=hub["endpoint"], cache_dir=str(tmp_path / "cache"), token=False)
    try:
        deadline = time.monotonic() + CHILD_TIMEOUT
        while any(d._dataset(k).file._hub_file._core_file().uncached_blocks([(0, _frames.FIRST_BLOCK)])
                  for k in range(FILES)) and time.monotonic() < deadline:
            time.sleep(0.01)  # the first blocks the dataset hinted when made: not the plan's
        hints = []
        file_type = type(d._dataset(0).file)
        hint = file_type._hint

        def recorded(f, ranges, **options):
            hints.append((f.filename, list(ranges), options))
            return hint(f, ranges, **options)
        monkeypatch.setattr(file_type, "_hint", recorded)
        control(hub["endpoint"], "POST", "/_hubfs/reset", {})
        order = [FRAMES * (i % FILES) + i // FILES for i in range(len(d))]
        assert list(d.plan(order, ahead=len(d), lead=0)) == order  # returns once the bytes are in
        trace = control(hub["endpoint"], "GET", "/_hubfs/trace")
        for i in order:
            np.testing.assert_array_equal(d[i], hub["frames"][i])
    finally:
        d.close()
    # Every frame but those the dataset's first MiB holds (a file's first) is hinted, whole runs.
    assert len(hints) >= len(order) - FILES and all(options == {"whole_runs": True} for _, _, options in hints)
    # Each hinted frame spans several blocks: spread, the first alone went out in as many requests.
    assert all(len(_inflight.blocks_of(ranges, _frames.FRAME_BLOCK)) >= 3 for _, ranges, _ in hints)
    requests = [t for t in trace if t.get("range")]
    assert 0 < len(requests) <= len(hints)
