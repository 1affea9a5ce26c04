// The disk tier: the local block cache (cache/block_cache.h) as a BlockTier. A block file of the
// wrong length (a file cut short by a writer that crashed between versions of this program, say)
// is not this block: a miss, fetched again. Calls run on the caller's thread and touch the disk.
#pragma once

#include <cstddef>
#include <memory>

#include "cache/block_cache.h"
#include "reader/block_buffers.h"
#include "reader/block_tier.h"

namespace hubfs {

class DiskTier final : public BlockTier {
 public:
  // cache must outlive this tier. Blocks of exactly block_size bytes are read into memory of a
  // pool of this tier's (reader/block_buffers.h), each as its whole block file (header, then the
  // data the block's bytes point at), in a slot aligned and sized for a direct read
  // (BlockCache::get_file_into); others (a file's short last block, any block size when
  // block_size is 0) into a string of their own. `pool`: the one to use (slots of
  // file_slot_bytes(block_size), shared with the reader's fetches), or null for one of its own.
  explicit DiskTier(BlockCache& cache, size_t block_size = 0, std::shared_ptr<BlockBufferPool> pool = nullptr)
      : cache_(cache), block_size_(block_size),
        pool_(pool         ? std::move(pool)
              : block_size ? BlockBufferPool::create(file_slot_bytes(block_size))
                           : nullptr) {}

  // A slot's size for blocks of block_size bytes: the block file, rounded up to the alignment a
  // direct read needs.
  static size_t file_slot_bytes(size_t block_size);

  std::optional<BlockBytes> get(const BlockId& id) override;
  void put(const BlockId& id, const BlockBytes& bytes) override;
  void remove(const BlockId& id) override;

 private:
  BlockCache& cache_;
  const size_t block_size_;
  const std::shared_ptr<BlockBufferPool> pool_;
};

}  // namespace hubfs
