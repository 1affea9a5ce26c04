// Expiring marks (hinted files, timed-out blocks) on a manual Env's clock: no sleeps.
#include "reader/recent_keys.h"
#include "reader/timed_out_blocks.h"

#include <gtest/gtest.h>

#include "support/manual_env.h"

namespace hubfs {
namespace HUBFS_UNITY_ID {

using namespace std::chrono_literals;

TEST(RecentKeys, AMarkLastsItsMemoryThenGoes) {
  testing::ManualEnv env;
  RecentKeys keys(env, 30s, 16);
  EXPECT_FALSE(keys.marked_ago("f"));
  keys.mark("f");
  env.advance(29s);
  ASSERT_TRUE(keys.marked_ago("f"));
  EXPECT_EQ(*keys.marked_ago("f"), 29s);
  env.advance(1s);
  EXPECT_FALSE(keys.marked_ago("f"));
  EXPECT_TRUE(keys.empty());  // the expired mark was dropped
}

TEST(RecentKeys, PastItsBoundTheTableStartsOver) {
  testing::ManualEnv env;
  RecentKeys keys(env, 30s, 2);
  keys.mark("a");
  keys.mark("b");
  keys.mark("c");  // clears a and b first
  EXPECT_FALSE(keys.marked_ago("a"));
  EXPECT_TRUE(keys.marked_ago("c"));
}

TEST(TimedOutBlocks, AReadRightAfterATimeoutFailsAtOnceUntilTheBlockIsServedOrTimePasses) {
  testing::ManualEnv env;
  TimedOutBlocks timed_out(env, 2000ms);
  MemoryTier memory(1 << 20);
  const std::string id = "sha256:ab";
  EXPECT_TRUE(timed_out.check("f", id, 0, 3, memory).ok());
  timed_out.mark(id, 2);
  env.advance(300ms);
  Status st = timed_out.check("data/f.bin", id, 0, 3, memory);
  EXPECT_EQ(st.code(), Code::kTimeout);
  EXPECT_NE(st.message().find("block 2"), std::string::npos) << st.message();
  EXPECT_NE(st.message().find("300 ms ago"), std::string::npos) << st.message();
  EXPECT_TRUE(timed_out.check("f", id, 3, 5, memory).ok());  // other blocks are not affected
  // Served since (a late answer): reads get it.
  memory.put(BlockId{id, 2, 1}, BlockBytes{std::make_shared<const std::string>("x"), 0, 1});
  EXPECT_TRUE(timed_out.check("f", id, 0, 3, memory).ok());
  // Or enough time passed: the network is tried afresh.
  timed_out.mark(id, 1);
  env.advance(TimedOutBlocks::kTimedOutMemory);
  EXPECT_TRUE(timed_out.check("f", id, 0, 3, memory).ok());
}

}  // namespace
}  // namespace hubfs
