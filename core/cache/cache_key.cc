#include "cache/cache_key.h"

#include <charconv>

namespace hubfs {

namespace {
constexpr std::string_view kSuffix = ".bs";
}  // namespace

std::string cache_key(std::string_view content_id, uint32_t block_size) {
  std::string key(content_id);
  if (block_size != kDefaultBlockSize) key += std::string(kSuffix) + std::to_string(block_size);
  return key;
}

ParsedCacheKey parse_cache_key(std::string_view key) {
  const size_t at = key.rfind(kSuffix);
  if (at == std::string_view::npos) return {std::string(key), kDefaultBlockSize};
  const std::string_view digits = key.substr(at + kSuffix.size());
  uint32_t size = 0;
  const auto [end, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), size);
  // Exactly digits, no sign or leading zero, and a size a reader takes: else not a suffix.
  if (ec != std::errc() || end != digits.data() + digits.size() || digits.empty() || digits[0] == '0' || size == 0 ||
      size == kDefaultBlockSize || (size & (size - 1)) != 0)
    return {std::string(key), kDefaultBlockSize};
  return {std::string(key.substr(0, at)), size};
}

}  // namespace hubfs
