// The one seam between the daemon and the operating system's time and threads (leveldb's Env):
// the clocks, delayed work, and executors. Everything that reads the time, waits out a delay or
// starts background threads takes an Env&, handed down from the assembly (core/stack/stack.cc's
// Stack, which the mount and every other door build), so a test swaps the whole seam for a
// manual one (tests/support/manual_env.h) and moves time itself instead of sleeping.
//
// Contracts:
// - clock(): the steady clock every deadline, expiry, backoff and circuit breaker reads.
// - system_now(): wall time, only for absolute stamps (a signed URL's X-Amz-Date or Expires=, a
//   token's exp, file mtimes, when a revision was pinned); never for measuring an interval.
// - schedule_after(delay, fn): runs fn once, after `delay` on clock(), on the Env's timer thread.
//   A function must not block (it runs beside every other one); it may schedule more. False
//   (and fn is not taken) once the Env stopped: the caller runs fn itself. An owner that must
//   not leave functions waiting behind it when it stops uses a ScheduledGroup.
// - new_executor(threads): a TaskQueue (common/task_queue.h) with its semantics: tasks never
//   run on the poster, drain() runs what is queued and joins, the destructor drains.
// Thread-safe: one Env serves every thread of the process.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>

#include "common/deadline.h"

namespace hubfs {

// Where background tasks run. TaskQueue is the real one; tests may run tasks inline.
class Executor {
 public:
  virtual ~Executor() = default;
  // Queues the task; false (and the task is not run) once a drain found the executor idle.
  virtual bool post(std::function<void()> task) = 0;
  // Runs what is queued (and what it queues) to completion, then stops. Idempotent.
  virtual void drain() = 0;
  // Tasks queued or running.
  virtual size_t pending() const = 0;
};

// Wall time, as Env::system_now() gives it.
using WallTime = std::chrono::system_clock::time_point;

class Env {
 public:
  virtual ~Env() = default;

  virtual const MonotonicClock& clock() const = 0;
  MonotonicClock::time_point now() const { return clock().now(); }
  virtual WallTime system_now() const = 0;

  virtual bool schedule_after(std::chrono::milliseconds delay, std::function<void()> fn) = 0;

  // `threads` workers (at least one).
  virtual std::unique_ptr<Executor> new_executor(int threads) = 0;

  // The process's Env: steady_clock, system_clock, one timer thread (started on first use, so
  // a process that forks before using it forks without threads; a forked child starts its own
  // on first use and never touches the parent's) and TaskQueues. Never destroyed: components
  // built on it may outlive any owner of it.
  static Env& real();
};

// The Env an options struct names. Every component's is required (core/ has no default Env: the
// stack's is handed down from its assembly); a missing one is a programming error, and this
// aborts naming the component.
Env& env_of(Env* env, const char* component);

// Functions scheduled on an Env by one owner, which it can flush when it stops: shutdown()
// runs every one still waiting, at once, on the caller's thread (a retry waiting out its backoff
// then sees its owner stopping and answers with its last result), so nothing scheduled is ever
// dropped and none runs after shutdown returns. schedule_after() after shutdown runs nothing and
// returns false: the caller runs the function itself. shutdown() must not be called from a
// scheduled function. This is what a private Timer gave each owner, on the Env's one thread.
class ScheduledGroup {
 public:
  explicit ScheduledGroup(Env& env);
  ~ScheduledGroup();  // shutdown()
  ScheduledGroup(const ScheduledGroup&) = delete;
  ScheduledGroup& operator=(const ScheduledGroup&) = delete;

  bool schedule_after(std::chrono::milliseconds delay, std::function<void()> fn);
  void shutdown();
  // Functions waiting (scheduled, not yet run).
  size_t waiting() const;

 private:
  struct State;
  Env& env_;
  std::shared_ptr<State> state_;  // shared with the Env's timer entries, which may outlive us
};

}  // namespace hubfs
