// Time budgets: one clock seam (MonotonicClock) and the Deadline a read carries through every layer it touches
// (shared-tier lookups, Hub requests, their retries), so a read ends when its budget does,
// however many steps it took.
//
// The daemon uses the real monotonic clock; tests pass a manual clock (tests/support) and move it
// themselves, so a retry rule is tested without waiting for time to pass.
#pragma once

#include <algorithm>
#include <chrono>

namespace hubfs {

class MonotonicClock {
 public:
  using time_point = std::chrono::steady_clock::time_point;
  virtual ~MonotonicClock() = default;
  virtual time_point now() const = 0;
  // std::chrono::steady_clock; lives for the whole program.
  static const MonotonicClock& real();
};

// A point in time on a clock, or never. Cheap to copy; the clock must outlive every copy.
class Deadline {
 public:
  Deadline() = default;  // never
  static Deadline never() { return Deadline(); }
  static Deadline after(std::chrono::milliseconds budget, const MonotonicClock& clock = MonotonicClock::real()) {
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
  // The sooner of this deadline and `budget` from now (on this deadline's clock, or the real one
  // for never): a step's own limit inside the whole's.
  Deadline within(std::chrono::milliseconds budget) const {
    const MonotonicClock& c = is_never() ? MonotonicClock::real() : *clock_;
    const MonotonicClock::time_point own = c.now() + budget;
    return Deadline(&c, is_never() ? own : std::min(at_, own));
  }
  // This deadline moved `by` later (never stays never): a request held for the Hub's quota window
  // keeps the time it had left (RetryingTransport).
  Deadline later_by(std::chrono::milliseconds by) const {
    return is_never() ? *this : Deadline(clock_, at_ + by);
  }
  // For waits on the real clock (condition variables); time_point::max() for never.
  MonotonicClock::time_point at() const { return is_never() ? MonotonicClock::time_point::max() : at_; }

 private:
  Deadline(const MonotonicClock* clock, MonotonicClock::time_point at) : clock_(clock), at_(at) {}
  const MonotonicClock* clock_ = nullptr;
  MonotonicClock::time_point at_ = MonotonicClock::time_point::max();
};

}  // namespace hubfs
