#include "common/task_queue.h"

#include <algorithm>
#include <cassert>

namespace hubfs {

TaskQueue::TaskQueue(int threads) {
  for (int i = 0; i < std::max(1, threads); ++i) threads_.emplace_back([this] { worker(); });
}

TaskQueue::~TaskQueue() { drain(); }

bool TaskQueue::post(std::function<void()> task) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    // A running task may still post (its follow-up work belongs to the drain); outsiders may not.
    if (draining_ && running_ == 0) return false;
    tasks_.push_back(std::move(task));
  }
  work_cv_.notify_one();
  return true;
}

void TaskQueue::drain() {
  std::vector<std::thread> threads;
  {
    std::unique_lock<std::mutex> lock(mu_);
    draining_ = true;
    idle_cv_.wait(lock, [this] { return tasks_.empty() && running_ == 0; });
    threads.swap(threads_);
  }
  work_cv_.notify_all();
  for (auto& t : threads) t.join();
}

size_t TaskQueue::pending() const {
  std::lock_guard<std::mutex> lock(mu_);
  return tasks_.size() + running_;
}

void TaskQueue::worker() {
  std::unique_lock<std::mutex> lock(mu_);
  for (;;) {
    work_cv_.wait(lock, [this] { return !tasks_.empty() || (draining_ && running_ == 0); });
    if (tasks_.empty()) return;  // draining and nothing left anywhere
    std::function<void()> task = std::move(tasks_.front());
    tasks_.pop_front();
    ++running_;
    lock.unlock();
    task();
    task = nullptr;  // destroy captures before the queue may be declared idle
    lock.lock();
    --running_;
    if (tasks_.empty() && running_ == 0) {
      idle_cv_.notify_all();
      work_cv_.notify_all();  // other workers may exit now if draining
    }
  }
}

void InFlight::add(int64_t n) {
  std::lock_guard<std::mutex> lock(mu_);
  count_ += n;
}

void InFlight::done(int64_t n) {
  std::lock_guard<std::mutex> lock(mu_);
  count_ -= n;
  assert(count_ >= 0);
  if (count_ <= 0) zero_cv_.notify_all();
}

void InFlight::wait_zero() {
  std::unique_lock<std::mutex> lock(mu_);
  zero_cv_.wait(lock, [this] { return count_ <= 0; });
}

int64_t InFlight::count() const {
  std::lock_guard<std::mutex> lock(mu_);
  return count_;
}

}  // namespace hubfs
