// When to send a slow GET a second time: the hedging rule of the transport, apart from its event
// loop so it can be tested without sockets or a clock.
//
// Contract: not thread-safe (the transport's one loop thread owns it). It holds no clock: the
// caller passes how long each transfer has waited, so time is the caller's to read (or a test's
// to make up).
//
// The rule: a GET whose first byte has not come after delay() is sent once more on another
// connection, and the first of the two to answer wins. delay() is 1.5 x the p95 of recent
// first-byte times (never below min_delay), or initial_delay until enough are known. At most a
// quarter of the transfer slots go to hedges, so a slow server is not answered with twice the load.
#pragma once

#include <chrono>
#include <cstddef>
#include <deque>

namespace hubfs {

struct HedgeOptions {
  std::chrono::nanoseconds min_delay{std::chrono::milliseconds(250)};
  std::chrono::nanoseconds initial_delay{std::chrono::milliseconds(1000)};  // before enough samples
  int max_in_flight = 16;  // the transport's slots; a quarter of them (at least one) for hedges
};

class HedgePolicy {
 public:
  explicit HedgePolicy(HedgeOptions options);

  // A transfer's first byte came this long after it started.
  void learn(std::chrono::nanoseconds first_byte_after);
  // How long a GET waits for its first byte before it is hedged.
  std::chrono::nanoseconds delay() const;
  // Whether a transfer still waiting for its first byte after `waited` should get a twin now
  // (a free hedge slot and a wait past delay()).
  bool should_hedge(std::chrono::nanoseconds waited) const;
  bool slots_left() const { return running_ < max_hedges_; }
  void started() { ++running_; }
  void ended() { --running_; }
  size_t running() const { return running_; }

 private:
  const HedgeOptions options_;
  const size_t max_hedges_;
  std::deque<std::chrono::nanoseconds> first_byte_times_;  // recent, oldest first
  size_t running_ = 0;
};

}  // namespace hubfs
