// Decoded Xet chunks on disk, keyed by xorb hash and chunk index (docs/xet.md, "The chunk
// cache"): a chunk fetched for any file or revision is never fetched again while it is here.
// Files sharing chunks (a revision that changed 1%, fine-tunes of one base) then cost only
// their new chunks.
//
// Only chunks whose hash was checked go in (put() takes the hash the caller verified), and a
// chunk comes out only if its bytes still hash to the stored hash: a damaged file is a miss,
// removed, never served. Layout: <dir>/<first 2 hex of the xorb>/<xorb hex>.<index>, each file
// the 32 raw hash bytes then the content; written to a temporary name and renamed, so a reader
// never sees half a chunk. No eviction yet: the directory grows with what was read (`hubfs
// cache clear` removes it with the rest of the cache).
//
// Thread-safe (each call touches its own file; counters are atomic).
#pragma once

#include <atomic>
#include <cstdint>
#include <optional>
#include <string>

#include "xet/chunker.h"
#include "xet/hash.h"

namespace hubfs::xet {

struct ChunkCacheStats {
  uint64_t hits = 0;
  uint64_t hit_bytes = 0;  // content bytes served from here instead of the network
  uint64_t misses = 0;
  uint64_t stored = 0;
  uint64_t damaged = 0;  // files that no longer matched their hash (removed)
};

class ChunkCache {
 public:
  // dir is created on first put().
  explicit ChunkCache(std::string dir);

  // The chunk's content if present and intact; *hash (if given) gets its hash.
  std::optional<std::string> get(const MerkleHash& xorb, uint32_t index, MerkleHash* hash = nullptr);
  // Whether a file for it exists (no read, no check): to decide if a term can skip the network.
  bool contains(const MerkleHash& xorb, uint32_t index) const;
  // Stores a chunk whose content hashes to `hash` (the caller checked it). Failures are ignored
  // (a cache, not a store of record).
  void put(const MerkleHash& xorb, uint32_t index, const MerkleHash& hash, const char* data, size_t len);

  ChunkCacheStats stats() const;
  const std::string& dir() const { return dir_; }

 private:
  std::string path_of(const MerkleHash& xorb, uint32_t index) const;

  std::string dir_;
  std::atomic<uint64_t> hits_{0}, hit_bytes_{0}, misses_{0}, stored_{0}, damaged_{0};
};

}  // namespace hubfs::xet
