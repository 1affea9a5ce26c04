// Where each chunk of one dataset lives in the file, learned from the HDF5 C library one chunk
// at a time and remembered.
//
// Why one at a time: in HDF5 1.10.8 every chunk query (H5Dget_chunk_info_by_coord and friends)
// walks the chunk index from the top, about 2 us near its start and up to 880 us near its end,
// so listing a 16,384-chunk dataset takes seconds (quadratic). We ask only for the chunks a read
// touches, and a file's content never changes while it is open read-only, so every answer is
// kept for the next read of the same dataset.
#pragma once

#include <hdf5.h>

#include <cstdint>
#include <mutex>
#include <unordered_map>
#include <vector>

#include "common/status.h"

namespace h5chunk {

using hubfs::Result;
using hubfs::Status;

struct ChunkLocation {
  bool allocated = false;    // false: never written, reads as the fill value
  uint64_t offset = 0;       // absolute byte offset in the file (user block included)
  uint64_t size = 0;         // stored (compressed) bytes
  uint32_t filter_mask = 0;  // bit i set: filter i was skipped when this chunk was written
};

class ChunkManifest {
 public:
  // `dataset` must outlive this object. `base_address` is the file's user block size: HDF5
  // reports chunk addresses relative to it.
  ChunkManifest(hid_t dataset, std::vector<uint64_t> shape, std::vector<uint64_t> chunk,
                uint64_t base_address);

  // The chunk whose grid coordinates (origin / chunk shape per axis) are `grid`. Calls HDF5 on
  // a miss, so call it from one thread at a time per process region that may call HDF5 (the
  // reader calls it from the caller's thread only).
  Result<ChunkLocation> locate(const uint64_t* grid);

  // HDF5 chunk queries made so far (tests check that a read asks only for what it touches).
  uint64_t queries() const;

  // The chunk's position in C order over the chunk grid (roughly its place in HDF5's index),
  // and whether locate() would answer it from memory.
  uint64_t position(const uint64_t* grid) const;
  bool known(const uint64_t* grid) const;

 private:
  hid_t dataset_;
  std::vector<uint64_t> shape_, chunk_, grid_shape_;
  uint64_t base_address_;
  // One HDF5 query for the chunk at `grid`, cross-checked; called with mu_ held.
  Result<ChunkLocation> query(const uint64_t* grid);

  mutable std::mutex mu_;  // guards memo_, damaged_ and queries_: readers may share a dataset
  std::unordered_map<uint64_t, ChunkLocation> memo_;
  std::unordered_map<uint64_t, Status> damaged_;  // chunks whose index entries are corrupt
  uint64_t queries_ = 0;
};

}  // namespace h5chunk
