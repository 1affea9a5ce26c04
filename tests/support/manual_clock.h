// A MonotonicClock that moves only when the test moves it: retry, deadline and timeout rules are
// tested without waiting for time to pass. A wait with a limit on this clock (wait_until,
// Deadline::wait) ends when advance() moves the clock to its limit, whichever thread moves it.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <functional>
#include <list>
#include <memory>
#include <mutex>

#include "common/deadline.h"

namespace hubfs::testing {

class ManualClock : public MonotonicClock {
 public:
  time_point now() const override { return time_point(std::chrono::nanoseconds(ns_.load())); }

  // Moves the clock, then wakes every wait whose limit it reached.
  void advance(std::chrono::nanoseconds d) {
    ns_ += d.count();
    std::list<std::shared_ptr<Sleeper>> due;
    {
      std::lock_guard<std::mutex> lock(mu_);
      for (const auto& s : sleepers_)
        if (s->at <= now()) due.push_back(s);
    }
    for (const auto& s : due) {
      std::lock_guard<std::mutex> guard(s->mu);
      if (s->gone) continue;
      // Under the waiter's own lock: it is either before its check of the time (and will see the
      // new one) or inside cv.wait (and gets this notification); never in between.
      std::lock_guard<std::mutex> waiter(*s->lock);
      s->cv->notify_all();
    }
  }

  bool wait_until(std::condition_variable& cv, std::unique_lock<std::mutex>& lock, time_point at,
                  const std::function<bool()>& done) const override {
    auto s = std::make_shared<Sleeper>();
    s->cv = &cv;
    s->lock = lock.mutex();
    s->at = at;
    std::list<std::shared_ptr<Sleeper>>::iterator it;
    {
      std::lock_guard<std::mutex> guard(mu_);
      it = sleepers_.insert(sleepers_.end(), s);
    }
    slept_.notify_all();
    while (!done() && now() < at) cv.wait(lock);
    // Leave the list with the caller's lock released: advance() takes the sleeper's lock, then
    // the caller's. Then the answer under the caller's lock again, as a condition variable gives it.
    lock.unlock();
    {
      std::lock_guard<std::mutex> guard(s->mu);
      s->gone = true;
    }
    {
      std::lock_guard<std::mutex> guard(mu_);
      sleepers_.erase(it);
    }
    lock.lock();
    return done();
  }

  // Waits on this clock in progress (for tests that move the clock once a thread waits).
  size_t sleepers() const {
    std::lock_guard<std::mutex> lock(mu_);
    return sleepers_.size();
  }
  // Waits until at least n threads wait on this clock: a wait for what must happen (another
  // thread reaching its timed wait), bounded for a loaded machine. False if not within `bound`.
  bool wait_for_sleepers(size_t n, std::chrono::seconds bound = std::chrono::seconds(60)) const {
    std::unique_lock<std::mutex> lock(mu_);
    return slept_.wait_for(lock, bound, [&] { return sleepers_.size() >= n; });
  }

 private:
  struct Sleeper {
    std::mutex mu;  // guards gone; taken before the waiter's lock
    bool gone = false;
    std::condition_variable* cv = nullptr;
    std::mutex* lock = nullptr;
    time_point at;
  };

  // Starts far from zero, so "now - something" never underflows a time_point.
  std::atomic<int64_t> ns_{std::chrono::nanoseconds(std::chrono::hours(1000)).count()};
  mutable std::mutex mu_;  // a leaf: guards sleepers_
  mutable std::condition_variable slept_;  // a sleeper was added
  mutable std::list<std::shared_ptr<Sleeper>> sleepers_;
};

}  // namespace hubfs::testing
