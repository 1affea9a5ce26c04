# Type hints for the compiled extension (python/src/h5chunk_module.cc).
from typing import Any, Callable, List, Optional, Sequence, Tuple

import numpy as np

DEFAULT_MIN_FAST_PATH_BYTES: int
DEFAULT_MAX_BYTES_IN_FLIGHT: int

class ReadStats:
    fast_path: bool
    fallback_cause: str
    chunks: int
    compressed_bytes: int
    manifest_queries: int
    peak_bytes_in_flight: int
    def __init__(self) -> None: ...

class Dataset:
    path: str
    shape: Tuple[int, ...]
    numeric: bool
    dtype_name: Optional[str]
    readable: bool
    unsupported_type: str
    null_space: bool
    refusal: str
    element_kind: str
    element_size: int
    numpy_descr: str
    numpy_stored_descr: str
    big_endian: bool
    type_text: str
    layout: str
    chunk: Optional[Tuple[int, ...]]
    filters: list[dict[str, Any]]
    nbytes: int
    fast_path_blocker: str
    fix: str
    missing_sources: List[str]
    manifest_queries: int
    def read_into(self, items: Sequence[Any], out: np.ndarray[Any, Any], route: str = ...,
                  progress: Optional[Callable[[int], Any]] = ..., on_caller: bool = ...) -> ReadStats: ...
    def selection_shape(self, items: Sequence[Any]) -> list[int]: ...
    def row_ranges(self, first: int, count: int) -> list[Tuple[int, int]]: ...

class File:
    path: str
    threads: int
    # path: a file path, or a byte source capsule (hubfs.HubFile._byte_source()).
    def __init__(self, path: Any, threads: int = ..., min_fast_path_bytes: Optional[int] = ...,
                 max_bytes_in_flight: Optional[int] = ...) -> None: ...
    def dataset(self, name: str) -> Dataset: ...
    def dataset_paths(self) -> list[str]: ...
    def take_notes(self) -> list[str]: ...
    def hint(self, ranges: Sequence[Tuple[int, int]]) -> None: ...
