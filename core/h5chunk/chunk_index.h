// Every chunk of one dataset, read straight from the file's chunk index in one pass.
//
// Why: HDF5 1.10.8 answers "where is chunk X" by walking its chunk index from the start on every
// call, so locating all chunks of a large dataset one by one is quadratic (docs/hdf5-formats.md,
// "The quadratic trap"). Reading the index structures ourselves visits each node or block once:
// time linear in the number of chunks.
//
// What is read: the dataset's object header (v1, or v2 "OHDR" with "OCHK" continuations), its
// Data Layout message (version 3: v1 B-tree; version 4: single chunk, implicit, fixed array,
// extensible array, v2 B-tree) and then the index itself. The format, as read here, is in
// docs/hdf5-formats.md section 1a.
//
// Everything read is hostile input: every size and count is bounded, every checksum the format
// has is verified, recursion has a depth limit and node visits a count limit. Anything unexpected
// is an error, and the caller falls back to asking libhdf5 chunk by chunk (slow but
// authoritative). Never a guess.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "common/status.h"
#include "h5chunk/byte_source.h"

namespace h5chunk {

using hubfs::Result;
using hubfs::Status;

// Where the index lives and what the caller knows about the dataset from libhdf5 (the parse
// cross-checks the layout message against it).
struct ChunkIndexSource {
  int fd = -1;                    // the file, read with pread only...
  ByteSource* source = nullptr;   // ...or through this, when set
  uint64_t base_address = 0;      // user block size: every address in the file is relative to it
  uint64_t header_address = 0;    // the dataset's object header (H5Oget_info's addr)
  unsigned sizeof_addr = 8;       // H5Pget_sizes of the file creation property list
  unsigned sizeof_size = 8;
  std::vector<uint64_t> shape;    // current dimensions
  std::vector<uint64_t> maxdims;  // maximum dimensions (UINT64_MAX: unlimited)
  std::vector<uint64_t> chunk;    // chunk dimensions
  uint64_t elem_size = 0;         // bytes per element as stored
  bool filtered = false;          // the dataset has a filter pipeline (H5Pget_nfilters > 0)
};

// One allocated chunk. Unallocated chunks are simply not reported.
struct IndexedChunk {
  const uint64_t* grid = nullptr;  // chunk coordinates (origin / chunk shape), rank entries
  uint64_t address = 0;            // relative to the base address, as libhdf5 reports it
  uint64_t size = 0;               // stored bytes; 0 only in a damaged index (no writer stores it)
  uint32_t filter_mask = 0;
};

// Calls `sink` once per allocated chunk whose grid coordinates lie inside the current extent
// (in no particular order). Returns the index type's name ("v1 B-tree", "fixed array", ...) or
// an error naming what was wrong; after an error the sink may already have seen some chunks.
Result<std::string> read_chunk_index(const ChunkIndexSource& src,
                                     const std::function<Status(const IndexedChunk&)>& sink);

// Jenkins' lookup3 hash as HDF5 uses it for metadata checksums (initial value 0).
uint32_t hdf5_checksum(const uint8_t* data, size_t len);

}  // namespace h5chunk
