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
#include "h5chunk/codecs.h"
#include "h5chunk/filters.h"

namespace h5chunk {

inline constexpr unsigned kNbitFilter = 5;         // H5Z_FILTER_NBIT
inline constexpr unsigned kScaleOffsetFilter = 6;  // H5Z_FILTER_SCALEOFFSET

// Where a chunk stored with `filter_mask` meets the pipeline's scale-offset or n-bit filter,
// when h5chunk can give that filter's input: every filter after it in the pipeline (applied
// after it when writing, so undone before it when reading: deflate, shuffle, fletcher32 ...) is
// one h5chunk decodes. Then `step` is that filter and `after` with `after_mask` the filters to
// undo first (none when it is the last filter the chunk went through). `step` is null when the
// chunk goes through neither filter, or through a filter h5chunk does not decode before it.
// The filters before it get its output, the chunk's exact size, which they decode safely.
struct UncheckedStage {
  const FilterStep* step = nullptr;
  std::vector<FilterStep> after;
  uint32_t after_mask = 0;
  bool undo_after = false;  // some filter of `after` applies to the chunk
};
UncheckedStage unchecked_stage(const std::vector<FilterStep>& pipeline, uint32_t filter_mask);

// The most bytes scale-offset's or n-bit's input can hold for a chunk of chunk_bytes: the chunk
// at full precision plus scale-offset's 21-byte header, with room for a byte of padding.
inline uint64_t max_unchecked_input(uint64_t chunk_bytes) { return chunk_bytes + 64; }

// Ok when `in` (in_size stored bytes) is input `step` (scale-offset or n-bit) can decode into a
// chunk of chunk_elems elements of elem_size bytes without reading or writing out of bounds and
// to the chunk's exact size; else kCorrupt saying what is wrong.
hubfs::Status check_unchecked_filter_input(const FilterStep& step, size_t elem_size, uint64_t chunk_elems,
                                           const uint8_t* in, size_t in_size);

}  // namespace h5chunk
