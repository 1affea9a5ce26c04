// Time budgets: one clock seam (MonotonicClock) and the Deadline a read carries through every layer it touches
// (shared-tier lookups, Hub requests, their retries), so a read ends when its budget does,
// however many steps it took.
//
// The daemon uses the real monotonic clock (its Env's, common/env.h); tests pass a manual clock
// (tests/support) and move it themselves, so a retry rule or a timeout is tested without waiting
// for time to pass. A wait with a limit (a condition variable's) goes through the clock too
// (MonotonicClock::wait_until, Deadline::wait), so a manual clock ends it when the test moves
// past the limit.
#pragma once

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <functional>
#include <mutex>

namespace hubfs {

class MonotonicClock {
 public:
  using time_point = std::chrono::steady_clock::time_point;
  using duration = time_point::duration;
  virtual ~MonotonicClock() = default;
  virtual time_point now() const = 0;
  // Blocks on `cv` (`lock` held, as condition_variable::wait) until done() or until this clock
  // reaches `at`; returns done(). Whoever makes done() true notifies `cv` under lock's mutex.
  // The real clock waits as condition_variable::wait_until does; a manual clock wakes the waiter
  // when the test moves it to `at`.
  virtual bool wait_until(std::condition_variable& cv, std::unique_lock<std::mutex>& lock, time_point at,
                          const std::function<bool()>& done) const = 0;
  // std::chrono::steady_clock; lives for the whole program. Only the real Env (common/env.cc)
  // hands it out: everything else reads the clock of the Env it was given.
  static const MonotonicClock& real();
};

// A point in time on a clock, or never. Cheap to copy; the clock must outlive every copy.
class Deadline {
 public:
  Deadline() = default;  // never
  static Deadline never() { return Deadline(); }
  static Deadline after(std::chrono::milliseconds budget, const MonotonicClock& clock) {
    return Deadline(&clock, clock.now() + budget);
  }

  bool is_never() const { return clock_ == nullptr; }
  bool expired() const { return !is_never() && clock_->now() >= at_; }
  // Time left, rounded up to whole milliseconds (so "1 µs left" is not "expired"); 0 once
  // expired; milliseconds::max() for never.
  std::chrono::milliseconds remaining() const {
    if (is_never()) return std::chrono::milliseconds::max();
    const auto left = at_ - clock_->now();
    if (left <= MonotonicClock::time_point::duration::zero()) return std::chrono::milliseconds(0);
    return std::chrono::ceil<std::chrono::milliseconds>(left);
  }
  // The sooner of this deadline and `budget` from now (on this deadline's clock, or `clock` for
  // never: the Env's): a step's own limit inside the whole's.
  Deadline within(std::chrono::milliseconds budget, const MonotonicClock& clock) const {
    const MonotonicClock& c = is_never() ? clock : *clock_;
    const MonotonicClock::time_point own = c.now() + budget;
    return Deadline(&c, is_never() ? own : std::min(at_, own));
  }
  // This deadline moved `by` later (never stays never): a request held for the Hub's quota window
  // keeps the time it had left (RetryingTransport).
  Deadline later_by(std::chrono::milliseconds by) const {
    return is_never() ? *this : Deadline(clock_, at_ + by);
  }
  // When it passes, on its clock; time_point::max() for never.
  MonotonicClock::time_point at() const { return is_never() ? MonotonicClock::time_point::max() : at_; }
  // Blocks on `cv` (`lock` held) until done() or until this deadline passes, on its own clock (see
  // MonotonicClock::wait_until); returns done(). Never: until done().
  bool wait(std::condition_variable& cv, std::unique_lock<std::mutex>& lock, const std::function<bool()>& done) const {
    if (is_never()) {
      cv.wait(lock, done);
      return true;
    }
    return clock_->wait_until(cv, lock, at_, done);
  }

 private:
  Deadline(const MonotonicClock* clock, MonotonicClock::time_point at) : clock_(clock), at_(at) {}
  const MonotonicClock* clock_ = nullptr;
  MonotonicClock::time_point at_ = MonotonicClock::time_point::max();
};

}  // namespace hubfs
