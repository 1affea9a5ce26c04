// PlanCache (xet/plan_cache.h): a kept plan serves every read inside its range until its TTL on
// the Env's clock, `fresh` and forget() drop a file's plans, and reads asking for one range at
// once share one request. Time is a ManualEnv's.
#include "xet/plan_cache.h"

#include <gtest/gtest.h>

#include <condition_variable>
#include <future>
#include <vector>

#include "support/manual_env.h"

namespace hubfs::xet {
namespace HUBFS_UNITY_ID {

MerkleHash hash_of(uint8_t b) {
  MerkleHash h;
  h.bytes[0] = b;
  return h;
}

TEST(PlanCacheTest, KeepsPlansForTheirRangeUntilTheirTtl) {
  testing::ManualEnv env;
  PlanCache cache(env, std::chrono::seconds(300), 16);
  int asked = 0;
  PlanCache::Ask ask = [&](const MerkleHash&, hubfs::ByteRange, const Deadline&, int* version) {
    ++asked;
    *version = 2;
    return Result<std::shared_ptr<const ReconstructionPlan>>(std::make_shared<const ReconstructionPlan>());
  };
  const MerkleHash f = hash_of(1);
  auto a = cache.get(f, {100, 1000}, Deadline::never(), false, ask);
  ASSERT_TRUE(a.ok());
  EXPECT_EQ(a->covered.offset, 100u);
  EXPECT_EQ(a->covered.length, 1000u);
  EXPECT_TRUE(cache.get(f, {200, 800}, Deadline::never(), false, ask).ok());
  EXPECT_EQ(asked, 1) << "inside the kept plan's range";
  EXPECT_TRUE(cache.get(f, {200, 1000}, Deadline::never(), false, ask).ok());
  EXPECT_EQ(asked, 2) << "past its end";
  EXPECT_TRUE(cache.get(hash_of(2), {200, 800}, Deadline::never(), false, ask).ok());
  EXPECT_EQ(asked, 3) << "another file";
  env.advance(std::chrono::seconds(300));
  EXPECT_TRUE(cache.get(f, {200, 800}, Deadline::never(), false, ask).ok());
  EXPECT_EQ(asked, 4) << "past the TTL its URLs may be expiring";
  EXPECT_TRUE(cache.get(f, {200, 800}, Deadline::never(), true, ask).ok());
  EXPECT_EQ(asked, 5) << "fresh";
  cache.forget(f);
  EXPECT_TRUE(cache.get(f, {200, 800}, Deadline::never(), false, ask).ok());
  EXPECT_EQ(asked, 6) << "forgotten";
  EXPECT_EQ(cache.requests(), 6u);
}

TEST(PlanCacheTest, AFailureIsNotKept) {
  testing::ManualEnv env;
  PlanCache cache(env, std::chrono::seconds(300), 16);
  int asked = 0;
  PlanCache::Ask ask = [&](const MerkleHash&, hubfs::ByteRange, const Deadline&, int*)
      -> Result<std::shared_ptr<const ReconstructionPlan>> {
    if (++asked == 1) return Unavailable("the service failed");
    return std::make_shared<const ReconstructionPlan>();
  };
  EXPECT_EQ(cache.get(hash_of(1), {0, 10}, Deadline::never(), false, ask).status().code(), Code::kUnavailable);
  EXPECT_TRUE(cache.get(hash_of(1), {0, 10}, Deadline::never(), false, ask).ok());
  EXPECT_EQ(asked, 2);
  EXPECT_EQ(cache.size(), 1u);
}

TEST(PlanCacheTest, ReadsOfOneRangeAtOnceShareOneRequest) {
  testing::ManualEnv env;
  PlanCache cache(env, std::chrono::seconds(300), 16);
  std::mutex mu;
  std::condition_variable cv;
  bool release = false, entered = false;
  int asked = 0;
  PlanCache::Ask ask = [&](const MerkleHash&, hubfs::ByteRange, const Deadline&, int* version) {
    std::unique_lock<std::mutex> lock(mu);
    ++asked;
    entered = true;
    cv.notify_all();
    cv.wait(lock, [&] { return release; });
    *version = 1;
    return Result<std::shared_ptr<const ReconstructionPlan>>(std::make_shared<const ReconstructionPlan>());
  };
  auto leader = std::async(std::launch::async, [&] { return cache.get(hash_of(1), {0, 10}, Deadline::never(), false, ask); });
  {
    std::unique_lock<std::mutex> lock(mu);
    cv.wait(lock, [&] { return entered; });
  }
  auto late = cache.get(hash_of(1), {0, 10}, Deadline::after(std::chrono::milliseconds(0), env.clock()), false, ask);
  EXPECT_EQ(late.status().code(), Code::kTimeout) << "a waiter out of time gives up; the request goes on";
  EXPECT_EQ(cache.joined(), 1u);
  {
    std::lock_guard<std::mutex> lock(mu);
    release = true;
  }
  cv.notify_all();
  auto got = leader.get();
  ASSERT_TRUE(got.ok());
  EXPECT_EQ(got->version, 1);
  EXPECT_EQ(asked, 1);
}

}  // namespace
}  // namespace hubfs::xet
