// TierStack: the block tiers stacked (named for its role, so it does not read as one BlockTier):
// memory, then the local disk cache, then the shared tier, then (outside,
// BlockReader's fetch) the Hub. This is the one place that decides what moves between tiers:
// - promotion: a block found below memory goes up into memory when it is served (the caller's
//   `serve`), and a block from the shared tier also into the disk cache, later (deferred: see
//   DeferredWrites; past max_deferred_write_bytes waiting, at once on the disk workers);
// - write-back: a block the Hub sent is offered to the shared tier first (the sooner other
//   machines find it), then written to the disk cache, on the calling (disk worker) thread;
// - a failed hash's cleanup (drop_failed_file) moves the file's epoch and removes its blocks from
//   every tier; FileEpochs (file_epochs.h) keeps every lower-tier access of the old epoch out of
//   it (a write of the old epoch lands before the removals or never) and every one of the new
//   epoch after it;
// - blocks on their way to the disk cache (a Hub block from before its waiters are released until
//   its write lands; a shared-tier block while its deferred write waits) are found below memory
//   as if on disk: with a memory tier smaller than what arrives at once (a training loop's
//   planner), a block evicted before its write landed was fetched a second time.
// The memory tier is always there; disk and shared may be absent.
//
// Threads: one deferred writer (a TaskQueue of one thread at nice kDeferredWriteNice) for the
// deferred disk writes; everything else runs on the caller's thread. shutdown() runs the writes
// still waiting and joins that thread.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

#include "common/env.h"
#include "common/latency_histogram.h"
#include "reader/block_tier.h"
#include "reader/deferred_writes.h"
#include "reader/file_epochs.h"
#include "reader/memory_tier.h"

namespace hubfs {

struct TierStackOptions {
  uint64_t memory_bytes = 256ull << 20;              // ReaderOptions::memory_cache_bytes
  uint64_t max_deferred_write_bytes = 256ull << 20;  // ReaderOptions::max_deferred_write_bytes
  // The deferred writer waits until nothing was read (nor asked of the shared tier) for this long.
  // Its nice value alone did not keep it off the reader's CPU: it ran whenever the loaders waited
  // on memcached (docs/constants.md, deferred_write_quiet), and the other processes of
  // the read (memcached, the reading application) are not ranked below it. Reads count, not only
  // lookups: a stream's read-ahead has claimed its last blocks while the reader still consumes.
  std::chrono::milliseconds deferred_write_quiet{50};
};

class TierStack {
 public:
  using PostFn = DeferredWrites::PostFn;
  // Blocks (index, bytes) of one file found below memory, to be served: into memory, the file's
  // hash, their waiters released (BlockReader::complete_batch).
  using Serve = std::function<void(const std::vector<std::pair<uint64_t, BlockBytes>>&)>;

  // disk and shared may be null. disk_work runs fallback writes (the reader's disk workers).
  // writer: where the deferred writes' pump runs; null: a thread of its own from `env`, at low
  // priority (tests pass one that keeps the task and drive deferred().run_due() themselves).
  // Time (the deferred writes' quiet period) is env's.
  TierStack(Env& env, std::unique_ptr<BlockTier> disk, std::unique_ptr<BlockTier> shared, TierStackOptions options,
            PostFn disk_work, PostFn writer = nullptr);
  ~TierStack();  // shutdown()
  TierStack(const TierStack&) = delete;
  TierStack& operator=(const TierStack&) = delete;

  MemoryTier& memory() { return memory_; }
  const MemoryTier& memory() const { return memory_; }
  bool has_disk() const { return disk_ != nullptr; }
  bool has_shared() const { return shared_ != nullptr; }
  // The files' content epochs (how many times each failed its hash).
  FileEpochs& epochs() { return epochs_; }
  const FileEpochs& epochs() const { return epochs_; }

  // Looks for the blocks (ascending, of one file, for a read of `epoch`) below memory: the disk
  // cache first (each hit served as it is read), then the shared tier in one lookup by
  // `deadline` (the hits served together, then queued for the disk cache). Returns the indices
  // neither holds (all of them while the file's epoch is not `epoch` or it is being cleaned).
  // from_shared (may be null): set when the shared tier served any.
  std::vector<uint64_t> fill_from_lower(const std::vector<BlockId>& ids, uint64_t epoch, const Deadline& deadline,
                                        const Serve& serve, bool* from_shared = nullptr);
  // The block from the disk cache alone, not served (a warm stream's read-ahead, which must never
  // reach the network); nothing while the file's epoch is not `epoch` or it is being cleaned.
  std::optional<BlockBytes> disk_copy(const BlockId& id, uint64_t epoch);
  // Blocks the Hub sent for a read of `epoch`, about to be released to their waiters (and so
  // evictable from memory) before store_fetched writes them: until then the tiers below memory
  // serve them from here. Call before the waiters go; store_fetched ends it. A no-op without disk.
  void expect_writes(std::string_view cache_id, uint64_t epoch,
                     const std::vector<std::pair<uint64_t, BlockBytes>>& blocks);
  // Blocks the Hub sent for a read of `epoch` (skipped where !served[i]): offered to the shared
  // tier, then written to the disk cache, on this thread; not once the file's epoch moved.
  void store_fetched(std::string_view cache_id, uint64_t epoch, const std::vector<std::pair<uint64_t, BlockBytes>>& blocks,
                     const std::vector<bool>& served);
  // The file's bytes of `epoch` failed their hash: drops its blocks (`size` bytes in blocks of
  // `block_size`) from the memory namespace `memory_id` and, when `epoch` is the file's current
  // one, moves the epoch and drops them from the disk cache and the shared tier (see FileEpochs;
  // a failure of an older epoch left nothing below memory to clean).
  void drop_failed_file(std::string_view memory_id, std::string_view cache_id, uint64_t epoch, uint64_t size,
                        uint32_t block_size);
  // A read happened (the deferred writer waits for a pause). Cheap; a no-op without a shared tier.
  void note_activity() {
    if (shared_) deferred_.note_activity();
  }
  // Runs the deferred writes still waiting, then joins the writer. Idempotent. Call once nothing
  // else (the reader's disk workers) can hand it blocks.
  void shutdown();

  uint64_t disk_hits() const { return disk_hits_.load(); }
  // Blocks waiting for their disk write (expect_writes, deferred promotions), and of the disk
  // hits those served from there.
  size_t writes_waiting() const;
  // Waits until none of these blocks of `cache_id` waits for its disk write (expect_writes until
  // store_fetched, a deferred promotion until it ran; written or skipped, as a full disk skips
  // it), or until `deadline`; true when none does. A block not waiting (never fetched here, or
  // on disk already) returns at once. For a process that fetches blocks for others, who read
  // them from the disk cache: a training loop's planner releases a frame's in-flight markers
  // when this returns (h5chunk.FrameDataset.plan; it polled the disk before, 1-10 ms apart).
  bool wait_written(std::string_view cache_id, const std::vector<uint64_t>& indices, const Deadline& deadline);
  uint64_t hits_before_write() const { return hits_before_write_.load(); }
  // How long each disk hit took to read (one per disk_hits), and each block asked of the shared
  // tier (the lookup's time, once per block asked).
  LatencySnapshot disk_latency() const { return disk_latency_.snapshot(); }
  LatencySnapshot shared_latency() const { return shared_latency_.snapshot(); }
  uint64_t deferred_writes() const { return deferred_.deferred(); }
  DeferredWrites& deferred() { return deferred_; }

 private:
  // Writes a served block of a read of `epoch` to the disk cache, unless the file's epoch moved.
  void write_back(const BlockId& id, const BlockBytes& bytes, uint64_t epoch);
  // A block from the shared tier, to the disk cache later (skipped if its file failed its hash).
  void promote_to_disk(const BlockId& id, const BlockBytes& bytes, uint64_t epoch);
  // The blocks on their way to disk (expect_writes): one being written, or of an old epoch, is
  // looked up by epoch; `done` removes it once its write landed (or was skipped).
  static std::string writing_key(std::string_view cache_id, uint64_t index);
  void add_writing(std::string_view cache_id, uint64_t index, const BlockBytes& bytes, uint64_t epoch);
  std::optional<BlockBytes> find_writing(const BlockId& id, uint64_t epoch) const;
  void done_writing(std::string_view cache_id, uint64_t index, const BlockBytes& bytes);

  MemoryTier memory_;
  const std::unique_ptr<BlockTier> disk_;
  const std::unique_ptr<BlockTier> shared_;
  const PostFn disk_work_;
  FileEpochs epochs_;
  std::atomic<uint64_t> disk_hits_{0};
  mutable std::atomic<uint64_t> hits_before_write_{0};
  struct Writing {
    BlockBytes bytes;
    uint64_t epoch = 0;
  };
  // A wait_written under way: how many of its blocks still wait for their write. Woken alone,
  // when the last of them is written: one wake per wait (a condition variable shared by every
  // waiter woke a training loop's 16 plan threads at each of its ~1,100 block writes an epoch).
  struct WriteWait {
    std::condition_variable cv;
    size_t left = 0;
  };
  mutable std::mutex writing_mu_;  // a leaf: guards writing_ and write_waits_
  std::unordered_map<std::string, Writing> writing_;  // by writing_key
  std::unordered_multimap<std::string, WriteWait*> write_waits_;  // by writing_key: the waits on it
  const MonotonicClock& latency_clock_;  // the Env's: what the latency histograms read
  LatencyHistogram disk_latency_;
  LatencyHistogram shared_latency_;
  std::unique_ptr<Executor> writer_;  // the deferred writer's one thread (unless one was given)
  DeferredWrites deferred_;            // after writer_: its pump runs there
};

}  // namespace hubfs
