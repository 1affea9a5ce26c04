// What the fast path's workers read with: a WorkerState per worker (its descriptor of the file
// or the file's ByteSource, its buffers, its codec contexts), kept from read to read by the
// file's WorkerStatePool, and the process-wide pools of idle buffers they share.
//
// Ownership: a file's WorkerStatePool owns its idle states; a worker owns the state it acquired
// until it releases it. Buffers move between a state and the process's BufferPools (released
// states give theirs back, acquired ones take them again).
//
// Thread-safety: WorkerStatePool and BufferPool are thread-safe, one mutex each; a WorkerState
// belongs to one thread at a time. Lock order: WorkerStatePool's before a BufferPool's (an idle
// state takes the process's buffers as acquire() hands it out); a BufferPool's is a leaf. The
// BufferPools' locks are held across fork() (pthread_atfork, worker_state.cc):
// compressed_buffers() before chunk_buffers().
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "common/big_buffer.h"
#include "common/status.h"
#include "h5chunk/byte_source.h"
#include "h5chunk/codecs.h"

namespace h5chunk {

using hubfs::Result;
using hubfs::Status;

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
  // Held across fork() (pthread_atfork, worker_state.cc): a child forked while a worker held the lock
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

}  // namespace h5chunk
