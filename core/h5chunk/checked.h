// Overflow-checked arithmetic for sizes that come from files. Every element count, byte count
// and chunk-grid size h5chunk derives from a dataset's shape goes through these: a corrupt or
// hostile file can declare dimensions up to 2^64 - 1, and a product that silently wraps turns
// "refuse this" into a small buffer that H5Dread or a decoder then overruns.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace h5chunk {

// a * b, or nullopt when it does not fit in 64 bits.
inline std::optional<uint64_t> checked_mul(uint64_t a, uint64_t b) {
  uint64_t r;
  if (__builtin_mul_overflow(a, b, &r)) return std::nullopt;
  return r;
}

// a + b, or nullopt when it does not fit in 64 bits.
inline std::optional<uint64_t> checked_add(uint64_t a, uint64_t b) {
  uint64_t r;
  if (__builtin_add_overflow(a, b, &r)) return std::nullopt;
  return r;
}

// scale * dims[0] * dims[1] * ..., or nullopt when any partial product overflows. A zero
// dimension makes the product 0 whatever the others are (numpy agrees: shape (0, 2^63) is an
// empty array, not an overflow).
template <typename T>
std::optional<uint64_t> checked_product(const std::vector<T>& dims, uint64_t scale = 1) {
  for (T d : dims) {
    if (d == 0) return 0;
  }
  uint64_t n = scale;
  for (T d : dims) {
    auto next = checked_mul(n, static_cast<uint64_t>(d));
    if (!next) return std::nullopt;
    n = *next;
  }
  return n;
}

// ceil(a / b) without the a + b - 1 that overflows near 2^64; 0 when b is 0.
inline uint64_t ceil_div(uint64_t a, uint64_t b) { return b == 0 ? 0 : a / b + (a % b != 0); }

}  // namespace h5chunk
