// The reader's side of the shared block tier (shared/shared_store.h): looks blocks up by content id
// and index, checks every value's envelope and MAC (a bad one, truncated or forged included, is
// counted corrupt and is a miss, never served), and offers blocks fetched from the Hub to the
// tier (asynchronously: the tier queues them).
// BlockReader calls it where a block missed the local disk cache and would go to the Hub.
#pragma once

#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "shared/shared_store.h"

namespace hubfs {

struct SharedBlocksStats {
  uint64_t hits = 0;        // blocks served from the tier (each a Hub fetch saved)
  uint64_t misses = 0;      // blocks looked up and not there (or the node did not answer)
  uint64_t corrupt = 0;     // values that failed their envelope or MAC check, or had the wrong size
                            // (ignored; overwritten later)
  uint64_t bytes_read = 0;  // block bytes served from the tier
  uint64_t offered = 0;     // blocks fetched from the Hub and handed to the tier to store
  SharedStoreStats tier;     // the engine's own counters
};

// A block found in the tier: a slice of the value that carried it (no copy).
struct SharedHit {
  std::shared_ptr<const std::string> value;
  size_t offset = 0;
  size_t length = 0;
};

class SharedBlocks {
 public:
  // tier must outlive this object. `key` authenticates every value written and read.
  SharedBlocks(SharedStore& tier, uint32_t block_size, SharedStoreKey key);

  // For each (index, length) of content `cache_id`, the block if the tier holds a good one;
  // returns by `deadline` (what has not arrived by then is a miss).
  std::vector<std::optional<SharedHit>> lookup(const std::string& cache_id,
                                                 const std::vector<std::pair<uint64_t, size_t>>& blocks,
                                                 const Deadline& deadline);
  // Queues the block for storing; returns at once.
  void offer(const std::string& cache_id, uint64_t index, std::string_view block);
  // Queues deletes of these blocks (their file failed its hash: they may be the bad bytes).
  void forget(const std::string& cache_id, const std::vector<std::pair<uint64_t, size_t>>& blocks);

  SharedBlocksStats stats() const;
  std::string describe() const { return tier_.describe(); }

 private:
  std::string key(const std::string& cache_id, uint64_t index) const;

  SharedStore& tier_;
  const uint32_t block_size_;
  const SharedStoreKey key_;
  mutable std::mutex mu_;
  SharedBlocksStats stats_;
};

}  // namespace hubfs
