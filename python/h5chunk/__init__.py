"""h5chunk: read HDF5 datasets fast, as numpy arrays equal to what h5py returns.

The C++ library takes each dataset's chunk manifest from libhdf5, preads the compressed chunks
itself from a pool of threads and decodes them (Blosc, LZ4, Zstd, deflate, shuffle, bitshuffle,
fletcher32) straight into the numpy array it returns. Anything it cannot read that way goes
through HDF5's own H5Dread, with a FallbackWarning saying why (once per dataset and cause), so
the result always equals h5py's.

    import h5chunk
    with h5chunk.File("scan.hdf5") as f:
        ds = f["data/raw_data"]           # .shape .dtype .chunks .filters .fast_path
        frames = ds[0:5]                  # numpy array, == h5py's f["data/raw_data"][0:5]
        ds.read(np.s_[5:10], out=buf)     # into your own C-contiguous array
        ds.read(np.s_[:], progress=True)  # tqdm bar over compressed bytes

    import h5py
    with h5py.File("scan.hdf5") as hf:
        frames = h5chunk.read(hf["data/raw_data"], np.s_[0:5])

Every selection h5py accepts works (ints, negative ints, slices with steps, index lists,
boolean masks, Ellipsis, np.s_[...]) and gives h5py's shape, dtype and values. Indexing is
orthogonal, as in h5py: each index selects along its own axis, and an int drops its axis. So
with index lists on several axes, ``ds[[3, 1], [2, 0, 2]]`` is numpy's
``a[np.ix_([3, 1], [2, 0, 2])]`` (shape (2, 3)), NOT numpy's fancy indexing, which would pair
the lists element by element. Where h5py refuses an index with this per-axis meaning (unsorted
or repeated lists, lists on several axes, negative steps) h5chunk returns that meaning, and all
of these are read by the parallel fast path straight into the result.

Reads release the GIL for their whole length (threads reading at once run in parallel), and
Ctrl-C stops a long read promptly with KeyboardInterrupt.

Processes (PyTorch DataLoader workers, multiprocessing): a File or Dataset made before a fork
works in the child, which opens the file again there on first use (hf:// files at the commit
the parent read) and never touches the parent's threads or locks. Both pickle, for spawn and
forkserver workers, as the path or URL and the options.
"""

from __future__ import annotations

import ast
import collections
import contextlib
import os
import threading
import warnings
from typing import Any, Callable, Iterator, Optional, Union

import numpy as np

from . import _core, _selection
from ._core import ReadStats
from ._frames import FrameDataset, FramePlan

__all__ = ["File", "Dataset", "read", "FallbackWarning", "MissingSourceWarning", "ReadStats", "FrameDataset",
           "FramePlan"]


class FallbackWarning(UserWarning):
    """A read went through HDF5's H5Dread (serial, slower) instead of h5chunk's parallel path.

    The message names the file and dataset, says why (layout, compression, byte order, the
    selection) and how to avoid it. Issued once per dataset and cause for each open File.
    """


class MissingSourceWarning(UserWarning):
    """A virtual dataset of a local file (or one on a mount) has sources libhdf5 cannot find: it
    reads their part as the fill value, as h5py does, without an error. The message lists them
    (``FILE:/DATASET (why)``; ``Dataset.missing_sources`` too). Over hf:// such a dataset is
    refused with OSError instead.
    """


def _closed_error() -> ValueError:
    return ValueError("the h5chunk File is closed")


class File:
    """An HDF5 file opened read-only for fast reads.

    ``File(path, threads=0)``: ``threads`` is the number of workers per read (0: one per core,
    at most 16, and only the calling thread for chunks under 16 KiB). Use as a context manager, or call ``close()``. Index it with a dataset path
    (``f["data/raw_data"]``) to get a :class:`Dataset`.

    ``path`` may also be ``hf://[datasets/|spaces/]ORG/NAME[@REVISION]/PATH`` (or a file
    ``hubfs.open`` returned): the file is read without a mount, through hubfs's reader and block
    cache in this process. libhdf5 reads the metadata through it, and each read's chunks go out
    as one range hint, all in flight at once. Keyword options other than the ones above are
    ``hubfs.open``'s (``endpoint``, ``cache_dir``, ``revision``, ``token``, ...).

    Over hf://, datasets whose data lives in other files (virtual datasets, external links,
    external storage) read those files from the same repo and revision, never local files; what
    the repo lacks is an OSError naming it. On a local file, a virtual dataset's sources libhdf5
    cannot find read as its fill value, with a :class:`MissingSourceWarning`.

    Raises FileNotFoundError when ``path`` does not exist (for hf://: the repo, revision or
    path), PermissionError for a gated or private repo without access, and OSError when it is
    not HDF5 or cannot be read (the message says why and what to do).
    """

    def __init__(self, path: Any, mode: str = "r", *, threads: int = 0,
                 min_fast_path_bytes: Optional[int] = None,
                 max_bytes_in_flight: Optional[int] = None, **hub_options: Any) -> None:
        if mode != "r":
            raise ValueError(f"h5chunk opens files read-only (mode 'r'), not {mode!r}")
        self._hub_file: Any = None  # the hubfs.HubFile read, for hf:// files
        self._hub_options = hub_options
        self._core_args = (threads, min_fast_path_bytes, max_bytes_in_flight)
        self._pid = os.getpid()  # the process self._core belongs to
        if hasattr(path, "_byte_source"):  # a hubfs.open file
            self.filename = path.name
            self._hub_options = dict(path._options)
            target: Any = path._byte_source()
        else:
            self.filename = os.fsdecode(path)
            if self.filename.startswith("hf://"):
                import hubfs  # built and installed with h5chunk
                self._hub_file = hubfs.open(self.filename, **hub_options)
                target = self._hub_file._byte_source()
            else:
                if hub_options:
                    raise TypeError(f"unexpected keyword argument(s) {sorted(hub_options)} "
                                    "(hubfs.open's options apply to hf:// files only)")
                target = self.filename
        self._h5py_warned: set = set()  # (dataset, cause) read with h5py, warned once
        try:
            self._core: Optional[_core.File] = _core.File(target, *self._core_args)
        except BaseException:
            if self._hub_file is not None:
                self._hub_file.close()
            raise
        # hf://: the commit read, so a child process or an unpickled copy reads the same bytes.
        self._commit: Optional[str] = getattr(path, "commit", None) or getattr(self._hub_file, "commit", None)
        self._datasets: dict = {}
        self._lock = threading.Lock()

    def _pinned_options(self) -> dict:
        """hubfs.open's options for this file again, at the commit it was read at."""
        return dict(self._hub_options, revision=self._commit) if self._commit else dict(self._hub_options)

    def _reopen_in_this_process(self) -> None:
        """After a fork: this file opened again in the child. The parent's handle (its session's
        threads and locks) is left to the extension, which never touches it here."""
        with _fork_lock:
            if self._pid == os.getpid() or self._core is None:
                return
            self._lock = threading.Lock()  # the parent's may have been held at the fork
            if self.filename.startswith("hf://"):
                import hubfs
                hub_file = hubfs.open(self.filename, **self._pinned_options())
                try:
                    core = _core.File(hub_file._byte_source(), *self._core_args)
                except BaseException:
                    hub_file.close()
                    raise
            else:
                hub_file, core = None, _core.File(self.filename, *self._core_args)
            self._hub_file, self._core, self._pid = hub_file, core, os.getpid()

    def _pinned_options_with_core_args(self) -> dict:
        """File's keyword options that open this file again: the same reads, the same commit."""
        threads, min_fast, max_in_flight = self._core_args
        return dict(self._pinned_options(), threads=threads, min_fast_path_bytes=min_fast,
                    max_bytes_in_flight=max_in_flight)

    def _hint(self, ranges: list, whole_runs: bool = False) -> None:
        """Fetches these (offset, length) ranges ahead of reads (hf:// and hubfs mounts).
        ``whole_runs`` (hf://): each run of neighbouring blocks in one request, not spread over
        the idle connections, for a caller that hints many ranges back to back."""
        core = self._require_open()
        ranges = [(int(o), int(n)) for o, n in ranges]
        if whole_runs and self._hub_file is not None:
            try:
                self._hub_file._core_file().hint(ranges, whole_runs=True)
            except Exception:  # noqa: BLE001 (a hint only, as below: the reads report what is wrong)
                pass
            return
        core.hint(ranges)

    def __reduce__(self):
        if self.closed:
            raise ValueError(f"cannot pickle the h5chunk File {self.filename!r}: it is closed")
        threads, min_fast, max_in_flight = self._core_args
        return (_open_file, (self.filename, threads, min_fast, max_in_flight, self._pinned_options(), os.getpid()))

    @contextlib.contextmanager
    def _h5py_file(self) -> Iterator[Any]:
        """This file opened with h5py (read-only), for what only h5py reads."""
        import h5py
        if not self.filename.startswith("hf://"):
            with h5py.File(self.filename, "r") as hf:
                yield hf
            return
        import hubfs
        with hubfs.open(self.filename, **self._pinned_options()) as raw, h5py.File(raw, "r") as hf:
            yield hf

    @property
    def threads(self) -> int:
        """Workers per read."""
        return self._require_open().threads

    def _require_open(self) -> _core.File:
        if self._pid != os.getpid():
            self._reopen_in_this_process()
        core = self._core
        if core is None:
            raise _closed_error()
        return core

    def __getitem__(self, name: str) -> "Dataset":
        """The dataset at ``name`` ("data/raw_data" or "/data/raw_data"); KeyError if none."""
        core = self._require_open()
        key = name if name.startswith("/") else "/" + name
        with self._lock:
            ds = self._datasets.get(key)
        if ds is None:
            ds = Dataset(self, core.dataset(key))
            with self._lock:
                ds = self._datasets.setdefault(key, ds)
        return ds

    def __contains__(self, name: str) -> bool:
        try:
            self[name]
        except KeyError:
            return False
        return True

    def get(self, name: str, default: Any = None) -> Any:
        try:
            return self[name]
        except KeyError:
            return default

    def datasets(self) -> list:
        """Paths of every dataset in the file ("/data/raw_data", ...), in HDF5's order."""
        return list(self._require_open().dataset_paths())

    def close(self) -> None:
        """Closes the file; its Dataset objects stop working. Idempotent."""
        if self._pid != os.getpid():
            self._lock = threading.Lock()  # forked: the parent's may have been held at the fork
        with self._lock:
            for ds in self._datasets.values():
                ds._core = None
            self._datasets.clear()
            self._core = None
            if self._hub_file is not None:
                self._hub_file.close()
                self._hub_file = None

    @property
    def closed(self) -> bool:
        return self._core is None

    def __enter__(self) -> "File":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def __repr__(self) -> str:
        state = "closed" if self.closed else "open"
        return f"<h5chunk.File {self.filename!r} ({state})>"

    def _warn_notes(self, stacklevel: int) -> None:
        core = self._core
        if core is None:
            return
        for line in core.take_notes():
            warnings.warn(line, FallbackWarning, stacklevel=stacklevel)


def _numpy_dtype(descr: str, where: str = "") -> np.dtype:
    """The numpy dtype the C++ library describes as a Python literal ("'<f4'", "{'names': ...}").

    A damaged datatype message can describe a type numpy cannot represent (fields overlapping
    or past the item size, a zero-sized member): that is an OSError naming the dataset and the
    type, not numpy's TypeError/ValueError from deep inside the constructor.
    """
    try:
        return np.dtype(ast.literal_eval(descr))
    except (TypeError, ValueError, SyntaxError, MemoryError) as e:
        raise OSError(
            f"{where or 'the dataset'}: its datatype ({descr}) is not one numpy can represent "
            f"({type(e).__name__}: {e}); the file's datatype message is probably damaged") from None


def _progress_callback(progress: Any, desc: str):
    """(callback taking byte increments, closer) for ``progress``."""
    if progress is None or progress is False:
        return None, None
    if progress is True:
        try:
            from tqdm import tqdm
        except ImportError:  # tqdm is optional: without it, no bar
            return None, None
        bar = tqdm(total=None, unit="B", unit_scale=True, unit_divisor=1024, desc=desc)
        return bar.update, bar.close
    if callable(progress):
        return progress, None
    raise TypeError("progress must be True, False, None or a callable taking a byte count")


class Dataset:
    """One HDF5 dataset of a fixed-size type, read like h5py's: ``ds[sel]`` returns a numpy array.

    Attributes (as h5py names them where h5py has them):

    - ``name``: the dataset's path; ``file``: its :class:`File`
    - ``shape``, ``ndim``, ``size``, ``dtype`` (numpy, as h5py gives it: bool, enums as their
      base integer, complex, structured records, ``S<n>`` strings, ``V<n>`` opaque bytes,
      float16; variable-length types and references, which h5chunk reads through h5py, get
      h5py's dtype, or None without h5py), ``nbytes``
    - ``chunks``: chunk shape, or None when not chunked; ``layout``: "chunked", "contiguous", ...
    - ``filters``: the filter pipeline, a list of dicts (id, name, flags, cd_values)
    - ``fast_path``: True when reads can take h5chunk's parallel path
    - ``fallback_cause``: why not (with the fix), "" when they can

    Reading: ``ds[sel]`` or ``ds.read(sel, out=None, progress=None)``. Any h5py selection
    gives h5py's result; unsorted or repeated lists, lists on several axes and negative steps
    select along each axis independently (where h5py raises). Out-of-range indices raise
    IndexError; corrupt data raises OSError naming the file, dataset and chunk.
    """

    def __init__(self, file: File, core: _core.Dataset) -> None:
        self.file = file
        self._core: Optional[_core.Dataset] = core
        self._pid = os.getpid()  # the process self._core belongs to
        self.name: str = core.path
        self.shape: tuple = tuple(core.shape)
        self.layout: str = core.layout
        self.chunks: Optional[tuple] = core.chunk
        self.filters: list = list(core.filters)
        self.nbytes: int = core.nbytes
        self.fallback_cause: str = (
            f"the dataset {core.fast_path_blocker}. {core.fix}".strip() if core.fast_path_blocker else "")
        self.fast_path: bool = not core.fast_path_blocker
        # A local virtual dataset's sources libhdf5 will not find (it reads them as fill values).
        self.missing_sources: list = list(core.missing_sources)
        self._readable = core.readable
        self._type_text = core.type_text
        self._refusal = core.refusal
        # A null dataspace holds no elements at all: h5py's shape None, its reads h5py.Empty.
        self._null_space = core.null_space
        if self._null_space:
            self.shape = None  # type: ignore[assignment]
        # Variable-length types and references: h5py reads them (object arrays), h5chunk cannot.
        self._h5py_only = core.unsupported_type
        if core.readable or (not self._h5py_only and core.numpy_stored_descr):
            # Elements arrive in native order; h5py's dtype keeps the stored byte order.
            where = f"file '{file.filename}', dataset '{core.path}'"
            self._native_dtype: Optional[np.dtype] = _numpy_dtype(core.numpy_descr, where)
            self.dtype: Optional[np.dtype] = _numpy_dtype(core.numpy_stored_descr, where)
        else:
            self._native_dtype = None
            self.dtype = None
            if self._h5py_only:
                h5py = _h5py_or_none()
                if h5py is not None:
                    with file._h5py_file() as hf:
                        self.dtype = hf[self.name].dtype

    @property
    def ndim(self) -> int:
        return len(self.shape) if self.shape is not None else 0

    @property
    def size(self) -> Optional[int]:
        if self.shape is None:
            return None  # a null dataspace, as h5py says
        return int(np.prod(self.shape, dtype=np.int64))

    def __len__(self) -> int:
        if not self.shape:
            raise TypeError("a scalar dataset has no len()")
        return self.shape[0]

    def __repr__(self) -> str:
        path = "fast path" if self.fast_path else "H5Dread: " + self.fallback_cause
        return (f"<h5chunk.Dataset {self.name!r} shape {self.shape} dtype {self.dtype or self._type_text}"
                f" chunks {self.chunks} ({path})>")

    def __getitem__(self, selection: Any) -> Any:
        """``ds[sel]``: the selection as a numpy array (a numpy scalar when every axis is an int)."""
        return self._read(selection, None, None, "auto", False, stacklevel=3)

    def __array__(self, dtype: Any = None) -> np.ndarray:
        a = np.asarray(self._read((), None, None, "auto", False, stacklevel=3))
        return a if dtype is None else a.astype(dtype)

    def read(self, selection: Any = (), *, out: Optional[np.ndarray] = None,
             progress: Union[bool, None, Callable[[int], Any]] = None, route: str = "auto",
             return_stats: bool = False) -> Any:
        """Reads ``selection`` (anything ``ds[...]`` takes; default: everything).

        - ``out``: a C-contiguous, writeable numpy array of exactly the result's shape and dtype
          to read into (ValueError otherwise); returned. Every selection is decoded straight
          into it, except a boolean mask of the dataset's shape (a point selection), which goes
          through a temporary.
        - ``progress``: True for a tqdm bar over the compressed bytes read (when tqdm is
          installed), or a callable receiving byte increments, called on this thread.
        - ``route``: "auto" (default), "fast" (the fast path even for small reads; a dataset
          it cannot read, e.g. one stored contiguous, still goes to H5Dread with a
          FallbackWarning) or "h5dread" (HDF5's reader, the reference).
        - ``return_stats``: return ``(result, ReadStats)`` instead of the result.
        """
        return self._read(selection, out, progress, route, return_stats, stacklevel=3)

    def _read_with_h5py(self, selection: Any, return_stats: bool, stacklevel: int) -> Any:
        """A variable-length or reference dataset: h5py's own read (H5Dread), with a warning."""
        import h5py
        key = (self.name, self._h5py_only)
        if key not in self.file._h5py_warned:
            self.file._h5py_warned.add(key)
            warnings.warn(
                f"h5chunk: reading '{self.file.filename}' ({self.name}): the dataset has a "
                f"{self._h5py_only} dtype, which h5chunk cannot return - read with h5py (H5Dread). "
                "Fix: store fixed-size types (e.g. fixed-length strings) to read them in parallel.",
                FallbackWarning, stacklevel=stacklevel + 1)
        with self.file._h5py_file() as hf:
            result = hf[self.name][selection]
        stats = ReadStats()
        return (result, stats) if return_stats else result

    def _read_fields(self, names: tuple, selection: Any, out: Optional[np.ndarray], progress: Any,
                     route: str, return_stats: bool, stacklevel: int) -> Any:
        """``ds["x"]``, ``ds["x", "y", 0:5]``: h5py's answer (one field: its own dtype; several: a
        packed record of them). The whole records are read, then the fields taken."""
        dtype = self.dtype
        if dtype is None or dtype.names is None:
            raise ValueError("Field names only allowed for compound types")
        for name in names:
            if name not in dtype.names:
                raise ValueError(f"Field {name} does not appear in this type.")
        if out is not None:
            raise ValueError("out cannot be combined with field names (read the records into out)")
        got = self._read(selection, None, progress, route, return_stats, stacklevel + 1)
        records, stats = got if return_stats else (got, None)
        records = np.asarray(records)
        if len(names) == 1:
            result = np.array(records[names[0]])
        else:
            result = np.empty(records.shape, np.dtype([(n, dtype.fields[n][0]) for n in names]))
            for n in names:
                result[n] = records[n]
        if result.ndim == 0 and not isinstance(got if not return_stats else got[0], np.ndarray):
            result = result[()]
        return (result, stats) if return_stats else result

    def _require_open(self) -> _core.Dataset:
        core = self._core
        if core is None:
            raise _closed_error()
        if self._pid != os.getpid():  # forked: the dataset of the file opened again here
            core = self.file._require_open().dataset(self.name)
            self._core, self._pid = core, os.getpid()
        return core

    def __reduce__(self):
        return (_dataset_of, (self.file, self.name))

    def _row_ranges(self, first: int, count: int) -> list:
        """The file's byte ranges (offset, length) holding rows [first, first + count)."""
        return self._require_open().row_ranges(int(first), int(count))

    def _read(self, selection: Any, out: Optional[np.ndarray], progress: Any, route: str,
              return_stats: bool, stacklevel: int, on_caller: bool = False, hint_chunks: bool = True) -> Any:
        """on_caller: the read runs on this thread even on the main thread (a short read: see
        _core.Dataset.read_into); FrameDataset's frames whose bytes are on local disk.
        hint_chunks=False: the chunks are not announced before they are read (FrameDataset's
        hf:// frames whose blocks are all in the disk cache)."""
        names, selection = _split_field_names(selection)
        if names:
            return self._read_fields(names, selection, out, progress, route, return_stats, stacklevel + 1)
        core = self._require_open()
        if self.missing_sources:
            warnings.warn(f"'{self.name}' in '{self.file.filename}' is a virtual dataset with sources libhdf5 "
                          f"cannot find, read as its fill value (as h5py reads them): "
                          f"{'; '.join(self.missing_sources)}", MissingSourceWarning, stacklevel=stacklevel + 1)
        if not self._readable and self._h5py_only and out is None and _h5py_or_none() is not None:
            return self._read_with_h5py(selection, return_stats, stacklevel + 1)
        if self._null_space:
            h5py = _h5py_or_none()
            if h5py is not None and selection in ((), Ellipsis) and out is None:
                result = h5py.Empty(self.dtype)  # h5py's answer: there are no elements
                return (result, ReadStats()) if return_stats else result
            raise ValueError(f"'{self.name}' in '{self.file.filename}' has a null dataspace: it holds "
                             "no elements, so there is nothing to select (h5py returns h5py.Empty for ds[()])")
        if not self._readable and not self._h5py_only:
            # Corrupt (the message names what is wrong): as OSError, like every corrupt read.
            raise OSError(self._refusal or f"'{self.name}' in '{self.file.filename}' cannot be read")
        if not self._readable:
            raise TypeError(
                f"'{self.name}' in '{self.file.filename}' has a dtype h5chunk cannot return "
                f"({self._type_text}); h5chunk reads fixed-size types only (read it with h5py)")
        plan = _selection.plan(selection, self.shape)
        dtype = self.dtype
        # An array element type (h5py's ('>i2', (4,))) is no dtype a numpy array has: its arrays
        # hold the base type, the element's shape appended to theirs, as h5py returns them.
        # `base` and `shape` are the dtype itself and () for every other type.
        if out is not None:
            _check_out(out, plan.shape + dtype.shape, dtype.base)
        stats = ReadStats()
        if plan.empty:
            result = out if out is not None else np.empty(plan.shape, dtype)
            return (result, stats) if return_stats else result

        native = self._native_dtype
        into_out = out is not None and plan.direct and dtype.base == native.base
        buf = out if into_out else np.empty(plan.read_shape, native)
        callback, close = _progress_callback(progress, self.name)
        try:
            stats = core.read_into(plan.items, buf, route, callback, on_caller, hint_chunks)
        finally:
            if close is not None:
                close()
            self.file._warn_notes(stacklevel + 1)
        result = _selection.apply(plan, buf)
        if dtype.base != native.base:
            # h5py returns big-endian data in its stored order. Cast to the base type: a cast to
            # a subarray dtype would broadcast each element over the element shape once more.
            result = result.astype(dtype.base)
        if out is not None:
            if result is not out:
                np.copyto(out, result)
            result = out
        elif plan.scalar:
            result = result[()]
        return (result, stats) if return_stats else result


# Held while a forked child opens a file again (threads of the child may race to), and made
# afresh in every child: a lock held at the fork by another thread would stay held there.
_fork_lock = threading.Lock()


def _open_file(filename: str, threads: int, min_fast_path_bytes: Optional[int],
               max_bytes_in_flight: Optional[int], hub_options: dict, pickled_in: int = 0) -> File:
    """A pickled File in the process that unpickles it."""
    if filename.startswith("hf://") and pickled_in != os.getpid():
        _one_of_many()
    return File(filename, threads=threads, min_fast_path_bytes=min_fast_path_bytes,
                max_bytes_in_flight=max_bytes_in_flight, **hub_options)


def _one_of_many() -> None:
    """This process is one of many reading through the cache directory (a pool's worker): its
    hf:// sessions keep a small memory tier (hubfs.open's memory_cache)."""
    from hubfs import _remote
    _remote._one_of_many = True


def _dataset_of(file: File, name: str) -> Dataset:
    """A pickled Dataset in the process that unpickles it."""
    return file[name]


def _fresh_locks_in_child() -> None:
    global _fork_lock, _file_cache_lock
    _fork_lock = threading.Lock()
    _file_cache_lock = threading.Lock()


os.register_at_fork(after_in_child=_fresh_locks_in_child)


def _h5py_or_none() -> Any:
    try:
        import h5py
    except ImportError:  # h5py is optional: without it those datasets raise TypeError
        return None
    return h5py


def _split_field_names(selection: Any) -> tuple:
    """(field names, the rest of the selection), as h5py separates them: strings anywhere."""
    key = selection if isinstance(selection, tuple) else (selection,)
    names = tuple(k for k in key if isinstance(k, str))
    if not names:
        return (), selection
    return names, tuple(k for k in key if not isinstance(k, str))


def _check_out(out: Any, shape: tuple, dtype: np.dtype) -> None:
    if not isinstance(out, np.ndarray):
        raise ValueError(f"out must be a numpy array, not {type(out).__name__}")
    if out.shape != tuple(shape):
        raise ValueError(f"out has shape {out.shape}, the selection needs {tuple(shape)}")
    if out.dtype != dtype:
        raise ValueError(f"out has dtype {out.dtype}, the dataset is {dtype}")
    if not out.flags.c_contiguous:
        raise ValueError("out must be C-contiguous")
    if not out.flags.writeable:
        raise ValueError("out must be writeable")


# h5py Datasets passed to read(): their files, opened by h5chunk once each and kept while the
# h5py file stays open (so the chunk manifest is remembered from read to read). Keyed by the
# file's identity on disk, so a rewritten file is reopened rather than read stale.
_MAX_CACHED_FILES = 16
_file_cache: "collections.OrderedDict[tuple, list]" = collections.OrderedDict()  # key -> [File, h5py FileID]
_file_cache_lock = threading.Lock()


def _cached_file(filename: str, h5py_fid: Any) -> File:
    st = os.stat(filename)
    key = (os.path.realpath(filename), st.st_dev, st.st_ino, st.st_mtime_ns, st.st_size)
    stale = []
    with _file_cache_lock:
        entry = _file_cache.get(key)
        if entry is not None:
            entry[1] = h5py_fid  # the h5py file open now (it may have been closed and reopened)
            _file_cache.move_to_end(key)
        # Files whose h5py file has been closed since are closed too: an open descriptor would
        # keep a mount busy and a deleted file's space allocated.
        for k, (f, fid) in list(_file_cache.items()):
            if k != key and not getattr(fid, "valid", False):
                stale.append(_file_cache.pop(k)[0])
    for f in stale:
        f.close()
    if entry is not None and not entry[0].closed:
        return entry[0]
    f = File(filename)
    with _file_cache_lock:
        _file_cache[key] = [f, h5py_fid]
        while len(_file_cache) > _MAX_CACHED_FILES:
            stale.append(_file_cache.popitem(last=False)[1][0])
    for old in stale:
        old.close()
    return f


def _close_cached_files(under: Optional[str] = None) -> None:
    """Closes the files read() opened for h5py Datasets (those below directory ``under`` only,
    if given); hubfs.unmount calls this so h5chunk does not keep the mount busy."""
    prefix = os.path.join(os.path.realpath(under), "") if under else ""
    with _file_cache_lock:
        keys = [k for k in _file_cache if k[0].startswith(prefix)]
        closing = [_file_cache.pop(k)[0] for k in keys]
    for f in closing:
        f.close()


def read(dataset: Any, selection: Any = (), *, out: Optional[np.ndarray] = None,
         progress: Union[bool, None, Callable[[int], Any]] = None, route: str = "auto",
         return_stats: bool = False) -> Any:
    """Reads ``selection`` of ``dataset`` with h5chunk: an h5chunk Dataset, or an h5py Dataset
    (its ``.file.filename`` and ``.name`` say what to read; the file is opened by h5chunk once
    and kept). Same keywords as :meth:`Dataset.read`; the result equals ``dataset[selection]``.
    """
    if isinstance(dataset, Dataset):
        return dataset._read(selection, out, progress, route, return_stats, stacklevel=3)
    try:
        h5file, name = dataset.file, dataset.name
        filename = h5file.filename
    except AttributeError:
        raise TypeError(
            f"read() takes an h5chunk or h5py Dataset, not {type(dataset).__name__}") from None
    if getattr(h5file, "mode", "r") != "r":
        h5file.flush()  # a file open for writing: what h5py wrote must be on disk for us
    ds = _cached_file(filename, getattr(h5file, "id", None))[name]
    got = ds._read(selection, out, progress, route, return_stats, stacklevel=3)
    if out is not None:
        return got
    result, stats = got if return_stats else (got, None)
    result = _in_field_order_of(result, getattr(dataset, "dtype", None))
    return (result, stats) if return_stats else result


def _in_field_order_of(result: Any, dtype: Any) -> Any:
    """``result`` with the record fields in ``dtype``'s order, where only the order differs.

    libhdf5 sorts a compound type's members by offset once a conversion has used it, and the
    type is shared by every open of the dataset in the process: an h5py Dataset opened after
    an H5Dread of it lists the fields in offset order, one opened before in the file's order
    (PyTables' out_of_order_types.h5). Same fields at the same offsets: a view, no copy."""
    if not isinstance(dtype, np.dtype) or dtype.names is None:
        return result
    have = getattr(result, "dtype", None)
    if have is None or have == dtype or have.names is None or have.itemsize != dtype.itemsize:
        return result
    if dict(have.fields) != dict(dtype.fields):
        return result
    if isinstance(result, np.ndarray):
        return result.view(dtype)
    return np.asarray(result).view(dtype)[()]  # a record (numpy.void)
