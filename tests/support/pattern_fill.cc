// The per-byte loops of support/pattern.h, apart from the rest: tests/CMakeLists.txt compiles
// this file optimized and without sanitizer instrumentation in every build (at -O0 under TSan,
// filling a 10 MiB test file took ~1 s, and checking the bytes an integration test streams cost
// seconds per suite). It is a pure function of its arguments writing into the caller's buffer,
// so there is nothing in it to sanitize; and it instantiates no template and uses no library
// type, so no uninstrumented copy of an inline function can stand in for the instrumented one
// the rest of the program links.
#include <string.h>

#include "support/pattern.h"

namespace hubfs::testing {
namespace {

// splitmix64: cheap, and every 8-byte word is computed on its own (random access).
uint64_t word(uint64_t seed, uint64_t index) {
  uint64_t z = seed * 0x9E3779B97F4A7C15ull + index * 0xD1B54A32D192ED03ull + 0x632BE59BD9B4E019ull;
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

}  // namespace

void fill_pattern(uint64_t seed, uint64_t offset, size_t n, char* out) {
  size_t i = 0;
  while (i < n) {
    const uint64_t o = offset + i;
    const uint64_t w = word(seed, o / 8);
    const size_t in_word = o % 8;
    size_t take = 8 - in_word;
    if (take > n - i) take = n - i;
    for (size_t k = 0; k < take; ++k) out[i + k] = static_cast<char>(w >> (8 * (in_word + k)));
    i += take;
  }
}

size_t count_pattern_mismatches(uint64_t seed, uint64_t offset, const char* data, size_t n, uint64_t* first) {
  enum : size_t { kSlice = 1 << 16 };
  char want[kSlice];
  size_t wrong = 0;
  for (size_t done = 0; done < n; done += kSlice) {
    const size_t len = n - done < kSlice ? n - done : kSlice;
    fill_pattern(seed, offset + done, len, want);
    if (memcmp(want, data + done, len) == 0) continue;
    for (size_t k = 0; k < len; ++k) {
      if (want[k] != data[done + k]) {
        if (wrong++ == 0 && first) *first = offset + done + k;
      }
    }
  }
  return wrong;
}

}  // namespace hubfs::testing
