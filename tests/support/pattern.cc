#include "support/pattern.h"

#include <cstring>
#include <filesystem>
#include <fstream>
#include <stdexcept>
#include <vector>

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
    uint64_t o = offset + i;
    uint64_t w = word(seed, o / 8);
    size_t in_word = o % 8;
    size_t take = std::min<size_t>(8 - in_word, n - i);
    for (size_t k = 0; k < take; ++k) out[i + k] = static_cast<char>(w >> (8 * (in_word + k)));
    i += take;
  }
}

std::string pattern_bytes(uint64_t seed, uint64_t offset, size_t n) {
  std::string s(n, '\0');
  fill_pattern(seed, offset, n, s.data());
  return s;
}

size_t count_pattern_mismatches(uint64_t seed, uint64_t offset, const char* data, size_t n,
                                uint64_t* first) {
  constexpr size_t kSlice = 1 << 16;
  char want[kSlice];
  size_t wrong = 0;
  for (size_t done = 0; done < n; done += kSlice) {
    size_t len = std::min(kSlice, n - done);
    fill_pattern(seed, offset + done, len, want);
    if (std::memcmp(want, data + done, len) == 0) continue;
    for (size_t k = 0; k < len; ++k) {
      if (want[k] != data[done + k]) {
        if (wrong++ == 0 && first) *first = offset + done + k;
      }
    }
  }
  return wrong;
}

void write_pattern_file(const std::string& path, uint64_t seed, uint64_t size) {
  std::filesystem::path p(path);
  if (p.has_parent_path()) std::filesystem::create_directories(p.parent_path());
  std::ofstream out(p, std::ios::binary | std::ios::trunc);
  std::vector<char> buf(4 << 20);
  for (uint64_t off = 0; off < size; off += buf.size()) {
    size_t len = static_cast<size_t>(std::min<uint64_t>(buf.size(), size - off));
    fill_pattern(seed, off, len, buf.data());
    out.write(buf.data(), static_cast<std::streamsize>(len));
  }
  out.close();
  if (!out) throw std::runtime_error("cannot write " + path);
}

}  // namespace hubfs::testing
