// The memory tier: recently used blocks, least recently used evicted first, within a byte budget
// accounted by the buffers its blocks pin (a block cut from an 8 MiB coalesced response keeps all
// 8 MiB alive, and is counted so), each buffer counted once however many of its blocks are kept.
//
// Holds only blocks that were served (right length, not of a file that failed its hash since):
// get() does not check lengths. Thread-safe; one mutex, a leaf (see BlockReader's lock order).
#pragma once

#include <cstdint>
#include <list>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "reader/block_tier.h"

namespace hubfs {

class MemoryTier final : public BlockTier {
 public:
  explicit MemoryTier(uint64_t budget_bytes) : budget_(budget_bytes) {}

  // A hit counts as a use (moves the block to the front).
  std::optional<BlockBytes> get(const BlockId& id) override;
  // Evicts least recently used blocks until the pinned bytes fit the budget (the newest block
  // stays even if it alone is larger).
  void put(const BlockId& id, const BlockBytes& bytes) override;
  void remove(const BlockId& id) override;

  // get() without counting as a use: hashing a block or checking for it is not reading it.
  std::optional<BlockBytes> peek(const BlockId& id) const;
  // The file's blocks held now (one pass over the tier: for the start of a hash).
  struct Held {
    uint64_t index = 0;
    bool source_checked = false;  // BlockBytes::source_checked
  };
  std::vector<Held> blocks_of(std::string_view cache_id) const;
  // Bytes the tier pins (whole buffers).
  uint64_t pinned_bytes() const;

 private:
  using Lru = std::list<std::pair<std::string, BlockBytes>>;  // most recent first
  static std::string key(const BlockId& id);
  void erase_locked(std::unordered_map<std::string, Lru::iterator>::iterator it);

  const uint64_t budget_;
  mutable std::mutex mu_;  // a leaf: nothing is called while it is held
  Lru lru_;
  std::unordered_map<std::string, Lru::iterator> index_;
  std::unordered_map<const void*, size_t> buffer_refs_;  // blocks in lru_ per buffer
  uint64_t pinned_ = 0;
};

}  // namespace hubfs
