// Blocks whose read timed out moments ago. The kernel answers a failed read-ahead by reading the
// page again at once, which would otherwise wait a second --read-timeout ("a read fails after
// twice --read-timeout"): for kTimedOutMemory after a read of a block timed out, reads of it fail
// at once, unless the block was served since (a late answer). A read that comes later tries the
// network afresh. Thread-safe (RecentKeys' leaf mutex); time from the Env, for tests.
#pragma once

#include <chrono>
#include <string>

#include "common/status.h"
#include "reader/memory_tier.h"
#include "reader/recent_keys.h"

namespace hubfs {

class TimedOutBlocks {
 public:
  // A few seconds cover the kernel's immediate retry.
  static constexpr std::chrono::seconds kTimedOutMemory{5};
  // Blocks remembered; past this the table is cleared (a bound, not an LRU: timeouts are rare).
  static constexpr size_t kMaxTimedOut = 4096;

  TimedOutBlocks(Env& env, std::chrono::milliseconds read_timeout)
      : read_timeout_(read_timeout), marked_(env, kTimedOutMemory, kMaxTimedOut) {}

  void mark(const std::string& cache_id, uint64_t index) { marked_.mark(key(cache_id, index)); }

  // kTimeout naming the first block of [first, last] that timed out lately and is not in
  // `memory` since; OK otherwise (at once when nothing timed out lately).
  Status check(const std::string& path, const std::string& cache_id, uint64_t first, uint64_t last,
               const MemoryTier& memory) {
    if (marked_.empty()) return Status::Ok();
    for (uint64_t b = first; b <= last; ++b) {
      auto ago = marked_.marked_ago(key(cache_id, b));
      if (!ago) continue;
      if (memory.peek(BlockId{cache_id, b, 0})) {  // served since: try it
        marked_.forget(key(cache_id, b));
        continue;
      }
      return Timeout("reading " + path + ": block " + std::to_string(b) + " was not served within " +
                     std::to_string(read_timeout_.count() / 1000) + " s (--read-timeout) by a read " +
                     std::to_string(ago->count()) + " ms ago; failing at once instead of waiting again (try again later)");
    }
    return Status::Ok();
  }

 private:
  static std::string key(const std::string& cache_id, uint64_t index) { return cache_id + "#" + std::to_string(index); }

  const std::chrono::milliseconds read_timeout_;
  RecentKeys marked_;
};

}  // namespace hubfs
