// A MonotonicClock that moves only when the test moves it: retry and deadline rules are tested without
// waiting for time to pass.
#pragma once

#include <atomic>
#include <chrono>

#include "common/deadline.h"

namespace hubfs::testing {

class ManualClock : public MonotonicClock {
 public:
  time_point now() const override { return time_point(std::chrono::nanoseconds(ns_.load())); }
  void advance(std::chrono::nanoseconds d) { ns_ += d.count(); }

 private:
  // Starts far from zero, so "now - something" never underflows a time_point.
  std::atomic<int64_t> ns_{std::chrono::nanoseconds(std::chrono::hours(1000)).count()};
};

}  // namespace hubfs::testing
