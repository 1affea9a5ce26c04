// Where each chunk of one dataset lives in the file.
//
// First choice: on first use, read the dataset's whole chunk index from the file in one pass
// (chunk_index.h), linear in the number of chunks. Each chunk a read then uses is cross-checked
// once against libhdf5's lookup of its stored size (H5Dget_chunk_storage_size: a B-tree search
// or an array index, not a walk), so a damaged index or a parser gap shows up as an error,
// never as wrong bytes.
//
// Fallback, when the index cannot be read (a format corner we do not parse, a file driver other
// than sec2, damage): ask libhdf5 one chunk at a time and remember each answer. In HDF5 1.10.8
// every such query (H5Dget_chunk_info_by_coord and friends) walks the chunk index from the top,
// in time growing with the chunk's place in it, so listing a large dataset that way is quadratic
// (docs/hdf5-formats.md, "The quadratic trap"); the reader declines such reads
// (check_lookup_cost) and H5Dread serves them.
#pragma once

#include <hdf5.h>

#include <cstdint>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

#include "common/status.h"
#include "h5chunk/source_driver.h"

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
  // `source`: the file's source when it was opened from one (the index is read through it; it
  // must outlive this object), else null (read through the sec2 driver's descriptor). A lookup
  // that failed because a read through the source failed is not remembered: the next one asks
  // again (a network hiccup is not damage).
  ChunkManifest(hid_t dataset, std::vector<uint64_t> shape, std::vector<uint64_t> chunk,
                uint64_t base_address, SourceLink* source = nullptr);

  // The chunk whose grid coordinates (origin / chunk shape per axis) are `grid`. Calls HDF5 on
  // a miss, so call it from one thread at a time per process region that may call HDF5 (the
  // reader calls it from the caller's thread only).
  Result<ChunkLocation> locate(const uint64_t* grid);

  // HDF5 chunk queries made so far: per-chunk locations on the fallback, per-chunk cross-checks
  // with the parsed index (tests check that a read asks only for what it touches).
  uint64_t queries() const;

  // Reads the chunk index on first call; true when every chunk's location is now in memory
  // (locating costs no walk). `index_type()` names the index, `index_status()` says why it could
  // not be read: kUnsupported when locate() asks libhdf5 chunk by chunk instead, anything else
  // when the index is damaged and locate() reports that for every chunk.
  bool indexed();
  std::string index_type() const;
  Status index_status() const;

  // Ok, or the damage our parser found in the chunk index (kCorrupt, naming it). Reads the
  // index first if not yet tried and the grid has at most `max_grid_chunks` chunks; a larger
  // grid not yet read is not looked at (Ok).
  Status damage(uint64_t max_grid_chunks);

  // The chunk's position in C order over the chunk grid (roughly its place in HDF5's index),
  // and whether locate() would answer it from memory.
  uint64_t position(const uint64_t* grid) const;
  bool known(const uint64_t* grid) const;

 private:
  hid_t dataset_;
  std::vector<uint64_t> shape_, chunk_, grid_shape_;
  uint64_t base_address_;
  SourceLink* source_ = nullptr;
  // One HDF5 query for the chunk at `grid`, cross-checked; called with mu_ held.
  Result<ChunkLocation> query(const uint64_t* grid);
  // Fills table_ from the file's chunk index; called with mu_ held, once (try_index).
  Status read_index();
  // Returns a failure of the source's (the index stays untried, to be read again), else Ok.
  Status try_index();
  // The refusal every read of a damaged index gets; called with mu_ held.
  Status damaged_index_error() const;
  // The parsed entry for `key` checked against HDF5's lookup; called with mu_ held.
  Result<ChunkLocation> verify(const uint64_t* grid, uint64_t key);

  // The parsed entry for `key`: a copy of the dense or sparse table's (unallocated if absent).
  ChunkLocation parsed(uint64_t key) const;
  bool parsed_verified(uint64_t key) const;
  void mark_verified(uint64_t key);

  enum class IndexState { kUntried, kParsed, kFailed, kDamaged };
  IndexState index_state_ = IndexState::kUntried;
  // The parsed index: a dense table over the grid when it has at most kMaxIndexedChunks chunks,
  // else (a huge, sparse grid) the allocated chunks alone, by key.
  bool dense_ = true;
  std::vector<ChunkLocation> table_;  // dense: C order over the grid
  std::vector<bool> verified_;        // dense: table_ entries cross-checked with HDF5
  struct SparseEntry {
    ChunkLocation loc;
    bool verified = false;
  };
  std::unordered_map<uint64_t, SparseEntry> sparse_;  // sparse: allocated chunks only
  std::vector<hsize_t> origin_;       // verify()'s scratch
  std::string index_type_;
  Status index_status_;

  mutable std::mutex mu_;  // guards memo_, damaged_ and queries_: readers may share a dataset
  std::unordered_map<uint64_t, ChunkLocation> memo_;
  std::unordered_map<uint64_t, Status> damaged_;  // chunks whose index entries are corrupt
  uint64_t queries_ = 0;
};

}  // namespace h5chunk
