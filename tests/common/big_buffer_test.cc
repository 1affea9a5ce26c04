// BigBuffer and allocate_in_huge_pages: large buffers 2 MiB aligned in huge pages, small ones plain;
// prefault_pages maps fresh memory without changing a byte of it.
#include "common/big_buffer.h"

#include <sys/mman.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

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

TEST(BigBufferTest, PrefaultingMapsFreshPagesAndKeepsWhatIsWritten) {
  const size_t page = static_cast<size_t>(::sysconf(_SC_PAGESIZE));
  const size_t n = 64 * page;
  void* m = ::mmap(nullptr, n, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  ASSERT_NE(m, MAP_FAILED);
  char* p = static_cast<char*>(m);
  std::memset(p, 'a', page);  // one page written before: its bytes stay
  std::vector<unsigned char> in(n / page);
  ASSERT_EQ(::mincore(p, n, in.data()), 0);
  size_t mapped = 0;
  for (unsigned char c : in) mapped += c & 1;
  EXPECT_EQ(mapped, 1u);
  // From the middle of the first page: only whole pages inside the range are mapped.
  EXPECT_TRUE(prefault_pages(p + 10, n - 10)) << "MADV_POPULATE_WRITE needs Linux 5.14 or later";
  ASSERT_EQ(::mincore(p, n, in.data()), 0);
  mapped = 0;
  for (unsigned char c : in) mapped += c & 1;
  EXPECT_EQ(mapped, n / page);
  EXPECT_EQ(p[0], 'a');
  EXPECT_EQ(p[page - 1], 'a');
  EXPECT_EQ(p[page], '\0');
  EXPECT_TRUE(prefault_pages(p + 1, 10));  // no whole page: nothing to do
  EXPECT_TRUE(prefault_pages(nullptr, 0));
  ::munmap(m, n);
}

}  // namespace HUBFS_UNITY_ID
}  // namespace hubfs
