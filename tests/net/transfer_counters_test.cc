#include "net/transfer_counters.h"

#include <gtest/gtest.h>

namespace hubfs {
namespace HUBFS_UNITY_ID {

TEST(TransferCounters, EachEventCountsInItsOwnField) {
  TransferCounters c;
  c.request_started();
  c.request_started();
  c.hedge_started();
  c.hedge_won();
  c.set_in_flight(5);
  c.set_in_flight(3);  // a mirror of the loop's count, not a sum
  CurlStats s = c.snapshot();
  EXPECT_EQ(s.requests, 2u);
  EXPECT_EQ(s.hedges, 1u);
  EXPECT_EQ(s.hedge_wins, 1u);
  EXPECT_EQ(s.in_flight, 3u);
  EXPECT_EQ(s.queued, 0u);  // the transport's queue fills it in
}

}  // namespace HUBFS_UNITY_ID
}  // namespace hubfs
