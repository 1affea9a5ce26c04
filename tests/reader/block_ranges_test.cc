// The read path's block arithmetic: hints to blocks, missing blocks to requests.
#include "reader/block_ranges.h"

#include <gtest/gtest.h>

namespace hubfs {
namespace HUBFS_UNITY_ID {

TEST(BlockRanges, HintsNameEveryBlockTheyTouchOnceInOrder) {
  auto blocks = blocks_of_ranges({{5000, 10}, {0, 100}, {1023, 2}, {4096, 1}}, 10'000, 1024, "f");
  ASSERT_TRUE(blocks.ok());
  EXPECT_EQ(*blocks, (std::vector<uint64_t>{0, 1, 4}));
  EXPECT_EQ(*blocks_of_ranges({{0, 10'000}}, 10'000, 4096, "f"), (std::vector<uint64_t>{0, 1, 2}));
}

TEST(BlockRanges, AMalformedHintIsRefusedNamingTheFile) {
  for (ByteRange bad : {ByteRange{0, 0}, ByteRange{10'000, 1}, ByteRange{9'999, 2}, ByteRange{UINT64_MAX - 1, 5}}) {
    auto r = blocks_of_ranges({{0, 10}, bad}, 10'000, 1024, "data/x.h5");
    ASSERT_FALSE(r.ok());
    EXPECT_EQ(r.status().code(), Code::kInvalidArgument);
    EXPECT_NE(r.status().message().find("data/x.h5"), std::string::npos);
  }
}

TEST(BlockRanges, NeighboursShareARequestUpToTheRunCap) {
  EXPECT_EQ(coalesce({0, 1, 2, 5, 6, 9}, 8), (std::vector<BlockRun>{{0, 3}, {5, 2}, {9, 1}}));
  EXPECT_EQ(coalesce({0, 1, 2, 3, 4}, 2), (std::vector<BlockRun>{{0, 2}, {2, 2}, {4, 1}}));
  EXPECT_EQ(coalesce({3, 4}, 0), (std::vector<BlockRun>{{3, 1}, {4, 1}}));  // 0 counts as 1
  EXPECT_TRUE(coalesce({}, 8).empty());
}

}  // namespace
}  // namespace hubfs
