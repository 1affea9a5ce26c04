"""Turns any h5py-style selection into a read the C++ fast path serves, plus the numpy
indexing that makes its result equal to what h5py returns.

The fast path reads integers, unit-step ranges and at most one increasing index list. Anything
else keeps its obvious per-axis (orthogonal) meaning and is composed here:

* a strided slice is read as the increasing list of its indices;
* a negative step, an unsorted or a repeated list is read as its sorted unique indices, then
  reordered with ``numpy.take`` on that axis;
* when several axes carry lists, the one that saves most stays a list and the others are read
  as their bounding range, then picked out with ``numpy.take``;
* a boolean mask with the dataset's shape (h5py's point selection) reads the mask's bounding
  box and applies the mask to it.

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

    # Per dataset axis: an int, a (start, stop) unit range, or an increasing int64 array.
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
            return Plan(items=[(0, 0)] * rank, read_shape=(0,) * rank, shape=(0,), scalar=False)
        lo = [int(h.min()) for h in hits]
        hi = [int(h.max()) + 1 for h in hits]
        box = tuple(slice(a, b) for a, b in zip(lo, hi))
        return Plan(items=list(zip(lo, hi)), read_shape=tuple(b - a for a, b in zip(lo, hi)),
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

    # Per axis: ("int", i) | ("range", start, count) | ("list", requested indices).
    axes: list = []
    for d, (k, n) in enumerate(zip(expanded, shape)):
        if k is None:
            raise TypeError("None (numpy.newaxis) is not a valid dataset index")
        if isinstance(k, str):
            raise TypeError(f"field names ({k!r}) are taken out before planning (Dataset._read)")
        if isinstance(k, slice):
            start, stop, step = k.indices(n)
            if step == 1:
                axes.append(("range", start, max(stop - start, 0)))
            else:
                axes.append(("list", np.arange(start, stop, step, dtype=np.int64)))
        elif _is_list_like(k):
            axes.append(("list", _as_indices(k, d, n)))
        else:
            axes.append(("int", _as_index(k, d, n)))

    # Lists: each read as its sorted unique indices; a consecutive run is a plain range.
    # At most one non-run list can go to the fast path; the others become bounding ranges.
    reads = []  # per axis: ("int", i) | ("range", start, count) | ("list", uniq)
    for a in axes:
        if a[0] != "list":
            reads.append(a)
            continue
        uniq = np.unique(a[1])
        if uniq.size == 0:
            reads.append(("range", 0, 0))
        elif uniq[-1] - uniq[0] + 1 == uniq.size:
            reads.append(("range", int(uniq[0]), int(uniq.size)))
        else:
            reads.append(("list", uniq))
    lists = [d for d, r in enumerate(reads) if r[0] == "list"]
    if len(lists) > 1:
        # Keep the list whose bounding range would read the most extra; widen the rest.
        keep = max(lists, key=lambda d: (reads[d][1][-1] - reads[d][1][0] + 1) / reads[d][1].size)
        for d in lists:
            if d != keep:
                u = reads[d][1]
                reads[d] = ("range", int(u[0]), int(u[-1] - u[0] + 1))

    items: list = []
    read_shape: list = []
    final_shape: list = []
    takes: List[Tuple[int, np.ndarray]] = []
    for a, r in zip(axes, reads):
        if r[0] == "int":
            items.append(int(r[1]))
            continue
        axis = len(read_shape)
        if r[0] == "range":
            start, count = r[1], r[2]
            items.append((start, start + count))
            read_shape.append(count)
            if a[0] == "list":
                wanted = a[1]
                if not (wanted.size == count and (count == 0 or (wanted[0] == start and np.all(np.diff(wanted) == 1)))):
                    takes.append((axis, wanted - start))
                final_shape.append(int(wanted.size))
            else:
                final_shape.append(count)
        else:
            uniq = r[1]
            items.append(uniq)
            read_shape.append(int(uniq.size))
            wanted = a[1]
            if not (wanted.size == uniq.size and np.array_equal(wanted, uniq)):
                takes.append((axis, np.searchsorted(uniq, wanted)))
            final_shape.append(int(wanted.size))
    return Plan(items=items, read_shape=tuple(read_shape), takes=takes, shape=tuple(final_shape),
                scalar=not final_shape)


def apply(plan_: Plan, data: np.ndarray) -> np.ndarray:
    """The final result from the C++ read's output."""
    if plan_.mask is not None:
        return data[plan_.mask]
    for axis, positions in plan_.takes:
        data = np.take(data, positions, axis=axis)
    return data
