// What every h5chunk decoder fuzz target shares: the input layout, the output buffer, and the
// checks a decoder's answer must pass.
//
// Input: one flags byte, a u32 (little-endian) output capacity, then the decoder's input.
//   flags bit 0: the target is exact (a final pipeline step) rather than "up to capacity"
//   flags bit 1: take the capacity from the payload's own header when it has one (so the
//                fuzzer reaches the decoding loops without guessing sizes first)
#pragma once

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>

#include "h5chunk/codecs.h"

namespace h5chunk::fuzz {

// Outputs up to 256 KiB: every decoder loop (many blocks, several zlib slices of output) is
// reachable well below that, and small outputs keep thousands of runs a second.
constexpr size_t kMaxCapacity = size_t{1} << 18;

struct Case {
  bool exact = true;
  bool capacity_from_header = false;
  size_t capacity = 0;
  const uint8_t* payload = nullptr;
  size_t payload_size = 0;
};

inline bool parse(const uint8_t* data, size_t size, Case* c) {
  if (size < 5) return false;
  c->exact = data[0] & 1;
  c->capacity_from_header = data[0] & 2;
  uint32_t raw = uint32_t{data[1]} | uint32_t{data[2]} << 8 | uint32_t{data[3]} << 16 | uint32_t{data[4]} << 24;
  c->capacity = raw % (kMaxCapacity + 1);
  c->payload = data + 5;
  c->payload_size = size - 5;
  return true;
}

// A heap buffer of exactly n bytes, so AddressSanitizer reports a write one byte past it.
// Prefilled with `fill`: running a decode over two different prefills and comparing tells
// whether a "successful" decode wrote every byte it claims.
inline std::unique_ptr<uint8_t[]> output(size_t n, uint8_t fill) {
  std::unique_ptr<uint8_t[]> p(new uint8_t[n ? n : 1]);
  std::memset(p.get(), fill, n ? n : 1);
  return p;
}

[[noreturn]] inline void fail(const char* what) {
  std::fprintf(stderr, "h5chunk fuzz invariant violated: %s\n", what);
  std::abort();
}

#define FUZZ_CHECK(cond) \
  do {                   \
    if (!(cond)) ::h5chunk::fuzz::fail(#cond); \
  } while (0)

// The contract of codecs.h for one decode into target `t`: an error, or a byte count within
// the target (exactly its capacity when exact), and a message whenever it fails.
inline void check_result(const Result<size_t>& r, const codec::Target& t) {
  if (!r.ok()) {
    FUZZ_CHECK(!r.status().message().empty());
    return;
  }
  FUZZ_CHECK(*r <= t.capacity);
  if (t.exact) FUZZ_CHECK(*r == t.capacity);
}

// Decodes twice into buffers prefilled differently: a success must produce the same bytes both
// times (else it left some uninitialised) and the same answer.
template <typename Decode>
void decode_twice(const Case& c, Decode decode) {
  auto a = output(c.capacity, 0x00), b = output(c.capacity, 0xff);
  codec::Target ta{a.get(), c.capacity, c.exact}, tb{b.get(), c.capacity, c.exact};
  Result<size_t> ra = decode(ta);
  check_result(ra, ta);
  Result<size_t> rb = decode(tb);
  check_result(rb, tb);
  FUZZ_CHECK(ra.ok() == rb.ok());
  if (ra.ok()) {
    FUZZ_CHECK(*ra == *rb);
    FUZZ_CHECK(std::memcmp(a.get(), b.get(), *ra) == 0);
  }
}

inline uint32_t le32(const uint8_t* p) {
  return uint32_t{p[0]} | uint32_t{p[1]} << 8 | uint32_t{p[2]} << 16 | uint32_t{p[3]} << 24;
}

}  // namespace h5chunk::fuzz
