"""In-flight markers: the blocks a planner (``FrameDataset.plan``) has on their way, so that a
worker needing one waits for it instead of fetching it too.

Over hf:// the planner and the workers are separate processes, each with its own single-flight;
what they share is the disk cache. The markers of a file are one empty file,
``<cache_dir>/inflight/<file key>``, and block ``b`` is its byte ``b``: the planner holds an
exclusive POSIX record lock (``fcntl.lockf``) on that byte from its hint until the block is in
its cache. A worker whose frame touches a marked block asks the kernel whether the byte is
locked (``F_GETLK``, no lock taken), polling, then reads (from the cache). The kernel drops the
locks of a process that dies, and a forked child does not inherit them, so a worker never waits
on a dead planner; past ``WAIT_SECONDS`` it stops waiting and fetches the block itself. A marker
only ever delays a read: the bytes still come through the reader, checked.

One file per file, not per block: making and unlinking a file per block cost the planner's
thread more than half its CPU (docs/benchmarks.md, session 31-32). A process's record locks on a
file all go when it closes *any* descriptor of that file, so each process opens a file's markers
once and keeps that descriptor (``Markers._fds``) while it holds a marker there or waits on one;
nothing else opens them. Of the files it holds nothing on, it keeps the ``MAX_IDLE_FILES`` used
last open (a plan touches the same files again) and closes the rest: a dataset of thousands of
files must not run a worker out of descriptors. Marker files are not unlinked here: a process
holding a descriptor of an unlinked file would lock bytes no other process sees. Only a whole
``hubfs cache clear`` removes them (and the directory, which ``hold`` then makes again); a plan
it catches may see a block fetched twice, never a wrong byte. Until then, one empty file per
file ever planned is left.
"""

from __future__ import annotations

import fcntl
import hashlib
import os
import struct
import threading
import time
from typing import Callable, Dict, Iterable, List, Optional, Sequence, Tuple

# Blocks are the reader's (hubfs.open's block_size, the file's ``block_size``): what is fetched,
# cached and marked as one. A file's markers are named with its block size, so processes that
# read a file in blocks of different sizes never wait on each other's marks.

# How long a worker waits for a planner's block before fetching it itself: well past a fetch
# under load (a block queued behind a 64-frame hint arrived 2 s after it was hinted), and
# well inside the reader's own 120 s read timeout. A dead planner costs no wait at all.
WAIT_SECONDS = 60.0
# Polls of a held marker: the first soon (a block of a hint is often about to land), then less often.
_POLL_FIRST = 0.002
_POLL_MAX = 0.01
# Marker files a process keeps open while it holds no marker on them and waits on none: enough
# for a plan's window over a few files, far below the usual 1,024 descriptors a process may have.
MAX_IDLE_FILES = 64

# Linux's struct flock (64-bit off_t): l_type, l_whence, l_start, l_len, l_pid.
_FLOCK = "hhqqi4x"

_registry_lock = threading.Lock()
_registry: Dict[str, "Markers"] = {}


def file_key(url: str, commit: str, block: int) -> str:
    """The name markers give a file at a commit read in blocks of ``block`` bytes (the same in the
    planner and its workers)."""
    return hashlib.sha256(f"{url}\0{commit}\0{block}".encode()).hexdigest()[:32]


def blocks_of(ranges: Iterable[Tuple[int, int]], block: int) -> List[int]:
    """The blocks of ``block`` bytes holding these (offset, length) ranges, ascending, each once."""
    out = set()
    for offset, length in ranges:
        if length > 0:
            out.update(range(offset // block, (offset + length - 1) // block + 1))
    return sorted(out)


def markers(directory: str) -> "Markers":
    """This process's markers under ``directory`` (one object per directory, so what one part of
    the process holds, another part never waits for)."""
    with _registry_lock:
        m = _registry.get(directory)
        if m is None:
            m = _registry[directory] = Markers(directory)
        return m


def _forget_in_child() -> None:
    # The parent's locks are its own (record locks do not cross fork): the child holds none, and
    # must not release the parent's. Closing the inherited descriptors drops only the child's
    # own locks (none).
    global _registry_lock, _registry
    for m in _registry.values():
        for fd in m._fds.values():
            try:
                os.close(fd)
            except OSError:
                pass
    _registry_lock = threading.Lock()
    _registry = {}


os.register_at_fork(after_in_child=_forget_in_child)


def _runs(blocks: Iterable[int]) -> List[Tuple[int, int]]:
    """(first, count) of each run of consecutive blocks, ascending."""
    out: List[Tuple[int, int]] = []
    for b in sorted(set(blocks)):
        if out and out[-1][0] + out[-1][1] == b:
            out[-1] = (out[-1][0], out[-1][1] + 1)
        else:
            out.append((b, 1))
    return out


class Markers:
    """The markers of one cache directory, as one process sees them."""

    def __init__(self, directory: str) -> None:
        self.dir = directory
        self._fds: Dict[str, int] = {}  # file key -> its marker file, open for this process's life
        self._held: Dict[str, set] = {}  # file key -> the blocks this process holds
        self._waiting: Dict[str, int] = {}  # file key -> this process's waits using its descriptor
        self._lock = threading.Lock()

    def path(self, key: str) -> str:
        """The marker file of file ``key``."""
        return os.path.join(self.dir, key)

    def _fd(self, key: str, create: bool) -> Optional[int]:
        """The marker file of ``key``, opened once (under self._lock); None if there is none
        (and not ``create``) or it cannot be made."""
        fd = self._fds.pop(key, None)
        if fd is not None:
            self._fds[key] = fd  # the most recently used last: _close_idle closes the oldest
            return fd
        flags = os.O_RDWR | os.O_CLOEXEC | (os.O_CREAT if create else 0)
        try:
            fd = os.open(self.path(key), flags, 0o600)
        except FileNotFoundError:
            if not create:
                return None
            try:  # no directory yet, or it went (`hubfs cache clear` takes it): make it
                os.makedirs(self.dir, mode=0o700, exist_ok=True)
                fd = os.open(self.path(key), flags, 0o600)
            except OSError:
                return None  # no markers: the workers may fetch a block twice, nothing worse
        except OSError:
            return None
        self._fds[key] = fd
        return fd

    def _close_idle(self) -> None:
        """Closes the marker files used longest ago of those this process holds nothing on and
        waits on none, past MAX_IDLE_FILES (under self._lock). Closing one drops only this
        process's locks on it, and it has none there."""
        idle = [k for k in self._fds if not self._held.get(k) and not self._waiting.get(k)]
        for key in idle[:max(0, len(idle) - MAX_IDLE_FILES)]:
            self._held.pop(key, None)
            try:
                os.close(self._fds.pop(key))
            except OSError:
                pass

    def hold(self, key: str, blocks: Sequence[int]) -> List[Tuple[str, int]]:
        """Marks these blocks of file ``key`` as on their way from this process; returns the
        markers taken, as (key, block) (not those already held here or by another live process)."""
        taken: List[Tuple[str, int]] = []
        with self._lock:
            fd = self._fd(key, create=True)
            if fd is None:
                return taken
            mine = self._held.setdefault(key, set())
            new = [b for b in blocks if b not in mine]
            for first, count in _runs(new):
                try:  # a frame's blocks in one call, mostly
                    fcntl.lockf(fd, fcntl.LOCK_EX | fcntl.LOCK_NB, count, first)
                    got = range(first, first + count)
                except OSError:  # another planner has some of them on their way: the rest, each
                    got = []
                    for b in range(first, first + count):
                        try:
                            fcntl.lockf(fd, fcntl.LOCK_EX | fcntl.LOCK_NB, 1, b)
                            got.append(b)
                        except OSError:
                            pass
                for b in got:
                    mine.add(b)
                    taken.append((key, b))
            self._close_idle()
        return taken

    def release(self, names: Iterable[Tuple[str, int]]) -> None:
        """The blocks are in the cache: workers waiting for them read now."""
        by_key: Dict[str, List[int]] = {}
        for key, b in names:
            by_key.setdefault(key, []).append(b)
        with self._lock:
            for key, blocks in by_key.items():
                mine = self._held.get(key)
                fd = self._fds.get(key)
                if not mine or fd is None:
                    continue
                for first, count in _runs(b for b in blocks if b in mine):
                    for b in range(first, first + count):
                        mine.discard(b)
                    try:
                        fcntl.lockf(fd, fcntl.LOCK_UN, count, first)
                    except OSError:
                        pass
            self._close_idle()

    def held(self) -> int:
        with self._lock:
            return sum(len(s) for s in self._held.values())

    def _locked_elsewhere(self, fd: int, b: int) -> bool:
        """Whether another process holds a lock on byte ``b`` (this process's own locks never
        show: F_GETLK reports only conflicting ones)."""
        asked = struct.pack(_FLOCK, fcntl.F_RDLCK, os.SEEK_SET, b, 1, 0)
        got = fcntl.fcntl(fd, fcntl.F_GETLK, asked)
        return struct.unpack(_FLOCK, got)[0] != fcntl.F_UNLCK

    def wait(self, key: str, blocks: Sequence[int], seconds: Optional[float] = None,
             on_wait: Optional[Callable[[], None]] = None) -> int:
        """Waits while another live process holds a marker of these blocks of file ``key``, up to
        ``seconds`` in all (WAIT_SECONDS). Returns how many of them were held when looked at.
        ``on_wait`` is called when the first held one is found (before waiting for it)."""
        deadline = time.monotonic() + (WAIT_SECONDS if seconds is None else seconds)
        with self._lock:
            fd = self._fd(key, create=False)
            if fd is None:
                return 0  # no marker file: nobody has any of its blocks on their way
            mine = set(self._held.get(key, ()))
            self._waiting[key] = self._waiting.get(key, 0) + 1  # fd stays open until we are done
        try:
            return self._wait_on(fd, blocks, mine, deadline, on_wait)
        finally:
            with self._lock:
                self._waiting[key] -= 1
                if not self._waiting[key]:
                    del self._waiting[key]
                self._close_idle()

    def _wait_on(self, fd: int, blocks: Sequence[int], mine: set, deadline: float,
                 on_wait: Optional[Callable[[], None]]) -> int:
        waited = 0
        for b in blocks:
            if b in mine:
                continue  # this process fetches it: its own single-flight joins the read
            delay = _POLL_FIRST
            first = True
            while True:
                try:
                    if not self._locked_elsewhere(fd, b):
                        break  # free: the holder released it, or died
                except OSError:
                    break
                if first:
                    waited += 1
                    first = False
                    if waited == 1 and on_wait is not None:
                        on_wait()
                left = deadline - time.monotonic()
                if left <= 0:
                    break  # fetch it ourselves
                time.sleep(min(delay, left))
                delay = min(delay * 2, _POLL_MAX)
        return waited
