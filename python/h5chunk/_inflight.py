"""In-flight markers: the blocks a planner (``FrameDataset.plan``) has on their way, so that a
worker needing one waits for it instead of fetching it too.

Over hf:// the planner and the workers are separate processes, each with its own single-flight;
what they share is the disk cache. A marker is one file per block, ``<cache_dir>/inflight/<file
key>.<block>``, that the planner holds with an exclusive POSIX record lock (``fcntl.lockf``) from
its hint until the block is in its cache. A worker whose frame touches a marked block waits for
the lock, polling, then reads (from the cache). The kernel drops the locks of a process that
dies, and a forked child does not inherit them, so a worker never waits on a dead planner; past
``WAIT_SECONDS`` it stops waiting and fetches the block itself. A marker only ever delays a
read: the bytes still come through the reader, checked.
"""

from __future__ import annotations

import errno
import fcntl
import hashlib
import os
import threading
import time
from typing import Callable, Dict, Iterable, List, Optional, Sequence, Tuple

# The reader's block (ReaderOptions::block_size): what is fetched, cached and marked as one.
BLOCK = 1 << 20
# How long a worker waits for a planner's block before fetching it itself: well past a fetch
# under load (a block queued behind a 64-frame hint arrived 2 s after it was hinted), and
# well inside the reader's own 120 s read timeout. A dead planner costs no wait at all.
WAIT_SECONDS = 60.0
# Polls of a held marker: the first soon (a block of a hint is often about to land), then less often.
_POLL_FIRST = 0.002
_POLL_MAX = 0.01

_registry_lock = threading.Lock()
_registry: Dict[str, "Markers"] = {}


def file_key(url: str, commit: str) -> str:
    """The name markers give a file at a commit (the same in the planner and its workers)."""
    return hashlib.sha256(f"{url}\0{commit}".encode()).hexdigest()[:32]


def blocks_of(ranges: Iterable[Tuple[int, int]]) -> List[int]:
    """The reader's blocks holding these (offset, length) ranges, ascending, each once."""
    out = set()
    for offset, length in ranges:
        if length > 0:
            out.update(range(offset // BLOCK, (offset + length - 1) // BLOCK + 1))
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
    # must neither release nor unlink the parent's markers.
    global _registry_lock, _registry
    for m in _registry.values():
        for fd in m._held.values():
            try:
                os.close(fd)
            except OSError:
                pass
    _registry_lock = threading.Lock()
    _registry = {}


os.register_at_fork(after_in_child=_forget_in_child)


class Markers:
    """The markers of one cache directory, as one process sees them."""

    def __init__(self, directory: str) -> None:
        self.dir = directory
        self._held: Dict[str, int] = {}  # marker name -> the open file holding its lock
        self._lock = threading.Lock()
        self._made_dir = False

    def _path(self, name: str) -> str:
        return os.path.join(self.dir, name)

    def hold(self, key: str, blocks: Sequence[int]) -> List[str]:
        """Marks these blocks of file ``key`` as on their way from this process; returns the
        markers taken (not those already held here or by another live process)."""
        taken = []
        with self._lock:
            if not self._made_dir:
                try:
                    os.makedirs(self.dir, mode=0o700, exist_ok=True)
                except OSError:
                    return []  # no markers: the workers may fetch a block twice, nothing worse
                self._made_dir = True
            for b in blocks:
                name = f"{key}.{b}"
                if name in self._held:
                    continue
                try:
                    fd = os.open(self._path(name), os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
                except OSError:
                    continue
                try:
                    fcntl.lockf(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                except OSError:
                    os.close(fd)  # another planner has it on its way
                    continue
                self._held[name] = fd
                taken.append(name)
        return taken

    def release(self, names: Iterable[str]) -> None:
        """The blocks are in the cache: workers waiting for them read now."""
        with self._lock:
            for name in names:
                fd = self._held.pop(name, None)
                if fd is None:
                    continue
                try:
                    os.unlink(self._path(name))
                except OSError:
                    pass
                os.close(fd)  # drops the lock

    def held(self) -> int:
        with self._lock:
            return len(self._held)

    def wait(self, key: str, blocks: Sequence[int], seconds: Optional[float] = None,
             on_wait: Optional[Callable[[], None]] = None) -> int:
        """Waits while another live process holds a marker of these blocks of file ``key``, up to
        ``seconds`` in all (WAIT_SECONDS). Returns how many of them were held when looked at.
        ``on_wait`` is called when the first held one is found (before waiting for it)."""
        deadline = time.monotonic() + (WAIT_SECONDS if seconds is None else seconds)
        waited = 0
        for b in blocks:
            name = f"{key}.{b}"
            with self._lock:
                if name in self._held:
                    continue  # this process fetches it: its own single-flight joins the read
            try:
                fd = os.open(self._path(name), os.O_RDONLY | os.O_CLOEXEC)
            except OSError:
                continue  # no marker: nobody has it on its way
            try:
                delay = _POLL_FIRST
                first = True
                while True:
                    try:
                        fcntl.lockf(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
                        break  # free: the holder released it, or died
                    except OSError as e:
                        if e.errno not in (errno.EAGAIN, errno.EACCES):
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
            finally:
                os.close(fd)  # drops the shared lock, if taken
        return waited
