// The reference path: H5Dread with a file selection equivalent to the numpy selection. Used for
// everything the fast path does not serve, and by tests and benchmarks as the yardstick.
#pragma once

#include <hdf5.h>

#include "common/status.h"
#include "h5chunk/selection.h"

namespace h5chunk {

// Reads `selection` of `dataset` as `mem_type` (elements of `elem_size` bytes) into `out`, in C
// order of selection.out_shape. An unsorted or repeated index list, which an HDF5 hyperslab
// cannot express, is read as its sorted distinct indices and then reordered in memory, giving
// numpy's answer. Call from one thread per dataset at a time (HDF5 serialises anyway).
Status h5dread_selection(hid_t dataset, hid_t mem_type, size_t elem_size,
                         const NormalizedSelection& selection, void* out);

}  // namespace h5chunk
