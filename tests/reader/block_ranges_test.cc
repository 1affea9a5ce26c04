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

// A cache's question (what of these ranges does it hold?) takes any range: cut at the end of the
// file, none named by an empty one or one past the end; the blocks of ranges inside the file are
// blocks_of_ranges'.
TEST(BlockRanges, BlocksWithinCutRangesAtTheEndOfTheFile) {
  EXPECT_EQ(blocks_within({{5000, 10}, {0, 100}, {1023, 2}, {4096, 1}}, 10'000, 1024), (std::vector<uint64_t>{0, 1, 4}));
  EXPECT_EQ(blocks_within({{9'000, 5'000}, {3000, 0}, {10'000, 1}, {12'000, 7}}, 10'000, 1024),
            (std::vector<uint64_t>{8, 9}));
  EXPECT_EQ(blocks_within({{9'999, UINT64_MAX}}, 10'000, 1024), (std::vector<uint64_t>{9}));  // no overflow
  EXPECT_TRUE(blocks_within({}, 10'000, 1024).empty());
}

TEST(BlockRanges, NeighboursShareARequestUpToTheRunCap) {
  EXPECT_EQ(coalesce({0, 1, 2, 5, 6, 9}, 8), (std::vector<BlockRun>{{0, 3}, {5, 2}, {9, 1}}));
  EXPECT_EQ(coalesce({0, 1, 2, 3, 4}, 2), (std::vector<BlockRun>{{0, 2}, {2, 2}, {4, 1}}));
  EXPECT_EQ(coalesce({3, 4}, 0), (std::vector<BlockRun>{{3, 1}, {4, 1}}));  // 0 counts as 1
  EXPECT_TRUE(coalesce({}, 8).empty());
}

// A whole file's hint in graded requests (ReaderOptions::whole_file_hint_grade): they add up to
// the blocks, each at least 1, none smaller than the one before, the last the largest; ratio 1
// is the even split; what cannot be graded within the bounds is left to the even split (empty).
TEST(BlockRanges, GradedGroupsGrowByTheRatioAndAddUp) {
  const std::vector<uint64_t> zea = graded_groups(161, 16, 1.08, 32);  // the 16-frame read's hint
  ASSERT_EQ(zea.size(), 16u);
  uint64_t sum = 0;
  for (size_t k = 0; k < zea.size(); ++k) {
    sum += zea[k];
    EXPECT_GE(zea[k], 1u);
    if (k) {
      EXPECT_GE(zea[k], zea[k - 1]) << k;
    }
  }
  EXPECT_EQ(sum, 161u);
  EXPECT_LE(zea.front(), 6u);
  EXPECT_GE(zea.back(), 15u);
  EXPECT_EQ(graded_groups(11, 4, 1.0, 32), (std::vector<uint64_t>{3, 3, 2, 3}));
  EXPECT_EQ(graded_groups(11, 4, 1.5, 32), (std::vector<uint64_t>{1, 2, 3, 5}));
  EXPECT_EQ(graded_groups(4, 4, 2.0, 32), (std::vector<uint64_t>{1, 1, 1, 1}));  // at least 1 each
  EXPECT_TRUE(graded_groups(3, 4, 1.08, 32).empty());    // fewer blocks than requests
  EXPECT_TRUE(graded_groups(100, 2, 1.0, 32).empty());   // 50 > 32 per request
  EXPECT_TRUE(graded_groups(100, 4, 0.9, 32).empty());   // shrinking is not graded
  EXPECT_TRUE(graded_groups(100, 0, 1.08, 32).empty());
}

}  // namespace
}  // namespace hubfs
