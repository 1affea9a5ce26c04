// BLAKE3, written from its specification (github.com/BLAKE3-team/BLAKE3-specs, blake3.pdf):
// the plain hash and the keyed hash, one-shot or incremental, any input length, any output
// length (extended output). Xet addresses every chunk, xorb and file by keyed BLAKE3 hashes
// (docs/xet.md), and Debian 12 packages no BLAKE3 C library, hence this portable implementation.
//
// Portable C++, no SIMD: one 1 KiB chunk is compressed at a time. Verifying Xet chunks as they
// arrive spreads the work over the worker threads; a Blake3 object itself is not thread-safe
// (one object per thread, or external locking).
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>

namespace hubfs::xet {

using Blake3Key = std::array<uint8_t, 32>;
using Blake3Digest = std::array<uint8_t, 32>;

class Blake3 {
 public:
  // The plain hash.
  Blake3();
  // The keyed hash (the spec's keyed_hash mode: the key replaces the IV, KEYED_HASH flag).
  explicit Blake3(const Blake3Key& key);

  // Appends input. Any split of the input gives the same digest as one call.
  void update(const void* data, size_t len);

  // The 32-byte digest of everything given so far. Does not change the state: more update()
  // calls may follow, and finalize() may be called again.
  Blake3Digest finalize() const;
  // Extended output: the first out_len bytes of the output stream (the first 32 are finalize()).
  void finalize(uint8_t* out, size_t out_len) const;

  static Blake3Digest hash(const void* data, size_t len);
  static Blake3Digest keyed_hash(const Blake3Key& key, const void* data, size_t len);

  // Whether long input may be hashed eight chunks at a time with AVX2 where the CPU has it (the
  // default; the digest is the same). Tests turn it off to compare the two paths.
  static void allow_simd(bool allowed);
  // Within that, whether sixteen chunks at a time with AVX-512 (where the CPU has it) may be
  // used before eight with AVX2 (the default). For tests; has_avx512 says whether it can be.
  static void allow_avx512(bool allowed);
  static bool has_avx512();

  static constexpr size_t kBlockLen = 64;
  static constexpr size_t kChunkLen = 1024;

 private:
  struct Output;
  struct ChunkState {
    std::array<uint32_t, 8> cv;
    uint64_t chunk_counter = 0;
    std::array<uint8_t, kBlockLen> block{};
    uint8_t block_len = 0;
    uint8_t blocks_compressed = 0;
    size_t len() const { return kBlockLen * blocks_compressed + block_len; }
  };

  // §2.5: a parent node's input is its two children's chaining values.
  static Output parent_output(const std::array<uint32_t, 8>& left, const std::array<uint32_t, 8>& right,
                              const std::array<uint32_t, 8>& key, uint32_t flags);

  void reset_chunk(uint64_t chunk_counter);
  void chunk_update(const uint8_t* data, size_t len);
  Output chunk_output() const;
  // Compresses one whole 1 KiB chunk straight from the input (the fast path for long input).
  std::array<uint32_t, 8> whole_chunk_cv(const uint8_t* data, uint64_t chunk_counter) const;
  // Pushes a finished chunk's chaining value, merging completed subtrees (the spec's lazy merge:
  // the number of merges is the number of trailing zero bits of the total chunk count).
  void add_chunk_cv(std::array<uint32_t, 8> cv, uint64_t total_chunks);

  std::array<uint32_t, 8> key_words_;
  uint32_t flags_;
  ChunkState chunk_;
  // 54 entries: enough for 2^54 chunks (2^64 bytes), the spec's maximum input.
  std::array<std::array<uint32_t, 8>, 54> cv_stack_;
  uint8_t cv_stack_len_ = 0;
};

}  // namespace hubfs::xet
