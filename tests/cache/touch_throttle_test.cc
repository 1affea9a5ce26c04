#include "cache/touch_throttle.h"

#include <gtest/gtest.h>

#include <chrono>

namespace hubfs {
namespace HUBFS_UNITY_ID {

using std::chrono::seconds;
constexpr TouchThrottle::time_point kStart{seconds(1000)};

TEST(TouchThrottle, TouchesABlockOncePerInterval) {
  TouchThrottle t(seconds(60), 100);
  EXPECT_TRUE(t.should_touch(1, kStart));
  EXPECT_FALSE(t.should_touch(1, kStart + seconds(59)));
  EXPECT_TRUE(t.should_touch(2, kStart + seconds(59)));  // another block is not throttled
  EXPECT_TRUE(t.should_touch(1, kStart + seconds(60)));
  EXPECT_FALSE(t.should_touch(1, kStart + seconds(61)));  // the interval restarts at the touch
}

TEST(TouchThrottle, AWrittenBlockNeedsNoTouchForAnInterval) {
  TouchThrottle t(seconds(60), 100);
  t.note_written(7, kStart);
  EXPECT_FALSE(t.should_touch(7, kStart + seconds(30)));
  EXPECT_TRUE(t.should_touch(7, kStart + seconds(60)));
}

TEST(TouchThrottle, AtItsBoundDropsExpiredEntriesFirst) {
  TouchThrottle t(seconds(60), 3);
  t.note_written(1, kStart);
  t.note_written(2, kStart + seconds(50));
  t.note_written(3, kStart + seconds(50));
  // Full: the entry older than the interval goes, the two fresh ones stay throttled.
  EXPECT_TRUE(t.should_touch(4, kStart + seconds(70)));
  EXPECT_EQ(t.tracked(), 3u);
  EXPECT_FALSE(t.should_touch(2, kStart + seconds(71)));
  EXPECT_FALSE(t.should_touch(4, kStart + seconds(71)));
}

TEST(TouchThrottle, AtItsBoundWithNothingExpiredStartsOver) {
  TouchThrottle t(seconds(60), 2);
  t.note_written(1, kStart);
  t.note_written(2, kStart);
  // Nothing is old enough to drop: the table is cleared, costing block 1 an early touch.
  EXPECT_TRUE(t.should_touch(3, kStart + seconds(1)));
  EXPECT_EQ(t.tracked(), 1u);
  EXPECT_TRUE(t.should_touch(1, kStart + seconds(2)));
}

}  // namespace HUBFS_UNITY_ID
}  // namespace hubfs
