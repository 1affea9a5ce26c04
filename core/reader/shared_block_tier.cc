#include "reader/shared_block_tier.h"

namespace hubfs {

std::optional<BlockBytes> SharedBlockTier::get(const BlockId& id) {
  return std::move(get_many({id}, Deadline::never()).front());
}

std::vector<std::optional<BlockBytes>> SharedBlockTier::get_many(const std::vector<BlockId>& ids,
                                                                 const Deadline& deadline) {
  std::vector<std::optional<BlockBytes>> out(ids.size());
  if (ids.empty()) return out;
  std::vector<std::pair<uint64_t, size_t>> wanted;
  wanted.reserve(ids.size());
  for (const BlockId& id : ids) wanted.emplace_back(id.index, id.length);
  // One file per call (TierStack asks per file): the first id names it.
  auto found = shared_.lookup(std::string(ids.front().cache_id), wanted, deadline);
  for (size_t i = 0; i < ids.size() && i < found.size(); ++i) {
    if (found[i]) out[i] = BlockBytes{std::move(found[i]->value), found[i]->offset, found[i]->length};
  }
  return out;
}

void SharedBlockTier::put(const BlockId& id, const BlockBytes& bytes) {
  shared_.offer(std::string(id.cache_id), id.index, bytes.view());
}

void SharedBlockTier::remove(const BlockId& id) {
  shared_.forget(std::string(id.cache_id), {{id.index, static_cast<size_t>(id.length)}});
}

}  // namespace hubfs
