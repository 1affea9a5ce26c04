#include "reader/deferred_writes.h"

namespace hubfs {

using TimePoint = MonotonicClock::time_point;

DeferredWrites::DeferredWrites(Env& env, uint64_t max_bytes, std::chrono::milliseconds quiet, PostFn executor)
    : max_bytes_(max_bytes), quiet_(quiet), executor_(std::move(executor)), clock_(env.clock()) {}

void DeferredWrites::note_activity() {
  last_activity_.store(clock_.now().time_since_epoch().count(), std::memory_order_relaxed);
}

TimePoint DeferredWrites::quiet_from() const {
  return TimePoint(TimePoint::duration(last_activity_.load(std::memory_order_relaxed))) + quiet_;
}

bool DeferredWrites::add(uint64_t bytes, std::function<void()> write) {
  if (bytes_.fetch_add(bytes) + bytes > max_bytes_) {
    bytes_ -= bytes;
    return false;
  }
  bool post = false;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (!stopping_) {
      queue_.push_back(Write{bytes, std::move(write)});
      post = !pump_queued_;
      pump_queued_ = true;
      if (!post) {
        ++deferred_;
        return true;
      }
    }
  }
  if (!post) {
    bytes_ -= bytes;  // shut down: the caller writes
    return false;
  }
  if (!executor_([this] { pump(); })) {
    // The executor is gone (its owner drained it before shutdown()): what waits here, this write
    // included, runs now on this thread rather than never.
    {
      std::lock_guard<std::mutex> lock(mu_);
      stopping_ = true;
    }
    pump();
  }
  ++deferred_;
  return true;
}

std::optional<TimePoint> DeferredWrites::run_due() {
  std::unique_lock<std::mutex> lock(mu_);
  while (!queue_.empty() && (stopping_ || clock_.now() >= quiet_from())) {
    Write w = std::move(queue_.front());
    queue_.pop_front();
    lock.unlock();
    w.run();
    w.run = nullptr;  // its captures (the block's buffer) go before the bytes are released
    bytes_ -= w.bytes;
    lock.lock();
  }
  if (queue_.empty()) return std::nullopt;
  return quiet_from();
}

void DeferredWrites::pump() {
  for (;;) {
    std::optional<TimePoint> next = run_due();
    std::unique_lock<std::mutex> lock(mu_);
    if (queue_.empty()) {
      pump_queued_ = false;  // under the lock add() checks: a write queued after this posts a new pump
      return;
    }
    if (stopping_ || !next) continue;
    // Until the quiet point on the Env's clock, or until shutdown() wakes us. Activity meanwhile
    // moves the point: run_due() then finds it not yet reached and we wait again for the rest.
    clock_.wait_until(wake_, lock, *next, [this] { return stopping_; });
  }
}

void DeferredWrites::shutdown() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stopping_ = true;
  }
  wake_.notify_all();
}

}  // namespace hubfs
