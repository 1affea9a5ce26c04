#include "common/env.h"

#include <pthread.h>

#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <new>
#include <utility>

#include "common/task_queue.h"
#include "common/timer.h"

namespace hubfs {

namespace {

class RealEnv : public Env {
 public:
  RealEnv() {
    // A forked child has none of the parent's threads: its timer is started again on first use
    // there, and the parent's (its thread gone, its lock perhaps held) is never touched again.
    // timer_mu_ is held across the fork so the child's copy of it is free.
    pthread_atfork([] { real_env().timer_mu_.lock(); }, [] { real_env().timer_mu_.unlock(); },
                   [] {
                     real_env().timer_ = nullptr;  // left as it is: destroying it would join a thread this process lacks
                     real_env().timer_mu_.unlock();
                   });
  }

  const MonotonicClock& clock() const override { return MonotonicClock::real(); }
  std::chrono::system_clock::time_point system_now() const override { return std::chrono::system_clock::now(); }

  bool schedule_after(std::chrono::milliseconds delay, std::function<void()> fn) override {
    Timer* timer;
    {
      std::lock_guard<std::mutex> lock(timer_mu_);
      if (!timer_) timer_ = new Timer();
      timer = timer_;
    }
    return timer->schedule(delay, std::move(fn));
  }

  std::unique_ptr<Executor> new_executor(int threads) override { return std::make_unique<TaskQueue>(threads); }

 private:
  static RealEnv& real_env() { return static_cast<RealEnv&>(Env::real()); }

  std::mutex timer_mu_;      // a leaf: guards timer_ (held only to read or start it, and across a fork)
  Timer* timer_ = nullptr;  // this process's; never destroyed, as the Env (see Env::real)
};

}  // namespace

Env& Env::real() {
  // Placement into static storage: no destructor runs at exit, so a thread still using the
  // Env (a detached library user's) never sees it destroyed.
  alignas(RealEnv) static unsigned char storage[sizeof(RealEnv)];
  static RealEnv* env = new (storage) RealEnv();
  return *env;
}

Env& env_of(Env* env, const char* component) {
  if (!env) {
    std::fprintf(stderr, "hubfs: %s was built without an Env (its options' env is required)\n", component);
    std::abort();
  }
  return *env;
}

// ---- ScheduledGroup ---------------------------------------------------------------------------

struct ScheduledGroup::State {
  mutable std::mutex mu;  // a leaf: never held while a function runs
  std::condition_variable idle_cv;  // shutdown() waits here for functions the timer is running
  bool stopped = false;
  uint64_t next_id = 0;
  int running = 0;  // functions the Env's timer took and is running now
  std::map<uint64_t, std::function<void()>> waiting;

  // From the Env's timer: runs the function scheduled as `id` unless shutdown() ran it already
  // (each runs exactly once: here or in shutdown()).
  void fire(uint64_t id) {
    std::function<void()> fn;
    {
      std::lock_guard<std::mutex> lock(mu);
      auto it = waiting.find(id);
      if (it == waiting.end()) return;
      fn = std::move(it->second);
      waiting.erase(it);
      ++running;
    }
    fn();
    fn = nullptr;  // its captures go before shutdown() may return
    std::lock_guard<std::mutex> lock(mu);
    if (--running == 0) idle_cv.notify_all();
  }
};

ScheduledGroup::ScheduledGroup(Env& env) : env_(env), state_(std::make_shared<State>()) {}

ScheduledGroup::~ScheduledGroup() { shutdown(); }

bool ScheduledGroup::schedule_after(std::chrono::milliseconds delay, std::function<void()> fn) {
  uint64_t id;
  {
    std::lock_guard<std::mutex> lock(state_->mu);
    if (state_->stopped) return false;
    id = state_->next_id++;
    state_->waiting.emplace(id, std::move(fn));
  }
  const bool scheduled = env_.schedule_after(delay, [state = state_, id] { state->fire(id); });
  if (!scheduled) {
    // The Env stopped first: nothing will call it; the caller runs it.
    std::lock_guard<std::mutex> lock(state_->mu);
    state_->waiting.erase(id);
    return false;
  }
  return true;
}

void ScheduledGroup::shutdown() {
  std::map<uint64_t, std::function<void()>> left;
  {
    std::unique_lock<std::mutex> lock(state_->mu);
    if (state_->stopped) return;
    state_->stopped = true;
    left.swap(state_->waiting);
    // One the timer took just before is finishing: nothing of ours runs after we return.
    state_->idle_cv.wait(lock, [&] { return state_->running == 0; });
  }
  for (auto& [id, fn] : left) fn();  // in the order they were scheduled
}

size_t ScheduledGroup::waiting() const {
  std::lock_guard<std::mutex> lock(state_->mu);
  return state_->waiting.size();
}

}  // namespace hubfs
