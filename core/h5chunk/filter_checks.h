// Checks of a stored chunk for the HDF5 filters h5chunk does not decode but libhdf5 decodes
// without checking its input: scale-offset (6) and n-bit (5). HDF5 1.10.8's decoders trust the
// chunk's own header and the filter's parameters; a damaged chunk whose header asks for more
// bits per element than the type has, or that is shorter than its parameters say, makes them
// read and write past their buffers (H5Dread crashed, h5py with it). What can be checked
// without decoding is checked here before H5Dread is handed the chunk.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "common/status.h"
#include "h5chunk/filters.h"

namespace h5chunk {

inline constexpr unsigned kNbitFilter = 5;         // H5Z_FILTER_NBIT
inline constexpr unsigned kScaleOffsetFilter = 6;  // H5Z_FILTER_SCALEOFFSET

// The one filter of `pipeline` that a chunk stored with `filter_mask` goes through, when that
// filter is scale-offset or n-bit (nothing else applied): then the stored bytes are its input.
const FilterStep* sole_unchecked_filter(const std::vector<FilterStep>& pipeline, uint32_t filter_mask);

// Ok when `in` (in_size stored bytes) is input `step` (scale-offset or n-bit) can decode into a
// chunk of chunk_elems elements of elem_size bytes without reading or writing out of bounds and
// to the chunk's exact size; else kCorrupt saying what is wrong.
hubfs::Status check_unchecked_filter_input(const FilterStep& step, size_t elem_size, uint64_t chunk_elems,
                                           const uint8_t* in, size_t in_size);

}  // namespace h5chunk
