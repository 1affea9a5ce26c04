"""fsspec's protocol "hubfs": ``fsspec.open("hubfs://datasets/ORG/NAME/path")`` reads through
hubfs.open (no mount), for xarray, pandas and dask. Storage options are hubfs.open's
(endpoint, cache_dir, revision, token, ...). fsspec finds it through the "fsspec.specs" entry
point of hubfs's package metadata, without hubfs being imported (hubfs/__init__.py).

Every read method gives what fsspec's LocalFileSystem gives for the same bytes
(tests/python/test_file_contracts.py compares them); every write method raises ReadOnlyError.
The differences left, and why, are listed in docs/usage.md ("fsspec")."""

from __future__ import annotations

import contextlib
import datetime
import errno
import hashlib
import io
import os
from typing import Any, Dict, List

from fsspec.callbacks import _DEFAULT_CALLBACK
from fsspec.spec import AbstractFileSystem
from fsspec.utils import isfilelike

from . import _remote

# Reads from a HubFile are buffered this much: a parser's many small reads (pandas, zipfile)
# then cost one call into the reader per MiB, not one per read. One block of the reader.
_BUFFER_SIZE = 1 << 20


class ReadOnlyError(PermissionError, NotImplementedError):
    """A write to the hubfs filesystem: PermissionError with errno EROFS, as a write to a
    read-only mount. Also a NotImplementedError, what fsspec's default methods raise for an
    operation a filesystem lacks (and what these methods raised before), so code catching that
    keeps working."""

    def __init__(self, operation: str, path: Any = None):
        where = "" if path is None else f" {path}"
        super().__init__(errno.EROFS, f"hubfs is read-only: cannot {operation}{where} (Hub repos are "
                                      "written with huggingface_hub or git, not through hubfs)")


class HubfsBufferedFile(io.BufferedReader):
    """What HubfsFileSystem.open returns: a buffered reader of a hubfs.open file with the
    attributes fsspec's own files have (``size``, ``path``, ``fs``, ``info()``), which
    ``tail``, ``read_block`` and dask's ``read_bytes`` use."""

    def __init__(self, raw: _remote.HubFile, fs: "HubfsFileSystem", path: str, buffer_size: int):
        super().__init__(raw, buffer_size=buffer_size)
        self.fs = fs
        self.path = path
        self._buffer_size = buffer_size

    def __reduce__(self):
        # As fsspec's LocalFileOpener: a pickled open file opens again at its position (dask and
        # multiprocessing hand open files to other processes), and at its commit: a branch that
        # moved meanwhile must not mix two commits' bytes in one read. A closed one refuses (tell()).
        return _reopen, (self.fs, self.path, self.raw.commit, self.tell(), self._buffer_size)

    @property
    def size(self) -> int:
        return self.raw.size

    def info(self) -> Dict[str, Any]:
        return self.fs.info(self.path)


def _reopen(fs: "HubfsFileSystem", path: str, commit: str, position: int, buffer_size: int) -> HubfsBufferedFile:
    options = dict(fs._options)
    rtype, rid, _revision, rel = _remote._core().parse_url(fs._url(path), options.pop("revision", None))
    repo = rid if rtype == "model" else f"{rtype}s/{rid}"
    f = HubfsBufferedFile(_remote.open(f"hf://{repo}@{commit}/{rel}", **options), fs, path, buffer_size)
    f.seek(position)
    return f


class HubfsFileSystem(AbstractFileSystem):
    """Hub repos as an fsspec filesystem, read-only, through hubfs's reader and cache. Paths are
    ``[datasets/|spaces/]ORG/NAME[@REVISION]/PATH`` (with or without ``hubfs://``)."""

    protocol = "hubfs"
    root_marker = ""

    def __init__(self, **storage_options: Any):
        super().__init__(**storage_options)
        self._options = dict(storage_options)

    @classmethod
    def _strip_protocol(cls, path):
        if isinstance(path, list):
            return [cls._strip_protocol(p) for p in path]
        path = str(path)
        for prefix in ("hubfs://", "hf://"):
            if path.startswith(prefix):
                path = path[len(prefix):]
        return path.rstrip("/")

    def _url(self, path: str) -> str:
        return "hf://" + self._strip_protocol(path)

    @staticmethod
    def _bare(entry: Dict[str, Any]) -> Dict[str, Any]:
        entry = dict(entry)
        entry["name"] = entry["name"][len("hf://"):]
        return entry

    # ---- reads

    def ls(self, path, detail=True, **kwargs) -> List[Any]:
        entries = [self._bare(e) for e in _remote.ls(self._url(path), detail=True, **self._options)]
        return entries if detail else [e["name"] for e in entries]

    def info(self, path, **kwargs) -> Dict[str, Any]:
        return self._bare(_remote.info(self._url(path), **self._options))

    def _open(self, path, mode="rb", block_size=None, autocommit=True, cache_options=None, **kwargs):
        # fsspec's open() turns text modes into binary ones before calling this.
        if mode != "rb":
            if any(c in mode for c in "wax+"):
                raise ReadOnlyError(f"open with mode {mode!r}", path)
            raise ValueError(f"invalid mode {mode!r}: hubfs files open with mode 'rb' (or 'r' for text)")
        raw = _remote.open(self._url(path), **self._options)
        return HubfsBufferedFile(raw, self, self._strip_protocol(path), block_size or _BUFFER_SIZE)

    def cat_file(self, path, start=None, end=None, **kwargs) -> bytes:
        # Python slice bounds, clamped to the file (fsspec's LocalFileSystem clamps a start
        # before 0 the same way).
        with _remote.open(self._url(path), **self._options) as f:
            size = f.size
            start = 0 if start is None else (max(0, start + size) if start < 0 else start)
            end = size if end is None else (end + size if end < 0 else min(end, size))
            if end <= start:
                return b""
            f.seek(start)
            return f.read(end - start)

    def get_file(self, rpath, lpath, callback=None, outfile=None, **kwargs):
        # As LocalFileSystem's: the Hub file is opened before the local one is made, so a missing
        # one leaves no empty file behind (fsspec's default opens the local one first), and a copy
        # that fails part way removes what it wrote.
        if isfilelike(lpath) or outfile is not None:
            return super().get_file(rpath, lpath, callback=callback or _DEFAULT_CALLBACK, outfile=outfile, **kwargs)
        if self.isdir(rpath):
            os.makedirs(lpath, exist_ok=True)
            return None
        callback = callback or _DEFAULT_CALLBACK
        with self.open(rpath, "rb", **kwargs) as source:
            callback.set_size(source.size)
            try:
                with open(lpath, "wb") as target:
                    while True:
                        data = source.read(_BUFFER_SIZE)
                        if not data:
                            break
                        target.write(data)
                        callback.relative_update(len(data))
            except BaseException:
                with contextlib.suppress(OSError):
                    os.unlink(lpath)
                raise
        return None

    def _session(self, path) -> Any:
        return _remote._session(self._url(path), self._options)[0]

    def modified(self, path) -> datetime.datetime:
        """The date of the commit the repo is pinned to (timezone-aware, UTC): the mount's
        st_mtime. The Hub says when a commit was made, not when each file last changed."""
        self.info(path)  # FileNotFoundError for a missing path, as LocalFileSystem
        when = self._session(path).last_modified
        if not when:
            raise OSError(errno.ENODATA, f"the Hub gave no date for the commit of {path}, so it has no modified time")
        return datetime.datetime.fromtimestamp(when, tz=datetime.timezone.utc)

    def created(self, path) -> datetime.datetime:
        """The commit date too (as the mount's st_ctime): the Hub does not say when a file was added."""
        return self.modified(path)

    def ukey(self, path) -> str:
        """Changes whenever the file may have: the commit, the path and the size (fsspec's
        default, from info() alone, would stay the same across commits)."""
        info = self.info(path)
        key = f"{self._session(path).commit}\0{info['name']}\0{info['size']}\0{info['type']}"
        return hashlib.sha256(key.encode()).hexdigest()

    def checksum(self, path) -> int:
        return int(self.ukey(path)[:32], 16)

    # ---- writes: refused (AbstractFileSystem's mkdir, makedirs and rmdir would do nothing and
    # succeed; the others would raise NotImplementedError without a message)

    def mkdir(self, path, create_parents=True, **kwargs):
        raise ReadOnlyError("create directory", path)

    def makedirs(self, path, exist_ok=False):
        raise ReadOnlyError("create directories", path)

    def rmdir(self, path):
        raise ReadOnlyError("remove directory", path)

    def rm_file(self, path):
        raise ReadOnlyError("remove", path)

    def _rm(self, path):
        raise ReadOnlyError("remove", path)

    def rm(self, path, recursive=False, maxdepth=None):
        raise ReadOnlyError("remove", path)

    def cp_file(self, path1, path2, **kwargs):
        raise ReadOnlyError("copy to", path2)

    def copy(self, path1, path2, recursive=False, on_error=None, **kwargs):
        raise ReadOnlyError("copy to", path2)

    def mv(self, path1, path2, recursive=False, maxdepth=None, **kwargs):
        raise ReadOnlyError("move", path1)

    def put_file(self, lpath, rpath, callback=None, **kwargs):
        raise ReadOnlyError("upload to", rpath)

    def put(self, lpath, rpath, recursive=False, callback=None, **kwargs):
        raise ReadOnlyError("upload to", rpath)

    def pipe_file(self, path, value, **kwargs):
        raise ReadOnlyError("write", path)

    def pipe(self, path, value=None, **kwargs):
        raise ReadOnlyError("write", path)

    def touch(self, path, truncate=True, **kwargs):
        raise ReadOnlyError("touch", path)


def register() -> None:
    import fsspec
    fsspec.register_implementation("hubfs", HubfsFileSystem, clobber=True)
