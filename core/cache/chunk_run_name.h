// The file name of a run of Xet chunks in the chunk cache (xet/chunk_cache.h):
// "<xorb hex>.<first>-<end>", chunks [first, end) of that xorb. A name in the cache directory's
// layout (beside kXetChunkDir, cache/cache_admin.h), so it lives with the cache: `hubfs cache
// info` counts chunks from names alone, and the Xet code above the cache writes and reads them.
#pragma once

#include <cstdint>
#include <cstdio>
#include <limits>
#include <string>

namespace hubfs {

// (first, end) from a run's name; false unless the name is exactly a run's, for any xorb hex
// (`hex` empty) or for that one.
inline bool parse_chunk_run_name(const std::string& name, const std::string& hex, uint32_t* first, uint32_t* end) {
  const size_t dot = name.find('.');
  if (dot == std::string::npos || dot == 0 || (!hex.empty() && name.compare(0, dot, hex) != 0)) return false;
  if (name.find(".tmp") != std::string::npos) return false;  // a put in progress
  unsigned long long a = 0, b = 0;
  char tail = 0;
  if (std::sscanf(name.c_str() + dot + 1, "%llu-%llu%c", &a, &b, &tail) != 2) return false;
  if (a >= b || b > std::numeric_limits<uint32_t>::max()) return false;
  *first = static_cast<uint32_t>(a);
  *end = static_cast<uint32_t>(b);
  return true;
}

}  // namespace hubfs
