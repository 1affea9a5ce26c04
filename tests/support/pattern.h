// Deterministic file content for tests that read many bytes: byte `o` of a file with seed `s` is
// a function of (s, o) alone, so a reader checks any range it gets without keeping a copy of
// the file (a stress run reads gigabytes from hundreds of megabytes of files).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

namespace hubfs::testing {

// Fills out with bytes [offset, offset + n) of the pattern with this seed.
void fill_pattern(uint64_t seed, uint64_t offset, size_t n, char* out);
std::string pattern_bytes(uint64_t seed, uint64_t offset, size_t n);
// How many of the n bytes at data differ from the pattern at offset; *first gets the file
// offset of the first difference (unchanged when there is none).
size_t count_pattern_mismatches(uint64_t seed, uint64_t offset, const char* data, size_t n,
                                uint64_t* first = nullptr);
// Writes a file of `size` pattern bytes, creating parent directories; throws on failure.
void write_pattern_file(const std::string& path, uint64_t seed, uint64_t size);

}  // namespace hubfs::testing
