// The fast path: plans which chunks a selection touches and where each lands in the output,
// then reads and decodes them in a pool of workers.
//
// The calling thread walks the touched chunks in order, asks the manifest for each (the only
// HDF5 calls, kept out of the helper threads) and queues it, decoding queued chunks itself
// whenever the queue is full; each worker preads its chunk from its own descriptor and decodes
// it, so one chunk's read overlaps another's decode. A chunk that is exactly a contiguous
// region of the output is decoded straight into it (or, stored raw, pread straight into it);
// the rest are decoded into the worker's scratch and the selected part copied out.
//
// Its parts: worker_state.h (what each worker reads with, kept from read to read),
// chunk_plan.h (per axis, the touched chunks and where their parts land), chunk_queue.h (one
// read's queue, workers and bytes-in-flight budget); reader.cc's read_chunks ties them together
// on the caller's thread. Thread-safety: that thread makes every HDF5 call of the read (the
// manifest's lookups; manifest.h says who may call HDF5 when), the helper threads only pread,
// check, decode and copy. Each call has its own plan and queue; what it shares with other reads
// of the file (the worker-state pool, the helper pool, VerifiedChunks) is thread-safe.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_set>
#include <vector>

#include "common/status.h"
#include "h5chunk/codecs.h"
#include "h5chunk/element_type.h"
#include "h5chunk/h5chunk.h"
#include "h5chunk/helper_pool.h"
#include "h5chunk/manifest.h"
#include "h5chunk/selection.h"
#include "h5chunk/worker_state.h"

namespace h5chunk {

// What the fast path needs to know about a chunked dataset.
struct ChunkedLayout {
  std::vector<uint64_t> shape;
  std::vector<uint64_t> chunk;
  size_t elem_size = 0;
  std::vector<FilterStep> pipeline;
  bool dont_filter_partial = false;  // H5D_CHUNK_DONT_FILTER_PARTIAL_CHUNKS
  std::vector<uint8_t> fill;         // one element of fill value, native order
  Conversion conversion;             // stored -> returned element bytes (empty: none needed)
  // Every filter of the pipeline is one h5chunk decodes; else (scale-offset, n-bit) only a
  // verify_only read runs, checking what filter_checks.h can.
  bool decodable = true;
};

// Chunks of one dataset that the fast path's decoders have accepted (by their position in the
// chunk grid), so that H5Dread is handed each chunk only after it was checked, and checked once.
// Thread-safe.
class VerifiedChunks {
 public:
  bool contains(uint64_t position) const {
    std::lock_guard<std::mutex> lock(mu_);
    return positions_.count(position) > 0;
  }
  void insert(uint64_t position) {
    std::lock_guard<std::mutex> lock(mu_);
    positions_.insert(position);
  }

 private:
  mutable std::mutex mu_;  // leaf lock: nothing is called while it is held
  std::unordered_set<uint64_t> positions_;
};

struct FastRead {
  const ChunkedLayout* layout = nullptr;
  ChunkManifest* manifest = nullptr;
  WorkerStatePool* workers = nullptr;
  HelperPool* helpers = nullptr;  // the file's helper threads (threads - 1 of them are asked for)
  const NormalizedSelection* selection = nullptr;  // any: steps of either sign, lists in any order
  uint8_t* out = nullptr;                          // selection->num_elements * elem_size bytes
  unsigned threads = 1;
  bool threads_chosen = false;  // Options::threads was set: use that many even for tiny chunks
  uint64_t max_bytes_in_flight = kDefaultMaxBytesInFlight;
  ProgressFn progress;
  const std::atomic<bool>* cancel = nullptr;  // ReadOptions::cancel
  bool hint_chunks = true;                     // ReadOptions::hint_chunks
  std::string source;  // "file 'x.h5', dataset '/d'": prefixes every error
  bool may_decline = false;  // decline (kUnsupported) when chunk lookups would cost too much
  // Verify instead of read: every touched chunk not yet in `verified` is read and decoded into
  // scratch (nothing is written to `out`, which may be null), and added to `verified` once its
  // decode succeeded. A chunk whose location libhdf5 disputes (locate() says kUnsupported) is
  // skipped, not verified. Used before H5Dread serves a read (see verify_before_h5dread): a
  // layout that is not decodable has each chunk's location checked, and its scale-offset or
  // n-bit input as far as filter_checks.h can.
  bool verify_only = false;
  VerifiedChunks* verified = nullptr;  // required with verify_only
};

// HDF5 1.10 locates a chunk in time growing with its place in the chunk index, so locating many
// chunks one query at a time can cost far more than H5Dread reading them (docs/hdf5-formats.md,
// "The quadratic trap"). Estimates use the worst case measured (docs/constants.md,
// kLookupMicros)...
inline constexpr double kLookupMicros = 2.0;
inline constexpr double kLookupMicrosPerIndexPosition = 0.1;
// ...against H5Dread's pace with Blosc lz4 plus a fixed cost per call (docs/constants.md,
// kH5DreadBytesPerMicro).
inline constexpr double kH5DreadBytesPerMicro = 1500.0;
inline constexpr double kH5DreadMicros = 50.0;
// Chunks smaller than this (uncompressed) are all decoded on the caller's thread unless the
// caller chose a thread count: see read_chunks.
inline constexpr uint64_t kMinChunkBytesToShare = 16 << 10;
// A hinted read (a hubfs mount's or a source's) whose output is at least this large has the
// output's pages mapped by a thread of its own while its workers wait for the first chunks
// (hubfs::prefault_pages): a cold read's chunks arrive together at the end, and the faults and
// zeroing of 201 MB of fresh output (18-46 ms of CPU here) otherwise ran after the last byte,
// beside the decoding. Smaller reads (a training loop's frame) keep their one thread
// (docs/constants.md, kPrefaultOutputFrom).
inline constexpr uint64_t kPrefaultOutputFrom = 32ull << 20;

// Reads the selection with the worker pool. Errors name the source and the chunk.
// With may_decline: kUnsupported (nothing read) when locating the chunks not yet remembered
// would cost more than H5Dread reading the whole selection; the caller then uses H5Dread.
// With verify_only: Ok when every touched chunk decodes (stats.chunks counts those decoded now),
// else the decoder's error naming the chunk.
Result<ReadStats> read_chunks(const FastRead& request);

}  // namespace h5chunk
