// h5chunk's per-file helper threads (core/h5chunk/helper_pool.h): reads reuse the same threads,
// a read's join waits for the helpers that started, and those that did not start never run.
#include "h5chunk/helper_pool.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <future>
#include <mutex>
#include <set>
#include <thread>

namespace h5chunk {
namespace HUBFS_UNITY_ID {

TEST(HelperPool, ReadsReuseTheSameThreads) {
  HelperPool pool;
  std::mutex mu;
  std::set<std::thread::id> seen;
  for (int read = 0; read < 20; ++read) {
    auto run = pool.start(2, [&] {
      std::lock_guard<std::mutex> lock(mu);
      seen.insert(std::this_thread::get_id());
    });
    run->join();
  }
  // Two threads at most, however many reads (threads spawned per read would give up to 40).
  EXPECT_LE(seen.size(), 2u);
  EXPECT_EQ(seen.count(std::this_thread::get_id()), 0u);
}

TEST(HelperPool, JoinWaitsForStartedHelpers) {
  HelperPool pool;
  std::promise<void> started;
  std::atomic<bool> release{false};
  std::atomic<bool> finished{false};
  auto run = pool.start(1, [&] {
    started.set_value();
    while (!release.load()) std::this_thread::yield();
    finished = true;
  });
  ASSERT_EQ(started.get_future().wait_for(std::chrono::seconds(60)), std::future_status::ready);
  std::thread releaser([&] { release = true; });
  run->join();
  EXPECT_TRUE(finished.load()) << "join returned while its helper still ran";
  releaser.join();
}

// A read whose helpers are all busy with another read never waits for them: it joins at once,
// and its queued helpers, when the threads free up, run nothing.
TEST(HelperPool, HelpersThatDidNotStartBeforeJoinNeverRun) {
  HelperPool pool;
  std::mutex mu;
  std::condition_variable cv;
  bool busy_started = false, release = false;
  auto busy = pool.start(1, [&] {
    std::unique_lock<std::mutex> lock(mu);
    busy_started = true;
    cv.notify_all();
    cv.wait(lock, [&] { return release; });
  });
  {
    std::unique_lock<std::mutex> lock(mu);
    ASSERT_TRUE(cv.wait_for(lock, std::chrono::seconds(60), [&] { return busy_started; }));
  }
  std::atomic<int> ran{0};
  auto second = pool.start(1, [&] { ++ran; });
  second->join();  // the only thread is busy: returns without waiting
  {
    std::lock_guard<std::mutex> lock(mu);
    release = true;
  }
  cv.notify_all();
  busy->join();
  // The queue is FIFO on one thread: a third read's helper runs only after the second's queued
  // one was taken, so once it ran, the second's had its turn and ran nothing.
  std::promise<void> third_ran;
  auto third = pool.start(1, [&] { third_ran.set_value(); });
  ASSERT_EQ(third_ran.get_future().wait_for(std::chrono::seconds(60)), std::future_status::ready);
  third->join();
  EXPECT_EQ(ran.load(), 0);
}

TEST(HelperPool, NoHelpersAskedRunsNothing) {
  HelperPool pool;
  std::atomic<int> ran{0};
  auto run = pool.start(0, [&] { ++ran; });
  run->join();
  EXPECT_EQ(ran.load(), 0);
}

}  // namespace
}  // namespace h5chunk
