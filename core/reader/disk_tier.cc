#include "reader/disk_tier.h"

namespace hubfs {

std::optional<BlockBytes> DiskTier::get(const BlockId& id) {
  if (pool_ && id.length == pool_->slot_bytes()) {
    if (auto loan = pool_->take()) {
      // A miss gives the slot back as the loan goes.
      if (!cache_.get_into(id.cache_id, id.index, loan->data, id.length)) return std::nullopt;
      return BlockBytes{std::move(loan->bytes), 0, static_cast<size_t>(id.length)};
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
