// The one primitive for background work: a queue of tasks run by a fixed set of threads, and a
// count of work in flight that shutdown can wait for.
//
// Shutdown semantics (the reason this exists: hand-written queues each invented their own, and
// one lost a wakeup so that shutdown waited forever):
// - drain(): runs every task already posted, and every task posted while one still runs (a
//   task's follow-up work), then joins the threads. A post() that finds a draining queue idle
//   is refused (returns false: the caller must run or cancel the work itself), so nothing runs
//   after its owner is gone and nothing posted is silently dropped.
// - Tasks never run on the caller of post(); a task may post more tasks.
// - The destructor drains. A task must not destroy its own queue.
// Wakeups: workers and waiters use separate condition variables, so a post can never wake a
// waiter instead of a worker.
#pragma once

#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <functional>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "common/env.h"

namespace hubfs {

class TaskQueue : public Executor {
 public:
  // `threads` workers (at least one), started at once.
  explicit TaskQueue(int threads);
  ~TaskQueue() override;
  TaskQueue(const TaskQueue&) = delete;
  TaskQueue& operator=(const TaskQueue&) = delete;

  // Queues the task; false (and the task is not run) once a drain found the queue idle.
  bool post(std::function<void()> task) override;
  // Runs what is queued (and what it queues) to completion, then stops the workers. Idempotent.
  void drain() override;
  // Tasks queued or running.
  size_t pending() const override;

 private:
  void worker();

  mutable std::mutex mu_;
  std::condition_variable work_cv_;  // workers wait here
  std::condition_variable idle_cv_;  // drain() waits here
  std::deque<std::function<void()>> tasks_;
  size_t running_ = 0;
  bool draining_ = false;
  std::vector<std::thread> threads_;
};

// Counts work that will finish on some other thread (an HTTP request in flight, a queued task),
// so an owner can wait until none of it can call back into it any more.
class InFlight {
 public:
  void add(int64_t n = 1);
  void done(int64_t n = 1);
  // Blocks until the count is zero.
  void wait_zero();
  int64_t count() const;

 private:
  mutable std::mutex mu_;
  std::condition_variable zero_cv_;
  int64_t count_ = 0;
};

}  // namespace hubfs
