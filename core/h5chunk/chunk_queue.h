// One chunked read's work queue and workers (reader.cc's read_chunks runs it): the caller's
// thread queues the located chunks (ChunkTask) and decodes one itself whenever the queue is full;
// helper threads pop and process them (pread, check or decode, convert, place in the output).
//
// Ownership: read_chunks owns the queue on its stack, and joins the helpers before it goes; the
// queue refers to the request, its layout and the plan, which outlive it. Each worker brings
// its own WorkerState (descriptor or source, buffers, codec contexts).
//
// Thread-safety: every method may be called from any worker. One mutex (`mu_`) guards the
// queue, the failure, and the bytes-in-flight budget; two condition variables wait on it
// (`ready_`: a task or the end, `budget_cv_`: room in the budget). It is a leaf lock: no
// callback, read or decode runs while it is held. The first error (or cancel) wins, empties
// the queue and wakes every waiter.
#pragma once

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <cstring>
#include <deque>
#include <memory>
#include <mutex>
#include <new>
#include <vector>

#include "h5chunk/chunk_plan.h"
#include "h5chunk/manifest.h"
#include "h5chunk/reader.h"

namespace h5chunk {

struct ChunkTask {
  std::vector<const AxisPiece*> pieces;
  ChunkLocation loc;
  bool direct = false;     // the chunk is exactly one contiguous region of the output
  bool raw = false;        // stored unfiltered
  uint64_t out_offset = 0; // where that region starts (direct only)
  uint64_t position = 0;   // in the chunk grid (FastRead::verify_only)
};

// Everything the workers share for one read.
class ChunkQueue {
 public:
  ChunkQueue(const FastRead& request, const std::vector<AxisPlan>& axes)
      : req_(request), layout_(*request.layout), axes_(axes) {
    chunk_bytes_ = layout_.elem_size;
    for (uint64_t c : layout_.chunk) chunk_bytes_ *= c;
    queue_limit_ = 2 * static_cast<size_t>(request.threads) + 2;
  }

  uint64_t chunk_bytes() const { return chunk_bytes_; }

  // From now on, workers read with O_DIRECT (see uncached_reads_). Call before queueing tasks.
  void use_uncached_reads() { uncached_reads_.store(true); }

  // Producer side (the caller's thread). Queues the task, or returns false without taking it
  // when the queue is full (the caller then decodes a queued chunk itself instead of waiting).
  bool try_push(ChunkTask& task) {
    std::lock_guard<std::mutex> lock(mu_);
    if (failed_ || queue_.size() >= queue_limit_) return false;
    queue_.push_back(std::move(task));
    ready_.notify_one();
    return true;
  }

  bool failed() {
    std::lock_guard<std::mutex> lock(mu_);
    return failed_;
  }

  // Whether the caller asked to stop (FastRead::cancel); the first to notice fails the read.
  bool cancelled() {
    if (!req_.cancel || !req_.cancel->load(std::memory_order_relaxed)) return false;
    fail(hubfs::Unavailable(req_.source + ": read cancelled"));
    return true;
  }

  void close() {
    std::lock_guard<std::mutex> lock(mu_);
    closed_ = true;
    ready_.notify_all();
  }

  void fail(Status status) {
    std::lock_guard<std::mutex> lock(mu_);
    if (!failed_) error_ = std::move(status);
    failed_ = true;
    queue_.clear();
    ready_.notify_all();
    budget_cv_.notify_all();
  }

  Status error() {
    std::lock_guard<std::mutex> lock(mu_);
    return error_;
  }

  // A helper thread: processes chunks until the queue is closed and empty.
  void work();
  // The caller's thread: processes one queued chunk if there is one; false if there was none.
  bool help(WorkerState& worker);

  uint64_t peak_in_flight() {
    std::lock_guard<std::mutex> lock(mu_);
    return peak_in_flight_;
  }

  std::atomic<uint64_t> chunks{0}, compressed_bytes{0};

 private:
  bool pop(ChunkTask* task, bool wait) {
    std::unique_lock<std::mutex> lock(mu_);
    if (wait) ready_.wait(lock, [&] { return !queue_.empty() || closed_ || failed_; });
    if (failed_ || queue_.empty()) return false;
    *task = std::move(queue_.front());
    queue_.pop_front();
    return true;
  }

  // Reads and decodes one chunk; false (and the read failed) on error.
  bool run(const ChunkTask& task, WorkerState& worker);

  // Compressed bytes in flight stay under the limit, except that one chunk is always allowed
  // (a chunk larger than the limit must still be readable).
  bool acquire_budget(uint64_t bytes) {
    std::unique_lock<std::mutex> lock(mu_);
    budget_cv_.wait(lock, [&] {
      return failed_ || in_flight_ == 0 || in_flight_ + bytes <= req_.max_bytes_in_flight;
    });
    if (failed_) return false;
    in_flight_ += bytes;
    peak_in_flight_ = std::max(peak_in_flight_, in_flight_);
    return true;
  }

  void release_budget(uint64_t bytes) {
    std::lock_guard<std::mutex> lock(mu_);
    in_flight_ -= bytes;
    budget_cv_.notify_all();
  }

  // One chunk of fill value, or nullptr when it cannot be allocated.
  const uint8_t* fill_chunk() {
    std::call_once(fill_once_, [&] {
      fill_.reset(new (std::nothrow) uint8_t[chunk_bytes_]);
      if (!fill_) return;
      const size_t e = layout_.elem_size;
      for (uint64_t i = 0; i < chunk_bytes_; i += e) std::memcpy(&fill_[i], layout_.fill.data(), e);
    });
    return fill_.get();
  }

  Status process(const ChunkTask& task, WorkerState& worker);

  const FastRead& req_;
  const ChunkedLayout& layout_;
  const std::vector<AxisPlan>& axes_;
  uint64_t chunk_bytes_ = 0;
  size_t queue_limit_ = 0;

  std::mutex mu_;
  std::condition_variable ready_, budget_cv_;
  std::deque<ChunkTask> queue_;
  bool closed_ = false, failed_ = false;
  Status error_;
  uint64_t in_flight_ = 0, peak_in_flight_ = 0;
  // On a hubfs mount, once the chunks are hinted (their bytes already on their way), reads
  // skip the page cache: with FADV_RANDOM the kernel sends a chunk's buffered pread to the
  // mount one 1 MiB request after another, while an O_DIRECT pread goes out as concurrent
  // requests and is copied once, straight into the buffer, which is faster
  // (docs/benchmarks.md, "Steady reads").
  std::atomic<bool> uncached_reads_{false};

  std::once_flag fill_once_;
  std::unique_ptr<uint8_t[]> fill_;
};

}  // namespace h5chunk
