// Writes that wait for the reader to pause: blocks served by the shared tier are written to the
// local disk cache once nothing was read (nor asked of the shared tier) for `quiet`, so a stream
// from the tier does not share the CPU with its own write-backs.
//
// Event-driven, no polling: add() hands the queue to the executor once (a "pump" task); the pump
// runs every write that is due and, while the reader is busy, waits on a condition variable until
// the quiet period after the last activity ends (activity moves that point later; the pump then
// waits again for the rest) or until shutdown() wakes it. Bounded: at most max_bytes wait (each
// write counts the bytes it pins); past that, add() refuses and the caller writes at once.
//
// Time comes from the Env's clock, and the pump's wait is a wait on that clock, so the rule is
// tested with a manual Env (moving it wakes the pump) or with run_due() alone. Thread-safe; one mutex, a leaf (writes run
// without it).
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <mutex>
#include <optional>

#include "common/env.h"

namespace hubfs {

class DeferredWrites {
 public:
  // Runs a task on some other thread; false when it will not (then the task is not run). Only the
  // post call of an Executor (common/env.h), hence not that name.
  using PostFn = std::function<bool(std::function<void()>)>;

  DeferredWrites(Env& env, uint64_t max_bytes, std::chrono::milliseconds quiet, PostFn executor);
  DeferredWrites(const DeferredWrites&) = delete;
  DeferredWrites& operator=(const DeferredWrites&) = delete;

  // Queues `write`, which pins `bytes` until it ran. False (nothing queued) when the budget is
  // spent, after shutdown(), or when the executor refused: the caller runs the write itself.
  bool add(uint64_t bytes, std::function<void()> write);
  // The reader read something now: writes wait for the next pause. Cheap (one atomic store).
  void note_activity();
  // From now on every queued write is due at once, and add() refuses. The pump (on the executor)
  // runs what is left: drain the executor after this.
  void shutdown();

  // Runs, on the calling thread, the writes due now (all of them once shut down). Returns when
  // the next one is due, or nullopt when none is left. The pump's loop; tests call it directly.
  std::optional<MonotonicClock::time_point> run_due();
  uint64_t queued_bytes() const { return bytes_.load(); }
  uint64_t deferred() const { return deferred_.load(); }  // writes ever accepted by add()

 private:
  struct Write {
    uint64_t bytes;
    std::function<void()> run;
  };
  void pump();
  MonotonicClock::time_point quiet_from() const;

  const uint64_t max_bytes_;
  const std::chrono::milliseconds quiet_;
  const PostFn executor_;
  const MonotonicClock& clock_;
  std::atomic<MonotonicClock::time_point::rep> last_activity_{0};  // clock_ ticks
  std::atomic<uint64_t> bytes_{0};
  std::atomic<uint64_t> deferred_{0};

  std::mutex mu_;  // a leaf: guards the fields below; no write runs under it
  std::condition_variable wake_;  // the pump waits here for the quiet point or shutdown()
  std::deque<Write> queue_;
  bool pump_queued_ = false;  // a pump task is queued or running: add() posts none
  bool stopping_ = false;
};

}  // namespace hubfs
