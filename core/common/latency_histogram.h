// A latency distribution with fixed buckets, for the metrics (fuse/metrics.h turns it into a
// Prometheus histogram): the Hub's requests, the range requests for file content (CDN or Xet
// storage), and reads from the disk and shared cache tiers. Lock-free: observe() is a few
// relaxed atomic adds, cheap enough for every block read. Durations come from the caller, who
// reads the stack's Env clock (common/env.h), so a test's manual clock decides them.
#pragma once

#include <array>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <vector>

namespace hubfs {

// A copy of a histogram: counts per bucket (not cumulative; the last is above every bound),
// their total and the sum of the observed durations.
struct LatencySnapshot {
  std::vector<uint64_t> counts;
  uint64_t count = 0;
  double sum_s = 0;
};

class LatencyHistogram {
 public:
  // Upper bounds in seconds (docs/constants.md says why these): from a page-cache disk read
  // (well under 1 ms) to a CDN request held by a slow link or the Hub's quota (tens of s).
  static constexpr std::array<double, 15> kBoundsS = {0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1,
                                                      0.25,   0.5,   1,      2.5,   5,     10,    30};

  // `times` observations of duration d (a range sent in parts counts each part).
  void observe(std::chrono::nanoseconds d, uint64_t times = 1);
  LatencySnapshot snapshot() const;

 private:
  std::array<std::atomic<uint64_t>, kBoundsS.size() + 1> buckets_{};
  std::atomic<uint64_t> count_{0};
  std::atomic<uint64_t> sum_ns_{0};
};

}  // namespace hubfs
