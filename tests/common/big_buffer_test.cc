// BigBuffer and allocate_in_huge_pages: large buffers 2 MiB aligned in huge pages, small ones plain.
#include "common/big_buffer.h"

#include <cstdlib>
#include <cstring>
#include <string>

#include <gtest/gtest.h>

namespace hubfs {
namespace HUBFS_UNITY_ID {

TEST(BigBufferTest, SmallAndLargeBuffersHoldWhatIsWritten) {
  for (size_t n : {size_t{0}, size_t{1}, size_t{4096}, size_t{(1u << 20) - 1}, size_t{1u << 20},
                   size_t{(5u << 20) + 3}}) {
    BigBuffer b;
    uint8_t* p = b.reserve(n);
    ASSERT_NE(p, nullptr) << n;
    EXPECT_GE(b.capacity(), n);
    std::memset(p, 0xA5, n);
    for (size_t i = 0; i < n; i += 4093) ASSERT_EQ(p[i], 0xA5) << n << " at " << i;
    if (n >= (1u << 20)) {
      EXPECT_EQ(reinterpret_cast<uintptr_t>(p) % (2u << 20), 0u) << "not 2 MiB aligned: " << n;
    }
  }
}

TEST(BigBufferTest, ASmallerReserveKeepsTheBufferALargerOneReplacesIt) {
  BigBuffer b;
  uint8_t* first = b.reserve(3u << 20);
  ASSERT_NE(first, nullptr);
  EXPECT_EQ(b.reserve(1u << 20), first);
  uint8_t* bigger = b.reserve(9u << 20);
  ASSERT_NE(bigger, nullptr);
  EXPECT_GE(b.capacity(), 9u << 20);
  std::memset(bigger, 1, 9u << 20);
  b.release();
  EXPECT_EQ(b.capacity(), 0u);
  EXPECT_EQ(b.data(), nullptr);
}

TEST(BigBufferTest, MovingHandsTheMemoryOver) {
  BigBuffer a;
  uint8_t* p = a.reserve(4u << 20);
  ASSERT_NE(p, nullptr);
  p[0] = 7;
  BigBuffer b(std::move(a));
  EXPECT_EQ(b.data(), p);
  EXPECT_EQ(a.data(), nullptr);
  BigBuffer c;
  c.reserve(100);
  c = std::move(b);
  EXPECT_EQ(c.data(), p);
  EXPECT_EQ(c.data()[0], 7);
}

// Below the threshold plain malloc; from it, 2 MiB aligned; either way writable and freed by
// std::free (h5chunk's arrays hand their memory to a deleter that calls it).
TEST(BigBufferTest, AllocationsFromTheThresholdAreHugePageAligned) {
  for (size_t n : {size_t{0}, size_t{100}, size_t{(8u << 20) - 1}, size_t{8u << 20}, size_t{(9u << 20) + 5}}) {
    void* p = allocate_in_huge_pages(n, 8u << 20);
    ASSERT_NE(p, nullptr) << n;
    std::memset(p, 0x5A, n);
    if (n >= (8u << 20)) {
      EXPECT_EQ(reinterpret_cast<uintptr_t>(p) % (2u << 20), 0u) << "not 2 MiB aligned: " << n;
    }
    std::free(p);
  }
}

// The advice is a hint on any buffer, aligned or not, however small: the bytes stay.
TEST(BigBufferTest, AdvisingHugePagesOnAStringKeepsItsBytes) {
  for (size_t n : {size_t{10}, size_t{3u << 20}, size_t{(8u << 20) + 17}}) {
    std::string s;
    s.reserve(n);
    advise_huge_pages(s.data(), n);
    s.assign(n, 'x');
    EXPECT_EQ(s.size(), n);
    EXPECT_EQ(s[n / 2], 'x');
  }
}

}  // namespace HUBFS_UNITY_ID
}  // namespace hubfs
