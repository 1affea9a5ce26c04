// The fast path: plans which chunks a selection touches and where each lands in the output,
// then reads and decodes them in a pool of workers.
//
// The calling thread walks the touched chunks in order, asks the manifest for each (the only
// HDF5 calls, kept out of the workers) and queues it; each worker preads its chunk from its own
// descriptor and decodes it, so one chunk's read overlaps another's decode. A chunk that is
// exactly a contiguous region of the output is decoded straight into it; the rest are decoded
// into the worker's scratch and the selected part copied out.
#pragma once

#include <cstdint>
#include <mutex>
#include <string>
#include <vector>

#include "common/status.h"
#include "h5chunk/codecs.h"
#include "h5chunk/h5chunk.h"
#include "h5chunk/manifest.h"
#include "h5chunk/selection.h"

namespace h5chunk {

// Read-only descriptors of one file, one per concurrent worker, reused across reads: opening a
// file on a network mount is not free, and per-worker descriptors keep workers from sharing
// any file state.
class DescriptorPool {
 public:
  explicit DescriptorPool(std::string path) : path_(std::move(path)) {}
  ~DescriptorPool();
  DescriptorPool(const DescriptorPool&) = delete;
  DescriptorPool& operator=(const DescriptorPool&) = delete;
  Result<int> acquire();
  void release(int fd);

 private:
  std::string path_;
  std::mutex mu_;
  std::vector<int> idle_;
};

// What the fast path needs to know about a chunked dataset.
struct ChunkedLayout {
  std::vector<uint64_t> shape;
  std::vector<uint64_t> chunk;
  size_t elem_size = 0;
  std::vector<FilterStep> pipeline;
  bool dont_filter_partial = false;  // H5D_CHUNK_DONT_FILTER_PARTIAL_CHUNKS
  std::vector<uint8_t> fill;         // one element of fill value, native order
};

struct FastRead {
  const ChunkedLayout* layout = nullptr;
  ChunkManifest* manifest = nullptr;
  DescriptorPool* descriptors = nullptr;
  const NormalizedSelection* selection = nullptr;  // no blocker: unit steps, one sorted list
  uint8_t* out = nullptr;                          // selection->num_elements * elem_size bytes
  unsigned threads = 1;
  uint64_t max_bytes_in_flight = kDefaultMaxBytesInFlight;
  ProgressFn progress;
  std::string source;  // "file 'x.h5', dataset '/d'": prefixes every error
};

// Reads the selection with the worker pool. Errors name the source and the chunk.
Result<ReadStats> read_chunks(const FastRead& request);

}  // namespace h5chunk
