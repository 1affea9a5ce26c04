"""hf:// files without a mount: the mount's reader, block cache and verification in-process.

For machines where FUSE is not allowed (containers without /dev/fuse, unprivileged pods, HPC
nodes, hosted notebooks)::

    import h5py, hubfs
    with hubfs.open("hf://datasets/ORG/NAME/recordings/scan.hdf5") as f, h5py.File(f) as h5:
        frames = h5["data/raw_data"][0:5]

URLs are huggingface_hub's HfFileSystem's: ``hf://[datasets/|spaces/]ORG/NAME[@REVISION]/PATH``
(a revision holding ``/`` percent-encoded: ``@refs%2Fpr%2F1``). Blocks go to the same cache
directory, under the same keys, as a mount's: a file read through a mount is warm here, and the
other way round.

Options are the mount's: ``endpoint`` ($HF_ENDPOINT), ``cache_dir`` ($HUBFS_CACHE_DIR, else
$XDG_CACHE_HOME/hubfs, else ~/.cache/hubfs), ``cache_size`` ("10G"; 0 keeps no disk cache),
``revision``, ``token`` (default: HF_TOKEN or the token file, as huggingface_hub finds it;
``False`` sends none), ``max_requests`` (16), ``read_timeout`` (120 s), ``shared_cache`` (a list
of memcached "host:port", with ``shared_cache_key_file``; ``shared_cache_private``),
``offline`` ($HF_HUB_OFFLINE: the cache alone), ``ca_bundle``, ``memory_cache`` (the session's
memory tier: "256M", or "8M" in a process that is one of many sharing the cache directory: a
forked child of a process that used hf://, one that unpickled a file, or one that made an
h5chunk.FrameDataset over hf://), ``block_size`` (the reader's block, what is fetched and cached
as one: "1M", a mount's; a power of two from "64K" up: a reader of random pieces much smaller
than a few MiB fetches less with smaller blocks; h5chunk.FrameDataset takes "256K"; blocks of
each size are cached apart), ``read_ahead`` (the mount's --read-ahead: a cap on what read-ahead
fetches past the reads, "4M"; 0: none; default: no cap).

The repo is pinned to a commit when first opened, and the pinned session (cache, connections,
listings) is shared by every later open with the same repo, revision and options in the
process: reopening costs no request.

Processes: a session is its process's own. A file opened before a fork keeps working in the
child, which opens it again there (a session of its own, at the same commit, at the same
position) on first use and never touches the parent's threads or locks. A file pickles (for
spawn and forkserver workers) as its URL, options, commit and position.
"""

from __future__ import annotations

import atexit
import errno
import fnmatch
import io
import operator
import os
import posixpath
import sys
import threading
from typing import Any, Dict, Iterable, Iterator, List, Optional, Sequence, Tuple, Union
from urllib.parse import quote

__all__ = ["open", "ls", "info", "glob", "walk", "exists", "close_sessions", "HubFile"]

_DEFAULT_CACHE_SIZE = "10G"  # as `hubfs mount`
_DEFAULT_MAX_REQUESTS = 16
_DEFAULT_READ_TIMEOUT = 120
# The memory tier of a session: a process on its own keeps the mount's 256 MiB; one of many
# processes sharing the cache directory (a training loop's workers) keeps 8 MiB, since the disk
# tier they share holds the blocks, and 16 workers x 256 MiB held copies of the same ones; 8 MiB
# holds the blocks of two 3 MB frames, what a worker reading a frame at a time needs (32 MiB
# measured 25-30 MiB more worker PSS; docs/constants.md).
_DEFAULT_MEMORY_CACHE = 256 << 20
_DEFAULT_BLOCK_SIZE = 1 << 20  # a mount's: blocks the two fetch are each other's
_ONE_OF_MANY_MEMORY_CACHE = 8 << 20
_OPTIONS = {"endpoint", "cache_dir", "cache_size", "revision", "token", "max_requests", "read_timeout",
            "shared_cache", "shared_cache_key_file", "shared_cache_private", "offline", "ca_bundle",
            "memory_cache", "block_size", "read_ahead"}
# True in a forked child of a process that used hf://, or in one that unpickled a file.
_one_of_many = False

# lseek(2)'s SEEK_DATA and SEEK_HOLE (Linux values), which io.FileIO passes on.
_SEEK_DATA = getattr(os, "SEEK_DATA", 3)
_SEEK_HOLE = getattr(os, "SEEK_HOLE", 4)

_core_module = None
_core_lock = threading.Lock()
# This process's id, kept here: a file compares it with its own at every read, and os.getpid()
# is a system call (~1.7 us here; h5py makes 4 reads per open). os.fork() renews it below.
_process_id = os.getpid()


def _fresh_locks_in_child() -> None:
    # A lock another thread held at the fork stays held in the child: start with a free one.
    global _core_lock, _one_of_many, _process_id
    _core_lock = threading.Lock()
    _one_of_many = _one_of_many or _core_module is not None
    _process_id = os.getpid()


os.register_at_fork(after_in_child=_fresh_locks_in_child)


def _core():
    global _core_module
    with _core_lock:
        if _core_module is None:
            from . import _core as core  # the extension: built with the package
            _core_module = core
            # Queued cache writes finish, and connections close, before the interpreter goes.
            atexit.register(core.close_sessions)
    return _core_module


def close_sessions() -> None:
    """Ends every hf:// session no open file holds: their memory caches (up to 256 MiB each),
    connections and threads. Queued cache writes finish first; the next open builds a session
    again, warm from the disk cache. (Idle sessions beyond the few used last end on their own.)"""
    if _core_module is not None:
        _core_module.close_sessions()


def _truthy(value: Optional[str]) -> bool:
    return (value or "").strip().lower() in ("1", "true", "yes", "on")


def _session(url: str, options: Dict[str, Any], opening: bool = False):
    """(session, repo-relative path, URL prefix of the repo) for an hf:// URL. opening: the URL's
    file is opened next (a new session then resolves it beside the revision's pin, instead of
    listing the repo first)."""
    unknown = set(options) - _OPTIONS
    if unknown:
        raise TypeError(f"unknown option(s) {sorted(unknown)}; hubfs.open takes {sorted(_OPTIONS)}")
    core = _core()
    if not isinstance(url, str):
        url = os.fspath(url)
    rtype, rid, revision, path = core.parse_url(url, options.get("revision"))
    cache_size = options.get("cache_size", _DEFAULT_CACHE_SIZE)
    if isinstance(cache_size, str):
        cache_size = core.parse_size(cache_size)
    token = options.get("token")
    if token is False:
        token = ""  # send none, whatever the environment holds
    shared = options.get("shared_cache") or []
    if isinstance(shared, str):
        shared = [s for s in shared.split(",") if s]
    memory_cache = options.get("memory_cache")
    if memory_cache is None:
        memory_cache = _ONE_OF_MANY_MEMORY_CACHE if _one_of_many else _DEFAULT_MEMORY_CACHE
    elif isinstance(memory_cache, str):
        memory_cache = core.parse_size(memory_cache)
    block_size = options.get("block_size")
    if block_size is None:
        block_size = _DEFAULT_BLOCK_SIZE
    if isinstance(block_size, str):
        block_size = core.parse_size(block_size)
    read_ahead = options.get("read_ahead")
    if isinstance(read_ahead, str):
        read_ahead = core.parse_size(read_ahead)
    if read_ahead is not None and int(read_ahead) < 0:
        raise ValueError("hubfs.open: read_ahead must be a size of 0 or more (\"4M\"; 0: none), not %r" % (read_ahead,))
    offline = options.get("offline")
    if offline is None:
        offline = _truthy(os.environ.get("HF_HUB_OFFLINE"))
    session = core.get_session(
        rtype, rid, revision,
        endpoint=options.get("endpoint") or core.default_endpoint(),
        cache_dir=os.fspath(options.get("cache_dir") or core.default_cache_dir()),
        cache_size=int(cache_size),
        token=token,
        max_requests=int(options.get("max_requests") or _DEFAULT_MAX_REQUESTS),
        read_timeout=int(options.get("read_timeout") or _DEFAULT_READ_TIMEOUT),
        shared_cache=list(shared),
        shared_cache_key_file=os.fspath(options.get("shared_cache_key_file") or ""),
        shared_cache_private=bool(options.get("shared_cache_private", False)),
        offline=bool(offline),
        ca_bundle=os.fspath(options.get("ca_bundle") or ""),
        first_file=path if opening else "",
        memory_cache=int(memory_cache),
        block_size=int(block_size),
        read_ahead=None if read_ahead is None else int(read_ahead))
    prefix = "hf://" + ("" if rtype == "model" else rtype + "s/") + rid
    if "@" in url or options.get("revision"):
        prefix += "@" + quote(revision, safe="")
    return session, path, prefix


# Positions as lseek(2) takes them (off_t): seek refuses a target beyond, as io.FileIO does.
_MAX_POSITION = (1 << 63) - 1
# readline's first look ahead for the end of a line, doubled until one is found (up to _LINE_CHUNK_MAX):
# a short line costs one small read, a long one a few.
_LINE_CHUNK = 1024
_LINE_CHUNK_MAX = 1 << 20


def _size_arg(size: Any) -> int:
    """A read()/readline() size as io.FileIO takes it: an integer, or None for "all" (-1)."""
    if size is None:
        return -1
    try:
        n = operator.index(size)
    except TypeError:
        raise TypeError(f"argument should be integer or None, not '{type(size).__name__}'") from None
    if not -sys.maxsize - 1 <= n <= sys.maxsize:
        raise OverflowError("cannot fit 'int' into an index-sized integer")
    return n


class HubFile(io.RawIOBase):
    """A read-only binary file of a Hub repo (io.RawIOBase): readinto (the GIL released), seek,
    tell, a context manager, and hint() for readers that know what they will need. It behaves as
    io.FileIO opened "rb" (tests/python/test_file_contracts.py compares them), except that it has
    no file descriptor (fileno() raises io.UnsupportedOperation) and any position up to 2**63-1
    can be sought (a read there gives b"")."""

    def __init__(self, core_file, name: str, session, options: Optional[Dict[str, Any]] = None):
        super().__init__()
        self._f = core_file
        self._pid = _process_id  # the process core_file belongs to
        self._options = dict(options or {})
        self._pos = 0
        self._size = core_file.size
        self.name = name
        self.mode = "rb"
        self.commit = session.commit

    def _core_file(self):
        """The extension's file, opened again (same commit) in a process forked after it was made."""
        if self._pid != _process_id:
            session, path, _ = _session(self.name, dict(self._options, revision=self.commit), opening=True)
            self._f = session.open(path)  # the parent's is kept by the extension, never touched
            self._pid = _process_id
        return self._f

    def __reduce__(self):
        if self.closed:
            raise ValueError(f"cannot pickle {self.name}: the file is closed")
        return (_reopen, (self.name, self._options, self.commit, self._pos, os.getpid()))

    # io.RawIOBase
    def readable(self) -> bool:
        self._check_open()
        return True

    def seekable(self) -> bool:
        self._check_open()
        return True

    def writable(self) -> bool:
        self._check_open()
        return False

    def readinto(self, buffer) -> int:
        self._check_open()
        try:
            view = memoryview(buffer)
        except TypeError:
            view = None
        if view is None or view.readonly or not view.c_contiguous:
            if view is not None:
                view.release()
            raise TypeError(f"readinto() argument must be read-write bytes-like object, not {type(buffer).__name__}")
        with view:
            if self._pos >= self._size or view.nbytes == 0:
                return 0
        n = self._core_file().readinto(buffer, self._pos)
        self._pos += n
        return n

    def read(self, size: Any = -1) -> bytes:
        self._check_open()
        n = _size_arg(size)
        if n < 0:
            return self.readall()
        # Never more than what is left: read(2**40) of a small file allocates the file, not 1 TiB.
        buf = bytearray(min(n, max(0, self._size - self._pos)))
        got = self.readinto(buf) if buf else 0
        return bytes(buf) if got == len(buf) else bytes(buf[:got])

    def readall(self) -> bytes:
        # One read of what is left (io's default reads 8 KiB at a time).
        self._check_open()
        left = max(0, self._size - self._pos)
        buf = bytearray(left)
        view = memoryview(buf)
        got = 0
        while got < left:
            n = self.readinto(view[got:])
            if not n:
                break
            got += n
        del view
        return bytes(buf[:got]) if got < left else bytes(buf)

    def readline(self, size: Any = -1) -> bytes:
        # io's default reads one byte per call; this reads ahead and gives back what follows the line.
        self._check_open()
        limit = _size_arg(size)
        line = bytearray()
        chunk = _LINE_CHUNK
        while limit < 0 or len(line) < limit:
            data = self.read(chunk if limit < 0 else min(chunk, limit - len(line)))
            if not data:
                break
            end = data.find(b"\n")
            if end >= 0:
                line += data[:end + 1]
                self._pos -= len(data) - end - 1
                break
            line += data
            chunk = min(chunk * 2, _LINE_CHUNK_MAX)
        return bytes(line)

    def seek(self, offset: Any, whence: Any = io.SEEK_SET) -> int:
        # As lseek(2) through io.FileIO: integers only, EINVAL for a negative target or an unknown
        # whence; SEEK_DATA and SEEK_HOLE see one data extent (a Hub file has no holes).
        self._check_open()
        offset = operator.index(offset)
        whence = operator.index(whence)
        if not -_MAX_POSITION - 1 <= offset <= _MAX_POSITION:
            raise OverflowError("Python int too large to convert to C long")
        if whence == io.SEEK_SET:
            pos = offset
        elif whence == io.SEEK_CUR:
            pos = self._pos + offset
        elif whence == io.SEEK_END:
            pos = self._size + offset
        elif whence in (_SEEK_DATA, _SEEK_HOLE):
            if not 0 <= offset < self._size:
                raise OSError(errno.ENXIO, f"no data at or after offset {offset} (the file has {self._size} bytes)")
            pos = offset if whence == _SEEK_DATA else self._size
        else:
            raise OSError(errno.EINVAL, f"invalid whence ({whence}, should be 0, 1, 2, 3 or 4)")
        if pos < 0:
            raise OSError(errno.EINVAL, f"negative seek position {pos}")
        if pos > _MAX_POSITION:
            raise OSError(errno.EINVAL, f"seek position {pos} is beyond 2**63-1")
        self._pos = pos
        return pos

    def tell(self) -> int:
        self._check_open()
        return self._pos

    def write(self, data) -> int:
        self._check_open()
        raise io.UnsupportedOperation("File not open for writing (hubfs files are read-only)")

    def truncate(self, size: Any = None) -> int:
        self._check_open()
        raise io.UnsupportedOperation("File not open for writing (hubfs files are read-only)")

    def close(self) -> None:
        if not self.closed:
            self._f.close()
        super().close()

    def fileno(self) -> int:
        self._check_open()
        raise io.UnsupportedOperation("a hubfs.open file has no file descriptor (it is not a mounted file)")

    # hubfs
    @property
    def size(self) -> int:
        return self._size

    def hint(self, ranges: Iterable[Tuple[int, int]]) -> int:
        """Fetches these (offset, length) ranges into the cache concurrently, ahead of the reads
        that will need them; returns the bytes newly scheduled."""
        self._check_open()
        return self._core_file().hint([(int(o), int(n)) for o, n in ranges])

    def _byte_source(self):
        """This file as the byte source h5chunk.File reads (a capsule for h5chunk's extension);
        it keeps the file open for h5chunk whatever happens to this object."""
        self._check_open()
        return self._core_file().byte_source(self.name)

    def _check_open(self) -> None:
        if self.closed:
            raise ValueError("I/O operation on closed file")

    def __repr__(self) -> str:
        return f"<hubfs.HubFile {self.name!r} size={self._size}{' closed' if self.closed else ''}>"


def open(url: Union[str, "os.PathLike[str]"], mode: str = "rb", **options: Any) -> HubFile:  # noqa: A001
    """Opens hf://[datasets/|spaces/]ORG/NAME[@REVISION]/PATH for reading, without a mount.

    Raises FileNotFoundError (no such repo, revision or path; as on the Hub, also a private repo
    without its token), PermissionError (a gated repo's files without access), ValueError (a
    malformed URL or option), OSError (anything else: the message says why and what to do)."""
    if mode not in ("rb", "r"):
        raise ValueError(f"hubfs.open is read-only and binary: mode must be 'rb', not {mode!r}")
    session, path, prefix = _session(url, options, opening=True)
    if not path:
        raise IsADirectoryError(21, f"{url} names a repo, not a file in it")
    try:
        core_file = session.open(path)
    except ValueError as e:
        # As open(2) and io.FileIO: a directory is IsADirectoryError (the core's message says so).
        if session.stat(path)[1]:
            raise IsADirectoryError(errno.EISDIR, str(e)) from None
        raise
    return HubFile(core_file, f"{prefix}/{path}", session, options)


def _reopen(name: str, options: Dict[str, Any], commit: str, pos: int, pickled_in: int = 0) -> HubFile:
    """A pickled HubFile in the process that unpickles it: the same file at the same commit."""
    global _one_of_many
    if pickled_in != os.getpid():
        _one_of_many = True  # a worker of a pool (spawn, forkserver)
    f = open(name, **dict(options, revision=commit))
    f.name = name  # as the pickled one was named (open names it by the commit it was given)
    f.seek(pos)
    return f


def _entry(prefix: str, item) -> Dict[str, Any]:
    path, is_dir, size = item
    return {"name": f"{prefix}/{path}" if path else prefix, "size": size,
            "type": "directory" if is_dir else "file"}


def info(url: str, **options: Any) -> Dict[str, Any]:
    """{"name", "size", "type": "file"|"directory"} of an hf:// URL."""
    session, path, prefix = _session(url, options)
    return _entry(prefix, session.stat(path))


def exists(url: str, **options: Any) -> bool:
    try:
        info(url, **options)
        return True
    except FileNotFoundError:
        return False


def ls(url: str, detail: bool = False, **options: Any) -> List[Any]:
    """The entries of a directory (URLs, or info dicts with detail=True), sorted; a file lists
    itself."""
    session, path, prefix = _session(url, options)
    if not session.stat(path)[1]:
        entries = [_entry(prefix, session.stat(path))]
    else:
        entries = [_entry(prefix, e) for e in session.listdir(path)]
    return entries if detail else [e["name"] for e in entries]


def walk(url: str, **options: Any) -> Iterator[Tuple[str, List[str], List[str]]]:
    """(directory URL, subdirectory names, file names) for a directory and everything below it,
    top-down, as os.walk."""
    session, path, prefix = _session(url, options)
    todo = [path]
    while todo:
        d = todo.pop(0)
        entries = session.listdir(d)
        dirs = [posixpath.basename(p) for p, is_dir, _ in entries if is_dir]
        files = [posixpath.basename(p) for p, is_dir, _ in entries if not is_dir]
        yield (f"{prefix}/{d}" if d else prefix), dirs, files
        todo[0:0] = [posixpath.join(d, name) if d else name for name in dirs]


def glob(pattern: str, **options: Any) -> List[str]:
    """The URLs matching a pattern's path part (fnmatch per component; ``**`` matches any number
    of directories), sorted. The repo part takes no wildcards."""
    session, path, prefix = _session(pattern, options)
    parts = [p for p in path.split("/") if p]
    found = set()

    def match(base: str, rest: Sequence[str]) -> None:
        if not rest:
            found.add(base)
            return
        head, tail = rest[0], rest[1:]
        if head == "**":
            match(base, tail)  # zero directories
            for p, is_dir, _ in session.listdir(base):
                if is_dir:
                    match(p, rest)
            return
        if not any(c in head for c in "*?["):
            candidate = posixpath.join(base, head) if base else head
            try:
                is_dir = session.stat(candidate)[1]
            except FileNotFoundError:
                return
            if tail and not is_dir:
                return
            match(candidate, tail)
            return
        try:
            entries = session.listdir(base)
        except (FileNotFoundError, ValueError):
            return
        for p, is_dir, _ in entries:
            if fnmatch.fnmatchcase(posixpath.basename(p), head) and (is_dir or not tail):
                match(p, tail)

    match("", parts)
    return sorted(f"{prefix}/{p}" if p else prefix for p in found)
