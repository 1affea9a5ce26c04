// Byte-level surgery on HDF5 files for the hostile-file tests: read and write a file whole,
// find the little-endian encoding of a dataset's dimensions, patch it.
#pragma once

#include <cstdint>
#include <fstream>
#include <stdexcept>
#include <string>
#include <vector>

#include "support/mount_harness.h"

namespace h5chunk::testing {

// With read(2) (support/mount_harness.h), not an istreambuf_iterator: a byte per call at the
// test code's -O0 was 4% of test_h5chunk's time under TSan.
inline std::vector<uint8_t> read_file_bytes(const std::string& path) {
  if (!std::ifstream(path, std::ios::binary)) throw std::runtime_error("cannot read " + path);
  const std::string bytes = hubfs::testing::read_all(path);
  return std::vector<uint8_t>(bytes.begin(), bytes.end());
}

inline void write_file_bytes(const std::string& path, const std::vector<uint8_t>& bytes) {
  std::ofstream f(path, std::ios::binary | std::ios::trunc);
  f.write(reinterpret_cast<const char*>(bytes.data()), std::streamsize(bytes.size()));
  if (!f) throw std::runtime_error("cannot write " + path);
}

inline void put_le64(uint8_t* p, uint64_t v) {
  for (int i = 0; i < 8; ++i) p[i] = uint8_t(v >> (8 * i));
}

// Every offset where `dims` appear as consecutive little-endian u64s: how the dataspace message
// of an HDF5 file stores a dataset's current dimensions (then, when present, its maximum ones).
inline std::vector<size_t> find_dims(const std::vector<uint8_t>& file, const std::vector<uint64_t>& dims) {
  std::vector<uint8_t> pattern(dims.size() * 8);
  for (size_t d = 0; d < dims.size(); ++d) put_le64(&pattern[d * 8], dims[d]);
  std::vector<size_t> hits;
  for (size_t i = 0; i + pattern.size() <= file.size(); ++i) {
    if (std::equal(pattern.begin(), pattern.end(), file.begin() + long(i))) hits.push_back(i);
  }
  return hits;
}

}  // namespace h5chunk::testing
