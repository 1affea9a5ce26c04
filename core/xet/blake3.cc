// BLAKE3 from its specification: section numbers refer to the BLAKE3 paper (blake3.pdf).
#include "xet/blake3.h"

#include <algorithm>
#include <atomic>
#include <cstring>

#if defined(__x86_64__)
#include <immintrin.h>
#endif

namespace hubfs::xet {
namespace {

// §2.1: the IV is SHA-256's.
constexpr std::array<uint32_t, 8> kIv = {0x6A09E667, 0xBB67AE85, 0x3C6EF372, 0xA54FF53A,
                                         0x510E527F, 0x9B05688C, 0x1F83D9AB, 0x5BE0CD19};

// §2.1 domain flags.
constexpr uint32_t kChunkStart = 1u << 0;
constexpr uint32_t kChunkEnd = 1u << 1;
constexpr uint32_t kParent = 1u << 2;
constexpr uint32_t kRoot = 1u << 3;
constexpr uint32_t kKeyedHash = 1u << 4;

// §2.2: the message permutation applied between rounds. The schedule for round r is the
// permutation applied r times, precomputed so a round indexes the original block directly.
constexpr std::array<uint8_t, 16> kPermutation = {2, 6, 3, 10, 7, 0, 4, 13, 1, 11, 12, 5, 9, 14, 15, 8};
struct Schedule {
  uint8_t idx[7][16];
};
constexpr Schedule make_schedule() {
  Schedule s{};
  for (int i = 0; i < 16; ++i) s.idx[0][i] = static_cast<uint8_t>(i);
  for (int r = 1; r < 7; ++r)
    for (int i = 0; i < 16; ++i) s.idx[r][i] = s.idx[r - 1][kPermutation[i]];
  return s;
}
constexpr Schedule kSchedule = make_schedule();

inline uint32_t rotr(uint32_t x, int n) { return (x >> n) | (x << (32 - n)); }

inline uint32_t load_le32(const uint8_t* p) {
  return uint32_t(p[0]) | (uint32_t(p[1]) << 8) | (uint32_t(p[2]) << 16) | (uint32_t(p[3]) << 24);
}

inline void store_le32(uint8_t* p, uint32_t v) {
  p[0] = uint8_t(v);
  p[1] = uint8_t(v >> 8);
  p[2] = uint8_t(v >> 16);
  p[3] = uint8_t(v >> 24);
}

inline void load_block(const uint8_t* p, uint32_t m[16]) {
  for (int i = 0; i < 16; ++i) m[i] = load_le32(p + 4 * i);
}

#define HUBFS_B3_G(a, b, c, d, x, y) \
  do {                               \
    a = a + b + (x);                 \
    d = rotr(d ^ a, 16);             \
    c = c + d;                       \
    b = rotr(b ^ c, 12);             \
    a = a + b + (y);                 \
    d = rotr(d ^ a, 8);              \
    c = c + d;                       \
    b = rotr(b ^ c, 7);              \
  } while (0)

// One round (§2.2) with round R's message schedule resolved at compile time: indexing the block
// through a runtime schedule table made the whole hash several times slower (docs/benchmarks.md,
// BLAKE3).
template <int R>
inline void round(uint32_t v[16], const uint32_t m[16]) {
  constexpr const uint8_t* s = kSchedule.idx[R];
  HUBFS_B3_G(v[0], v[4], v[8], v[12], m[s[0]], m[s[1]]);
  HUBFS_B3_G(v[1], v[5], v[9], v[13], m[s[2]], m[s[3]]);
  HUBFS_B3_G(v[2], v[6], v[10], v[14], m[s[4]], m[s[5]]);
  HUBFS_B3_G(v[3], v[7], v[11], v[15], m[s[6]], m[s[7]]);
  HUBFS_B3_G(v[0], v[5], v[10], v[15], m[s[8]], m[s[9]]);
  HUBFS_B3_G(v[1], v[6], v[11], v[12], m[s[10]], m[s[11]]);
  HUBFS_B3_G(v[2], v[7], v[8], v[13], m[s[12]], m[s[13]]);
  HUBFS_B3_G(v[3], v[4], v[9], v[14], m[s[14]], m[s[15]]);
}

// §2.2 the compression function; writes the full 16-word state (the first 8 words are the new
// chaining value; all 16 are extended output).
void compress(const uint32_t cv[8], const uint32_t m[16], uint64_t counter, uint32_t block_len, uint32_t flags,
              uint32_t out[16]) {
  uint32_t v[16] = {cv[0],  cv[1],  cv[2],  cv[3],  cv[4],           cv[5],                 cv[6],     cv[7],
                    kIv[0], kIv[1], kIv[2], kIv[3], uint32_t(counter), uint32_t(counter >> 32), block_len, flags};
  round<0>(v, m);
  round<1>(v, m);
  round<2>(v, m);
  round<3>(v, m);
  round<4>(v, m);
  round<5>(v, m);
  round<6>(v, m);
  for (int i = 0; i < 8; ++i) {
    out[i] = v[i] ^ v[i + 8];
    out[i + 8] = v[i + 8] ^ cv[i];
  }
}
#undef HUBFS_B3_G

// Only the chaining value (first 8 words) of a compression.
inline void compress_cv(uint32_t cv[8], const uint32_t m[16], uint64_t counter, uint32_t block_len,
                        uint32_t flags) {
  uint32_t out[16];
  compress(cv, m, counter, block_len, flags, out);
  std::memcpy(cv, out, 8 * sizeof(uint32_t));
}

#if defined(__x86_64__)
// Eight whole 1 KiB chunks at once, one per 32-bit lane of AVX2 registers: the same compression
// as whole_chunk_cv, lane j hashing chunk `counter + j` at in + j * 1024 (the layout of the
// reference implementation's hash_many, written here from the spec's §2.2 and §5.3: chunks are
// independent until their chaining values are merged, so they can be compressed side by side).
// Verifying a Xet read hashes every byte it serves, and the scalar path was a large share of a
// read's CPU (docs/benchmarks.md, BLAKE3).
__attribute__((target("avx2"))) inline __m256i rot16(__m256i x) {
  const __m256i m = _mm256_set_epi8(13, 12, 15, 14, 9, 8, 11, 10, 5, 4, 7, 6, 1, 0, 3, 2, 13, 12, 15, 14, 9, 8, 11,
                                    10, 5, 4, 7, 6, 1, 0, 3, 2);
  return _mm256_shuffle_epi8(x, m);
}
__attribute__((target("avx2"))) inline __m256i rot8(__m256i x) {
  const __m256i m = _mm256_set_epi8(12, 15, 14, 13, 8, 11, 10, 9, 4, 7, 6, 5, 0, 3, 2, 1, 12, 15, 14, 13, 8, 11, 10,
                                    9, 4, 7, 6, 5, 0, 3, 2, 1);
  return _mm256_shuffle_epi8(x, m);
}
__attribute__((target("avx2"))) inline __m256i rot12(__m256i x) {
  return _mm256_or_si256(_mm256_srli_epi32(x, 12), _mm256_slli_epi32(x, 20));
}
__attribute__((target("avx2"))) inline __m256i rot7(__m256i x) {
  return _mm256_or_si256(_mm256_srli_epi32(x, 7), _mm256_slli_epi32(x, 25));
}
__attribute__((target("avx2"))) inline void g8(__m256i& a, __m256i& b, __m256i& c, __m256i& d, __m256i x,
                                               __m256i y) {
  a = _mm256_add_epi32(_mm256_add_epi32(a, b), x);
  d = rot16(_mm256_xor_si256(d, a));
  c = _mm256_add_epi32(c, d);
  b = rot12(_mm256_xor_si256(b, c));
  a = _mm256_add_epi32(_mm256_add_epi32(a, b), y);
  d = rot8(_mm256_xor_si256(d, a));
  c = _mm256_add_epi32(c, d);
  b = rot7(_mm256_xor_si256(b, c));
}
// r[j] holds 8 words of lane j; afterwards r[i] holds word i of every lane.
__attribute__((target("avx2"))) inline void transpose8(__m256i r[8]) {
  const __m256i t0 = _mm256_unpacklo_epi32(r[0], r[1]), t1 = _mm256_unpackhi_epi32(r[0], r[1]);
  const __m256i t2 = _mm256_unpacklo_epi32(r[2], r[3]), t3 = _mm256_unpackhi_epi32(r[2], r[3]);
  const __m256i t4 = _mm256_unpacklo_epi32(r[4], r[5]), t5 = _mm256_unpackhi_epi32(r[4], r[5]);
  const __m256i t6 = _mm256_unpacklo_epi32(r[6], r[7]), t7 = _mm256_unpackhi_epi32(r[6], r[7]);
  const __m256i u0 = _mm256_unpacklo_epi64(t0, t2), u1 = _mm256_unpackhi_epi64(t0, t2);
  const __m256i u2 = _mm256_unpacklo_epi64(t1, t3), u3 = _mm256_unpackhi_epi64(t1, t3);
  const __m256i u4 = _mm256_unpacklo_epi64(t4, t6), u5 = _mm256_unpackhi_epi64(t4, t6);
  const __m256i u6 = _mm256_unpacklo_epi64(t5, t7), u7 = _mm256_unpackhi_epi64(t5, t7);
  r[0] = _mm256_permute2x128_si256(u0, u4, 0x20);
  r[1] = _mm256_permute2x128_si256(u1, u5, 0x20);
  r[2] = _mm256_permute2x128_si256(u2, u6, 0x20);
  r[3] = _mm256_permute2x128_si256(u3, u7, 0x20);
  r[4] = _mm256_permute2x128_si256(u0, u4, 0x31);
  r[5] = _mm256_permute2x128_si256(u1, u5, 0x31);
  r[6] = _mm256_permute2x128_si256(u2, u6, 0x31);
  r[7] = _mm256_permute2x128_si256(u3, u7, 0x31);
}
template <int R>
__attribute__((target("avx2"))) inline void round8(__m256i v[16], const __m256i m[16]) {
  constexpr const uint8_t* s = kSchedule.idx[R];
  g8(v[0], v[4], v[8], v[12], m[s[0]], m[s[1]]);
  g8(v[1], v[5], v[9], v[13], m[s[2]], m[s[3]]);
  g8(v[2], v[6], v[10], v[14], m[s[4]], m[s[5]]);
  g8(v[3], v[7], v[11], v[15], m[s[6]], m[s[7]]);
  g8(v[0], v[5], v[10], v[15], m[s[8]], m[s[9]]);
  g8(v[1], v[6], v[11], v[12], m[s[10]], m[s[11]]);
  g8(v[2], v[7], v[8], v[13], m[s[12]], m[s[13]]);
  g8(v[3], v[4], v[9], v[14], m[s[14]], m[s[15]]);
}
// `lanes` (1 to 8) chunks; the lanes past them hash chunk 0 again and are not stored.
__attribute__((target("avx2"))) void eight_chunk_cvs(const uint8_t* in, int lanes, const std::array<uint32_t, 8>& key,
                                                      uint64_t counter, uint32_t flags,
                                                      std::array<uint32_t, 8> out[8]) {
  __m256i cv[8];
  for (int i = 0; i < 8; ++i) cv[i] = _mm256_set1_epi32(static_cast<int>(key[i]));
  alignas(32) uint32_t lo[8], hi[8];
  for (int j = 0; j < 8; ++j) {
    lo[j] = uint32_t(counter + j);
    hi[j] = uint32_t((counter + j) >> 32);
  }
  const __m256i counter_lo = _mm256_load_si256(reinterpret_cast<const __m256i*>(lo));
  const __m256i counter_hi = _mm256_load_si256(reinterpret_cast<const __m256i*>(hi));
  constexpr size_t kBlocks = Blake3::kChunkLen / Blake3::kBlockLen;
  for (size_t b = 0; b < kBlocks; ++b) {
    // Word i of lane j is word i of block b of chunk j (little-endian, as x86 loads it).
    __m256i m[16];
    for (int half = 0; half < 2; ++half) {
      for (int j = 0; j < 8; ++j) {
        const size_t chunk = j < lanes ? j : 0;
        m[8 * half + j] = _mm256_loadu_si256(
            reinterpret_cast<const __m256i*>(in + chunk * Blake3::kChunkLen + b * Blake3::kBlockLen + 32 * half));
      }
      transpose8(m + 8 * half);
    }
    uint32_t f = flags;
    if (b == 0) f |= kChunkStart;
    if (b == kBlocks - 1) f |= kChunkEnd;
    __m256i v[16] = {cv[0],
                     cv[1],
                     cv[2],
                     cv[3],
                     cv[4],
                     cv[5],
                     cv[6],
                     cv[7],
                     _mm256_set1_epi32(static_cast<int>(kIv[0])),
                     _mm256_set1_epi32(static_cast<int>(kIv[1])),
                     _mm256_set1_epi32(static_cast<int>(kIv[2])),
                     _mm256_set1_epi32(static_cast<int>(kIv[3])),
                     counter_lo,
                     counter_hi,
                     _mm256_set1_epi32(static_cast<int>(Blake3::kBlockLen)),
                     _mm256_set1_epi32(static_cast<int>(f))};
    round8<0>(v, m);
    round8<1>(v, m);
    round8<2>(v, m);
    round8<3>(v, m);
    round8<4>(v, m);
    round8<5>(v, m);
    round8<6>(v, m);
    for (int i = 0; i < 8; ++i) cv[i] = _mm256_xor_si256(v[i], v[i + 8]);
  }
  alignas(32) uint32_t words[8][8];
  for (int i = 0; i < 8; ++i) _mm256_store_si256(reinterpret_cast<__m256i*>(words[i]), cv[i]);
  for (int j = 0; j < lanes; ++j)
    for (int i = 0; i < 8; ++i) out[j][i] = words[i][j];
}

bool cpu_has_avx2() {
  static const bool has = __builtin_cpu_supports("avx2");
  return has;
}

// GCC 12's avx512fintrin.h builds the unmasked forms of these intrinsics on an
// _mm512_undefined_epi32() source and then warns that it is uninitialized (GCC PR 105593, fixed
// in GCC 13): a false alarm in the header, silenced for these functions only.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"

// Sixteen chunks at once in the lanes of AVX-512 registers: the eight-way path twice as wide,
// with the rotations one instruction each (vprord) where AVX2 needs a shift, a shift and an or
// for two of the four: at eight lanes the chunk hashes were still a visible share of a Xet read's
// CPU (docs/benchmarks.md, BLAKE3).
__attribute__((target("avx512f"))) inline void g16(__m512i& a, __m512i& b, __m512i& c, __m512i& d, __m512i x,
                                                   __m512i y) {
  a = _mm512_add_epi32(_mm512_add_epi32(a, b), x);
  d = _mm512_ror_epi32(_mm512_xor_si512(d, a), 16);
  c = _mm512_add_epi32(c, d);
  b = _mm512_ror_epi32(_mm512_xor_si512(b, c), 12);
  a = _mm512_add_epi32(_mm512_add_epi32(a, b), y);
  d = _mm512_ror_epi32(_mm512_xor_si512(d, a), 8);
  c = _mm512_add_epi32(c, d);
  b = _mm512_ror_epi32(_mm512_xor_si512(b, c), 7);
}

// r[j] holds the 16 words of lane j's block; afterwards r[w] holds word w of every lane, lane j
// in element j. Three stages: 32-bit and 64-bit interleaves inside each 128-bit quarter (as
// transpose8) leave, for rows 4k..4k+3, words c, c+4, c+8, c+12 in quarters 0..3 of b[4k+c];
// then each word's four quarters are gathered from the four row groups with two 128-bit
// shuffles.
__attribute__((target("avx512f"))) inline void transpose16(__m512i r[16]) {
  __m512i a[16], b[16];
  for (int k = 0; k < 8; ++k) {
    a[2 * k] = _mm512_unpacklo_epi32(r[2 * k], r[2 * k + 1]);
    a[2 * k + 1] = _mm512_unpackhi_epi32(r[2 * k], r[2 * k + 1]);
  }
  for (int k = 0; k < 4; ++k) {
    b[4 * k + 0] = _mm512_unpacklo_epi64(a[4 * k], a[4 * k + 2]);
    b[4 * k + 1] = _mm512_unpackhi_epi64(a[4 * k], a[4 * k + 2]);
    b[4 * k + 2] = _mm512_unpacklo_epi64(a[4 * k + 1], a[4 * k + 3]);
    b[4 * k + 3] = _mm512_unpackhi_epi64(a[4 * k + 1], a[4 * k + 3]);
  }
  for (int c = 0; c < 4; ++c) {
    // Quarter q of b[4L + c] is word c + 4q of rows 4L..4L+3: it goes to quarter L of r[c + 4q].
    const __m512i p0 = _mm512_shuffle_i32x4(b[c], b[4 + c], 0x44);       // B0.0 B0.1 B1.0 B1.1
    const __m512i p1 = _mm512_shuffle_i32x4(b[c], b[4 + c], 0xEE);       // B0.2 B0.3 B1.2 B1.3
    const __m512i p2 = _mm512_shuffle_i32x4(b[8 + c], b[12 + c], 0x44);  // B2.0 B2.1 B3.0 B3.1
    const __m512i p3 = _mm512_shuffle_i32x4(b[8 + c], b[12 + c], 0xEE);  // B2.2 B2.3 B3.2 B3.3
    r[c + 0] = _mm512_shuffle_i32x4(p0, p2, 0x88);   // B0.0 B1.0 B2.0 B3.0
    r[c + 4] = _mm512_shuffle_i32x4(p0, p2, 0xDD);   // B0.1 B1.1 B2.1 B3.1
    r[c + 8] = _mm512_shuffle_i32x4(p1, p3, 0x88);   // B0.2 ...
    r[c + 12] = _mm512_shuffle_i32x4(p1, p3, 0xDD);  // B0.3 ...
  }
}

template <int R>
__attribute__((target("avx512f"))) inline void round16(__m512i v[16], const __m512i m[16]) {
  constexpr const uint8_t* s = kSchedule.idx[R];
  g16(v[0], v[4], v[8], v[12], m[s[0]], m[s[1]]);
  g16(v[1], v[5], v[9], v[13], m[s[2]], m[s[3]]);
  g16(v[2], v[6], v[10], v[14], m[s[4]], m[s[5]]);
  g16(v[3], v[7], v[11], v[15], m[s[6]], m[s[7]]);
  g16(v[0], v[5], v[10], v[15], m[s[8]], m[s[9]]);
  g16(v[1], v[6], v[11], v[12], m[s[10]], m[s[11]]);
  g16(v[2], v[7], v[8], v[13], m[s[12]], m[s[13]]);
  g16(v[3], v[4], v[9], v[14], m[s[14]], m[s[15]]);
}

// `lanes` (1 to 16) chunks, as eight_chunk_cvs.
__attribute__((target("avx512f"))) void sixteen_chunk_cvs(const uint8_t* in, int lanes,
                                                          const std::array<uint32_t, 8>& key, uint64_t counter,
                                                          uint32_t flags, std::array<uint32_t, 8> out[16]) {
  __m512i cv[8];
  for (int i = 0; i < 8; ++i) cv[i] = _mm512_set1_epi32(static_cast<int>(key[i]));
  alignas(64) uint32_t lo[16], hi[16];
  for (int j = 0; j < 16; ++j) {
    lo[j] = uint32_t(counter + j);
    hi[j] = uint32_t((counter + j) >> 32);
  }
  const __m512i counter_lo = _mm512_load_si512(lo);
  const __m512i counter_hi = _mm512_load_si512(hi);
  constexpr size_t kBlocks = Blake3::kChunkLen / Blake3::kBlockLen;
  for (size_t b = 0; b < kBlocks; ++b) {
    __m512i m[16];
    for (int j = 0; j < 16; ++j) {
      const size_t chunk = j < lanes ? j : 0;
      m[j] = _mm512_loadu_si512(in + chunk * Blake3::kChunkLen + b * Blake3::kBlockLen);
    }
    transpose16(m);
    uint32_t f = flags;
    if (b == 0) f |= kChunkStart;
    if (b == kBlocks - 1) f |= kChunkEnd;
    __m512i v[16] = {cv[0],
                     cv[1],
                     cv[2],
                     cv[3],
                     cv[4],
                     cv[5],
                     cv[6],
                     cv[7],
                     _mm512_set1_epi32(static_cast<int>(kIv[0])),
                     _mm512_set1_epi32(static_cast<int>(kIv[1])),
                     _mm512_set1_epi32(static_cast<int>(kIv[2])),
                     _mm512_set1_epi32(static_cast<int>(kIv[3])),
                     counter_lo,
                     counter_hi,
                     _mm512_set1_epi32(static_cast<int>(Blake3::kBlockLen)),
                     _mm512_set1_epi32(static_cast<int>(f))};
    round16<0>(v, m);
    round16<1>(v, m);
    round16<2>(v, m);
    round16<3>(v, m);
    round16<4>(v, m);
    round16<5>(v, m);
    round16<6>(v, m);
    for (int i = 0; i < 8; ++i) cv[i] = _mm512_xor_si512(v[i], v[i + 8]);
  }
  alignas(64) uint32_t words[8][16];
  for (int i = 0; i < 8; ++i) _mm512_store_si512(words[i], cv[i]);
  for (int j = 0; j < lanes; ++j)
    for (int i = 0; i < 8; ++i) out[j][i] = words[i][j];
}

#pragma GCC diagnostic pop

bool cpu_has_avx512() {
  static const bool has = __builtin_cpu_supports("avx512f");
  return has;
}
#endif

std::atomic<bool> g_simd_allowed{true};
std::atomic<bool> g_avx512_allowed{true};

bool use_eight_way() {
#if defined(__x86_64__)
  return g_simd_allowed.load(std::memory_order_relaxed) && cpu_has_avx2();
#else
  return false;
#endif
}

bool use_sixteen_way() {
#if defined(__x86_64__)
  return g_simd_allowed.load(std::memory_order_relaxed) && g_avx512_allowed.load(std::memory_order_relaxed) &&
         cpu_has_avx512();
#else
  return false;
#endif
}

}  // namespace

void Blake3::allow_simd(bool allowed) { g_simd_allowed.store(allowed); }
void Blake3::allow_avx512(bool allowed) { g_avx512_allowed.store(allowed); }
bool Blake3::has_avx512() {
#if defined(__x86_64__)
  return cpu_has_avx512();
#else
  return false;
#endif
}

// The inputs of the compression that produces a node's output; the root node's output is
// expanded by counting the counter up (§2.6, extended output).
struct Blake3::Output {
  std::array<uint32_t, 8> input_cv;
  uint32_t block[16];
  uint64_t counter;
  uint32_t block_len;
  uint32_t flags;

  std::array<uint32_t, 8> chaining_value() const {
    uint32_t out[16];
    compress(input_cv.data(), block, counter, block_len, flags, out);
    std::array<uint32_t, 8> cv;
    std::memcpy(cv.data(), out, sizeof(cv));
    return cv;
  }

  void root_bytes(uint8_t* dst, size_t len) const {
    uint64_t output_block_counter = 0;
    while (len > 0) {
      uint32_t words[16];
      compress(input_cv.data(), block, output_block_counter, block_len, flags | kRoot, words);
      uint8_t bytes[64];
      for (int i = 0; i < 16; ++i) store_le32(bytes + 4 * i, words[i]);
      const size_t take = std::min(len, sizeof(bytes));
      std::memcpy(dst, bytes, take);
      dst += take;
      len -= take;
      ++output_block_counter;
    }
  }
};

Blake3::Blake3() : key_words_(kIv), flags_(0) { reset_chunk(0); }

Blake3::Blake3(const Blake3Key& key) : flags_(kKeyedHash) {
  for (int i = 0; i < 8; ++i) key_words_[i] = load_le32(key.data() + 4 * i);
  reset_chunk(0);
}

void Blake3::reset_chunk(uint64_t chunk_counter) {
  chunk_.cv = key_words_;
  chunk_.chunk_counter = chunk_counter;
  chunk_.block_len = 0;
  chunk_.blocks_compressed = 0;
}

void Blake3::chunk_update(const uint8_t* data, size_t len) {
  while (len > 0) {
    // A full buffered block is compressed only once more input shows it is not the chunk's last.
    if (chunk_.block_len == kBlockLen) {
      uint32_t m[16];
      load_block(chunk_.block.data(), m);
      const uint32_t start = chunk_.blocks_compressed == 0 ? kChunkStart : 0;
      compress_cv(chunk_.cv.data(), m, chunk_.chunk_counter, kBlockLen, flags_ | start);
      ++chunk_.blocks_compressed;
      chunk_.block_len = 0;
    }
    // Whole blocks with more input after them go straight from the caller's buffer.
    while (chunk_.block_len == 0 && len > kBlockLen) {
      uint32_t m[16];
      load_block(data, m);
      const uint32_t start = chunk_.blocks_compressed == 0 ? kChunkStart : 0;
      compress_cv(chunk_.cv.data(), m, chunk_.chunk_counter, kBlockLen, flags_ | start);
      ++chunk_.blocks_compressed;
      data += kBlockLen;
      len -= kBlockLen;
    }
    const size_t take = std::min(kBlockLen - chunk_.block_len, len);
    std::memcpy(chunk_.block.data() + chunk_.block_len, data, take);
    chunk_.block_len = static_cast<uint8_t>(chunk_.block_len + take);
    data += take;
    len -= take;
  }
}

Blake3::Output Blake3::chunk_output() const {
  Output o;
  o.input_cv = chunk_.cv;
  // The final block is zero-padded (§2.4); its real length goes in block_len.
  uint8_t padded[kBlockLen] = {};
  std::memcpy(padded, chunk_.block.data(), chunk_.block_len);
  load_block(padded, o.block);
  o.counter = chunk_.chunk_counter;
  o.block_len = chunk_.block_len;
  o.flags = flags_ | kChunkEnd | (chunk_.blocks_compressed == 0 ? kChunkStart : 0);
  return o;
}

std::array<uint32_t, 8> Blake3::whole_chunk_cv(const uint8_t* data, uint64_t chunk_counter) const {
  std::array<uint32_t, 8> cv = key_words_;
  constexpr size_t kBlocks = kChunkLen / kBlockLen;
  for (size_t b = 0; b < kBlocks; ++b) {
    uint32_t m[16];
    load_block(data + b * kBlockLen, m);
    uint32_t f = flags_;
    if (b == 0) f |= kChunkStart;
    if (b == kBlocks - 1) f |= kChunkEnd;
    compress_cv(cv.data(), m, chunk_counter, kBlockLen, f);
  }
  return cv;
}

void Blake3::add_chunk_cv(std::array<uint32_t, 8> cv, uint64_t total_chunks) {
  while ((total_chunks & 1) == 0) {
    cv = parent_output(cv_stack_[--cv_stack_len_], cv, key_words_, flags_).chaining_value();
    total_chunks >>= 1;
  }
  cv_stack_[cv_stack_len_++] = cv;
}

void Blake3::update(const void* data, size_t len) {
  const auto* p = static_cast<const uint8_t*>(data);
  while (len > 0) {
    // A full chunk is finished only once more input shows it is not the root's only chunk.
    if (chunk_.len() == kChunkLen) {
      const auto cv = chunk_output().chaining_value();
      const uint64_t total = chunk_.chunk_counter + 1;
      add_chunk_cv(cv, total);
      reset_chunk(total);
    }
#if defined(__x86_64__)
    // Up to sixteen (AVX-512) or eight (AVX2) whole chunks with more input after them, side by
    // side (a 64 KiB Xet chunk is 3 groups of 16 and one of 15, or 7 of 8 and one of 7, then its
    // last chunk, kept for finalize()).
    if (chunk_.len() == 0 && len > 9 * kChunkLen && use_sixteen_way()) {
      const int lanes = static_cast<int>(std::min<size_t>(16, (len - 1) / kChunkLen));
      std::array<uint32_t, 8> cvs[16];
      sixteen_chunk_cvs(p, lanes, key_words_, chunk_.chunk_counter, flags_, cvs);
      for (int j = 0; j < lanes; ++j) add_chunk_cv(cvs[j], chunk_.chunk_counter + j + 1);
      reset_chunk(chunk_.chunk_counter + lanes);
      p += lanes * kChunkLen;
      len -= lanes * kChunkLen;
      continue;
    }
    if (chunk_.len() == 0 && len > 2 * kChunkLen && use_eight_way()) {
      const int lanes = static_cast<int>(std::min<size_t>(8, (len - 1) / kChunkLen));
      std::array<uint32_t, 8> cvs[8];
      eight_chunk_cvs(p, lanes, key_words_, chunk_.chunk_counter, flags_, cvs);
      for (int j = 0; j < lanes; ++j) add_chunk_cv(cvs[j], chunk_.chunk_counter + j + 1);
      reset_chunk(chunk_.chunk_counter + lanes);
      p += lanes * kChunkLen;
      len -= lanes * kChunkLen;
      continue;
    }
#endif
    if (chunk_.len() == 0 && len > kChunkLen) {
      const auto cv = whole_chunk_cv(p, chunk_.chunk_counter);
      const uint64_t total = chunk_.chunk_counter + 1;
      add_chunk_cv(cv, total);
      reset_chunk(total);
      p += kChunkLen;
      len -= kChunkLen;
      continue;
    }
    const size_t take = std::min(kChunkLen - chunk_.len(), len);
    chunk_update(p, take);
    p += take;
    len -= take;
  }
}

void Blake3::finalize(uint8_t* out, size_t out_len) const {
  // Merge the right edge of the tree from the current chunk up to the root (§2.5).
  Output o = chunk_output();
  for (size_t i = cv_stack_len_; i > 0; --i) {
    o = parent_output(cv_stack_[i - 1], o.chaining_value(), key_words_, flags_);
  }
  o.root_bytes(out, out_len);
}

Blake3Digest Blake3::finalize() const {
  Blake3Digest d;
  finalize(d.data(), d.size());
  return d;
}

Blake3Digest Blake3::hash(const void* data, size_t len) {
  Blake3 h;
  h.update(data, len);
  return h.finalize();
}

Blake3Digest Blake3::keyed_hash(const Blake3Key& key, const void* data, size_t len) {
  Blake3 h(key);
  h.update(data, len);
  return h.finalize();
}

Blake3::Output Blake3::parent_output(const std::array<uint32_t, 8>& left, const std::array<uint32_t, 8>& right,
                                     const std::array<uint32_t, 8>& key, uint32_t flags) {
  Blake3::Output o;
  o.input_cv = key;
  std::memcpy(o.block, left.data(), 32);
  std::memcpy(o.block + 8, right.data(), 32);
  o.counter = 0;
  o.block_len = Blake3::kBlockLen;
  o.flags = flags | kParent;
  return o;
}

}  // namespace hubfs::xet
