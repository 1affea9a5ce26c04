#include "common/latency_histogram.h"

#include <gtest/gtest.h>

namespace hubfs {
namespace HUBFS_UNITY_ID {

using std::chrono::microseconds;
using std::chrono::milliseconds;
using std::chrono::seconds;

TEST(LatencyHistogram, EachObservationLandsInTheFirstBucketAtOrAboveIt) {
  LatencyHistogram h;
  h.observe(microseconds(200));   // <= 0.5 ms: the first bucket
  h.observe(microseconds(500));   // exactly a bound: that bucket (Prometheus's le)
  h.observe(milliseconds(30));    // (25 ms, 50 ms]
  h.observe(seconds(31), 3);      // above every bound, three times
  const LatencySnapshot s = h.snapshot();
  ASSERT_EQ(s.counts.size(), LatencyHistogram::kBoundsS.size() + 1);
  EXPECT_EQ(s.counts[0], 2u);
  EXPECT_EQ(s.counts[6], 1u);  // kBoundsS[6] = 0.05
  EXPECT_EQ(s.counts.back(), 3u);
  EXPECT_EQ(s.count, 6u);
  EXPECT_NEAR(s.sum_s, 0.0002 + 0.0005 + 0.030 + 93, 1e-9);
}

TEST(LatencyHistogram, ANegativeDurationCountsAsZeroAndZeroTimesNothing) {
  LatencyHistogram h;
  h.observe(milliseconds(-5));
  h.observe(milliseconds(7), 0);
  const LatencySnapshot s = h.snapshot();
  EXPECT_EQ(s.count, 1u);
  EXPECT_EQ(s.counts[0], 1u);
  EXPECT_EQ(s.sum_s, 0);
}

}  // namespace HUBFS_UNITY_ID
}  // namespace hubfs
