// A dataset's filter pipeline as the public API reports it (DatasetInfo::filters): HDF5 filter
// ids and the parameters each step was written with. Part of the public API; the decoders
// themselves (codecs.h) are not.
#pragma once

#include <string>
#include <vector>

namespace h5chunk {

// HDF5 filter ids.
enum FilterId : unsigned {
  kDeflate = 1,
  kShuffle = 2,
  kFletcher32 = 3,
  kLzf = 32000,
  kBlosc = 32001,
  kLz4 = 32004,
  kBitshuffle = 32008,
  kZstd = 32015,
};

struct FilterStep {
  unsigned id = 0;
  unsigned flags = 0;
  std::vector<unsigned> cd_values;
  std::string name;  // as HDF5 reports it, for messages
};

}  // namespace h5chunk
