// Keys marked recently, each forgotten `memory` after its mark: BlockReader's "this file was
// hinted lately" (no speculative read-ahead meanwhile) and "a read of this block timed out
// moments ago" (fail at once rather than wait a second --read-timeout). Bounded by max_keys: past
// it the table is cleared (a bound, not an LRU: both uses are rare, and forgetting costs only a
// read-ahead or a wait, never bytes).
//
// Time comes from the Env's clock, so expiry is tested with a manual one.
// Thread-safe; one mutex, a leaf.
#pragma once

#include <chrono>
#include <cstddef>
#include <mutex>
#include <optional>
#include <string>
#include <unordered_map>

#include "common/env.h"

namespace hubfs {

class RecentKeys {
 public:
  RecentKeys(Env& env, std::chrono::milliseconds memory, size_t max_keys)
      : memory_(memory), max_keys_(max_keys), clock_(env.clock()) {}

  void mark(const std::string& key) {
    const auto now = clock_.now();
    std::lock_guard<std::mutex> lock(mu_);
    if (marked_.size() >= max_keys_) marked_.clear();
    marked_[key] = now;
  }
  // How long ago the key was marked, if within `memory`; an expired mark is dropped.
  std::optional<std::chrono::milliseconds> marked_ago(const std::string& key) {
    std::lock_guard<std::mutex> lock(mu_);
    if (marked_.empty()) return std::nullopt;  // the common case: no clock read
    auto it = marked_.find(key);
    if (it == marked_.end()) return std::nullopt;
    const auto ago = clock_.now() - it->second;
    if (ago >= memory_) {
      marked_.erase(it);
      return std::nullopt;
    }
    return std::chrono::duration_cast<std::chrono::milliseconds>(ago);
  }
  void forget(const std::string& key) {
    std::lock_guard<std::mutex> lock(mu_);
    marked_.erase(key);
  }
  bool empty() const {
    std::lock_guard<std::mutex> lock(mu_);
    return marked_.empty();
  }

 private:
  const std::chrono::milliseconds memory_;
  const size_t max_keys_;
  const MonotonicClock& clock_;
  mutable std::mutex mu_;
  std::unordered_map<std::string, MonotonicClock::time_point> marked_;
};

}  // namespace hubfs
