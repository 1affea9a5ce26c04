// The read-ahead marks alone: claimed, fetching, forgotten, taken, in every order a read can
// overtake read-ahead.
#include "reader/read_ahead_marks.h"

#include <gtest/gtest.h>

namespace hubfs {
namespace HUBFS_UNITY_ID {

TEST(ReadAheadMarks, AReadTakesAFetchedBlocksMarkOnceAndCountsItsBytes) {
  ReadAheadMarks marks(16);
  uint64_t used = 0;
  EXPECT_FALSE(marks.take("f#1", &used)) << "nothing marked yet";
  marks.claim("f#1");
  EXPECT_EQ(marks.fetching("f#1", 100), 0u);
  EXPECT_TRUE(marks.take("f#1", &used));
  EXPECT_EQ(used, 100u);
  EXPECT_FALSE(marks.take("f#1", &used)) << "a mark is taken once";
  EXPECT_EQ(used, 0u);
  EXPECT_EQ(marks.size(), 0u);
}

TEST(ReadAheadMarks, AReadThatOvertakesTheFetchIsCountedWhenTheFetchStarts) {
  ReadAheadMarks marks(16);
  uint64_t used = 0;
  marks.claim("f#2");
  EXPECT_TRUE(marks.take("f#2", &used)) << "the read continues the stream";
  EXPECT_EQ(used, 0u) << "nothing fetched yet";
  EXPECT_FALSE(marks.take("f#2", &used)) << "a second read of the block";
  EXPECT_EQ(marks.fetching("f#2", 100), 100u) << "the overtaking read consumed the fetched bytes";
  EXPECT_EQ(marks.size(), 0u);
}

TEST(ReadAheadMarks, ABlockACacheServedIsNeitherUsedNorWasted) {
  ReadAheadMarks marks(16);
  uint64_t used = 0;
  marks.claim("f#3");
  marks.forget("f#3");
  EXPECT_FALSE(marks.take("f#3", &used));
  EXPECT_EQ(marks.fetching("f#3", 100), 0u);
  EXPECT_EQ(marks.size(), 0u);
}

TEST(ReadAheadMarks, TheTableIsBounded) {
  ReadAheadMarks marks(4);
  for (int i = 0; i < 10; ++i) marks.claim("f#" + std::to_string(i));
  EXPECT_LE(marks.size(), 4u);
  uint64_t used = 0;
  EXPECT_TRUE(marks.take("f#9", &used)) << "the newest mark survives a clear";
}

}  // namespace HUBFS_UNITY_ID
}  // namespace hubfs
