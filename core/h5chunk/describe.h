// What libhdf5 says a dataset is: its DatasetInfo (shape, element type, layout, filters, why
// the fast path cannot read it and the fix), the fast path's ChunkedLayout, and whatever in the
// file's description cannot be right (a damaged file: reads are then refused). Called once per
// dataset, when it is first opened (FileState::open_dataset), under the caller's
// QuietHdf5Errors; no state of its own.
#pragma once

#include <hdf5.h>

#include <cstdint>
#include <string>
#include <vector>

#include "h5chunk/element_type.h"
#include "h5chunk/h5chunk.h"
#include "h5chunk/reader.h"

namespace h5chunk {

// Empty if the fast path can number the chunks of this (sound) chunk shape; a valid file can
// have more than 2^64 chunks ((2^40, 2^40) in chunks of 1): H5Dread reads those.
std::string chunk_grid_problem(const std::vector<uint64_t>& shape, const std::vector<uint64_t>& chunk);

// Sets *corrupt to why the file's description of the dataset cannot be right (reads are then
// refused: H5Dread would return memory it never wrote), or leaves it empty.
Status describe_dataset(hid_t dset, hid_t file_type, hid_t dcpl, DatasetInfo* info, ChunkedLayout* layout,
                        ElementDescription* element, std::string* corrupt);

}  // namespace h5chunk
