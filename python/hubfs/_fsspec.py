"""fsspec's protocol "hubfs": ``fsspec.open("hubfs://datasets/ORG/NAME/path")`` reads through
hubfs.open (no mount), for xarray, pandas and dask. Storage options are hubfs.open's
(endpoint, cache_dir, revision, token, ...). Registered when hubfs is imported."""

from __future__ import annotations

import io
from typing import Any, Dict, List

from fsspec.spec import AbstractFileSystem

from . import _remote

# Reads from a HubFile are buffered this much: a parser's many small reads (pandas, zipfile)
# then cost one call into the reader per MiB, not one per read. One block of the reader.
_BUFFER_SIZE = 1 << 20


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

    def ls(self, path, detail=True, **kwargs) -> List[Any]:
        entries = [self._bare(e) for e in _remote.ls(self._url(path), detail=True, **self._options)]
        return entries if detail else [e["name"] for e in entries]

    def info(self, path, **kwargs) -> Dict[str, Any]:
        return self._bare(_remote.info(self._url(path), **self._options))

    def _open(self, path, mode="rb", block_size=None, autocommit=True, cache_options=None, **kwargs):
        if mode != "rb":
            raise NotImplementedError("hubfs is read-only: open with mode 'rb'")
        raw = _remote.open(self._url(path), **self._options)
        return io.BufferedReader(raw, buffer_size=block_size or _BUFFER_SIZE)

    def cat_file(self, path, start=None, end=None, **kwargs) -> bytes:
        with _remote.open(self._url(path), **self._options) as f:
            size = f.size
            start = 0 if start is None else (start + size if start < 0 else start)
            end = size if end is None else (end + size if end < 0 else end)
            if end <= start:
                return b""
            f.seek(start)
            buf = bytearray(end - start)
            view = memoryview(buf)
            got = 0
            while got < len(buf):
                n = f.readinto(view[got:])
                if not n:
                    break
                got += n
            del view
            return bytes(buf[:got])


def register() -> None:
    import fsspec
    fsspec.register_implementation("hubfs", HubfsFileSystem, clobber=True)
