#include "cache/touch_throttle.h"

namespace hubfs {

bool TouchThrottle::should_touch(uint64_t key, time_point now) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = last_touch_.find(key);
  if (it != last_touch_.end() && now - it->second < interval_) return false;
  remember_locked(key, now);
  return true;
}

void TouchThrottle::note_written(uint64_t key, time_point now) {
  std::lock_guard<std::mutex> lock(mu_);
  remember_locked(key, now);
}

size_t TouchThrottle::tracked() const {
  std::lock_guard<std::mutex> lock(mu_);
  return last_touch_.size();
}

void TouchThrottle::remember_locked(uint64_t key, time_point now) {
  if (last_touch_.size() >= max_tracked_) {
    std::erase_if(last_touch_, [&](const auto& e) { return now - e.second >= interval_; });
    if (last_touch_.size() >= max_tracked_) last_touch_.clear();
  }
  last_touch_[key] = now;
}

}  // namespace hubfs
