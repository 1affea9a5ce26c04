#include "h5chunk/helper_pool.h"

#include <unistd.h>

#include <algorithm>

namespace h5chunk {

void HelperPool::Run::join() {
  std::unique_lock<std::mutex> lock(state_->mu);
  state_->joined = true;
  state_->idle_cv.wait(lock, [&] { return state_->running == 0; });
}

std::unique_ptr<HelperPool::Run> HelperPool::start(unsigned n, std::function<void()> fn) {
  auto run = std::unique_ptr<Run>(new Run());
  if (n == 0) return run;
  hubfs::TaskQueue* queue;
  {
    std::lock_guard<std::mutex> lock(mu_);
    const pid_t pid = ::getpid();
    if (queue_ && pid_ != pid) {
      // Forked: the parent's threads are not here. Its queue cannot be drained or destroyed
      // (that would join threads this process does not have); it is left behind.
      (void)queue_.release();
    }
    if (!queue_) {
      queue_ = std::make_unique<hubfs::TaskQueue>(static_cast<int>(std::max(n, threads_)));
      pid_ = pid;
    }
    queue = queue_.get();
  }
  auto shared_fn = std::make_shared<std::function<void()>>(std::move(fn));
  for (unsigned i = 0; i < n; ++i) {
    (void)queue->post([state = run->state_, shared_fn] {
      {
        std::lock_guard<std::mutex> lock(state->mu);
        if (state->joined) return;  // the read is over: nothing left for this helper
        ++state->running;
      }
      (*shared_fn)();
      std::lock_guard<std::mutex> lock(state->mu);
      if (--state->running == 0) state->idle_cv.notify_all();
    });
  }
  return run;
}

HelperPool::~HelperPool() {
  std::lock_guard<std::mutex> lock(mu_);
  if (queue_ && pid_ != ::getpid()) (void)queue_.release();  // see start()
}

}  // namespace h5chunk
