// The shared tier (other machines' blocks, through reader/shared_blocks.h) as a BlockTier: a
// lookup checks every value's envelope and MAC (a bad one is a miss), a put offers the block
// (queued: returns at once), a remove queues its delete.
#pragma once

#include "reader/block_tier.h"
#include "reader/shared_blocks.h"

namespace hubfs {

class SharedBlockTier final : public BlockTier {
 public:
  // shared must outlive this tier.
  explicit SharedBlockTier(SharedBlocks& shared) : shared_(shared) {}

  // One lookup without a deadline of its own (the tier keeps to its own budget).
  std::optional<BlockBytes> get(const BlockId& id) override;
  // One lookup for all of them, within `deadline` and the tier's own budget: a slow node costs
  // a Hub fetch, never the read.
  std::vector<std::optional<BlockBytes>> get_many(const std::vector<BlockId>& ids, const Deadline& deadline) override;
  void put(const BlockId& id, const BlockBytes& bytes) override;
  void remove(const BlockId& id) override;

 private:
  SharedBlocks& shared_;
};

}  // namespace hubfs
