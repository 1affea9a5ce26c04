// stack/lazy_threads.h: a Stack's executors start their threads on the first task, keep Env's
// executor contract (off the poster, drain runs what is queued, refused after), and a stack built
// for a repo starts none of the pools it has not used yet.
#include "stack/lazy_threads.h"

#include <atomic>
#include <future>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "stack/stack.h"
#include "support/manual_env.h"
#include "support/temp_dir.h"

namespace hubfs {
namespace HUBFS_UNITY_ID {

// The executors really made (their thread counts), in order.
class CountingEnv : public testing::ManualEnv {
 public:
  std::unique_ptr<Executor> new_executor(int threads) override {
    {
      std::lock_guard<std::mutex> lock(mu_);
      made_.push_back(threads);
    }
    return ManualEnv::new_executor(threads);
  }
  std::vector<int> made() const {
    std::lock_guard<std::mutex> lock(mu_);
    return made_;
  }

 private:
  mutable std::mutex mu_;
  std::vector<int> made_;
};

TEST(LazyThreadsTest, AnExecutorNeverPostedToMakesNoThreads) {
  CountingEnv base;
  LazyThreadsEnv env(base);
  {
    auto executor = env.new_executor(16);
    EXPECT_EQ(executor->pending(), 0u);
    EXPECT_FALSE(static_cast<LazyExecutor&>(*executor).started());
  }  // destroyed (drained) unused
  EXPECT_TRUE(base.made().empty());
}

TEST(LazyThreadsTest, TheFirstPostStartsTheRealOneAndTasksRunOffThePoster) {
  CountingEnv base;
  LazyThreadsEnv env(base);
  auto executor = env.new_executor(3);
  std::promise<std::thread::id> ran_on;
  ASSERT_TRUE(executor->post([&ran_on] { ran_on.set_value(std::this_thread::get_id()); }));
  EXPECT_NE(ran_on.get_future().get(), std::this_thread::get_id());
  std::promise<void> second;
  ASSERT_TRUE(executor->post([&second] { second.set_value(); }));
  second.get_future().get();
  EXPECT_EQ(base.made(), std::vector<int>{3});  // made once, with the threads asked for
  EXPECT_TRUE(static_cast<LazyExecutor&>(*executor).started());
}

TEST(LazyThreadsTest, DrainRunsWhatIsQueuedThenRefuses) {
  CountingEnv base;
  LazyThreadsEnv env(base);
  auto executor = env.new_executor(2);
  std::atomic<int> ran{0};
  for (int i = 0; i < 50; ++i) ASSERT_TRUE(executor->post([&ran] { ran.fetch_add(1); }));
  executor->drain();
  EXPECT_EQ(ran.load(), 50);
  EXPECT_EQ(executor->pending(), 0u);
  EXPECT_FALSE(executor->post([&ran] { ran.fetch_add(1); }));
  executor->drain();  // idempotent
  EXPECT_EQ(ran.load(), 50);
}

TEST(LazyThreadsTest, ADrainBeforeAnyPostRefusesLaterOnesWithoutStartingThreads) {
  CountingEnv base;
  LazyThreadsEnv env(base);
  auto executor = env.new_executor(4);
  executor->drain();
  bool ran = false;
  EXPECT_FALSE(executor->post([&ran] { ran = true; }));
  EXPECT_FALSE(ran);
  EXPECT_TRUE(base.made().empty());
}

TEST(LazyThreadsTest, EverythingButExecutorsIsTheBaseEnvs) {
  testing::ManualEnv base(testing::ManualEnv::Timers::kManual);
  LazyThreadsEnv env(base);
  EXPECT_EQ(&env.clock(), &base.clock());
  EXPECT_EQ(&env.base(), &base);
  bool fired = false;
  ASSERT_TRUE(env.schedule_after(std::chrono::milliseconds(5), [&fired] { fired = true; }));
  base.advance(std::chrono::milliseconds(5));
  EXPECT_TRUE(fired);
}

TEST(LazyThreadsTest, AStackStartsNoPoolBeforeItsFirstUse) {
  // Transport, cache and reader built (no request made, nothing read): the reader's disk
  // loaders, the cache's writers and the URL refreshers are not running. What a stack starts at
  // once (if anything) is what its construction posts.
  CountingEnv base;
  testing::TempDir dir;
  SessionConfig config;
  config.endpoint = "http://127.0.0.1:9";
  config.cache_dir = dir.str();
  config.cache_size = 1ull << 30;
  config.max_requests = 7;
  config.token = "";
  Stack stack(base);
  ASSERT_TRUE(build_stack(config, stack).ok());
  ASSERT_TRUE(build_reader(config, stack).ok());
  int threads = 0;
  for (int n : base.made()) threads += n;
  std::string made;
  for (int n : base.made()) made += " " + std::to_string(n);
  // Each of one thread (the transport's loop, the cache's upkeep and writer at most), none of
  // the reader's disk loaders.
  EXPECT_LE(threads, 3) << "executors started while building (their threads):" << made;
  for (int n : base.made()) EXPECT_EQ(n, 1) << "executors started while building (their threads):" << made;
  EXPECT_EQ(stack.env, &stack.lazy_env);
  EXPECT_EQ(&stack.lazy_env.base(), &base);
}

// The session's receive buffer reaches curl (hf:// in Python asks for a small one: its process
// keeps glibc's default malloc, which faulted 512 KiB buffers in afresh per transfer).
TEST(LazyThreadsTest, TheStackGivesCurlTheSessionsReceiveBuffer) {
  testing::TempDir dir;
  for (long bytes : {64L * 1024, 512L * 1024}) {
    SessionConfig config;
    config.endpoint = "http://127.0.0.1:1";
    config.cache_dir = dir.str();
    config.cache_size = 0;
    config.token = "";
    config.receive_buffer_bytes = bytes;
    Stack stack(Env::real());
    ASSERT_TRUE(build_stack(config, stack).ok());
    EXPECT_EQ(stack.curl->options().receive_buffer_bytes, bytes);
  }
}

}  // namespace HUBFS_UNITY_ID
}  // namespace hubfs
