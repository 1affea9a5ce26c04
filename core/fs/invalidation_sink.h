// The mount's kernel invalidation (BranchFollower's `invalidate`), callable until closed: a
// follower hands it the names a replaced view told the kernel, and its stop() closes it so that
// no invalidation reaches a mount that is going.
//
// Guards: the callback, under mu_, which is held while the callback runs (close() clears it
// under the same lock, so it returns only once no delivery is under way).
// Threads: thread-safe. deliver() runs the callback on the caller's thread (the follower's).
// Lock order: the follower delivers under its poll_mu_ (poll_mu_ before mu_), never under its
// state_mu_; mu_ is held across the callback (the kernel's notifications), which must take no
// lock of the follower and not call close() nor deliver().
#pragma once

#include <functional>
#include <mutex>

#include "fs/filesystem.h"

namespace hubfs {

class InvalidationSink {
 public:
  using Callback = std::function<void(const ViewChange&)>;
  explicit InvalidationSink(Callback callback) : callback_(std::move(callback)) {}
  InvalidationSink(const InvalidationSink&) = delete;
  InvalidationSink& operator=(const InvalidationSink&) = delete;

  // Hands each non-empty change to the callback, in order, under one hold of the lock. Nothing
  // once closed (or with a null callback).
  void deliver(const ViewChange& first, const ViewChange& second);
  // No delivery after it returns: waits for one under way.
  void close();

 private:
  std::mutex mu_;
  Callback callback_;
};

}  // namespace hubfs
