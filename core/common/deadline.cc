#include "common/deadline.h"

namespace hubfs {
namespace {

class SteadyMonotonicClock : public MonotonicClock {
 public:
  time_point now() const override { return std::chrono::steady_clock::now(); }
};

}  // namespace

const MonotonicClock& MonotonicClock::real() {
  static const SteadyMonotonicClock clock;
  return clock;
}

}  // namespace hubfs
