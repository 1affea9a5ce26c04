#include "cache/crc32c.h"

#include <gtest/gtest.h>

#include <chrono>
#include <cstdio>
#include <random>
#include <string>

namespace hubfs::crc32c {
namespace HUBFS_UNITY_ID {

std::string random_bytes(size_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::string s(n, '\0');
  for (char& c : s) c = static_cast<char>(rng());
  return s;
}

TEST(Crc32c, KnownVectors) {
  // The standard check value, and the iSCSI test patterns of RFC 3720 appendix B.4.
  EXPECT_EQ(value("123456789"), 0xE3069283u);
  EXPECT_EQ(value(std::string(32, '\0')), 0x8A9136AAu);
  EXPECT_EQ(value(std::string(32, '\xFF')), 0x62A8AB43u);
  std::string ascending, descending;
  for (int i = 0; i < 32; ++i) {
    ascending += static_cast<char>(i);
    descending += static_cast<char>(31 - i);
  }
  EXPECT_EQ(value(ascending), 0x46DD794Eu);
  EXPECT_EQ(value(descending), 0x113FDB5Cu);
  EXPECT_EQ(value(""), 0u);
  EXPECT_EQ(extend_portable(0, "123456789", 9), 0xE3069283u);
}

TEST(Crc32c, AcceleratedMatchesPortableAtEveryLengthAndAlignment) {
  // Lengths straddle the 8-byte, 3x256-byte and 3x8192-byte strides of the fast path.
  const std::string data = random_bytes(3 * 8192 * 2 + 3 * 256 + 64, 7);
  const size_t lengths[] = {0,    1,     7,     8,     9,     767,   768,   769,  1000,
                            3071, 24575, 24576, 24577, 25344, 25351, 49152, 49999};
  for (size_t offset = 0; offset < 8; ++offset) {
    for (size_t n : lengths) {
      if (offset + n > data.size()) continue;
      EXPECT_EQ(extend(0, data.data() + offset, n), extend_portable(0, data.data() + offset, n))
          << "offset " << offset << " length " << n;
    }
  }
}

TEST(Crc32c, ExtendComposes) {
  const std::string data = random_bytes(100000, 11);
  for (size_t split : {0ul, 1ul, 13ul, 8192ul, 30000ul, 100000ul}) {
    uint32_t first = value(std::string_view(data).substr(0, split));
    EXPECT_EQ(extend(first, data.data() + split, data.size() - split), value(data)) << split;
  }
}

TEST(Crc32c, DetectsEverySingleBitFlipInABlock) {
  std::string data = random_bytes(4096, 3);
  const uint32_t good = value(data);
  for (size_t bit = 0; bit < data.size() * 8; bit += 7) {
    data[bit / 8] ^= static_cast<char>(1 << (bit % 8));
    EXPECT_NE(value(data), good) << bit;
    data[bit / 8] ^= static_cast<char>(1 << (bit % 8));
  }
}

// Not an assertion (no timing is asserted): logs the rate every cache hit pays.
TEST(Crc32c, ThroughputIsLogged) {
  const std::string block = random_bytes(1 << 20, 5);  // one default-size block
  constexpr int kRounds = 256;                         // 256 MiB: long enough to time
  uint32_t sink = 0;
  auto rate = [&](auto fn) {
    auto start = std::chrono::steady_clock::now();
    for (int i = 0; i < kRounds; ++i) sink += fn(block);
    double seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    return kRounds * static_cast<double>(block.size()) / seconds / 1e9;
  };
  double fast = rate([](const std::string& b) { return value(b); });
  double portable =
      rate([](const std::string& b) { return extend_portable(0, b.data(), b.size()); });
  std::printf("crc32c over 1 MiB blocks: %.2f GB/s (%s), portable %.2f GB/s [%08x]\n", fast,
              accelerated() ? "sse4.2 3-way" : "portable", portable, sink);
  RecordProperty("crc32c_gbps", std::to_string(fast));
  SUCCEED();
}

}  // namespace
}  // namespace hubfs::crc32c
