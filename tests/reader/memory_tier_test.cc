// The memory tier alone: LRU order, accounting by pinned buffers, peeks that are not uses.
#include "reader/memory_tier.h"

#include <gtest/gtest.h>

namespace hubfs {
namespace HUBFS_UNITY_ID {

BlockBytes bytes_of(std::shared_ptr<const std::string> buffer, size_t offset, size_t length) {
  return BlockBytes{std::move(buffer), offset, length};
}
BlockBytes block(size_t n, char c) { return bytes_of(std::make_shared<const std::string>(n, c), 0, n); }
BlockId id(uint64_t index, std::string_view file = "sha256:aa") { return BlockId{file, index, 0}; }

TEST(MemoryTier, KeepsTheMostRecentlyUsedWithinItsBudget) {
  MemoryTier tier(300);
  tier.put(id(0), block(100, 'a'));
  tier.put(id(1), block(100, 'b'));
  tier.put(id(2), block(100, 'c'));
  ASSERT_TRUE(tier.get(id(0)));  // a use: block 1 is now the oldest
  tier.put(id(3), block(100, 'd'));
  EXPECT_TRUE(tier.peek(id(0)));
  EXPECT_FALSE(tier.peek(id(1)));
  EXPECT_TRUE(tier.peek(id(2)));
  EXPECT_EQ(tier.get(id(3))->view(), std::string(100, 'd'));
  EXPECT_EQ(tier.pinned_bytes(), 300u);
}

TEST(MemoryTier, APeekIsNotAUse) {
  MemoryTier tier(200);
  tier.put(id(0), block(100, 'a'));
  tier.put(id(1), block(100, 'b'));
  ASSERT_TRUE(tier.peek(id(0)));  // not a use: block 0 stays the oldest
  tier.put(id(2), block(100, 'c'));
  EXPECT_FALSE(tier.peek(id(0)));
  EXPECT_TRUE(tier.peek(id(1)));
}

// Blocks cut from one response pin the whole response: counted once, released with the last.
TEST(MemoryTier, AccountsByPinnedBuffersEachOnce) {
  auto response = std::make_shared<const std::string>(800, 'r');
  MemoryTier tier(1000);
  for (uint64_t b = 0; b < 8; ++b) tier.put(id(b), bytes_of(response, b * 100, 100));
  EXPECT_EQ(tier.pinned_bytes(), 800u);
  for (uint64_t b = 0; b < 7; ++b) tier.remove(id(b));
  EXPECT_EQ(tier.pinned_bytes(), 800u);  // block 7 still pins all of it
  tier.remove(id(7));
  EXPECT_EQ(tier.pinned_bytes(), 0u);
  // Over budget through one large buffer: its blocks go, the newest one stays even alone.
  MemoryTier small(300);
  small.put(id(0), bytes_of(response, 0, 100));
  EXPECT_EQ(small.pinned_bytes(), 800u);
  small.put(id(1), block(10, 'x'));
  EXPECT_FALSE(small.peek(id(0)));
  EXPECT_EQ(small.pinned_bytes(), 10u);
}

TEST(MemoryTier, ReplacingABlockReleasesItsOldBuffer) {
  MemoryTier tier(1000);
  tier.put(id(0), block(100, 'a'));
  tier.put(id(0), block(50, 'b'));
  EXPECT_EQ(tier.pinned_bytes(), 50u);
  EXPECT_EQ(tier.get(id(0))->view(), std::string(50, 'b'));
}

TEST(MemoryTier, ListsTheBlocksOfOneFileWithWhatChecksThem) {
  MemoryTier tier(1000);
  tier.put(id(3), block(1, 'a'));
  BlockBytes checked = block(1, 'a');
  checked.source_checked = true;
  tier.put(id(12), checked);
  tier.put(id(5, "sha256:aab"), block(1, 'a'));  // another file whose id starts the same
  tier.put(id(7, "sha256:a"), block(1, 'a'));
  std::vector<std::pair<uint64_t, bool>> held;
  for (const MemoryTier::Held& h : tier.blocks_of("sha256:aa")) held.emplace_back(h.index, h.source_checked);
  std::sort(held.begin(), held.end());
  EXPECT_EQ(held, (std::vector<std::pair<uint64_t, bool>>{{3, false}, {12, true}}));
}

}  // namespace
}  // namespace hubfs
