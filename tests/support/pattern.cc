#include "support/pattern.h"

#include <cstring>
#include <filesystem>
#include <fstream>
#include <stdexcept>
#include <vector>

namespace hubfs::testing {

std::string pattern_bytes(uint64_t seed, uint64_t offset, size_t n) {
  std::string s(n, '\0');
  fill_pattern(seed, offset, n, s.data());
  return s;
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
