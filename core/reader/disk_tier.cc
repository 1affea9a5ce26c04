#include "reader/disk_tier.h"

#include "cache/block_file.h"
#include "cache/cache_disk.h"

namespace hubfs {

size_t DiskTier::file_slot_bytes(size_t block_size) {
  constexpr size_t align = CacheDisk::kDirectReadAlign;
  return (block_file::kHeaderSize + block_size + align - 1) / align * align;
}

std::optional<BlockBytes> DiskTier::get(const BlockId& id) {
  if (pool_ && id.length == block_size_) {
    if (auto loan = pool_->take()) {
      // A miss gives the slot back as the loan goes.
      if (!cache_.get_file_into(id.cache_id, id.index, loan->data, pool_->slot_bytes(), id.length))
        return std::nullopt;
      return BlockBytes{std::move(loan->bytes), block_file::kHeaderSize, static_cast<size_t>(id.length)};
    }
  }
  std::optional<std::string> hit = cache_.get(id.cache_id, id.index);
  if (!hit || hit->size() != id.length) return std::nullopt;
  auto buffer = std::make_shared<const std::string>(std::move(*hit));
  return BlockBytes{buffer, 0, buffer->size()};
}

void DiskTier::put(const BlockId& id, const BlockBytes& bytes) { cache_.put(id.cache_id, id.index, bytes.view()); }

void DiskTier::remove(const BlockId& id) { cache_.remove(id.cache_id, id.index); }

}  // namespace hubfs
