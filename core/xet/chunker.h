// Xet's content-defined chunking (docs/xet.md; xet-core xet_data/src/deduplication/chunking.rs,
// the gear hash of the rust-gearhash crate): a chunk ends after the first byte, at least
// kMinChunkSize into the chunk, where the rolling hash h = (h << 1) + kGearTable[byte] has its
// top 16 bits zero, or at kMaxChunkSize. The same bytes cut the same way anywhere, so a file
// edited in a few places shares all its other chunks with the previous revision.
//
// A Chunker is one stream's state: not thread-safe, cheap to create.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <vector>

namespace hubfs::xet {

// The chunk size the mask aims at: 16 mask bits, a boundary once per 2^16 bytes on average.
inline constexpr size_t kTargetChunkSize = 64 * 1024;
// xet-core: target / MINIMUM_CHUNK_DIVISOR (8), keeping tiny chunks (and their per-chunk
// overhead) out.
inline constexpr size_t kMinChunkSize = kTargetChunkSize / 8;
// xet-core: target * MAXIMUM_CHUNK_MULTIPLIER (2); the xorb chunk header also refuses more.
inline constexpr size_t kMaxChunkSize = kTargetChunkSize * 2;
// (target - 1) shifted to the top bits: the low bits of a gear hash depend on too few bytes.
inline constexpr uint64_t kGearMask = 0xFFFF000000000000ull;

extern const uint64_t kGearTable[256];

class Chunker {
 public:
  // Consumes the next len bytes of the stream and appends to *chunk_lengths the length of every
  // chunk that ends within them (a chunk may have begun in an earlier call).
  void update(const void* data, size_t len, std::vector<size_t>* chunk_lengths);
  // Ends the stream: the length of the final, shorter chunk if bytes are pending, and resets.
  std::optional<size_t> finish();
  // Bytes given since the last chunk ended.
  size_t pending() const { return pending_; }

 private:
  uint64_t hash_ = 0;
  size_t pending_ = 0;
};

// The chunk end offsets of a whole buffer (the last one is len; none for an empty buffer).
std::vector<size_t> chunk_boundaries(const void* data, size_t len);

}  // namespace hubfs::xet
