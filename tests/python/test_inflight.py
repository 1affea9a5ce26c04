"""In-flight markers (h5chunk._inflight): a worker that needs a block a planner has on its way
waits for it instead of fetching it too; a dead planner's markers hold nobody; a live planner that
never lets go holds a worker only until its deadline. Over hf:// (the bundled local Hub server on
127.0.0.1, started here); frames are compared with the local files' h5py reads."""

import multiprocessing
import os
import signal

import h5py
import numpy as np
import pytest

import h5chunk
from h5chunk import _inflight
from local_hub import local_hub

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


def _marked(ds):
    """(markers, file key, blocks) of FRAME."""
    k, ranges = ds.frame_ranges(FRAME)
    return _inflight.markers(ds._marker_dir), ds._marker_keys[k], _inflight.blocks_of(ranges)


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
    assert not any(n in os.listdir(ds._marker_dir) for n in names)  # released markers are gone


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
    assert names and all(n in os.listdir(ds._marker_dir) for n in names)  # left behind
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
    assert os.listdir(ds._marker_dir) == []
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
