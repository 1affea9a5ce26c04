#include "common/deadline.h"

namespace hubfs {
namespace {

class SteadyMonotonicClock : public MonotonicClock {
 public:
  time_point now() const override { return std::chrono::steady_clock::now(); }
  bool wait_until(std::condition_variable& cv, std::unique_lock<std::mutex>& lock, time_point at,
                  const std::function<bool()>& done) const override {
    return cv.wait_until(lock, at, done);
  }
};

}  // namespace

const MonotonicClock& MonotonicClock::real() {
  static const SteadyMonotonicClock clock;
  return clock;
}

}  // namespace hubfs
