// The read-ahead policy alone: reads in, ranges out, no threads, no network.
#include "reader/read_ahead.h"

#include <gtest/gtest.h>

namespace hubfs {
namespace HUBFS_UNITY_ID {

constexpr uint64_t kMiB = 1 << 20;

class ReadAheadPolicyTest : public ::testing::Test {
 protected:
  // 1 MiB blocks, windows of 4..128 blocks, 8-block requests, as the mount's defaults.
  ReadAheadPolicy policy_{ReadAheadConfig{}};
  ReadAheadState state_;

  // A read of `blocks` whole blocks starting at block `first`, as the caller records it.
  std::optional<BlockRange> read(uint64_t first, uint64_t blocks, uint64_t file_blocks = 1000,
                                 bool hinted = false) {
    auto r = policy_.on_read(state_, first * kMiB, (first + blocks) * kMiB, file_blocks * kMiB, hinted);
    if (r) state_.prefetched_to = r->last + 1;  // the caller fetched all of it
    return r;
  }
};

TEST_F(ReadAheadPolicyTest, AFirstReadIsNotSequentialAndFetchesNothingAhead) {
  EXPECT_EQ(read(0, 1), std::nullopt);
  EXPECT_EQ(state_.window_blocks, 0u);
  EXPECT_EQ(state_.next_offset, kMiB);
}

TEST_F(ReadAheadPolicyTest, ASequentialRunGrowsItsWindowNoFasterThanFourTimesItsBytes) {
  read(0, 1);
  // Second read: 2 MiB read in the run... window min(4 * 1, doubled from 0 = 4) = 4 blocks.
  auto r = read(1, 1);
  ASSERT_TRUE(r.has_value());
  EXPECT_EQ(state_.window_blocks, 4u);
  EXPECT_EQ(*r, (BlockRange{2, 5}));  // 4 blocks past the last one read: less than a request
  // The window doubles per read but stays under 4x the run's bytes: after 2 blocks of run, 8.
  read(2, 1);
  EXPECT_EQ(state_.window_blocks, 8u);
  for (uint64_t b = 3; b < 40; ++b) read(b, 1);
  EXPECT_EQ(state_.window_blocks, 128u);  // the cap
  EXPECT_LE(state_.prefetched_to, 40u + 128u);
}

TEST_F(ReadAheadPolicyTest, RefillsOnlyWholeRequestsExceptAtTheEndOfTheFile) {
  state_ = ReadAheadState{};
  state_.next_offset = 10 * kMiB;
  state_.window_blocks = 128;  // at its cap
  state_.run_bytes = 128 * kMiB;
  state_.prefetched_to = 11 + 125;  // 125 blocks already ahead of block 10: room 3 < one request
  EXPECT_EQ(read(10, 1), std::nullopt);
  // Six blocks further on there is room for 9: one whole request of 8 goes, not 9 blocks.
  state_.next_offset = 16 * kMiB;
  auto r = read(16, 1);
  ASSERT_TRUE(r.has_value());
  EXPECT_EQ(*r, (BlockRange{136, 143}));
  // Near the end of a file the last, short request goes out too.
  state_ = ReadAheadState{};
  read(0, 1, 6);
  auto tail = read(1, 1, 6);
  ASSERT_TRUE(tail.has_value());
  EXPECT_EQ(*tail, (BlockRange{2, 5}));
  EXPECT_EQ(read(5, 1, 6), std::nullopt);  // nothing is left past the last block
}

TEST_F(ReadAheadPolicyTest, RandomAccessResetsTheRunAndFetchesNothing) {
  for (uint64_t b = 0; b < 10; ++b) read(b, 1);
  ASSERT_GT(state_.window_blocks, 0u);
  EXPECT_EQ(read(500, 1), std::nullopt);
  EXPECT_EQ(state_.window_blocks, 0u);
  EXPECT_EQ(state_.run_bytes, 0u);
  EXPECT_EQ(state_.prefetched_to, 0u);
  // A read a little before where the last ended still counts as the same stream (the kernel
  // sends one stream's pieces from several threads, out of order).
  read(501, 1);
  EXPECT_TRUE(read(501, 1).has_value() || state_.window_blocks > 0);
  EXPECT_GT(state_.window_blocks, 0u);
}

TEST_F(ReadAheadPolicyTest, AHintedFileGrowsItsWindowButFetchesNothingAhead) {
  read(0, 1, 1000, true);
  EXPECT_EQ(read(1, 1, 1000, true), std::nullopt);
  EXPECT_EQ(read(2, 1, 1000, true), std::nullopt);
  EXPECT_GT(state_.window_blocks, 0u);  // the run is still tracked: unhinted reads resume it
  EXPECT_TRUE(read(3, 1).has_value());
}

TEST_F(ReadAheadPolicyTest, ABudgetThatStopsTheCallerEarlyIsAskedForAgainLater) {
  for (uint64_t b = 0; b < 20; ++b) read(b, 1);
  // The caller took only 3 blocks of the next range (its memory budget was spent).
  auto r = policy_.on_read(state_, 20 * kMiB, 21 * kMiB, 1000 * kMiB, false);
  if (r) state_.prefetched_to = r->first + 3;
  auto again = policy_.on_read(state_, 21 * kMiB, 22 * kMiB, 1000 * kMiB, false);
  ASSERT_TRUE(again.has_value());
  EXPECT_EQ(again->first, state_.prefetched_to);
}

TEST_F(ReadAheadPolicyTest, ASmallFileAndPartialBlocksStayInsideTheFile) {
  // A 2.5-block file read in 100 KiB pieces: nothing past its last block is ever asked for.
  const uint64_t size = 5 * kMiB / 2;
  for (uint64_t off = 0; off < size; off += 100 << 10) {
    auto r = policy_.on_read(state_, off, std::min(size, off + (100 << 10)), size, false);
    if (r) {
      EXPECT_LE(r->last, 2u);
      state_.prefetched_to = r->last + 1;
    }
  }
}

}  // namespace
}  // namespace hubfs
