#include "net/hedge_policy.h"

#include <algorithm>
#include <vector>

namespace hubfs {

namespace {
// First-byte times remembered for the delay: enough for a stable p95, recent enough to follow a
// CDN that slows down.
constexpr size_t kFirstByteSamples = 128;
constexpr size_t kMinSamplesForHedge = 16;
}  // namespace

HedgePolicy::HedgePolicy(HedgeOptions options)
    : options_(options), max_hedges_(std::max<size_t>(1, static_cast<size_t>(std::max(0, options.max_in_flight)) / 4)) {}

void HedgePolicy::learn(std::chrono::nanoseconds first_byte_after) {
  first_byte_times_.push_back(first_byte_after);
  if (first_byte_times_.size() > kFirstByteSamples) first_byte_times_.pop_front();
}

std::chrono::nanoseconds HedgePolicy::delay() const {
  if (first_byte_times_.size() < kMinSamplesForHedge) return options_.initial_delay;
  std::vector<std::chrono::nanoseconds> sorted(first_byte_times_.begin(), first_byte_times_.end());
  const size_t p95 = sorted.size() * 95 / 100;
  std::nth_element(sorted.begin(), sorted.begin() + static_cast<long>(p95), sorted.end());
  return std::max(sorted[p95] * 3 / 2, options_.min_delay);
}

bool HedgePolicy::should_hedge(std::chrono::nanoseconds waited) const { return slots_left() && waited >= delay(); }

}  // namespace hubfs
