#include "h5chunk/manifest.h"

#include <string>

#include "h5chunk/checked.h"
#include "h5chunk/hdf5_handle.h"

namespace h5chunk {

// The superblock starts every HDF5 file (at the base address); its shortest form (versions 2
// and 3) is 48 bytes.
constexpr haddr_t kSmallestSuperblockBytes = 48;

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
  // A chunk found damaged stays damaged: asking again could give another answer once H5Dread
  // has filled HDF5's chunk caches, which the lookup below consults first.
  if (auto it = damaged_.find(key); it != damaged_.end()) return it->second;
  auto result = query(grid);
  if (result.ok()) {
    memo_.emplace(key, *result);
  } else {
    damaged_.emplace(key, result.status());
  }
  return result;
}

Result<ChunkLocation> ChunkManifest::query(const uint64_t* grid) {

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
  // H5Dget_chunk_info_by_coord walks the index; H5Dread looks chunks up (a B-tree search, an
  // array index). On a sound index both find the same chunk. On a damaged one (a key or child
  // pointer overwritten) they can disagree, and reading what the walk found would return bytes
  // H5Dread never would (in one fuzz case, the superblock as chunk data). The lookup's view of
  // the chunk's size is cheap to ask for (no walk), so every located chunk is cross-checked.
  // HDF5 1.10.8 answers a lookup of an unwritten chunk with an error ("chunk storage is not
  // allocated", "chunk address isn't defined", depending on the index), so a failed lookup
  // means "none found": damage only if the walk found one.
  hsize_t looked_up = 0;
  const bool lookup_ok = H5Dget_chunk_storage_size(dataset_, origin.data(), &looked_up) >= 0;
  if (!lookup_ok) looked_up = 0;
  const uint64_t walked = addr != HADDR_UNDEF ? size : 0;
  if (looked_up != walked) {
    std::string coords;
    for (size_t d = 0; d < origin.size(); ++d) coords += (d ? ", " : "") + std::to_string(origin[d]);
    return hubfs::Corrupt(
        "the chunk index is damaged at (" + coords + "): walking it finds " +
        (walked ? "a chunk of " + std::to_string(walked) + " bytes" : std::string("no chunk")) +
        ", looking the chunk up " +
        (looked_up ? "finds one of " + std::to_string(looked_up) + " bytes"
                   : "finds none" + (lookup_ok ? std::string() : " (" + hdf5_error_text() + ")")) +
        "; the file is corrupt");
  }
  if (addr != HADDR_UNDEF && size > 0 && addr < kSmallestSuperblockBytes) {
    // Both views agree, but on a pointer a damaged index holds (a zeroed page): the superblock
    // is at address 0, so no chunk can start there, whatever H5Dread would make of it.
    std::string coords;
    for (size_t d = 0; d < origin.size(); ++d) coords += (d ? ", " : "") + std::to_string(origin[d]);
    return hubfs::Corrupt("the chunk index is damaged at (" + coords + "): it places the chunk at address " +
                          std::to_string(addr) + ", inside the file's superblock; the file is corrupt");
  }
  ChunkLocation loc;
  loc.allocated = addr != HADDR_UNDEF && size > 0;
  loc.offset = loc.allocated ? addr + base_address_ : 0;
  loc.size = loc.allocated ? size : 0;
  loc.filter_mask = mask;
  return loc;
}

uint64_t ChunkManifest::queries() const {
  std::lock_guard<std::mutex> lock(mu_);
  return queries_;
}

}  // namespace h5chunk
