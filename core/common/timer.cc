#include "common/timer.h"

namespace hubfs {

Timer::Timer() : thread_([this] { run(); }) {}

Timer::~Timer() { shutdown(); }

bool Timer::schedule(std::chrono::milliseconds delay, std::function<void()> fn) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (stopped_) return false;
    entries_.push(Entry{Clock::now() + delay, next_seq_++, std::move(fn)});
  }
  cv_.notify_one();
  return true;
}

void Timer::shutdown() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (stopped_) return;
    stopped_ = true;
  }
  cv_.notify_one();
  thread_.join();
  std::vector<std::function<void()>> left;
  {
    std::lock_guard<std::mutex> lock(mu_);
    while (!entries_.empty()) {
      left.push_back(entries_.top().fn);
      entries_.pop();
    }
  }
  for (auto& fn : left) fn();
}

void Timer::run() {
  std::unique_lock<std::mutex> lock(mu_);
  while (!stopped_) {
    if (entries_.empty()) {
      cv_.wait(lock);
      continue;
    }
    // A copy: wait_until reads its deadline while the lock is released, and a schedule() in the
    // meantime may reallocate the heap under a reference to its top.
    const Clock::time_point due = entries_.top().due;
    if (due > Clock::now()) {
      cv_.wait_until(lock, due);
      continue;
    }
    auto fn = entries_.top().fn;
    entries_.pop();
    lock.unlock();
    fn();
    lock.lock();
  }
}

}  // namespace hubfs
