#include "reader/shared_blocks.h"

namespace hubfs {

SharedBlocks::SharedBlocks(SharedStore& tier, uint32_t block_size, SharedStoreKey key)
    : tier_(tier), block_size_(block_size), key_(std::move(key)) {}

std::string SharedBlocks::key(const std::string& cache_id, uint64_t index) const {
  return SharedBlockKey{key_.id(), cache_id, block_size_, index}.str();
}

std::vector<std::optional<SharedHit>> SharedBlocks::lookup(
    const std::string& cache_id, const std::vector<std::pair<uint64_t, size_t>>& blocks, const Deadline& deadline) {
  std::vector<SharedGet> gets;
  gets.reserve(blocks.size());
  for (const auto& [index, length] : blocks) {
    std::string k = key(cache_id, index);
    const size_t size = shared_envelope::size(k, length);
    gets.push_back(SharedGet{std::move(k), size});
  }
  auto values = tier_.get(gets, deadline);
  std::vector<std::optional<SharedHit>> out(blocks.size());
  uint64_t hits = 0, misses = 0, corrupt = 0, bytes = 0;
  for (size_t i = 0; i < blocks.size(); ++i) {
    if (i >= values.size() || !values[i]) {
      ++misses;
      continue;
    }
    // A value of the wrong size (truncated) fails here too.
    auto block = shared_envelope::unwrap(key_, gets[i].key, blocks[i].second, *values[i]);
    if (!block) {
      // Never served (nor written to disk): the caller fetches it from the Hub and offers it,
      // overwriting this value.
      ++corrupt;
      ++misses;
      continue;
    }
    ++hits;
    bytes += block->size();
    const size_t offset = static_cast<size_t>(block->data() - values[i]->data());
    const size_t length = block->size();
    out[i] = SharedHit{std::make_shared<const std::string>(std::move(*values[i])), offset, length};
  }
  std::lock_guard<std::mutex> lock(mu_);
  stats_.hits += hits;
  stats_.misses += misses;
  stats_.corrupt += corrupt;
  stats_.bytes_read += bytes;
  return out;
}

void SharedBlocks::offer(const std::string& cache_id, uint64_t index, std::string_view block) {
  std::string k = key(cache_id, index);
  std::string value = shared_envelope::wrap(key_, k, block);
  {
    std::lock_guard<std::mutex> lock(mu_);
    ++stats_.offered;
  }
  tier_.put(std::move(k), std::move(value));
}

void SharedBlocks::forget(const std::string& cache_id, const std::vector<std::pair<uint64_t, size_t>>& blocks) {
  for (const auto& [index, length] : blocks) {
    std::string k = key(cache_id, index);
    const size_t size = shared_envelope::size(k, length);
    tier_.remove(std::move(k), size);
  }
}

SharedBlocksStats SharedBlocks::stats() const {
  SharedBlocksStats s;
  {
    std::lock_guard<std::mutex> lock(mu_);
    s = stats_;
  }
  s.tier = tier_.stats();
  return s;
}

}  // namespace hubfs
