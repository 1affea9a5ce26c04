#include "common/latency_histogram.h"

#include <algorithm>

namespace hubfs {

void LatencyHistogram::observe(std::chrono::nanoseconds d, uint64_t times) {
  if (times == 0) return;
  const int64_t ns = std::max<int64_t>(0, d.count());
  const double s = static_cast<double>(ns) / 1e9;
  // The first bound at or above it: Prometheus's le ("less than or equal").
  const size_t bucket =
      static_cast<size_t>(std::lower_bound(kBoundsS.begin(), kBoundsS.end(), s) - kBoundsS.begin());
  buckets_[bucket].fetch_add(times, std::memory_order_relaxed);
  sum_ns_.fetch_add(static_cast<uint64_t>(ns) * times, std::memory_order_relaxed);
  count_.fetch_add(times, std::memory_order_relaxed);
}

LatencySnapshot LatencyHistogram::snapshot() const {
  LatencySnapshot s;
  s.counts.reserve(buckets_.size());
  for (const auto& b : buckets_) s.counts.push_back(b.load(std::memory_order_relaxed));
  // The total is the buckets' sum, so a snapshot taken while observations land stays coherent.
  for (uint64_t c : s.counts) s.count += c;
  s.sum_s = static_cast<double>(sum_ns_.load(std::memory_order_relaxed)) / 1e9;
  return s;
}

}  // namespace hubfs
