#include "h5chunk/manifest.h"

#include <string>

#include "h5chunk/checked.h"
#include "h5chunk/hdf5_handle.h"

namespace h5chunk {

ChunkManifest::ChunkManifest(hid_t dataset, std::vector<uint64_t> shape,
                             std::vector<uint64_t> chunk, uint64_t base_address)
    : dataset_(dataset), shape_(std::move(shape)), chunk_(std::move(chunk)),
      base_address_(base_address) {
  for (size_t d = 0; d < shape_.size(); ++d) {
    // ceil_div: shape + chunk - 1 wraps near 2^64, and a corrupt layout can declare a zero
    // chunk dimension (the dataset then never takes the fast path; see chunk_shape_problem).
    grid_shape_.push_back(ceil_div(shape_[d], chunk_[d]));
  }
}

uint64_t ChunkManifest::position(const uint64_t* grid) const {
  uint64_t key = 0;
  for (size_t d = 0; d < grid_shape_.size(); ++d) key = key * grid_shape_[d] + grid[d];
  return key;
}

bool ChunkManifest::known(const uint64_t* grid) const {
  const uint64_t key = position(grid);
  std::lock_guard<std::mutex> lock(mu_);
  return memo_.count(key) > 0;
}

Result<ChunkLocation> ChunkManifest::locate(const uint64_t* grid) {
  const uint64_t key = position(grid);
  std::lock_guard<std::mutex> lock(mu_);
  if (auto it = memo_.find(key); it != memo_.end()) return it->second;

  std::vector<hsize_t> origin(chunk_.size());
  for (size_t d = 0; d < chunk_.size(); ++d) origin[d] = grid[d] * chunk_[d];
  unsigned mask = 0;
  haddr_t addr = HADDR_UNDEF;
  hsize_t size = 0;
  QuietHdf5Errors quiet;
  ++queries_;
  if (H5Dget_chunk_info_by_coord(dataset_, origin.data(), &mask, &addr, &size) < 0) {
    std::string coords;
    for (size_t d = 0; d < origin.size(); ++d) coords += (d ? ", " : "") + std::to_string(origin[d]);
    return hubfs::Corrupt("HDF5 could not locate the chunk at (" + coords +
                          "): " + hdf5_error_text());
  }
  ChunkLocation loc;
  loc.allocated = addr != HADDR_UNDEF && size > 0;
  loc.offset = loc.allocated ? addr + base_address_ : 0;
  loc.size = loc.allocated ? size : 0;
  loc.filter_mask = mask;
  memo_.emplace(key, loc);
  return loc;
}

uint64_t ChunkManifest::queries() const {
  std::lock_guard<std::mutex> lock(mu_);
  return queries_;
}

}  // namespace h5chunk
