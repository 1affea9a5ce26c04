// The Env seam (common/env.h): the real one runs delayed work and executors, ScheduledGroup
// flushes at shutdown, and the manual one (tests/support/manual_env.h) moves time only when told.
#include "common/env.h"

#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <future>
#include <mutex>
#include <thread>
#include <vector>

#include "support/manual_env.h"
#include "support/sanitized.h"

namespace hubfs {
namespace HUBFS_UNITY_ID {

using std::chrono::hours;
using std::chrono::milliseconds;
using std::chrono::seconds;
using testing::ManualEnv;

// A child forked after the timer thread started has no such thread: its functions run on one
// of its own. Tested in the Release pass only (and by tests/python/test_processes.py there):
// - not under ThreadSanitizer, whose die_after_fork (on by default) ends a child that starts a
//   thread after a multi-threaded fork;
// - not under AddressSanitizer: Debian 12's libasan (GCC 12) does not intercept fork, so its
//   allocator's locks are not taken across it, and a child forked while the busy thread below
//   allocates can block in malloc for good (seen once in 6 ASan runs: the child's new timer thread
//   never ran). glibc's malloc, which the product uses, is locked across fork.
// Not compiled at all under either: a skipped test fails the suite (tests/cmake).
#if !HUBFS_UNDER_TSAN && !HUBFS_UNDER_ASAN
TEST(RealEnv, AForkedChildGetsATimerOfItsOwn) {
  std::promise<void> ran;
  ASSERT_TRUE(Env::real().schedule_after(milliseconds(1), [&] { ran.set_value(); }));
  ASSERT_EQ(ran.get_future().wait_for(seconds(60)), std::future_status::ready);  // the parent's timer runs
  // Keep the parent's timer busy across the fork: its lock may be held in the copy the child gets.
  std::atomic<bool> stop{false};
  std::thread busy([&] {
    while (!stop) {
      std::promise<void> p;
      Env::real().schedule_after(milliseconds(0), [&p] { p.set_value(); });
      p.get_future().wait();
    }
  });
  const pid_t pid = fork();
  if (pid == 0) {
    alarm(120);  // a hang ends the child (SIGALRM), which fails the test below
    std::promise<void> in_child;
    const bool scheduled = Env::real().schedule_after(milliseconds(1), [&] { in_child.set_value(); });
    const bool fired = scheduled && in_child.get_future().wait_for(seconds(60)) == std::future_status::ready;
    _exit(fired ? 0 : 1);
  }
  stop = true;
  busy.join();
  ASSERT_GT(pid, 0);
  int status = 0;
  ASSERT_EQ(waitpid(pid, &status, 0), pid);
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 0) << "the child's scheduled function never ran";
}
#endif  // !HUBFS_UNDER_TSAN && !HUBFS_UNDER_ASAN

TEST(RealEnv, SchedulesOnItsTimerThread) {
  std::promise<std::thread::id> ran;
  auto on = ran.get_future();
  ASSERT_TRUE(Env::real().schedule_after(milliseconds(1), [&] { ran.set_value(std::this_thread::get_id()); }));
  ASSERT_EQ(on.wait_for(seconds(60)), std::future_status::ready);
  EXPECT_NE(on.get(), std::this_thread::get_id());
}

TEST(RealEnv, ExecutorsRunTasksOffThePoster) {
  auto executor = Env::real().new_executor(2);
  std::atomic<int> off_thread{0};
  const auto me = std::this_thread::get_id();
  for (int i = 0; i < 20; ++i) {
    ASSERT_TRUE(executor->post([&] {
      if (std::this_thread::get_id() != me) ++off_thread;
    }));
  }
  executor->drain();
  EXPECT_EQ(off_thread.load(), 20);
  EXPECT_FALSE(executor->post([] {}));
}

TEST(RealEnv, ClocksMove) {
  const auto a = Env::real().now();
  const auto w = Env::real().system_now();
  EXPECT_GE(Env::real().now(), a);
  EXPECT_GT(w.time_since_epoch().count(), 0);
}

TEST(ManualEnv, AdvanceRunsWhatFallsDueInOrderWithTheClockAtItsTime) {
  ManualEnv env;
  std::vector<int> order;
  std::vector<MonotonicClock::time_point> at;
  const auto start = env.now();
  for (int delay : {60, 20, 40}) {
    env.schedule_after(milliseconds(delay), [&, delay] {
      order.push_back(delay);
      at.push_back(env.now());
    });
  }
  env.advance(milliseconds(39));
  EXPECT_EQ(order, (std::vector<int>{20}));
  env.advance(milliseconds(100));
  EXPECT_EQ(order, (std::vector<int>{20, 40, 60}));
  ASSERT_EQ(at.size(), 3u);
  EXPECT_EQ(at[0] - start, milliseconds(20));
  EXPECT_EQ(at[2] - start, milliseconds(60));
  EXPECT_EQ(env.now() - start, milliseconds(139));
  EXPECT_EQ(env.waiting(), 0u);
}

TEST(ManualEnv, WallTimeMovesWithTheManualClock) {
  ManualEnv env;
  const auto w = env.system_now();
  env.advance(seconds(90));
  EXPECT_EQ(env.system_now() - w, seconds(90));
}

TEST(ManualEnv, AFunctionMayScheduleMoreThatRunsInTheSameAdvance) {
  ManualEnv env;
  int ran = 0;
  env.schedule_after(seconds(1), [&] {
    ++ran;
    env.schedule_after(seconds(1), [&] { ++ran; });
  });
  env.advance(seconds(2));
  EXPECT_EQ(ran, 2);
}

TEST(ScheduledGroup, RunsOnTheEnvsTimeAndExactlyOnce) {
  ManualEnv env;
  ScheduledGroup group(env);
  int ran = 0;
  ASSERT_TRUE(group.schedule_after(seconds(5), [&] { ++ran; }));
  EXPECT_EQ(group.waiting(), 1u);
  env.advance(seconds(4));
  EXPECT_EQ(ran, 0);
  env.advance(seconds(1));
  EXPECT_EQ(ran, 1);
  EXPECT_EQ(group.waiting(), 0u);
  group.shutdown();  // nothing left: runs nothing again
  EXPECT_EQ(ran, 1);
}

// Nothing scheduled is dropped: what still waits runs at shutdown, on the caller, and the Env's
// entries that fall due later find nothing to run.
TEST(ScheduledGroup, ShutdownRunsWhatIsWaitingAndRefusesLaterSchedules) {
  ManualEnv env;
  std::vector<int> order;
  {
    ScheduledGroup group(env);
    for (int i = 0; i < 5; ++i) ASSERT_TRUE(group.schedule_after(hours(1), [&, i] { order.push_back(i); }));
    group.shutdown();
    EXPECT_EQ(order, (std::vector<int>{0, 1, 2, 3, 4}));
    EXPECT_FALSE(group.schedule_after(milliseconds(0), [&] { order.push_back(99); }));
  }
  env.advance(hours(2));  // the group is gone: its entries run nothing
  EXPECT_EQ(order.size(), 5u);
}

TEST(ScheduledGroup, AStoppedEnvRefusesAndTheCallerRunsIt) {
  ManualEnv env;
  env.stop();
  ScheduledGroup group(env);
  EXPECT_FALSE(group.schedule_after(milliseconds(1), [] {}));
  EXPECT_EQ(group.waiting(), 0u);
}

TEST(ScheduledGroup, OnTheRealEnvShutdownWaitsForNothingLeftBehind) {
  std::atomic<int> ran{0};
  {
    ScheduledGroup group(Env::real());
    std::promise<void> first;
    auto first_ran = first.get_future();
    ASSERT_TRUE(group.schedule_after(milliseconds(0), [&] {
      ++ran;
      first.set_value();
    }));
    ASSERT_TRUE(group.schedule_after(hours(1), [&] { ++ran; }));
    ASSERT_EQ(first_ran.wait_for(seconds(60)), std::future_status::ready);
  }  // shutdown runs the hour-long one now
  EXPECT_EQ(ran.load(), 2);
}

TEST(InlineExecutor, RunsOnThePosterUntilDrained) {
  testing::InlineExecutor executor;
  const auto me = std::this_thread::get_id();
  std::thread::id on;
  ASSERT_TRUE(executor.post([&] { on = std::this_thread::get_id(); }));
  EXPECT_EQ(on, me);
  executor.drain();
  bool ran = false;
  EXPECT_FALSE(executor.post([&] { ran = true; }));
  EXPECT_FALSE(ran);
}

}  // namespace
}  // namespace hubfs
