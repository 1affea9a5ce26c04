#include "cache/crc32c.h"

#include <array>
#include <bit>
#include <cstring>

#if defined(__x86_64__)
#include <nmmintrin.h>
#define HUBFS_CRC32C_X86 1
#endif

namespace hubfs::crc32c {
namespace {

// The Castagnoli polynomial, bit-reversed (CRC-32C processes bits least significant first).
constexpr uint32_t kPoly = 0x82F63B78u;

using ByteTables = std::array<std::array<uint32_t, 256>, 8>;

// Slicing-by-8 tables: kTables[k][b] is the CRC register contribution of byte b followed by
// k zero bytes, so eight bytes fold into the register with eight lookups.
constexpr ByteTables make_byte_tables() {
  ByteTables t{};
  for (uint32_t b = 0; b < 256; ++b) {
    uint32_t reg = b;
    for (int bit = 0; bit < 8; ++bit) reg = (reg >> 1) ^ ((reg & 1) ? kPoly : 0);
    t[0][b] = reg;
  }
  for (int k = 1; k < 8; ++k)
    for (uint32_t b = 0; b < 256; ++b) t[k][b] = (t[k - 1][b] >> 8) ^ t[0][t[k - 1][b] & 0xFF];
  return t;
}
constexpr ByteTables kTables = make_byte_tables();

inline uint64_t load_le64(const uint8_t* p) {
  uint64_t v;
  std::memcpy(&v, p, 8);
  if constexpr (std::endian::native == std::endian::big) v = __builtin_bswap64(v);
  return v;
}

// The register is a linear function of (register, data) over GF(2), so "append n zero bytes"
// is a 32x32 bit matrix. We keep it as 32 columns: column i is the image of register bit i.
using Matrix = std::array<uint32_t, 32>;

constexpr uint32_t apply(const Matrix& m, uint32_t v) {
  uint32_t out = 0;
  for (int i = 0; v != 0; ++i, v >>= 1)
    if (v & 1) out ^= m[i];
  return out;
}
constexpr Matrix compose(const Matrix& a, const Matrix& b) {  // a after b
  Matrix out{};
  for (int i = 0; i < 32; ++i) out[i] = apply(a, b[i]);
  return out;
}
constexpr Matrix zero_bytes_operator(uint64_t bytes) {
  Matrix step{};  // one zero bit: shift right, fold the polynomial in if bit 0 was set
  step[0] = kPoly;
  for (int i = 1; i < 32; ++i) step[i] = 1u << (i - 1);
  Matrix result{};
  for (int i = 0; i < 32; ++i) result[i] = 1u << i;  // identity
  for (uint64_t bits = bytes * 8; bits != 0; bits >>= 1) {
    if (bits & 1) result = compose(step, result);
    step = compose(step, step);
  }
  return result;
}

// The zero-append operator as four byte-indexed tables, so shifting a register costs 4 lookups.
using ShiftTables = std::array<std::array<uint32_t, 256>, 4>;
constexpr ShiftTables make_shift_tables(uint64_t bytes) {
  const Matrix op = zero_bytes_operator(bytes);
  ShiftTables t{};
  for (uint32_t b = 0; b < 256; ++b)
    for (int k = 0; k < 4; ++k) t[k][b] = apply(op, b << (8 * k));
  return t;
}

#if HUBFS_CRC32C_X86
// Stream lengths for the 3-way interleave. The crc32 instruction has a latency of 3 cycles and
// a throughput of 1 per cycle, so three independent streams keep it busy; each stream must be
// long enough that the 2 shifts joining them (8 lookups each) are noise. 8 KiB strides cover
// big blocks; 256 B strides keep the tail of a block (and small blocks) on three streams too.
constexpr size_t kLong = 8192;
constexpr size_t kShort = 256;
constexpr ShiftTables kShiftLong = make_shift_tables(kLong);
constexpr ShiftTables kShiftShort = make_shift_tables(kShort);

inline uint32_t shift(const ShiftTables& t, uint32_t reg) {
  return t[0][reg & 0xFF] ^ t[1][(reg >> 8) & 0xFF] ^ t[2][(reg >> 16) & 0xFF] ^ t[3][reg >> 24];
}

template <size_t kStride>
__attribute__((target("sse4.2"))) inline const uint8_t* three_way(const uint8_t* p, size_t& n,
                                                                  uint64_t& reg,
                                                                  const ShiftTables& t) {
  while (n >= 3 * kStride) {
    uint64_t c0 = reg, c1 = 0, c2 = 0;  // c1, c2 start from zero and are folded in linearly
    const uint8_t* end = p + kStride;
    do {
      c0 = _mm_crc32_u64(c0, load_le64(p));
      c1 = _mm_crc32_u64(c1, load_le64(p + kStride));
      c2 = _mm_crc32_u64(c2, load_le64(p + 2 * kStride));
      p += 8;
    } while (p < end);
    uint32_t joined = shift(t, static_cast<uint32_t>(c0)) ^ static_cast<uint32_t>(c1);
    joined = shift(t, joined) ^ static_cast<uint32_t>(c2);
    reg = joined;
    p += 2 * kStride;
    n -= 3 * kStride;
  }
  return p;
}

__attribute__((target("sse4.2"))) uint32_t extend_sse42(uint32_t crc, const void* data, size_t n) {
  const uint8_t* p = static_cast<const uint8_t*>(data);
  uint64_t reg = ~crc;
  p = three_way<kLong>(p, n, reg, kShiftLong);
  p = three_way<kShort>(p, n, reg, kShiftShort);
  for (; n >= 8; n -= 8, p += 8) reg = _mm_crc32_u64(reg, load_le64(p));
  uint32_t reg32 = static_cast<uint32_t>(reg);
  for (; n > 0; --n, ++p) reg32 = _mm_crc32_u8(reg32, *p);
  return ~reg32;
}

bool detect_sse42() {
  __builtin_cpu_init();
  return __builtin_cpu_supports("sse4.2");
}
#endif

using ExtendFn = uint32_t (*)(uint32_t, const void*, size_t);
ExtendFn choose() {
#if HUBFS_CRC32C_X86
  if (detect_sse42()) return extend_sse42;
#endif
  return extend_portable;
}
// Chosen once: the CPU does not change under a running process.
const ExtendFn kExtend = choose();

}  // namespace

uint32_t extend_portable(uint32_t crc, const void* data, size_t n) {
  const uint8_t* p = static_cast<const uint8_t*>(data);
  uint32_t reg = ~crc;
  for (; n >= 8; n -= 8, p += 8) {
    uint64_t w = load_le64(p) ^ reg;
    reg = kTables[7][w & 0xFF] ^ kTables[6][(w >> 8) & 0xFF] ^ kTables[5][(w >> 16) & 0xFF] ^
          kTables[4][(w >> 24) & 0xFF] ^ kTables[3][(w >> 32) & 0xFF] ^
          kTables[2][(w >> 40) & 0xFF] ^ kTables[1][(w >> 48) & 0xFF] ^ kTables[0][w >> 56];
  }
  for (; n > 0; --n, ++p) reg = (reg >> 8) ^ kTables[0][(reg ^ *p) & 0xFF];
  return ~reg;
}

uint32_t extend(uint32_t crc, const void* data, size_t n) {
  // kExtend is initialised dynamically; a call from another translation unit's static
  // initialiser could run first, so fall back to choosing on the spot.
  ExtendFn fn = kExtend ? kExtend : choose();
  return fn(crc, data, n);
}

bool accelerated() { return choose() != extend_portable; }

}  // namespace hubfs::crc32c
