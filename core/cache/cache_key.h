// A file's key in the block cache (BlockCache, the index, the shared tier): its content id, and
// for blocks of a size other than the default that size as a suffix ("sha256:<hex>.bs262144").
// Block indices only mean something for one block size, so each size has a key space of its own;
// the tools that walk the cache (`hubfs cache info / clear / verify`) read the size back from the
// key. Content ids ("sha256:<hex>", "oid:<hex>") hold no '.', so the suffix is unambiguous.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

namespace hubfs {

// A mount's block (the largest read the kernel sends it): keys of this size carry no suffix.
inline constexpr uint32_t kDefaultBlockSize = 1u << 20;

// The key of a file with this content id read in blocks of `block_size`.
std::string cache_key(std::string_view content_id, uint32_t block_size);

struct ParsedCacheKey {
  std::string content_id;
  uint32_t block_size = kDefaultBlockSize;
};
// cache_key's inverse: a key without a well-formed suffix is a content id of the default size.
ParsedCacheKey parse_cache_key(std::string_view key);

}  // namespace hubfs
