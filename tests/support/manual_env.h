// An Env (common/env.h) whose time moves only when the test moves it, and an executor that runs
// tasks on the poster's thread: time rules (backoff, expiry, circuit breakers, quota holds) are
// tested without waiting for time to pass, and background work without waiting for threads.
//
// Timers: in the default mode, schedule_after queues the function and advance() runs, on the
// test's thread, every function that falls due, in due order (FIFO on ties), with the clock at its
// due time. Two other modes serve tests that only care which delays were asked for:
// kRunAtOnce runs the function inside schedule_after without moving the clock; kAdvanceAndRun
// first moves the clock by the delay. Every mode records the delays asked for.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <memory>
#include <mutex>
#include <utility>
#include <vector>

#include "common/env.h"
#include "common/task_queue.h"
#include "support/manual_clock.h"

namespace hubfs::testing {

// Runs each task at once, on the thread that posts it (so `post` returns after the task ran).
// Unlike a TaskQueue, a task runs on its poster: use it where the code under test does not
// hold a lock the task takes.
class InlineExecutor : public Executor {
 public:
  bool post(std::function<void()> task) override {
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (drained_) return false;
      ++running_;
    }
    task();
    std::lock_guard<std::mutex> lock(mu_);
    --running_;
    return true;
  }
  void drain() override {
    std::lock_guard<std::mutex> lock(mu_);
    drained_ = true;
  }
  size_t pending() const override {
    std::lock_guard<std::mutex> lock(mu_);
    return running_;
  }

 private:
  mutable std::mutex mu_;
  bool drained_ = false;
  size_t running_ = 0;
};

class ManualEnv : public Env {
 public:
  enum class Timers { kManual, kRunAtOnce, kAdvanceAndRun };

  explicit ManualEnv(Timers timers = Timers::kManual) : timers_(timers) {}

  const MonotonicClock& clock() const override { return clock_; }
  // Wall time moves with the manual clock, from a fixed start (2026-01-01T00:00:00Z).
  std::chrono::system_clock::time_point system_now() const override {
    return wall_start_ + std::chrono::duration_cast<std::chrono::system_clock::duration>(clock_.now() - start_);
  }
  void set_system_now(std::chrono::system_clock::time_point t) {
    wall_start_ = t - std::chrono::duration_cast<std::chrono::system_clock::duration>(clock_.now() - start_);
  }

  bool schedule_after(std::chrono::milliseconds delay, std::function<void()> fn) override {
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (stopped_) return false;
      delays_.push_back(delay);
      if (timers_ == Timers::kManual) {
        waiting_.emplace(std::make_pair(clock_.now() + delay, next_seq_++), std::move(fn));
        scheduled_cv_.notify_all();
        return true;
      }
    }
    if (timers_ == Timers::kAdvanceAndRun) clock_.advance(delay);
    fn();
    return true;
  }

  // TaskQueues, unless inline_executors(true) (then InlineExecutor).
  std::unique_ptr<Executor> new_executor(int threads) override {
    if (inline_executors_) return std::make_unique<InlineExecutor>();
    return std::make_unique<TaskQueue>(threads);
  }
  void inline_executors(bool on) { inline_executors_ = on; }

  // Moves the clock by d, running every function due by then (and those they schedule that
  // fall due by then) on this thread, each with the clock at its due time.
  void advance(std::chrono::nanoseconds d) {
    const MonotonicClock::time_point target = clock_.now() + d;
    for (;;) {
      std::function<void()> fn;
      MonotonicClock::time_point due;
      {
        std::lock_guard<std::mutex> lock(mu_);
        if (waiting_.empty() || waiting_.begin()->first.first > target) break;
        auto it = waiting_.begin();
        due = it->first.first;
        fn = std::move(it->second);
        waiting_.erase(it);
      }
      // Outside mu_: moving the clock wakes waits on it, under their owners' locks.
      if (due > clock_.now()) clock_.advance(due - clock_.now());
      fn();
    }
    if (target > clock_.now()) clock_.advance(target - clock_.now());
  }
  // Runs what is due now, without moving the clock.
  void run_due() { advance(std::chrono::nanoseconds(0)); }

  // Functions waiting for their time (kManual).
  size_t waiting() const {
    std::lock_guard<std::mutex> lock(mu_);
    return waiting_.size();
  }
  // Waits until at least n functions wait (work on other threads schedules them): a wait for
  // what must happen, bounded for a loaded machine. False if it did not happen within `bound`.
  bool wait_until_waiting(size_t n, std::chrono::seconds bound = std::chrono::seconds(60)) {
    std::unique_lock<std::mutex> lock(mu_);
    return scheduled_cv_.wait_for(lock, bound, [&] { return waiting_.size() >= n; });
  }
  // Time from now until the next waiting function is due; nullopt when none waits.
  std::optional<std::chrono::nanoseconds> next_due_in() const {
    std::lock_guard<std::mutex> lock(mu_);
    if (waiting_.empty()) return std::nullopt;
    return waiting_.begin()->first.first - clock_.now();
  }
  // Every delay asked for so far, in order.
  std::vector<std::chrono::milliseconds> delays() const {
    std::lock_guard<std::mutex> lock(mu_);
    return delays_;
  }
  // From now on schedule_after refuses (returns false), as a stopped Env does.
  void stop() {
    std::lock_guard<std::mutex> lock(mu_);
    stopped_ = true;
  }

  ManualClock& manual_clock() { return clock_; }

 private:
  const Timers timers_;
  ManualClock clock_;
  const MonotonicClock::time_point start_ = clock_.now();
  std::chrono::system_clock::time_point wall_start_ =
      std::chrono::system_clock::time_point(std::chrono::seconds(1767225600));
  bool inline_executors_ = false;

  mutable std::mutex mu_;  // a leaf: never held while a function runs
  std::condition_variable scheduled_cv_;  // a function was queued (kManual)
  bool stopped_ = false;
  uint64_t next_seq_ = 0;
  std::map<std::pair<MonotonicClock::time_point, uint64_t>, std::function<void()>> waiting_;
  std::vector<std::chrono::milliseconds> delays_;
};

// An Env assembled from functions, for tests whose time follows a script (a fake network moves
// it, a hook runs when the time is read). Empty functions: a ManualClock of its own that
// advance() moves, a fixed wall time moving with it, and schedule_after running the function at
// once. Executors are TaskQueues.
class FunctionEnv : public Env {
 public:
  std::function<MonotonicClock::time_point()> steady;
  std::function<std::chrono::system_clock::time_point()> wall;
  std::function<void(std::chrono::milliseconds, std::function<void()>)> schedule;

  const MonotonicClock& clock() const override { return adapter_; }
  std::chrono::system_clock::time_point system_now() const override {
    if (wall) return wall();
    return std::chrono::system_clock::time_point(std::chrono::seconds(1700000000)) +
           std::chrono::duration_cast<std::chrono::system_clock::duration>(own_.now() - own_start_);
  }
  bool schedule_after(std::chrono::milliseconds delay, std::function<void()> fn) override {
    if (schedule) {
      schedule(delay, std::move(fn));
    } else {
      fn();
    }
    return true;
  }
  std::unique_ptr<Executor> new_executor(int threads) override { return std::make_unique<TaskQueue>(threads); }
  void advance(std::chrono::nanoseconds d) { own_.advance(d); }

 private:
  class Adapter : public MonotonicClock {
   public:
    explicit Adapter(const FunctionEnv& env) : env_(env) {}
    time_point now() const override { return env_.steady ? env_.steady() : env_.own_.now(); }
    bool wait_until(std::condition_variable& cv, std::unique_lock<std::mutex>& lock, time_point at,
                    const std::function<bool()>& done) const override {
      if (!env_.steady) return env_.own_.wait_until(cv, lock, at, done);
      // A scripted clock tells no one when it moves: look again every millisecond.
      while (!done() && now() < at) cv.wait_for(lock, std::chrono::milliseconds(1));
      return done();
    }

   private:
    const FunctionEnv& env_;
  };
  ManualClock own_;
  const MonotonicClock::time_point own_start_ = own_.now();
  Adapter adapter_{*this};
};

}  // namespace hubfs::testing
