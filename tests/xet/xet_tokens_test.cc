// XetTokens (xet/xet_tokens.h): one fetch for every reader at once, a refresh only near exp or
// after a refusal, and a waiter that gives up at its own deadline. Time is a ManualEnv's.
#include "xet/xet_tokens.h"

#include <gtest/gtest.h>

#include <condition_variable>
#include <future>
#include <thread>
#include <vector>

#include "support/manual_env.h"

namespace hubfs::xet {
namespace HUBFS_UNITY_ID {

TEST(XetTokensTest, FetchesOnceAndAgainOnlyNearExpOrAfterARefusal) {
  testing::ManualEnv env;
  int calls = 0;
  XetTokens tokens([&]() -> Result<XetToken> {
    ++calls;
    return XetToken{"http://cas", "t" + std::to_string(calls), env.system_now() + std::chrono::seconds(100)};
  }, env, std::chrono::seconds(60));
  auto a = tokens.get(Deadline::never());
  ASSERT_TRUE(a.ok());
  EXPECT_EQ(a->access_token, "t1");
  EXPECT_EQ(tokens.get(Deadline::never())->access_token, "t1");
  env.advance(std::chrono::seconds(39));
  EXPECT_EQ(tokens.get(Deadline::never())->access_token, "t1") << "61 s left, more than the margin";
  env.advance(std::chrono::seconds(2));
  EXPECT_EQ(tokens.get(Deadline::never())->access_token, "t2") << "59 s left: refreshed";
  const std::string refused = "t2";
  EXPECT_EQ(tokens.get(Deadline::never(), &refused)->access_token, "t3");
  EXPECT_EQ(tokens.get(Deadline::never(), &refused)->access_token, "t3") << "only the refused token is replaced";
  EXPECT_EQ(tokens.requests(), 3u);
}

TEST(XetTokensTest, ReadersAtOnceShareOneFetchAndAWaiterGivesUpAtItsDeadline) {
  testing::ManualEnv env;
  std::mutex mu;
  std::condition_variable cv;
  bool release = false, entered = false;
  int calls = 0;
  XetTokens tokens([&]() -> Result<XetToken> {
    std::unique_lock<std::mutex> lock(mu);
    ++calls;
    entered = true;
    cv.notify_all();
    cv.wait(lock, [&] { return release; });
    return XetToken{"http://cas", "tok", env.system_now() + std::chrono::seconds(3600)};
  }, env, std::chrono::seconds(60));
  auto leader = std::async(std::launch::async, [&] { return tokens.get(Deadline::never()); });
  {
    std::unique_lock<std::mutex> lock(mu);
    cv.wait(lock, [&] { return entered; });
  }
  // A waiter whose deadline has passed gives up at once; the fetch goes on.
  auto late = tokens.get(Deadline::after(std::chrono::milliseconds(0), env.clock()));
  EXPECT_EQ(late.status().code(), Code::kTimeout);
  std::vector<std::future<Result<XetToken>>> waiters;
  for (int i = 0; i < 4; ++i) waiters.push_back(std::async(std::launch::async, [&] { return tokens.get(Deadline::never()); }));
  {
    std::lock_guard<std::mutex> lock(mu);
    release = true;
  }
  cv.notify_all();
  ASSERT_TRUE(leader.get().ok());
  for (auto& w : waiters) EXPECT_EQ(w.get()->access_token, "tok");
  EXPECT_EQ(calls, 1);
}

TEST(XetTokensTest, AFailureIsReportedAndForgotten) {
  testing::ManualEnv env;
  int calls = 0;
  XetTokens tokens([&]() -> Result<XetToken> {
    if (++calls == 1) return PermissionDenied("no access");
    return XetToken{"http://cas", "tok", env.system_now() + std::chrono::seconds(3600)};
  }, env, std::chrono::seconds(60));
  auto bad = tokens.get(Deadline::never());
  EXPECT_EQ(bad.status().code(), Code::kPermissionDenied);
  EXPECT_NE(bad.status().message().find("Xet read token"), std::string::npos);
  EXPECT_TRUE(tokens.get(Deadline::never()).ok());
  EXPECT_EQ(calls, 2);
}

}  // namespace
}  // namespace hubfs::xet
