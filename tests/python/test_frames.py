"""h5chunk.FrameDataset and its plan() sampler, over local files and hf:// (the bundled local Hub
server on 127.0.0.1, started here), and under torch.utils.data.DataLoader with 4 workers, forked
and spawned. Frames are compared with the local files' h5py reads."""

import multiprocessing
import os
import pickle

import h5py
import numpy as np
import pytest

import h5chunk
from local_hub import control, local_hub

URL = "hf://datasets/lab/rec"
FILES = 3
FRAMES = 5  # per file
# A hang is forever: any bound tells it from a slow loaded machine.
CHILD_TIMEOUT = 120


@pytest.fixture(scope="module")
def hub(tmp_path_factory):
    root = tmp_path_factory.mktemp("hub")
    repo = root / "datasets" / "lab" / "rec"
    repo.mkdir(parents=True)
    frames = []
    for i in range(FILES):
        # Frames of 192 KiB, one chunk each (as the zea files keep them), so a frame is its chunk.
        data = (np.sin(np.arange(FRAMES * 6 * 128 * 128) / 9.0).reshape(FRAMES, 6, 128, 128) * 2000
                + np.random.default_rng(i).normal(0, 20, size=(FRAMES, 6, 128, 128))).astype("int16")
        with h5py.File(repo / f"r{i}.hdf5", "w") as f:
            f.create_dataset("data/raw_data", data=data, chunks=(1, 6, 128, 128), compression="gzip",
                             compression_opts=1)
        frames.append(data)
    with local_hub(str(root)) as endpoint:
        yield {"endpoint": endpoint, "frames": np.concatenate(frames), "dir": str(repo)}


@pytest.fixture
def opts(hub, tmp_path):
    return {"endpoint": hub["endpoint"], "cache_dir": str(tmp_path / "cache"), "token": False}


def _urls():
    return [f"{URL}/r{i}.hdf5" for i in range(FILES)]


def test_frames_across_files_in_order(hub):
    ds = h5chunk.FrameDataset([os.path.join(hub["dir"], f"r{i}.hdf5") for i in range(FILES)], "data/raw_data")
    assert len(ds) == FILES * FRAMES
    assert ds.locate(FRAMES + 2) == (1, 2) and ds.locate(-1) == (FILES - 1, FRAMES - 1)
    for i in (0, FRAMES - 1, FRAMES, len(ds) - 1, -3):
        np.testing.assert_array_equal(ds[i], hub["frames"][i])
    with pytest.raises(IndexError):
        ds[len(ds)]
    ds2 = pickle.loads(pickle.dumps(ds))
    np.testing.assert_array_equal(ds2[7], hub["frames"][7])


def test_frame_ranges_are_the_chunks_hdf5_reports(hub, tmp_path):
    path = os.path.join(hub["dir"], "r1.hdf5")
    ds = h5chunk.FrameDataset([path], "data/raw_data")
    with h5py.File(path, "r") as f:
        dsid = f["data/raw_data"].id
        for i in range(FRAMES):
            info = dsid.get_chunk_info_by_coord((i, 0, 0, 0))
            assert ds.frame_ranges(i) == (0, [(info.byte_offset, info.size)])
    # Frames of two chunks each (along axis 1), and a contiguous dataset's rows.
    with h5py.File(tmp_path / "two.hdf5", "w") as f:
        f.create_dataset("c", data=np.arange(4 * 6 * 8, dtype="int32").reshape(4, 6, 8), chunks=(1, 3, 8))
        f.create_dataset("flat", data=np.arange(40, dtype="int64").reshape(4, 10))
    with h5py.File(tmp_path / "two.hdf5", "r") as f:
        want = [(f["c"].id.get_chunk_info_by_coord((2, a, 0)).byte_offset, 3 * 8 * 4) for a in (0, 3)]
        flat = f["flat"].id.get_offset()
    two = h5chunk.FrameDataset([tmp_path / "two.hdf5"], "c")
    assert two.frame_ranges(2) == (0, want)
    assert h5chunk.FrameDataset([tmp_path / "two.hdf5"], "flat").frame_ranges(3) == (0, [(flat + 3 * 80, 80)])


def test_hf_frames_are_located_when_the_dataset_is_made(hub, opts, monkeypatch):
    # A plan takes each frame's byte ranges from memory: looked up as it went, the first lookup
    # of each file read its chunk index through the reader and held the first hint back.
    ds = h5chunk.FrameDataset(_urls(), "data/raw_data", **opts)
    want = [ds._look_up(i) for i in range(len(ds))]
    calls = []
    monkeypatch.setattr(h5chunk.Dataset, "_row_ranges", lambda self, first, count: calls.append(first))
    assert [ds.frame_ranges(i) for i in range(len(ds))] == want
    assert list(ds.plan(range(len(ds)), ahead=4)) == list(range(len(ds)))
    for i in range(len(ds)):  # a read's look at the disk cache takes them from memory too
        np.testing.assert_array_equal(ds[i], hub["frames"][i])
    assert calls == []
    # Past the bound, frames are looked up where they are needed.
    monkeypatch.undo()
    from h5chunk import _frames
    monkeypatch.setattr(_frames, "LOCATE_AT_OPEN", len(ds) - 1)
    big = h5chunk.FrameDataset(_urls(), "data/raw_data", **opts)
    assert big._located == {} and [big.frame_ranges(i) for i in range(len(ds))] == want


def test_plan_yields_the_order_each_epoch_and_hints_ahead(hub, opts):
    ds = h5chunk.FrameDataset(_urls(), "data/raw_data", **opts)
    order = list(np.random.default_rng(3).permutation(len(ds)))
    plan = ds.plan(order, ahead=4, lead=0)
    assert len(plan) == len(ds)
    assert list(plan) == order
    # Over hf:// with a disk cache the plan marks what it hints (the workers wait for it): every
    # frame was hinted once in the epoch, from the first, with a lead or without.
    def stored(i):
        return sum(n for _, n in ds.frame_ranges(i)[1])
    assert plan.hinted_bytes == sum(stored(i) for i in order)
    led = ds.plan(order, ahead=4, lead=3)
    assert list(led) == order
    assert led.hinted_bytes == sum(stored(i) for i in order)
    # Unmarked (no disk cache: nothing shared), every frame but the next (the workers' own), and
    # with a lead, the frames a loader hands out at once are left to its workers: a hint of them
    # would race their reads.
    bare = h5chunk.FrameDataset(_urls(), "data/raw_data", **dict(opts, cache_size=0))
    plan0 = bare.plan(order, ahead=4, lead=0)
    assert list(plan0) == order and plan0.hinted_bytes == sum(stored(i) for i in order[1:])
    led0 = bare.plan(order, ahead=4, lead=3)
    assert list(led0) == order and led0.hinted_bytes == sum(stored(i) for i in order[4:])
    # A sampler is iterated afresh each epoch.
    class Shuffled:
        def __init__(self):
            self.epoch = 0

        def __len__(self):
            return len(ds)

        def __iter__(self):
            self.epoch += 1
            return iter(np.random.default_rng(self.epoch).permutation(len(ds)).tolist())

    plan2 = ds.plan(Shuffled(), ahead=3)
    first, second = list(plan2), list(plan2)
    assert sorted(first) == sorted(second) == list(range(len(ds))) and first != second


def _record_hints(ds, monkeypatch):
    """The (file, first offset) of every hint ds's files send, in the order sent. The plan takes
    every frame as missing from the disk cache (these small files are whole in it once the
    dataset hinted their first blocks)."""
    from h5chunk import _frames, _inflight
    monkeypatch.setattr(_frames._Arrivals, "missing", lambda self, k, ranges: _inflight.blocks_of(ranges, self._dataset._blocks[k]))
    sent = []
    file_type = type(ds._dataset(0).file)
    hint = file_type._hint

    def recorded(f, ranges, **options):
        sent.append((ds.paths.index(f.filename), ranges[0][0]))
        return hint(f, ranges, **options)
    monkeypatch.setattr(file_type, "_hint", recorded)
    return sent


def test_plan_hints_frames_in_the_order_they_come(hub, opts, monkeypatch):
    # The reader queues requests in the order hinted: frames of many files go out in the
    # sampler's order, not grouped by file (which put a file's late frames before the next
    # file's early ones).
    ds = h5chunk.FrameDataset(_urls(), "data/raw_data", **opts)
    sent = _record_hints(ds, monkeypatch)
    order = list(np.random.default_rng(5).permutation(len(ds)))
    assert list(ds.plan(order, ahead=len(ds), lead=0)) == order
    # One hint per run of one file's frames (they coalesce), each starting at the run's first.
    runs = []
    for k, ranges in (ds.frame_ranges(i) for i in order):
        if not runs or runs[-1][0] != k:
            runs.append((k, ranges[0][0]))
    assert len(runs) > FILES and sent == runs
    # hint() alone (no plan) also keeps the order, one hint per run of one file's frames.
    sent.clear()
    ds.hint([0, 1, FRAMES, 2])
    assert sent == [(0, ds.frame_ranges(0)[1][0][0]), (1, ds.frame_ranges(FRAMES)[1][0][0]),
                    (0, ds.frame_ranges(2)[1][0][0])]


def test_plan_spreads_a_hint_over_the_indices_a_loader_takes_at_once(hub, opts, monkeypatch):
    # A loader takes `lead` indices at once: the plan's first hint is spread over them (ahead /
    # lead frames each), so its first requests and the workers' first frames both go out at once.
    # A plan that marks its hints starts at the index it yields first: that index's blocks are
    # marked and on their way before a worker has it (its worker's first open, in a forked
    # child, comes later), and the worker waits for them instead of fetching them too.
    ds = h5chunk.FrameDataset(_urls(), "data/raw_data", **opts)
    sent = _record_hints(ds, monkeypatch)
    order = [FRAMES * (i % FILES) + i // FILES for i in range(len(ds))]  # files in turn: one hint a frame
    want = [(k, ranges[0][0]) for k, ranges in (ds.frame_ranges(i) for i in order[0:10])]
    it = iter(ds.plan(order, ahead=6, lead=3))
    assert next(it) == order[0]
    assert sent == want[:4]
    assert [next(it) for _ in range(2)] == order[1:3]
    assert sent == want
    assert list(it) == order[3:]


def test_a_plan_hints_each_frame_as_it_enters_the_window(hub, opts, monkeypatch):
    # After the first window, every index yielded lets the next frame in and hints it: the
    # window stays `ahead` frames deep. (In batches of half the window, a plan with connections
    # to spare fetched a batch and left them idle until its workers had taken the next half.)
    ds = h5chunk.FrameDataset(_urls(), "data/raw_data", **opts)
    sent = _record_hints(ds, monkeypatch)
    order = [FRAMES * (i % FILES) + i // FILES for i in range(len(ds))]  # files in turn: one hint a frame
    want = [(k, ranges[0][0]) for k, ranges in (ds.frame_ranges(i) for i in order)]
    ahead = 4
    it = iter(ds.plan(order, ahead=ahead, lead=0))
    for n in range(1, 3 * ahead):
        assert next(it) == order[n - 1]
        assert sent == want[:n + ahead], n
    assert list(it) == order[3 * ahead - 1:]
    assert sent == want


def test_a_plan_waits_for_a_frame_by_one_byte_in_each_of_its_blocks():
    from h5chunk._frames import _block_starts
    mib = 1 << 20
    assert _block_starts([(100, 10)], mib) == [100]
    assert _block_starts([(mib - 5, 10)], mib) == [mib - 5, mib]
    assert _block_starts([(3 * mib + 7, 2 * mib)], mib) == [3 * mib + 7, 4 * mib, 5 * mib]
    assert _block_starts([(2 * mib + 50, 10), (2 * mib + 10, 10), (0, 0)], mib) == [2 * mib + 10]
    # Only the blocks the disk cache lacks: those on disk need no wait.
    assert _block_starts([(3 * mib + 7, 2 * mib)], mib, [4, 9]) == [4 * mib]
    assert _block_starts([(3 * mib + 7, 2 * mib)], mib, []) == []
    # In the file's own blocks: a quarter-MiB block each.
    q = mib // 4
    assert _block_starts([(q - 5, q + 10)], q) == [q - 5, q, 2 * q]
    assert _block_starts([(q - 5, q + 10)], q, [2]) == [2 * q]


class _RecordedReads:
    """A core file whose disk cache lacks `missing` (block numbers) until a byte of each is read;
    records the offsets read."""

    block_size = 1 << 20

    def __init__(self, missing):
        self.missing, self.read = set(missing), []

    def uncached_blocks(self, ranges):
        from h5chunk import _inflight
        return sorted(self.missing & set(_inflight.blocks_of(ranges, self.block_size)))

    def readinto(self, buffer, offset):
        self.read.append(offset)
        self.missing.discard(offset // self.block_size)
        return 1

    def wait_written(self, ranges, timeout):
        return True


class _FullDisk(_RecordedReads):
    """A core file whose disk cache refuses every block write (a full disk): a block read stays
    missing from it, and its wait for the write ends as the write is refused. Records the plan's
    looks at the disk and its waits, and when the markers were held during the waits."""

    def __init__(self, missing, markers, key):
        super().__init__(missing)
        self.looks, self.waits, self.markers, self.key = 0, [], markers, key

    def uncached_blocks(self, ranges):
        from h5chunk import _inflight
        self.looks += 1
        return sorted(set(_inflight.blocks_of(ranges, self.block_size)))  # nothing ever reaches the disk

    def readinto(self, buffer, offset):
        self.read.append(offset)
        return 1

    def wait_written(self, ranges, timeout):
        # The markers are still held while the plan waits: a worker asking now waits too.
        self.waits.append((list(ranges), timeout, self.markers.held()))
        return True  # the write ended (refused): the wait is over


def test_a_plan_waits_for_a_frames_disk_writes_once_then_releases_its_markers(hub, opts, monkeypatch):
    from h5chunk import _frames, _inflight
    ds = h5chunk.FrameDataset(_urls(), "data/raw_data", **opts)
    mib = _RecordedReads.block_size
    markers = _inflight.markers(ds._marker_dir)
    raw = _FullDisk([1, 2], markers, ds._marker_keys[0])
    monkeypatch.setattr(ds._dataset(0).file._hub_file, "_core_file", lambda: raw)
    arrivals = ds._arrivals()
    names = arrivals.hold(0, [1, 2])
    arrivals.add(0, [(mib, 2 * mib)], names)
    arrivals.close(wait_for_bytes=True)
    assert raw.read == [mib, 2 * mib]  # a byte of each block the disk lacked: their fetches joined
    # Then one wait for their writes, bounded, with the markers held; no polling of the disk (a
    # full disk never gets the blocks: polled, the plan looked until _DISK_WAIT_SECONDS).
    assert raw.waits == [([(mib, 2 * mib)], _frames._DISK_WAIT_SECONDS, 2)]
    assert raw.looks == 1
    again = markers.hold(ds._marker_keys[0], [1, 2])
    assert len(again) == 2  # released after the wait: the workers fetch the blocks themselves
    markers.release(again)
    ds.close()


def test_a_fetched_block_is_on_disk_once_its_write_wait_returns(hub, opts):
    # The real reader: what a plan waits on before it releases a frame's markers. A block read in
    # is released to its readers before its disk write; wait_written returns after that write
    # (without it, the block is often not on disk yet when the read returns).
    import hubfs
    for b in (3, 7, 11):
        with hubfs.open(_urls()[0], block_size="64K", **opts) as f:
            raw = f._core_file()
            ranges = [(b * raw.block_size + 5, 10)]
            assert raw.uncached_blocks(ranges) == [b]
            assert raw.wait_written(ranges, 0) is True  # nothing fetched: no write to wait for
            f.seek(ranges[0][0])
            assert f.read(1)
            assert raw.wait_written(ranges, CHILD_TIMEOUT) is True
            assert raw.uncached_blocks(ranges) == []


def test_a_plan_reads_nothing_of_the_blocks_already_on_disk(hub, opts, monkeypatch):
    from h5chunk import _inflight
    ds = h5chunk.FrameDataset(_urls(), "data/raw_data", **opts)
    mib = _RecordedReads.block_size
    ranges = [(3 * mib + 7, 2 * mib)]  # blocks 3, 4, 5
    raw = _RecordedReads(missing=[4])
    hub_file = ds._dataset(0).file._hub_file
    monkeypatch.setattr(hub_file, "_core_file", lambda: raw)
    arrivals = ds._arrivals()
    names = arrivals.hold(0, [3, 4, 5])
    arrivals.add(0, ranges, names)
    names0 = arrivals.hold(0, [0])  # block 0: on disk from the start
    arrivals.add(0, [(0, mib)], names0)
    arrivals.close(wait_for_bytes=True)
    # The wait read a byte of the one block the disk lacked, none of those already there.
    assert raw.read == [4 * mib]
    markers = _inflight.markers(ds._marker_dir)
    again = markers.hold(ds._marker_keys[0], [0, 3, 4, 5])
    assert len(again) == 4  # every marker was released
    markers.release(again)
    ds.close()


def test_plan_caps_what_it_hints_by_bytes(hub, opts):
    ds = h5chunk.FrameDataset(_urls(), "data/raw_data", **opts)
    one = sum(n for _, n in ds.frame_ranges(0)[1])
    plan = ds.plan(range(len(ds)), ahead=100, max_bytes=2 * one, lead=0)
    it = iter(plan)
    next(it)
    # With 100 frames allowed, the byte cap stopped the first hint at about two frames.
    assert plan.hinted_bytes <= 3 * max(sum(n for _, n in ds.frame_ranges(i)[1]) for i in range(3))
    assert list(it) == list(range(1, len(ds)))


def test_a_dataset_over_hf_keeps_its_process_memory_tier_small(hub, opts, monkeypatch):
    # The plan's process hints blocks for its workers, through the shared disk tier: it keeps the
    # workers' small memory tier, not 256 MiB of blocks it never reads again.
    from hubfs import _remote
    monkeypatch.setattr(_remote, "_one_of_many", False)
    h5chunk.FrameDataset([os.path.join(hub["dir"], "r0.hdf5")], "data/raw_data").close()
    assert not _remote._one_of_many  # local files: nothing shared
    h5chunk.FrameDataset(_urls(), "data/raw_data", **dict(opts, cache_size=0)).close()
    assert not _remote._one_of_many  # no disk cache: nothing shared either
    h5chunk.FrameDataset(_urls(), "data/raw_data", **opts).close()
    assert _remote._one_of_many


def test_workers_find_planned_frames_in_the_cache(hub, opts):
    ds = h5chunk.FrameDataset(_urls(), "data/raw_data", **opts)
    order = list(range(len(ds)))
    ds.hint(order)  # the main process hints every frame
    # Wait for the hinted blocks to land: a read of each frame in this process waits for them.
    for i in order:
        ds[i]
    control(opts["endpoint"], "POST", "/_hubfs/reset", {})
    ctx = multiprocessing.get_context("fork")
    with ctx.Pool(2) as pool:
        got = pool.map_async(_frame_sum, [(ds, i) for i in order]).get(CHILD_TIMEOUT)
    assert got == [int(hub["frames"][i].astype(np.int64).sum()) for i in order]
    s = control(opts["endpoint"], "GET", "/_hubfs/stats")
    assert s["range_requests"] == 0, s  # every byte from the shared disk cache


class _ReadSpy:
    """A core Dataset that records how each read_into was asked to run (on the caller or not,
    announcing its chunks or not)."""

    def __init__(self, core):
        self.core, self.on_caller, self.hint_chunks = core, [], []

    def read_into(self, items, out, route="auto", progress=None, on_caller=False, hint_chunks=True):
        self.on_caller.append(on_caller)
        self.hint_chunks.append(hint_chunks)
        return self.core.read_into(items, out, route, progress, on_caller, hint_chunks)

    def __getattr__(self, name):
        return getattr(self.core, name)


class _DiskSays:
    """A hubfs core file whose uncached_blocks gives these answers in turn, the last one from then
    on (the rest is the real file's)."""

    def __init__(self, raw, *answers):
        self.raw, self.answers = raw, list(answers)

    def uncached_blocks(self, ranges):
        return self.answers.pop(0) if len(self.answers) > 1 else self.answers[0]

    def __getattr__(self, name):
        return getattr(self.raw, name)


def _spy_on(ds, k):
    d = ds._dataset(k)
    spy = _ReadSpy(d._core)
    d._core = spy
    return d, spy


def test_frames_on_local_disk_read_on_the_calling_thread(hub, opts, monkeypatch):
    # Local paths: on the caller. hf://: on the caller once the frame's blocks are all in the disk
    # cache, and with no hint of its chunk (nothing to fetch); before, on a thread of its own (the
    # main thread stays free for Ctrl-C), hinted, after waiting on the plan's markers of the
    # missing blocks only. Every frame exact either way.
    local = h5chunk.FrameDataset([os.path.join(hub["dir"], f"r{i}.hdf5") for i in range(FILES)], "data/raw_data")
    _, spy = _spy_on(local, 1)
    np.testing.assert_array_equal(local[FRAMES + 1], hub["frames"][FRAMES + 1])
    assert spy.on_caller == [True] and spy.hint_chunks == [True]  # a mount's path takes hints

    ds = h5chunk.FrameDataset(_urls(), "data/raw_data", **opts)
    d, spy = _spy_on(ds, 1)
    raw = d.file._hub_file._core_file()
    os.makedirs(ds._marker_dir, exist_ok=True)
    waited = []
    monkeypatch.setattr(h5chunk._inflight.Markers, "wait",
                        lambda self, key, blocks, *a, **k: waited.append(list(blocks)) or 0)
    for missing, on_caller in (([0], False), ([], True)):
        monkeypatch.setattr(d.file._hub_file, "_core_file", lambda m=missing: _DiskSays(raw, m))
        np.testing.assert_array_equal(ds[FRAMES + 3], hub["frames"][FRAMES + 3])
        assert spy.on_caller[-1] is on_caller and spy.hint_chunks[-1] is not on_caller
    assert waited == [[0]]  # the frame on disk waited for nothing
    # A frame whose missing block a plan held: once the wait is over, the disk is asked again.
    disk = _DiskSays(raw, [0], [])
    monkeypatch.setattr(h5chunk._inflight.Markers, "wait", lambda self, key, blocks, *a, **k: 1)
    monkeypatch.setattr(d.file._hub_file, "_core_file", lambda: disk)
    np.testing.assert_array_equal(ds[FRAMES + 4], hub["frames"][FRAMES + 4])
    assert spy.on_caller[-1] is True and disk.answers == [[]]


def _frame_sum(args):
    ds, i = args
    return int(ds[i].astype(np.int64).sum())


_inherited = ()  # a forked pool's datasets, as its initializer got them (inherited, not pickled)


def _inherit(*datasets):
    global _inherited
    _inherited = datasets


def _opened_at_fork(i):
    """In a forked worker, before any read: which of each inherited dataset's files (and their
    dataset) the thread started at the fork opened in this process; then frame i's sum."""
    from h5chunk import _frames
    datasets = _inherited
    opener = _frames.child_opener
    if opener is not None:
        opener.join(CHILD_TIMEOUT)
    here = os.getpid()
    opened = [sorted(k for k, f in d._files.items()
                     if f._pid == here and all(x._pid == here for x in f._datasets.values()))
              for d in datasets]
    return opened, int(datasets[0][i].astype(np.int64).sum())


def test_a_forked_worker_opens_the_files_as_it_is_forked(hub, opts):
    # A pool's worker has its files open again before its first frame (a forked worker's first
    # open came 0.2-0.5 s into a cold epoch). A closed dataset's files are not opened.
    ds = h5chunk.FrameDataset(_urls(), "data/raw_data", **opts)
    closed = h5chunk.FrameDataset(_urls(), "data/raw_data", **opts)
    closed.close()
    ctx = multiprocessing.get_context("fork")
    with ctx.Pool(2, initializer=_inherit, initargs=(ds, closed)) as pool:
        got = pool.map_async(_opened_at_fork, [0, len(ds) - 1]).get(CHILD_TIMEOUT)
    for (opened, total), i in zip(got, (0, len(ds) - 1)):
        assert opened == [list(range(FILES)), []]
        assert total == int(hub["frames"][i].astype(np.int64).sum())
    # Local files open cheaply where they are read: nothing is opened at the fork.
    local = h5chunk.FrameDataset([os.path.join(hub["dir"], f"r{i}.hdf5") for i in range(FILES)], "data/raw_data")
    with ctx.Pool(1, initializer=_inherit, initargs=(local,)) as pool:
        (opened, total), = pool.map_async(_opened_at_fork, [1]).get(CHILD_TIMEOUT)
    assert opened == [[]] and total == int(hub["frames"][1].astype(np.int64).sum())


def _torch_or_skip():
    try:
        import torch  # noqa: F401
        from torch.utils.data import DataLoader  # noqa: F401
    except ImportError as e:
        print(f"torch is not installed ({e}): install Debian's python3-torch (scripts/deps.sh) to run this")
        pytest.skip(f"torch is not installed ({e})")
    import torch
    return torch


@pytest.mark.parametrize("context", ["fork", "spawn"])
def test_dataloader_with_four_workers_over_hf(hub, opts, context):
    torch = _torch_or_skip()
    from torch.utils.data import DataLoader, RandomSampler
    ds = h5chunk.FrameDataset(_urls(), "data/raw_data", **opts)
    ds[0]  # the parent has read over hf:// before the workers start
    g = torch.Generator()
    g.manual_seed(0)
    sampler = ds.plan(RandomSampler(ds, generator=g), ahead=8)
    loader = DataLoader(ds, batch_size=1, sampler=sampler, num_workers=4,
                        multiprocessing_context=context, timeout=CHILD_TIMEOUT)
    seen = [batch[0].numpy() for batch in loader]
    # The sampler is iterated afresh each epoch: the same order again from the same seed.
    g.manual_seed(0)
    order = list(sampler)
    assert len(seen) == len(ds)
    for i, frame in zip(order, seen):
        np.testing.assert_array_equal(frame, hub["frames"][i])
