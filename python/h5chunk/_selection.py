"""Turns any h5py-style selection into the read the C++ library serves, plus the numpy
indexing (if any) that makes its result equal to what h5py returns.

Indexing is orthogonal, as in h5py: each index selects along its own axis and an integer drops
its axis. ``ds[[3, 1], :, [2, 0, 2]]`` is numpy's ``a[np.ix_([3, 1], range(n), [2, 0, 2])]``,
not numpy's fancy indexing (which would pair the two lists element by element). The C++ fast
path takes every such per-axis selection as it is: slices with steps of either sign, index
lists in any order, with repeats, on any number of axes. So where h5py refuses (unsorted or
repeated lists, several lists, negative steps) the result is that per-axis meaning, and nothing
is composed here.

The one exception is a boolean mask with the dataset's shape (h5py's point selection): it reads
the mask's bounding box and applies the mask to it.

Index errors are raised here, before anything is read: IndexError for an index out of range,
TypeError for what is not an index at all, ValueError for too many indices.
"""

from __future__ import annotations

import operator
from dataclasses import dataclass, field
from typing import Any, List, Optional, Tuple

import numpy as np


@dataclass
class Plan:
    """A read for the C++ library and what to do with its result."""

    # Per dataset axis: an int, a (start, stop, step) slice (stop None: past the end in the
    # step's direction), or an int64 array of non-negative indices in any order.
    items: list
    # Shape the C++ read produces (axes indexed by an int are dropped).
    read_shape: Tuple[int, ...]
    # (axis of the read result, positions) to apply with numpy.take, in order.
    takes: List[Tuple[int, np.ndarray]] = field(default_factory=list)
    # A point-selection mask to apply to the read result (boolean mask of the dataset's shape).
    mask: Optional[np.ndarray] = None
    # The shape of the final result.
    shape: Tuple[int, ...] = ()
    # h5py returns a numpy scalar (not a 0-d array) for this selection.
    scalar: bool = False

    @property
    def direct(self) -> bool:
        """The C++ read's output is already the result (it can go straight into ``out``)."""
        return not self.takes and self.mask is None

    @property
    def empty(self) -> bool:
        return any(n == 0 for n in self.shape)


def _as_index(item: Any, axis: int, size: int) -> int:
    try:
        value = operator.index(item)
    except TypeError:
        raise TypeError(
            f"Illegal index {item!r} on axis {axis}: use integers, slices, Ellipsis or 1-D "
            "integer/boolean arrays") from None
    if value < -size or value >= size:
        raise IndexError(f"Index ({value}) out of range for axis {axis} with size {size}")
    return value + size if value < 0 else value


def _as_indices(item: Any, axis: int, size: int) -> np.ndarray:
    arr = np.asarray(item)
    if arr.dtype == bool:
        if arr.ndim != 1 or arr.shape[0] != size:
            raise IndexError(
                f"boolean index of shape {arr.shape} does not match axis {axis} of size {size}")
        return np.flatnonzero(arr).astype(np.int64)
    if arr.size == 0:
        arr = arr.astype(np.int64)  # [] is float64 to numpy; an empty list selects nothing
    if arr.dtype.kind not in "iu":
        raise TypeError(f"Illegal index on axis {axis}: a list of {arr.dtype} (use integers)")
    if arr.ndim != 1:
        raise TypeError("Only 1-D index arrays are allowed (each index list selects along one axis)")
    arr = arr.astype(np.int64)
    if arr.size and (arr.min() < -size or arr.max() >= size):
        bad = arr[(arr < -size) | (arr >= size)][0]
        raise IndexError(f"Index ({bad}) out of range for axis {axis} with size {size}")
    return np.where(arr < 0, arr + size, arr)


def _is_list_like(item: Any) -> bool:
    return isinstance(item, (list, np.ndarray)) and not (
        isinstance(item, np.ndarray) and item.ndim == 0)


def plan(key: Any, shape: Tuple[int, ...]) -> Plan:
    """The read plan for ``dataset[key]`` on a dataset of ``shape``."""
    rank = len(shape)
    if not isinstance(key, tuple):
        key = (key,)
    if rank == 0:
        # A scalar dataset: () gives a numpy scalar, ... a 0-d array (as h5py).
        if key == ():
            return Plan(items=[], read_shape=(), shape=(), scalar=True)
        if all(k is Ellipsis for k in key) and len(key) == 1:
            return Plan(items=[], read_shape=(), shape=(), scalar=False)
        raise ValueError("Illegal slicing argument for scalar dataspace")

    # A boolean mask of the dataset's shape selects points (h5py's point selection).
    if (len(key) == 1 and isinstance(key[0], np.ndarray) and key[0].dtype == bool
            and key[0].ndim == rank and rank > 1):
        mask = key[0]
        if mask.shape != tuple(shape):
            raise IndexError(f"boolean mask of shape {mask.shape} does not match the dataset {tuple(shape)}")
        hits = np.nonzero(mask)
        if hits[0].size == 0:
            return Plan(items=[(0, 0, 1)] * rank, read_shape=(0,) * rank, shape=(0,), scalar=False)
        lo = [int(h.min()) for h in hits]
        hi = [int(h.max()) + 1 for h in hits]
        box = tuple(slice(a, b) for a, b in zip(lo, hi))
        return Plan(items=[(a, b, 1) for a, b in zip(lo, hi)], read_shape=tuple(b - a for a, b in zip(lo, hi)),
                    mask=mask[box], shape=(int(hits[0].size),), scalar=False)

    ellipses = sum(1 for k in key if k is Ellipsis)
    if ellipses > 1:
        raise IndexError("an index can only have a single ellipsis ('...')")
    explicit = len(key) - ellipses
    if explicit > rank:
        raise ValueError(f"{explicit} indexing arguments for {rank} dimensions")
    expanded: list = []
    for k in key:
        if k is Ellipsis:
            expanded.extend([slice(None)] * (rank - explicit))
        else:
            expanded.append(k)
    expanded.extend([slice(None)] * (rank - len(expanded)))

    items: list = []
    shape_out: list = []
    for d, (k, n) in enumerate(zip(expanded, shape)):
        if k is None:
            raise TypeError("None (numpy.newaxis) is not a valid dataset index")
        if isinstance(k, str):
            raise TypeError(f"field names ({k!r}) are not supported: h5chunk reads numeric datasets")
        if isinstance(k, slice):
            start, stop, step = k.indices(n)  # raises ValueError for a zero step, as h5py
            count = len(range(start, stop, step))
            # slice.indices() gives -1 for "before index 0" (a reversed slice run to the start,
            # or an empty one); the library reads -1 as the last index, so such a stop is left
            # open and an empty slice is sent as 0:0.
            if count == 0:
                items.append((0, 0, 1))
            else:
                items.append((start, None if stop < 0 else stop, step))
            shape_out.append(count)
        elif _is_list_like(k):
            indices = _as_indices(k, d, n)
            items.append(indices)
            shape_out.append(int(indices.size))
        else:
            items.append(_as_index(k, d, n))
    return Plan(items=items, read_shape=tuple(shape_out), shape=tuple(shape_out), scalar=not shape_out)


def apply(plan_: Plan, data: np.ndarray) -> np.ndarray:
    """The final result from the C++ read's output."""
    if plan_.mask is not None:
        return data[plan_.mask]
    for axis, positions in plan_.takes:
        data = np.take(data, positions, axis=axis)
    return data
