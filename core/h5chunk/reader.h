// The fast path: plans which chunks a selection touches and where each lands in the output,
// then reads and decodes them in a pool of workers.
//
// The calling thread walks the touched chunks in order, asks the manifest for each (the only
// HDF5 calls, kept out of the helper threads) and queues it, decoding queued chunks itself
// whenever the queue is full; each worker preads its chunk from its own descriptor and decodes
// it, so one chunk's read overlaps another's decode. A chunk that is exactly a contiguous
// region of the output is decoded straight into it (or, stored raw, pread straight into it);
// the rest are decoded into the worker's scratch and the selected part copied out.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_set>
#include <vector>

#include "h5chunk/helper_pool.h"
#include "common/status.h"
#include "h5chunk/byte_source.h"
#include "h5chunk/codecs.h"
#include "h5chunk/element_type.h"
#include "common/big_buffer.h"
#include "h5chunk/h5chunk.h"
#include "h5chunk/manifest.h"
#include "h5chunk/selection.h"

namespace h5chunk {

// A growable byte buffer that, unlike std::vector, does not zero what it allocates (zeroing
// would touch every page a second time); large ones in huge pages (common/big_buffer.h).
using Buffer = hubfs::BigBuffer;

// What one worker keeps from read to read: its own read-only descriptor of the file (workers
// share no file state; on a network mount opening is not free) or the file's ByteSource, its
// buffers (already page-faulted in: first touch of fresh memory costs more than decoding on
// these machines), and its codec contexts.
struct WorkerState {
  ~WorkerState();
  int fd = -1;
  ByteSource* source = nullptr;  // set instead of fd for a file opened from a source
  bool uncached = false;  // fd reads with O_DIRECT (set on a hubfs mount, once hinted)
  Buffer compressed;  // the chunk's stored bytes
  Buffer chunk;       // a decoded chunk that is not a contiguous region of the output
  DecodeScratch decode;
};

// Exactly `size` bytes at `offset`, through the worker's descriptor or source; kCorrupt
// ("file truncated") when the file ends first. `cancel` reaches a source (ByteSource::pread).
Status read_exact(WorkerState& worker, uint8_t* buf, uint64_t size, uint64_t offset,
                  const std::atomic<bool>* cancel = nullptr);
// The file's size, through the worker's descriptor or source.
Result<uint64_t> file_size(const WorkerState& worker);
// Announces ranges a read will need. A source is told all of them at once (it fetches them in
// parallel); on a descriptor they go out as a hubfs mount's range hint ioctl. True when the
// file takes hints (a source, or a hubfs mount): then the ranges are already on their way.
bool hint_ranges(const WorkerState& worker, uint64_t file_size,
                 const std::vector<std::pair<uint64_t, uint64_t>>& ranges);

// Idle worker states of one file (descriptor and codec contexts; their buffers are returned
// to the process-wide BufferPools on release and taken again on acquire).
class WorkerStatePool {
 public:
  explicit WorkerStatePool(std::string path) : path_(std::move(path)) {}
  // A file with no local path: workers read through `source` (which outlives the pool).
  explicit WorkerStatePool(ByteSource* source) : source_(source) {}
  Result<std::unique_ptr<WorkerState>> acquire();
  void release(std::unique_ptr<WorkerState> state);

 private:
  std::string path_;
  ByteSource* source_ = nullptr;
  std::mutex mu_;
  std::vector<std::unique_ptr<WorkerState>> idle_;
};

// Buffers larger than this are freed when a read ends rather than kept for the next one: a
// zea frame chunk (12.6 MB) stays warm, a pathological 1 GB chunk does not pin memory.
inline constexpr size_t kRetainedBufferBytes = 64ull << 20;
// Most bytes of idle worker buffers the process keeps, per kind (compressed, decoded). Idle
// buffers go to one process-wide pool, not to the idle state of their file, so a process with
// many open files keeps what its busiest moment used, not buffers per file. 256 MiB: the
// buffers of 16 workers (kMaxDefaultThreads) reading zea frames (12.6 MB each) stay warm.
inline constexpr size_t kPooledBufferBytes = 256ull << 20;

// Idle worker buffers of one kind, shared by every file of the process (already faulted in: a
// new file's first read reuses them). Thread-safe.
class BufferPool {
 public:
  explicit BufferPool(size_t cap_bytes) : cap_(cap_bytes) {}
  // An idle buffer (the most recently given), or an empty one.
  Buffer take();
  // Keeps the buffer for a later take(), or frees it when it is larger than
  // kRetainedBufferBytes or the pool would pass its cap.
  void give(Buffer buffer);
  size_t kept_bytes() const;
  size_t kept_count() const;
  // Held across fork() (pthread_atfork, reader.cc): a child forked while a worker held the lock
  // would find it locked forever.
  void lock_for_fork() { mu_.lock(); }
  void unlock_after_fork() { mu_.unlock(); }

 private:
  const size_t cap_;
  mutable std::mutex mu_;
  std::vector<Buffer> idle_;
  size_t bytes_ = 0;
};

// The process's pools of idle compressed-chunk and decoded-chunk buffers.
BufferPool& compressed_buffers();
BufferPool& chunk_buffers();

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

// HDF5 1.10 locates a chunk in time growing with its place in the chunk index: measured here
// (bench-style probe of a 16,384-chunk dataset, first full read) 2.3 s for a v1 B-tree and
// 12.4 s for a fixed array, i.e. up to ~0.09 us per index position per lookup, on top of
// about 2 us per call (hdf5-chunks notes), where H5Dread read the same dataset in 0.1 s.
// Estimates use these worst cases...
inline constexpr double kLookupMicros = 2.0;
inline constexpr double kLookupMicrosPerIndexPosition = 0.1;
// ...against H5Dread's pace on this machine: 1.5-1.6 GB/s with Blosc lz4 (bench_h5chunk_local),
// plus a fixed cost per call (its small-read sweep: a whole 512 KiB chunk in 30-74 us).
inline constexpr double kH5DreadBytesPerMicro = 1500.0;
inline constexpr double kH5DreadMicros = 50.0;
// Chunks smaller than this (uncompressed) are all decoded on the caller's thread unless the
// caller chose a thread count: see read_chunks.
inline constexpr uint64_t kMinChunkBytesToShare = 16 << 10;

// Reads the selection with the worker pool. Errors name the source and the chunk.
// With may_decline: kUnsupported (nothing read) when locating the chunks not yet remembered
// would cost more than H5Dread reading the whole selection; the caller then uses H5Dread.
// With verify_only: Ok when every touched chunk decodes (stats.chunks counts those decoded now),
// else the decoder's error naming the chunk.
Result<ReadStats> read_chunks(const FastRead& request);

}  // namespace h5chunk
