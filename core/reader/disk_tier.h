// The disk tier: the local block cache (cache/block_cache.h) as a BlockTier. A block file of the
// wrong length (a file cut short by a writer that crashed between versions of this program, say)
// is not this block: a miss, fetched again. Calls run on the caller's thread and touch the disk.
#pragma once

#include "cache/block_cache.h"
#include "reader/block_tier.h"

namespace hubfs {

class DiskTier final : public BlockTier {
 public:
  // cache must outlive this tier.
  explicit DiskTier(BlockCache& cache) : cache_(cache) {}

  std::optional<BlockBytes> get(const BlockId& id) override;
  void put(const BlockId& id, const BlockBytes& bytes) override;
  void remove(const BlockId& id) override;

 private:
  BlockCache& cache_;
};

}  // namespace hubfs
