// FileEpochs alone: the epoch a failure moves, and the cleanup's exclusion of lower-tier access.
#include "reader/file_epochs.h"

#include <atomic>
#include <thread>

#include <gtest/gtest.h>

#include "support/wait_for.h"

namespace hubfs {
namespace HUBFS_UNITY_ID {

using testing::wait_for_state;

TEST(FileEpochsTest, AFailureMovesTheEpochAndShutsTheOldOneOut) {
  FileEpochs e;
  EXPECT_EQ(e.current("a"), 0u);
  ASSERT_TRUE(e.enter("a", 0));
  e.leave("a");
  EXPECT_FALSE(e.enter("a", 1));  // an epoch that has not come
  ASSERT_TRUE(e.begin_cleanup("a", 0));
  EXPECT_EQ(e.current("a"), 1u);
  EXPECT_FALSE(e.enter("a", 1)) << "the new epoch must not reach the lower tiers before the cleanup ends";
  e.end_cleanup("a");
  EXPECT_FALSE(e.enter("a", 0)) << "the old epoch's access after the failure";
  ASSERT_TRUE(e.enter("a", 1));
  e.leave("a");
  EXPECT_EQ(e.current("b"), 0u);  // other files are untouched
  ASSERT_TRUE(e.enter("b", 0));
  e.leave("b");
}

// A hash of an epoch already left behind that fails too moves nothing: the new epoch's handles
// must not get errors for the old bytes.
TEST(FileEpochsTest, ALateFailureOfAnOldEpochMovesNothing) {
  FileEpochs e;
  ASSERT_TRUE(e.begin_cleanup("a", 0));
  e.end_cleanup("a");
  EXPECT_FALSE(e.begin_cleanup("a", 0));
  EXPECT_EQ(e.current("a"), 1u);
  ASSERT_TRUE(e.begin_cleanup("a", 1));
  e.end_cleanup("a");
  EXPECT_EQ(e.current("a"), 2u);
}

// The cleanup waits for the accesses under way (a write-back of the old epoch lands before the
// removals), and while it waits and runs, no access of either epoch gets in.
TEST(FileEpochsTest, TheCleanupWaitsForAccessesUnderWayAndAdmitsNoneMeanwhile) {
  FileEpochs e;
  ASSERT_TRUE(e.enter("a", 0));  // a write-back of the old epoch, under way
  std::atomic<bool> began{false}, cleaned_after_leave{false};
  std::atomic<bool> left{false};
  std::thread cleanup([&] {
    began = e.begin_cleanup("a", 0);
    cleaned_after_leave = left.load();  // the removals would run here
    e.end_cleanup("a");
  });
  wait_for_state([&] { return e.current("a") == 1; });  // the epoch moved: the cleanup began and waits
  EXPECT_FALSE(e.enter("a", 1));
  EXPECT_FALSE(e.enter("a", 0));
  left = true;
  e.leave("a");
  cleanup.join();
  EXPECT_TRUE(began.load());
  EXPECT_TRUE(cleaned_after_leave.load()) << "the cleanup ran while an access was under way";
  ASSERT_TRUE(e.enter("a", 1));
  e.leave("a");
}

}  // namespace HUBFS_UNITY_ID
}  // namespace hubfs
