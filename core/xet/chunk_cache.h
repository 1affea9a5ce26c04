// Decoded Xet chunks on disk, keyed by xorb hash and chunk index (docs/xet.md, "The chunk
// cache"): a chunk fetched for any file or revision is never fetched again while it is here.
// Files sharing chunks (a revision that changed 1%, fine-tunes of one base) then cost only
// their new chunks.
//
// Only chunks whose hash was checked go in (put() takes the hash the caller verified), and a
// chunk comes out only if its bytes still hash to the stored hash: a damaged file is a miss,
// removed, never served. Layout: <dir>/<first 2 hex of the xorb>/<xorb hex>.<index>, each file
// the 32 raw hash bytes then the content; written to a temporary name and renamed, so a reader
// never sees half a chunk.
//
// Bounded: with max_bytes set, a put() that takes the directory past it evicts the least
// recently used chunks (a hit refreshes its file's mtime) down to 90% of it, so one sweep pays
// for many puts. The sweep lists the directory, which also corrects the running total for what
// other processes sharing the directory stored or removed. One sweep at a time; a put that finds
// one running goes on without waiting.
//
// Thread-safe (each call touches its own file; counters are atomic; sweeps under sweep_mu_, which
// is held across nothing but this directory's own files).
#pragma once

#include <atomic>
#include <cstdint>
#include <mutex>
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
  uint64_t evicted = 0;  // files removed to stay within max_bytes
};

class ChunkCache {
 public:
  // dir is created on first put(). max_bytes: the most its files may take (headers included);
  // 0 for no bound.
  explicit ChunkCache(std::string dir, uint64_t max_bytes = 0);

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
  // Lists the directory, sets bytes_ to what it holds, and if that is over max_bytes_ removes
  // the oldest files (by mtime) down to 90% of it. Called with sweep_mu_ held.
  void sweep();

  std::string dir_;
  const uint64_t max_bytes_;
  std::mutex sweep_mu_;             // one sweep at a time (try_lock: a put never waits for one)
  std::atomic<bool> counted_{false};  // bytes_ was set from a listing at least once
  std::atomic<uint64_t> bytes_{0};  // what the directory holds, as far as this process knows
  std::atomic<uint64_t> hits_{0}, hit_bytes_{0}, misses_{0}, stored_{0}, damaged_{0}, evicted_{0};
};

}  // namespace hubfs::xet
