// `hubfs mount --follow[=SECONDS]`: the mount follows its branch. Every interval one revision
// request (HubClient::repo_info, through the quota gate like every API call) asks where the
// revision points now; a new commit becomes the FileSystem's view (FileSystem::advance) and the
// names the kernel may hold from the old one are handed to `invalidate` (the mount tells the
// kernel: fuse_lowlevel_notify_inval_entry / _inval_inode), on the follower's own thread, never
// a FUSE request's, after the new view is installed. A poll that fails (offline, quota, a Hub
// error) keeps the current commit and is logged once, until a poll succeeds again.
//
// Threads: the Env's timer schedules each poll after the last one ended (so polls never overlap
// and a slow one only delays the next); the poll and `invalidate` run on a one-thread executor
// of the follower's own. stop() ends scheduling and `invalidate` calls (waiting for one under
// way); a poll still waiting on the network ends when the stack's transport shuts down, and the
// destructor waits for it: destroy the follower after Stack::shutdown(), before the FileSystem.
// Lock order: poll_mu_ before state_mu_ (a leaf) and before invalidate_'s lock, held across the
// kernel invalidations (fs/invalidation_sink.h).
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <string>

#include "common/env.h"
#include "fs/filesystem.h"
#include "fs/invalidation_sink.h"
#include "fs/listing_cache.h"
#include "hub/hub_client.h"

namespace hubfs {

// The default interval, and the least one a mount accepts: each poll is one request counted
// against the Hub's API quota (docs/constants.md). HUBFS_FOLLOW_MIN_INTERVAL_S lowers the least
// one, for tests against a local Hub only (docs/usage.md).
inline constexpr int kFollowDefaultIntervalS = 60;
inline constexpr int kFollowMinIntervalS = 5;
// The least interval in force: kFollowMinIntervalS, or HUBFS_FOLLOW_MIN_INTERVAL_S (>= 1).
int follow_min_interval_s();

class BranchFollower {
 public:
  struct State {
    std::string commit;         // what new lookups see
    int64_t checked_at = 0;     // unix seconds of the last poll that answered (0: none yet)
    uint64_t polls = 0;         // polls made
    uint64_t changes = 0;       // new commits taken
    std::string last_error;     // the last poll's failure ("" once one succeeds again)
  };

  // `repo` as named (its revision is the branch or tag followed); fs shows it now at commit
  // fs.current_commit(). hub, fs and env must outlive the follower; `listings` may be null.
  BranchFollower(HubClient& hub, RepoRef repo, std::shared_ptr<const ListingCache> listings, FileSystem& fs, Env& env,
                 std::chrono::milliseconds interval, std::function<void(const ViewChange&)> invalidate);
  ~BranchFollower();  // stop(), then waits for a poll under way
  BranchFollower(const BranchFollower&) = delete;
  BranchFollower& operator=(const BranchFollower&) = delete;

  void stop();
  State state() const;
  std::chrono::milliseconds interval() const { return interval_; }
  // One poll now, on the caller's thread (tests; the scheduled polls go on as before).
  void poll();

 private:
  void schedule_next();

  HubClient& hub_;
  const RepoRef repo_;
  const std::shared_ptr<const ListingCache> listings_;
  FileSystem& fs_;
  Env& env_;
  const std::chrono::milliseconds interval_;
  InvalidationSink invalidate_;  // the mount's; stop() closes it (fs/invalidation_sink.h)
  std::mutex poll_mu_;  // one poll at a time (a test's poll beside a scheduled one)
  mutable std::mutex state_mu_;  // a leaf
  State state_;
  bool failing_ = false;  // under state_mu_: the failure was logged; the next success says so
  std::atomic<bool> stopping_{false};
  std::unique_ptr<Executor> worker_;
  ScheduledGroup timer_;  // declared last: shut down (its functions run, doing nothing) first
};

}  // namespace hubfs
