// The Env a Stack hands its pieces (stack/stack.h): the caller's, except that an executor's
// threads start when its first task is posted, not when it is made. A stack builds a dozen
// executors (the reader's disk loads, the cache's writes and upkeep, Xet's fetches, URL refreshes)
// of which a process that opens a few files and reads their first blocks from the cache uses one
// or two: starting the rest cost a fresh process tens of threads before its first read
// (docs/benchmarks.md, "Opening 16 files"). A forked child that never used them never has them.
//
// The executors keep Env's contract (common/env.h): tasks never run on the poster (they run on
// the caller's Env's executor, made on the first post), drain() runs what is queued and joins,
// and a post after a drain that found nothing to run is refused.
#pragma once

#include <memory>
#include <mutex>

#include "common/env.h"

namespace hubfs {

// An executor whose real one (base.new_executor(threads)) is made on the first post.
class LazyExecutor : public Executor {
 public:
  LazyExecutor(Env& base, int threads) : base_(base), threads_(threads) {}
  ~LazyExecutor() override { drain(); }
  LazyExecutor(const LazyExecutor&) = delete;
  LazyExecutor& operator=(const LazyExecutor&) = delete;

  bool post(std::function<void()> task) override;
  void drain() override;
  size_t pending() const override;
  // Whether the real executor (and its threads) exists yet.
  bool started() const;

 private:
  Env& base_;
  const int threads_;
  mutable std::mutex mu_;  // a leaf: guards real_ and drained_, never held across a task or a drain
  std::unique_ptr<Executor> real_;
  bool drained_ = false;  // drained before any post: every later post is refused
};

// `base` with executors that start their threads on first use; everything else is base's.
class LazyThreadsEnv : public Env {
 public:
  explicit LazyThreadsEnv(Env& base) : base_(base) {}
  const MonotonicClock& clock() const override { return base_.clock(); }
  WallTime system_now() const override { return base_.system_now(); }
  bool schedule_after(std::chrono::milliseconds delay, std::function<void()> fn) override {
    return base_.schedule_after(delay, std::move(fn));
  }
  std::unique_ptr<Executor> new_executor(int threads) override {
    return std::make_unique<LazyExecutor>(base_, threads);
  }
  Env& base() const { return base_; }

 private:
  Env& base_;
};

}  // namespace hubfs
