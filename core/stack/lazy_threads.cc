#include "stack/lazy_threads.h"

namespace hubfs {

bool LazyExecutor::post(std::function<void()> task) {
  Executor* real;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (drained_) return false;
    if (!real_) real_ = base_.new_executor(threads_);
    real = real_.get();  // never replaced once made: safe to use without the lock
  }
  return real->post(std::move(task));
}

void LazyExecutor::drain() {
  Executor* real;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (!real_) {
      drained_ = true;  // nothing ever ran, nothing is queued: refuse from now on
      return;
    }
    real = real_.get();
  }
  real->drain();  // idempotent; refuses later posts itself
}

size_t LazyExecutor::pending() const {
  std::lock_guard<std::mutex> lock(mu_);
  return real_ ? real_->pending() : 0;
}

bool LazyExecutor::started() const {
  std::lock_guard<std::mutex> lock(mu_);
  return real_ != nullptr;
}

}  // namespace hubfs
