// The transport's hedging rule, without sockets or a clock: the waits are made up.
#include "net/hedge_policy.h"

#include <gtest/gtest.h>

namespace hubfs {
namespace HUBFS_UNITY_ID {

using std::chrono::milliseconds;

HedgeOptions options_of(int slots) {
  HedgeOptions o;
  o.min_delay = milliseconds(250);
  o.initial_delay = milliseconds(1000);
  o.max_in_flight = slots;
  return o;
}

TEST(HedgePolicy, WaitsTheInitialDelayUntilSixteenFirstBytesAreKnown) {
  HedgePolicy p(options_of(16));
  for (int i = 0; i < 15; ++i) p.learn(milliseconds(10));
  EXPECT_EQ(p.delay(), milliseconds(1000));
  EXPECT_FALSE(p.should_hedge(milliseconds(999)));
  EXPECT_TRUE(p.should_hedge(milliseconds(1000)));
  p.learn(milliseconds(10));
  EXPECT_EQ(p.delay(), milliseconds(250));  // 1.5 x 10 ms is below the floor
}

TEST(HedgePolicy, DelayIsOneAndAHalfTimesTheRecentP95) {
  HedgePolicy p(options_of(16));
  // 100 samples: 1..100 ms; the p95 sample (index 95 of the sorted ones) is 96 ms.
  for (int i = 1; i <= 100; ++i) p.learn(milliseconds(i * 10));
  EXPECT_EQ(p.delay(), milliseconds(960 * 3 / 2));
  // Only the last 128 count: a CDN that became fast brings the delay down to the floor.
  for (int i = 0; i < 128; ++i) p.learn(milliseconds(20));
  EXPECT_EQ(p.delay(), milliseconds(250));
}

TEST(HedgePolicy, AQuarterOfTheSlotsAtMostAndAlwaysOne) {
  HedgePolicy p(options_of(16));
  for (int i = 0; i < 4; ++i) {
    ASSERT_TRUE(p.should_hedge(milliseconds(5000))) << i;
    p.started();
  }
  EXPECT_FALSE(p.slots_left());
  EXPECT_FALSE(p.should_hedge(milliseconds(5000)));
  p.ended();
  EXPECT_TRUE(p.should_hedge(milliseconds(5000)));

  HedgePolicy small(options_of(2));
  EXPECT_TRUE(small.slots_left());
  small.started();
  EXPECT_FALSE(small.slots_left());
}

}  // namespace HUBFS_UNITY_ID
}  // namespace hubfs
