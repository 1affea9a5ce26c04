#include "reader/memory_tier.h"

#include <charconv>

namespace hubfs {

std::string MemoryTier::key(const BlockId& id) {
  std::string k;
  k.reserve(id.cache_id.size() + 21);
  k.append(id.cache_id);
  k += '#';
  k += std::to_string(id.index);
  return k;
}

void MemoryTier::erase_locked(std::unordered_map<std::string, Lru::iterator>::iterator it) {
  // A buffer's bytes leave the account with the last block that pins it.
  const SharedBytes& buffer = it->second->second.buffer;
  auto ref = buffer_refs_.find(buffer.get());
  if (ref != buffer_refs_.end() && --ref->second == 0) {
    pinned_ -= buffer.size();
    buffer_refs_.erase(ref);
  }
  lru_.erase(it->second);
  index_.erase(it);
}

std::optional<BlockBytes> MemoryTier::get(const BlockId& id) {
  const std::string k = key(id);
  std::lock_guard<std::mutex> lock(mu_);
  auto it = index_.find(k);
  if (it == index_.end()) return std::nullopt;
  lru_.splice(lru_.begin(), lru_, it->second);
  return it->second->second;
}

std::optional<BlockBytes> MemoryTier::peek(const BlockId& id) const {
  const std::string k = key(id);
  std::lock_guard<std::mutex> lock(mu_);
  auto it = index_.find(k);
  if (it == index_.end()) return std::nullopt;
  return it->second->second;
}

void MemoryTier::put(const BlockId& id, const BlockBytes& bytes) {
  std::string k = key(id);
  std::lock_guard<std::mutex> lock(mu_);
  if (auto it = index_.find(k); it != index_.end()) erase_locked(it);
  if (buffer_refs_[bytes.buffer.get()]++ == 0) pinned_ += bytes.buffer->size();
  lru_.emplace_front(k, bytes);
  index_[std::move(k)] = lru_.begin();
  while (pinned_ > budget_ && lru_.size() > 1) erase_locked(index_.find(lru_.back().first));
}

void MemoryTier::remove(const BlockId& id) {
  const std::string k = key(id);
  std::lock_guard<std::mutex> lock(mu_);
  if (auto it = index_.find(k); it != index_.end()) erase_locked(it);
}

std::vector<MemoryTier::Held> MemoryTier::blocks_of(std::string_view cache_id) const {
  std::vector<Held> out;
  std::lock_guard<std::mutex> lock(mu_);
  for (const auto& [k, bytes] : lru_) {
    if (k.size() <= cache_id.size() || k.compare(0, cache_id.size(), cache_id) != 0 || k[cache_id.size()] != '#')
      continue;
    uint64_t b = 0;
    const char* first = k.data() + cache_id.size() + 1;
    auto [end, ec] = std::from_chars(first, k.data() + k.size(), b);
    if (ec == std::errc() && end == k.data() + k.size()) out.push_back(Held{b, bytes.source_checked});
  }
  return out;
}

uint64_t MemoryTier::pinned_bytes() const {
  std::lock_guard<std::mutex> lock(mu_);
  return pinned_;
}

}  // namespace hubfs
