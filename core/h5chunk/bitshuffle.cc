// Bitshuffle filter (32008), as bshuf_h5filter reads it. The chunk is cut into blocks of
// block_elems elements (a multiple of 8); each block is bit-transposed, so bit k of byte j of
// every element lands in bit row j*8+k, one bit per element. With compression (cd_values[4]
// = 2 LZ4, 3 zstd) the payload starts with u64 BE total bytes and u32 BE block size in BYTES,
// then each block is a u32 BE compressed size and a raw LZ4 block or a zstd frame. The last
// block is rounded down to a multiple of 8 elements; the (n mod 8) elements left over are
// stored as they are.
#include <lz4.h>
#include <zstd.h>

#include <algorithm>
#include <climits>
#include <cstring>
#include <string>

#include "h5chunk/codecs.h"

#if defined(__SSE2__)
#include <emmintrin.h>
#endif

namespace h5chunk::codec {
namespace {

// The transpose works on groups of 8 elements (8 bits per byte).
constexpr size_t kGroup = 8;
// bshuf_default_block_size: blocks of about 8 KiB (an L1 cache's worth), never under 128
// elements. Must never change: writers that pass block size 0 rely on it.
constexpr size_t kTargetBlockBytes = 8192;
constexpr size_t kMinBlockElems = 128;
constexpr size_t kHeaderBytes = 12;      // u64 total + u32 block bytes
// Compression selector in cd_values[4].
constexpr unsigned kNone = 0, kLz4 = 2, kZstd = 3;

size_t default_block_elems(size_t elem_size) {
  size_t n = kTargetBlockBytes / elem_size / kGroup * kGroup;
  return std::max(n, kMinBlockElems);
}

// Transposes an 8x8 bit matrix held in a u64 (byte r = row r, bit c = column c): three rounds
// of swapping off-diagonal 1x1, 2x2 and 4x4 sub-blocks (Hacker's Delight 7-3). Its own inverse.
inline uint64_t transpose8x8(uint64_t x) {
  uint64_t t = (x ^ (x >> 7)) & 0x00AA00AA00AA00AAull;
  x ^= t ^ (t << 7);
  t = (x ^ (x >> 14)) & 0x0000CCCC0000CCCCull;
  x ^= t ^ (t << 14);
  t = (x ^ (x >> 28)) & 0x00000000F0F0F0F0ull;
  x ^= t ^ (t << 28);
  return x;
}

// Applies transpose8x8 to each of n little-endian u64 words at p, in place.
void transpose_words(uint8_t* p, size_t n) {
  size_t i = 0;
#if defined(__SSE2__)
  // The same three rounds on two words at once: the shifts are per 64-bit lane.
  const __m128i m1 = _mm_set1_epi64x(0x00AA00AA00AA00AAll);
  const __m128i m2 = _mm_set1_epi64x(0x0000CCCC0000CCCCll);
  const __m128i m3 = _mm_set1_epi64x(0x00000000F0F0F0F0ll);
  for (; i + 2 <= n; i += 2) {
    __m128i x = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p + 8 * i));
    __m128i t = _mm_and_si128(_mm_xor_si128(x, _mm_srli_epi64(x, 7)), m1);
    x = _mm_xor_si128(x, _mm_xor_si128(t, _mm_slli_epi64(t, 7)));
    t = _mm_and_si128(_mm_xor_si128(x, _mm_srli_epi64(x, 14)), m2);
    x = _mm_xor_si128(x, _mm_xor_si128(t, _mm_slli_epi64(t, 14)));
    t = _mm_and_si128(_mm_xor_si128(x, _mm_srli_epi64(x, 28)), m3);
    x = _mm_xor_si128(x, _mm_xor_si128(t, _mm_slli_epi64(t, 28)));
    _mm_storeu_si128(reinterpret_cast<__m128i*>(p + 8 * i), x);
  }
#endif
  for (; i < n; ++i) {
    uint64_t x;
    std::memcpy(&x, p + 8 * i, 8);  // the layout is little-endian, as on every x86
    x = transpose8x8(x);
    std::memcpy(p + 8 * i, &x, 8);
  }
}

std::string bitshuffle_block_error(size_t block, const std::string& what) {
  return "bitshuffle: block " + std::to_string(block) + " " + what;
}

// Decompresses one block of `bytes` plain bytes; Ok only if it yields exactly that many.
Status decompress_block(unsigned compression, ZSTD_DCtx_s* ctx, size_t block, const uint8_t* in,
                        size_t in_size, uint8_t* out, size_t bytes) {
  if (compression == kLz4) {
    if (in_size > static_cast<size_t>(INT_MAX) || bytes > static_cast<size_t>(INT_MAX)) {
      return hubfs::Corrupt(bitshuffle_block_error(block, "is too large for LZ4"));
    }
    int got = LZ4_decompress_safe(reinterpret_cast<const char*>(in), reinterpret_cast<char*>(out),
                                  static_cast<int>(in_size), static_cast<int>(bytes));
    if (got < 0) return hubfs::Corrupt(bitshuffle_block_error(block, "is not valid LZ4"));
    if (static_cast<size_t>(got) != bytes) {
      return hubfs::Corrupt(
          bitshuffle_block_error(block, "decoded " + std::to_string(got) + " bytes, expected " + std::to_string(bytes)));
    }
    return Status::Ok();
  }
  size_t got = ZSTD_decompressDCtx(ctx, out, bytes, in, in_size);
  if (ZSTD_isError(got))
    return hubfs::Corrupt(bitshuffle_block_error(block, std::string("zstd: ") + ZSTD_getErrorName(got)));
  if (got != bytes) {
    return hubfs::Corrupt(
        bitshuffle_block_error(block, "decoded " + std::to_string(got) + " bytes, expected " + std::to_string(bytes)));
  }
  return Status::Ok();
}

// Elements in the block starting at element `start`: full blocks, then the rest rounded down
// to a whole group (0 once only leftovers remain).
size_t block_elems_at(size_t start, size_t n, size_t block_elems) {
  size_t count = std::min(n - start, block_elems);
  return count - count % kGroup;
}

}  // namespace

void bit_untranspose(const uint8_t* in, uint8_t* out, size_t n_elems, size_t elem_size, uint8_t* tmp) {
  // Three passes over the block (8 KiB by default, so all in L1), each a fast primitive:
  //  1. for every element byte j, gather byte g of its 8 bit rows into word g (a byte
  //     unshuffle of size 8 over those rows): word g now holds an 8x8 bit matrix of
  //     8 elements x 8 bits;
  //  2. transpose each word: byte m becomes byte j of element 8g+m, so tmp holds byte plane j
  //     of every element, plane after plane (the byte-shuffled form);
  //  3. byte-unshuffle the planes into elements.
  size_t row = n_elems / kGroup;  // bytes per bit row
  size_t plane = kGroup * row;    // bytes per element-byte plane (= n_elems rounded to 8)
  for (size_t j = 0; j < elem_size; ++j) unshuffle(in + j * plane, tmp + j * plane, plane, kGroup);
  transpose_words(tmp, elem_size * row);
  unshuffle(tmp, out, elem_size * plane, elem_size);
}

void bit_transpose(const uint8_t* in, uint8_t* out, size_t n_elems, size_t elem_size) {
  size_t row = n_elems / kGroup;
  for (size_t g = 0; g < row; ++g) {
    const uint8_t* src = in + g * kGroup * elem_size;
    for (size_t j = 0; j < elem_size; ++j) {
      uint64_t x = 0;
      for (size_t m = 0; m < kGroup; ++m) x |= uint64_t{src[m * elem_size + j]} << (8 * m);
      x = transpose8x8(x);
      uint8_t* dst = out + j * kGroup * row + g;
      for (size_t k = 0; k < kGroup; ++k) dst[k * row] = static_cast<uint8_t>(x >> (8 * k));
    }
  }
}

Result<size_t> bitshuffle_decode(ZSTD_DCtx_s* ctx, std::vector<uint8_t>& block_buffer,
                                 const std::vector<unsigned>& cd_values, size_t elem_size, const uint8_t* in,
                                 size_t in_size, Target out) {
  // cd_values: [filter major, filter minor, elem size, block elems, compression, zstd level].
  size_t elem = cd_values.size() > 2 ? cd_values[2] : elem_size;
  size_t block_elems = cd_values.size() > 3 ? cd_values[3] : 0;
  unsigned compression = cd_values.size() > 4 ? cd_values[4] : kNone;
  if (elem == 0) return hubfs::Corrupt("bitshuffle: element size 0");
  if (compression != kNone && compression != kLz4 && compression != kZstd) {
    return hubfs::Unsupported("bitshuffle: unknown compression " + std::to_string(compression));
  }

  uint64_t total = in_size;
  size_t pos = 0;
  if (compression != kNone) {
    if (in_size < kHeaderBytes) {
      return hubfs::Corrupt("bitshuffle: " + std::to_string(in_size) +
                            " bytes is shorter than the 12-byte header");
    }
    total = load_be64(in);
    // The header's block size (in bytes) overrides cd_values, as the filter does.
    block_elems = load_be32(in + 8) / elem;
    pos = kHeaderBytes;
  }
  if (Status st = check_announced_size("bitshuffle", total, out); !st.ok()) return st;
  if (total % elem) {
    return hubfs::Corrupt("bitshuffle: " + std::to_string(total) + " bytes is not a whole number of " +
                          std::to_string(elem) + "-byte elements");
  }
  if (block_elems == 0) block_elems = default_block_elems(elem);
  if (block_elems % kGroup) {
    return hubfs::Corrupt("bitshuffle: block of " + std::to_string(block_elems) +
                          " elements is not a multiple of 8");
  }

  size_t n = static_cast<size_t>(total) / elem;
  size_t block = 0;
  size_t start = 0;
  for (size_t count; start < n && (count = block_elems_at(start, n, block_elems)) > 0;
       start += count, ++block) {
    size_t bytes = count * elem;
    uint8_t* dst = out.data + start * elem;
    // One buffer, two halves: the decompressed block, then the untranspose's temporary.
    if (block_buffer.size() < 2 * bytes) block_buffer.resize(2 * bytes);
    uint8_t* decompressed = block_buffer.data();
    uint8_t* tmp = block_buffer.data() + bytes;
    if (compression == kNone) {
      // Uncompressed: the blocks are contiguous, exactly as long as their plain form.
      bit_untranspose(in + pos, dst, count, elem, tmp);
      pos += bytes;
      continue;
    }
    auto framed = next_framed_block(in, in_size, pos, "bitshuffle", block);
    if (!framed.ok()) return framed.status();
    const size_t compressed = *framed;
    if (Status st = decompress_block(compression, ctx, block, in + pos, compressed, decompressed, bytes);
        !st.ok()) {
      return st;
    }
    bit_untranspose(decompressed, dst, count, elem, tmp);
    pos += compressed;
  }
  // What is left are the (n mod 8) elements no block covered, stored raw.
  size_t leftover = (n - start) * elem;
  if (in_size - pos != leftover) {
    return hubfs::Corrupt("bitshuffle: " + std::to_string(in_size - pos) +
                          " bytes after the last block, expected " + std::to_string(leftover));
  }
  if (leftover) std::memcpy(out.data + start * elem, in + pos, leftover);
  return static_cast<size_t>(total);
}

}  // namespace h5chunk::codec
