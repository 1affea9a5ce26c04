#include "common/task_queue.h"

#include <gtest/gtest.h>

#include <future>

#include <atomic>
#include <chrono>
#include <thread>

namespace hubfs {
namespace HUBFS_UNITY_ID {

TEST(TaskQueue, RunsEveryTaskBeforeDrainReturns) {
  std::atomic<int> ran{0};
  TaskQueue q(2);
  for (int i = 0; i < 1000; ++i) ASSERT_TRUE(q.post([&] { ++ran; }));
  q.drain();
  EXPECT_EQ(ran.load(), 1000);
  EXPECT_EQ(q.pending(), 0u);
}

TEST(TaskQueue, FollowUpTasksPostedByATaskRunBeforeDrainReturns) {
  std::atomic<int> ran{0};
  TaskQueue q(2);
  std::function<void(int)> chain = [&](int left) {
    ++ran;
    if (left > 0) {
      EXPECT_TRUE(q.post([&, left] { chain(left - 1); }));
    }
  };
  q.post([&] { chain(50); });
  q.drain();
  EXPECT_EQ(ran.load(), 51);
}

TEST(TaskQueue, PostAfterDrainIsRefusedAndNotRun) {
  TaskQueue q(1);
  q.drain();
  bool ran = false;
  EXPECT_FALSE(q.post([&] { ran = true; }));
  EXPECT_FALSE(ran);
  q.drain();  // idempotent
}

// The bug this primitive replaced: a post could wake the thread waiting for the queue to empty
// instead of a worker, leaving a task queued forever. Many short races, every one must end.
TEST(TaskQueue, DrainWhilePostsRaceNeverHangs) {
  for (int round = 0; round < 200; ++round) {
    std::atomic<int> ran{0};
    int accepted = 0;
    {
      TaskQueue q(2);
      std::thread poster([&] {
        for (int i = 0; i < 50; ++i)
          if (q.post([&] { ++ran; })) ++accepted;
      });
      q.post([&] { ++ran; });
      poster.join();
      q.drain();
    }
    EXPECT_EQ(ran.load(), accepted + 1);
  }
}

TEST(InFlight, WaitZeroReturnsOnceEveryAddIsDone) {
  InFlight f;
  f.add(3);
  std::thread t([&] {
    for (int i = 0; i < 3; ++i) f.done();
  });
  f.wait_zero();
  EXPECT_EQ(f.count(), 0);
  t.join();
}

}  // namespace
}  // namespace hubfs

#include "common/timer.h"

namespace hubfs {
namespace HUBFS_UNITY_ID {

TEST(Timer, RunsInDeadlineOrder) {
  Timer timer;
  std::mutex mu;
  std::vector<int> order;
  std::promise<void> all_ran;
  for (int delay : {60, 20, 40}) {
    timer.schedule(std::chrono::milliseconds(delay), [&, delay] {
      std::lock_guard<std::mutex> lock(mu);
      order.push_back(delay);
      if (order.size() == 3) all_ran.set_value();
    });
  }
  // Bounded, for a loaded machine; a wait for what must happen, not for what must not.
  ASSERT_EQ(all_ran.get_future().wait_for(std::chrono::seconds(60)), std::future_status::ready);
  std::lock_guard<std::mutex> lock(mu);
  EXPECT_EQ(order, (std::vector<int>{20, 40, 60}));
}

// Nothing scheduled is ever dropped: what is still waiting runs at shutdown, on the caller.
TEST(Timer, ShutdownRunsWhatIsWaitingAndRefusesLaterSchedules) {
  Timer timer;
  std::atomic<int> ran{0};
  for (int i = 0; i < 10; ++i) ASSERT_TRUE(timer.schedule(std::chrono::hours(1), [&] { ++ran; }));
  timer.shutdown();
  EXPECT_EQ(ran.load(), 10);
  EXPECT_FALSE(timer.schedule(std::chrono::milliseconds(0), [&] { ++ran; }));
  EXPECT_EQ(ran.load(), 10);
  timer.shutdown();  // idempotent
}

}  // namespace
}  // namespace hubfs
