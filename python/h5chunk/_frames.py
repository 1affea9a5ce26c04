"""FrameDataset: the frames (rows along axis 0) of one dataset across many HDF5 files, as a
map-style dataset for training loops (PyTorch's DataLoader, or any pool of processes).

    ds = h5chunk.FrameDataset(["hf://datasets/ORG/NAME/a.hdf5", ...], "data/raw_data")
    loader = DataLoader(ds, sampler=ds.plan(RandomSampler(ds), ahead=64), num_workers=4)

It needs no torch. Made in the parent, it works in forked workers (each opens the files again
on first use) and pickles for spawned ones (paths, dataset, options; hf:// files at the commit
the parent read). ``plan`` is a sampler run in the process that iterates it (the DataLoader's
main process): it hints the frames coming up, so the workers find them in the cache. Over hf://
it marks the blocks it has on their way (h5chunk._inflight), and a worker that needs one waits
for it rather than fetching it a second time.
"""

from __future__ import annotations

import bisect
import collections
import itertools
import os
import queue
import threading
import weakref
from typing import Any, Dict, Iterable, Iterator, List, Optional, Sequence, Tuple

from . import _inflight

# plan()'s defaults. 64 frames: enough to keep a connection pool of 16 busy behind 4 workers
# reading one frame each; 256 MiB: a bound on what one plan may hint ahead of its workers
# whatever the frame size, well inside the default 10 GiB disk cache.
DEFAULT_AHEAD = 64
DEFAULT_AHEAD_BYTES = 256 << 20
# The indices a DataLoader hands out before its workers read: prefetch_factor (2) x 4 workers.
DEFAULT_LEAD = 8
# The files a forked worker opens as soon as it is forked (per dataset, the first ones): a
# forked worker otherwise opens each file on its first frame of it, and its first open (the
# session made again, then each file's metadata read) came 0.2-0.5 s into a cold epoch, ahead of
# its first request. Capped: a dataset of thousands of files must not make every worker open them all.
OPEN_AT_FORK = 64
# The frames of hf:// files whose byte ranges a FrameDataset looks up when it is made (all of
# them, up to this many; about 150 bytes each): a plan then takes them from memory. Looked up as
# the plan went, the first lookup of each file in a cold epoch took 20-30 ms under load and held
# the first hint back 0.2-0.3 s; at the open, 480 frames took 9 ms.
LOCATE_AT_OPEN = 16384
# The bytes hinted of each hf:// file when a FrameDataset is made: its first MiB, where HDF5 keeps
# the superblock and, for most writers, the root group and the dataset's header, so the opens
# that follow find them cached.
FIRST_BLOCK = 1 << 20
# The block hf:// files are read in (hubfs.open's block_size) unless the options name one: a
# random frame fetches the blocks it touches whole, about one block more than its own bytes, and
# 1 MiB blocks made a cold epoch of 1.7 MB frames fetch 1.40x the frames' bytes, 256 KiB 1.10x
# (docs/constants.md, frame_block_size).
FRAME_BLOCK = 256 << 10


class FrameDataset:
    """``FrameDataset(paths, dataset, **options)``: ``len(ds)`` frames, ``ds[i]`` the i-th as a
    numpy array (one row along axis 0 of ``dataset``, counted across ``paths`` in the order
    given). ``paths``: local paths, paths on a hubfs mount, or ``hf://`` URLs; ``options`` are
    :class:`h5chunk.File`'s (``threads``, and for hf:// ``hubfs.open``'s: ``endpoint``,
    ``cache_dir``, ``cache_size``, ``token``, ...). hf:// files are read in blocks of
    ``FRAME_BLOCK`` (256 KiB) unless ``block_size`` is given."""

    def __init__(self, paths: Iterable[Any], dataset: str, **options: Any) -> None:
        from . import File
        self.paths: List[str] = [os.fspath(p) for p in paths]
        self.dataset = dataset
        self._options = dict(options)
        if _marker_dir(self.paths, self._options) is not None:
            # Over hf:// with a shared disk cache, this process (a plan's, the DataLoader's main
            # process) is one of many too: its sessions keep the workers' small memory tier. The
            # blocks it hints go to the shared disk tier for the workers; a 256 MiB tier here
            # held each for nothing, and the kernel zeroed fresh pages for every one of them.
            from . import _one_of_many
            _one_of_many()
        _hint_first_blocks(self.paths, self._options)
        self._files: Dict[int, Any] = {}
        self._file_options: List[dict] = []  # per file: hf:// ones pinned to the commit read here
        self._blocks: List[Optional[int]] = []  # per file: the block hf:// ones are read in
        lengths = []
        for k, path in enumerate(self.paths):
            f = File(path, **_options_for(path, self._options))
            ds = f[dataset]
            if not ds.shape:
                f.close()
                raise ValueError(f"{path}: '{dataset}' is a scalar dataset: it has no frames")
            lengths.append(ds.shape[0])
            self._files[k] = f
            self._file_options.append(_file_options(f, self._options))
            self._blocks.append(f._hub_file._core_file().block_size if f._hub_file is not None else None)
        self._starts = [0]
        for n in lengths:
            self._starts.append(self._starts[-1] + n)
        self._pid = os.getpid()
        # Over hf://, with a disk cache the processes share: where plans mark the blocks they
        # have on their way, and each file's name there (its URL at the commit read).
        self._marker_dir = _marker_dir(self.paths, self._options)
        self._marker_keys = [
            _inflight.file_key(p, o.get("revision") or "", block) if p.startswith("hf://") else None
            for p, o, block in zip(self.paths, self._file_options, self._blocks)]
        if any(p.startswith("hf://") for p in self.paths):
            _open_at_fork(self)
        self._located: Dict[int, Tuple[int, Tuple[Tuple[int, int], ...]]] = {}  # LOCATE_AT_OPEN
        hf_frames = [i for k, p in enumerate(self.paths) if p.startswith("hf://")
                     for i in range(self._starts[k], self._starts[k + 1])]
        if len(hf_frames) <= LOCATE_AT_OPEN:
            for i in hf_frames:
                k, ranges = self._look_up(i)
                self._located[i] = (k, tuple(ranges))

    def __len__(self) -> int:
        return self._starts[-1]

    def locate(self, i: int) -> Tuple[int, int]:
        """(file number, row in that file) of frame i (negative counts from the end)."""
        n = len(self)
        if i < 0:
            i += n
        if not 0 <= i < n:
            raise IndexError(f"frame {i} out of range for {n} frames")
        k = bisect.bisect_right(self._starts, i) - 1
        return k, i - self._starts[k]

    def _dataset(self, k: int):
        f = self._files.get(k)
        if f is None:
            from . import File
            f = File(self.paths[k], **self._file_options[k])
            self._files[k] = f
        return f[self.dataset]

    def __getitem__(self, i: int):
        k, row = self.locate(int(i))
        ds = self._dataset(k)
        on_disk = self._on_disk(k, ds, int(i))
        # An hf:// frame whose blocks are all in the disk cache is read here with no hint: a hint
        # only handed its blocks' disk loads to the reader's threads while this one waited, a
        # third of a warm frame's CPU (docs/benchmarks.md, session 37).
        cached = on_disk and bool(self._marker_keys[k])
        return ds._read(row, None, None, "auto", False, stacklevel=3, on_caller=on_disk, hint_chunks=not cached)

    def _on_disk(self, k: int, ds: Any, i: int) -> bool:
        """Whether frame i (in file k, whose dataset is ds) reads from local disk alone: a local path (or a mount's),
        or an hf:// frame whose blocks are all in the disk cache. Such a read is short, and runs
        on the calling thread (a thread of its own cost a fifth of a warm frame's CPU); the rest
        keep the main thread free for Ctrl-C. Over hf://, a frame with blocks a plan has on their
        way first waits for them, rather than fetching them a second time (bounded; a dead
        planner holds nothing), then looks again."""
        key = self._marker_keys[k]
        if not key:
            return not self.paths[k].startswith("hf://")
        raw = ds.file._hub_file._core_file()
        ranges = self.frame_ranges(i)[1]
        missing = raw.uncached_blocks(ranges)
        if not missing:
            return True
        if self._marker_dir and os.path.isdir(self._marker_dir) and \
                _inflight.markers(self._marker_dir).wait(key, missing):
            return not raw.uncached_blocks(ranges)  # the plan's blocks came: on disk now
        return False

    def frame_ranges(self, i: int) -> Tuple[int, List[Tuple[int, int]]]:
        """(file number, the byte ranges in that file holding frame i): what a hint fetches."""
        located = self._located.get(int(i))
        if located is not None:
            return located[0], list(located[1])
        return self._look_up(i)

    def _look_up(self, i: int) -> Tuple[int, List[Tuple[int, int]]]:
        k, row = self.locate(int(i))
        return k, self._dataset(k)._row_ranges(row, 1)

    def hint(self, indices: Iterable[int], max_bytes: Optional[int] = None) -> int:
        """Fetches these frames into the cache, all at once (in order, one hint per run of one
        file's frames), without reading them here; frames already cached cost nothing. Stops
        adding frames past ``max_bytes``. Returns the stored bytes hinted. Local files: nothing
        to fetch (0)."""
        return self._hint(indices, max_bytes, None)

    def _hint(self, indices: Iterable[int], max_bytes: Optional[int], arrivals: Optional["_Arrivals"],
              located: Optional[Sequence[Tuple[int, List[Tuple[int, int]]]]] = None) -> int:
        """hint(), marking the hinted blocks with ``arrivals`` (a plan's) until they are cached.
        ``located``: each index's frame_ranges, when the caller has them (a plan looked them up
        when it took the index)."""
        frames: List[Tuple[int, List[Tuple[int, int]]]] = []
        total = 0
        indices = list(indices)
        for at, i in enumerate(indices):
            k, ranges = located[at] if located is not None else self.frame_ranges(i)
            size = sum(n for _, n in ranges)
            if max_bytes is not None and total and total + size > max_bytes:
                break
            frames.append((k, ranges))
            total += size
        # In order, one hint per run of one file's frames: the reader queues requests in the
        # order hinted, so the frames the workers need first go out first (one hint per file sent
        # a file's frames due late ahead of the next file's due soon), and a run's frames share
        # blocks, which its hint coalesces into large requests.
        runs = itertools.groupby(frames, key=lambda frame: frame[0])
        if arrivals is None:
            for k, run in runs:
                hinted = [r for _, ranges in run for r in ranges]
                if hinted:  # frames of no stored bytes (unwritten chunks) have nothing to fetch
                    self._dataset(k).file._hint(hinted)
            return total
        # A plan (hf://): only frames with blocks the disk cache lacks are hinted, and those
        # blocks are marked before their hint goes out, so no worker fetches them meanwhile. A
        # cached frame costs the planner no read of its blocks (a warm epoch hints nothing). Runs
        # are looked up, marked and hinted one at a time: the first run's requests go out at
        # once, not after the whole batch was looked up and marked.
        # The hint names only the frame's bytes in the blocks the disk lacks: a block on disk
        # (shared with a frame fetched before) hinted would be read back into the planner's
        # memory tier (1 MiB read and checked) for nothing, as the workers read it from disk.
        for k, run in runs:
            marked = []
            for _, ranges in run:
                missing = arrivals.missing(k, ranges)
                if missing:
                    marked.append((ranges, _within_blocks(ranges, missing, self._blocks[k]), arrivals.hold(k, missing)))
            if marked:
                # Each frame's run of blocks in one request: the plan hints frame after frame at
                # once, and its first frames, spread over the connections still idle, went out
                # as 1-block requests, a round trip each (docs/benchmarks.md, session 37).
                self._dataset(k).file._hint([r for _, lacking, _ in marked for r in lacking], whole_runs=True)
                for ranges, _, names in marked:
                    arrivals.add(k, ranges, names)
        return total

    def _arrivals(self) -> Optional["_Arrivals"]:
        """What a plan marks its hints with: hf:// files sharing a disk cache only."""
        if self._marker_dir is None or not any(self._marker_keys):
            return None
        return _Arrivals(self, _inflight.markers(self._marker_dir))

    def plan(self, order: Any, ahead: int = DEFAULT_AHEAD, max_bytes: int = DEFAULT_AHEAD_BYTES,
             lead: int = DEFAULT_LEAD) -> "FramePlan":
        """A sampler yielding ``order`` (a list of indices, or a sampler iterated afresh each
        epoch) that, as it is iterated, hints the ``ahead`` frames (at most ``max_bytes`` stored
        bytes) that follow the ``lead`` next ones: those the loader hands its workers at once.
        Over hf:// with a disk cache, where the plan marks what it hints and the workers wait for
        it, the ``lead`` frames are hinted too; elsewhere the workers fetch them themselves (a
        hint of them would race their reads for the same blocks)."""
        return FramePlan(self, order, ahead, max_bytes, lead)

    def close(self) -> None:
        """Closes the files this process opened (they open again on the next read)."""
        files, self._files = self._files, {}
        for f in files.values():
            f.close()

    def __getstate__(self) -> dict:
        state = dict(self.__dict__)
        state["_files"] = {}  # opened again where unpickled, by path and pinned options
        state["_pid"] = os.getpid()  # the process that pickled it
        return state

    def __setstate__(self, state: dict) -> None:
        self.__dict__.update(state)
        if state["_pid"] != os.getpid() and any(p.startswith("hf://") for p in self.paths):
            from . import _one_of_many
            _one_of_many()  # a pool's worker: a small memory tier beside the shared disk tier

    def __repr__(self) -> str:
        return f"<h5chunk.FrameDataset {self.dataset!r}: {len(self)} frames in {len(self.paths)} files>"


class FramePlan:
    """The sampler ``FrameDataset.plan`` returns: iterating it yields ``order``. The next ``lead``
    indices are those a DataLoader hands out at once (prefetch_factor x workers): hinted too when
    the plan marks its hints (hf:// with a disk cache), else the workers' own to fetch; the
    ``ahead`` beyond them are hinted as they enter the window, at most ``max_bytes`` stored bytes
    chosen and not yet yielded. The first window's frames are hinted in order, ``ahead / lead``
    of them before each index yielded; after it, each index yielded lets the next frame in. A
    frame is hinted at most once per epoch."""

    def __init__(self, dataset: FrameDataset, order: Any, ahead: int, max_bytes: int, lead: int) -> None:
        if ahead < 0 or lead < 0:
            raise ValueError("ahead and lead must be 0 or more frames")
        self.dataset = dataset
        self.order = order
        self.ahead = int(ahead)
        self.lead = int(lead)
        self.max_bytes = int(max_bytes)
        self.hinted_bytes = 0  # stored bytes hinted over every epoch so far

    def __len__(self) -> int:
        return len(self.order)

    def __iter__(self) -> Iterator[int]:
        arrivals = self.dataset._arrivals() if self.ahead else None
        try:
            yield from self._iterate(arrivals)
            if arrivals is not None:
                arrivals.close(wait_for_bytes=True)  # the workers still read the last frames
        finally:
            if arrivals is not None:
                arrivals.close()

    def _iterate(self, arrivals: Optional["_Arrivals"]) -> Iterator[int]:
        source = iter(self.order)
        # [index, stored bytes, chosen for a hint, hinted, (file number, byte ranges)]
        buffer: "collections.deque[list]" = collections.deque()
        pending: "collections.deque[list]" = collections.deque()  # chosen, not yet hinted
        hinted_waiting = 0  # stored bytes chosen for hints and not yet yielded
        exhausted = False
        # Where the hinted window starts in the buffer (0: the index yielded next); it ends
        # `ahead` past the lead either way. A plan that marks its hints (hf://) hints from the
        # next index on: a worker waits for a marked block rather than fetching it too, and the
        # plan's connections are open while a forked worker's first request comes after its first
        # open (0.2-0.5 s: the first 8 frames of a cold epoch ended 1 s in, with the plan's first
        # 64 fetched meanwhile). Unmarked, the next `lead` indices are the workers' own: a hint of
        # them would race their reads.
        first = 0 if arrivals is not None else self.lead + 1
        # Frames hinted per index yielded: a batch is spread over the indices the loader takes
        # at once (its lead), so the workers get their first frames while the plan's first
        # hint is still going out, and the first requests leave after one frame's lookups
        # (a 64-frame hint took 0.3 s of this thread, loaded, before the first index went out).
        per_step = max(1, -(-(self.lead + self.ahead + 1 - first) // max(1, self.lead)))
        while True:
            while not exhausted and len(buffer) < self.lead + self.ahead + 1:
                try:
                    i = next(source)
                except StopIteration:
                    exhausted = True
                    break
                located = self.dataset.frame_ranges(i)
                buffer.append([i, sum(n for _, n in located[1]), False, False, located])
            if self.ahead and not pending:
                todo = [e for k, e in enumerate(buffer) if k >= first and not e[2]]
                # Each frame as it enters the window. Hinted in batches of half the window, a
                # plan whose connections fetched a batch faster than its workers took the next
                # half window left them idle meanwhile (at 32 connections, quarter-seconds with
                # no request in flight, in turn with quarter-seconds of 20).
                if todo:
                    for e in todo:
                        if pending and hinted_waiting + e[1] > self.max_bytes:
                            break
                        pending.append(e)
                        hinted_waiting += e[1]
                        e[2] = True
            if pending:
                step = [pending.popleft() for _ in range(min(per_step, len(pending)))]
                for e in step:
                    e[3] = True
                self.hinted_bytes += self.dataset._hint([e[0] for e in step], None, arrivals, [e[4] for e in step])
            if not buffer:
                return
            entry = buffer.popleft()
            i, size, chosen, hinted, _ = entry
            if chosen:
                hinted_waiting -= size
                if not hinted:
                    pending.remove(entry)  # handed out before its hint: the workers fetch it
            yield i


# How long a plan waits for a block it has read to reach the disk cache before releasing its
# marker all the same: the write follows the read within milliseconds. The wait ends as the write
# does (hubfs's wait_written; polling the disk 1-10 ms apart released markers up to a poll late
# and cost the plan's threads a look at every block file each time), and a write the disk cache
# refuses (a full disk) ends it too: the workers then fetch the block themselves.
_DISK_WAIT_SECONDS = 10.0


class _Arrivals:
    """A plan's side of the in-flight markers: it holds a marker on each block it hints, and
    releases a frame's once that frame's bytes are in this process's cache. Threads read a byte
    of each of its blocks here for that: a read joins the hint's fetch of its block and fetches
    nothing else (the blocks are claimed), and returns once the block is in; the disk cache has
    it a moment later."""

    # Frames waited on at once, in hint order: as many as the transport's requests in flight
    # (16), so a frame whose request is still queued does not hold back the markers of frames
    # already in. (With 4, fetched frames waited a median 0.3 s, 1.4 s in the queue, for their
    # release while the workers waited on them: docs/benchmarks.md, session 28.)
    THREADS = 16

    def __init__(self, dataset: FrameDataset, markers: "_inflight.Markers") -> None:
        self._dataset = dataset
        self._markers = markers
        self._queue: "queue.Queue[Optional[tuple]]" = queue.Queue()
        self._closed = False  # markers go without their bytes being waited for
        self._stopped = False
        self._threads = [threading.Thread(target=self._run, name="h5chunk-plan-arrivals", daemon=True)
                         for _ in range(self.THREADS)]
        for t in self._threads:
            t.start()

    def missing(self, k: int, ranges: List[Tuple[int, int]]) -> List[int]:
        """The blocks of these ranges of file k the disk cache lacks."""
        return self._dataset._dataset(k).file._hub_file._core_file().uncached_blocks(ranges)

    def hold(self, k: int, blocks: List[int]) -> List[Tuple[str, int]]:
        return self._markers.hold(self._dataset._marker_keys[k], blocks)

    def add(self, k: int, ranges: List[Tuple[int, int]], names: List[Tuple[str, int]]) -> None:
        """Waits, on a thread of the plan's, for the blocks of these ranges (marked as ``names``)
        to reach the disk cache (or for their writes to be refused), then releases their
        markers."""
        self._queue.put((k, ranges, names))

    def _run(self) -> None:
        byte = bytearray(1)
        while True:
            item = self._queue.get()
            if item is None:
                return
            k, ranges, names = item
            try:
                if names and not self._closed:
                    raw = self._dataset._dataset(k).file._hub_file._core_file()
                    # A byte of the ranges in each block the disk still lacks: the wait for that
                    # block without a copy of the frame (and no byte outside the hinted ranges).
                    for offset in _block_starts(ranges, raw.block_size, raw.uncached_blocks(ranges)):
                        raw.readinto(byte, offset)
                    # A read returns once the blocks are in memory; the disk cache, which the
                    # workers read, has them a moment later (written after the waiters go).
                    raw.wait_written(ranges, _DISK_WAIT_SECONDS)
            except Exception:  # noqa: BLE001 (a failed fetch: the workers read and report it)
                pass
            finally:
                self._markers.release(names)

    def close(self, wait_for_bytes: bool = False) -> None:
        """The epoch is over: returns once every marker is released, when their bytes are in
        (``wait_for_bytes``), or at once for those not being waited on (an abandoned epoch; the
        reads under way are each bounded by the reader's read timeout). Idempotent."""
        if self._stopped:
            return
        self._stopped = True
        self._closed = not wait_for_bytes
        for _ in self._threads:
            self._queue.put(None)
        for t in self._threads:
            if t is not threading.current_thread():
                t.join()


def _within_blocks(ranges: Iterable[Tuple[int, int]], blocks: Iterable[int], block: int) -> List[Tuple[int, int]]:
    """These (offset, length) ranges cut to the blocks ``blocks`` (of ``block`` bytes), in order:
    the parts of a frame that lie in those blocks (consecutive parts joined)."""
    wanted = set(blocks)
    out: List[Tuple[int, int]] = []
    for offset, length in ranges:
        end = offset + length
        at = offset
        while at < end:
            b = at // block
            upto = min(end, (b + 1) * block)
            if b in wanted:
                if out and out[-1][0] + out[-1][1] == at:
                    out[-1] = (out[-1][0], upto - out[-1][0])
                else:
                    out.append((at, upto - at))
            at = upto
    return out


def _block_starts(ranges: Iterable[Tuple[int, int]], block: int, only: Optional[Iterable[int]] = None) -> List[int]:
    """The first offset of these (offset, length) ranges in each block (of ``block`` bytes) they touch, ascending;
    with ``only``, in those of these blocks only. A plan waits by reading a byte of the blocks the
    disk cache still lacks: a block already written there would be read back whole into the
    planner's small memory tier for that byte (its fetch ended while earlier frames were waited
    on, and the tier had dropped it): a quarter of its disk threads' time in a cold epoch."""
    firsts: Dict[int, int] = {}
    for offset, length in ranges:
        end = offset + length
        at = offset
        while at < end:
            b = at // block
            firsts[b] = min(firsts.get(b, at), at)
            at = (b + 1) * block
    wanted = sorted(firsts) if only is None else sorted(set(only) & set(firsts))
    return [firsts[b] for b in wanted]


# The hf:// datasets made in this process (a forked child inherits them), and the thread a
# forked child opens their files on (tests join it).
_at_fork: "weakref.WeakSet[FrameDataset]" = weakref.WeakSet()
_fork_hook_registered = False
child_opener: Optional[threading.Thread] = None


def _open_at_fork(ds: FrameDataset) -> None:
    """Makes every process forked from this one open ds's open files (its first OPEN_AT_FORK) on a
    thread of its own as soon as it is forked, so a pool's worker has them open before its first
    frame. Registered from here, not at import: h5chunk's and hubfs's own fork hooks (fresh locks,
    sessions forgotten) are registered by then and run first."""
    global _fork_hook_registered
    _at_fork.add(ds)
    if not _fork_hook_registered:
        _fork_hook_registered = True
        os.register_at_fork(after_in_child=_start_opening_in_child)


def _start_opening_in_child() -> None:
    global child_opener
    datasets = list(_at_fork)
    child_opener = None
    if datasets:
        child_opener = threading.Thread(target=_open_files, args=(datasets,), name="h5chunk-frames-open",
                                        daemon=True)
        child_opener.start()


def _open_files(datasets: List[FrameDataset]) -> None:
    """Opens again in this (forked) process the files these datasets had open in the parent (a
    closed dataset's: none). A file that fails is left to the worker's read of it, which reports
    the error."""
    for ds in datasets:
        for k in sorted(ds._files)[:OPEN_AT_FORK]:
            try:
                ds._dataset(k)._require_open()
            except Exception:  # noqa: BLE001
                pass


def _marker_dir(paths: Sequence[str], options: dict) -> Optional[str]:
    """Where plans over these files mark their blocks: the disk cache's directory (hf:// only;
    none without a disk cache, which the processes would not share)."""
    if not any(p.startswith("hf://") for p in paths):
        return None
    size = options.get("cache_size")
    if size in (0, "0"):
        return None
    cache_dir = options.get("cache_dir")
    if not cache_dir:
        from hubfs import _remote
        cache_dir = _remote._core().default_cache_dir()
    return os.path.join(os.fspath(cache_dir), "inflight")


def _options_for(path: str, options: dict) -> dict:
    """File's options for this path: for hf://, the block FrameDataset reads in (FRAME_BLOCK)
    unless the options name one."""
    if path.startswith("hf://") and "block_size" not in options:
        return dict(options, block_size=FRAME_BLOCK)
    return options


def _file_options(f: Any, options: dict) -> dict:
    """The options that open file f again: hf:// files at the commit read."""
    if not f.filename.startswith("hf://"):
        return dict(options)
    return f._pinned_options_with_core_args()


def _hint_first_blocks(paths: Sequence[str], options: dict) -> None:
    """Sends every hf:// file's first block as a hint before any is opened: the opens then find
    them cached, instead of each waiting its own round trips in turn."""
    urls = [p for p in paths if p.startswith("hf://")]
    if len(urls) < 2:
        return
    import hubfs
    hub_options = {k: v for k, v in _options_for(urls[0], options).items() if k not in _FILE_ONLY_OPTIONS}
    for url in urls:
        with hubfs.open(url, **hub_options) as raw:
            raw.hint([(0, min(FIRST_BLOCK, raw.size))])


_FILE_ONLY_OPTIONS = {"threads", "min_fast_path_bytes", "max_bytes_in_flight"}
