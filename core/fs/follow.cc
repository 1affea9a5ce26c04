#include "fs/follow.h"

#include <stdlib.h>

#include <ctime>

#include "common/log.h"

namespace hubfs {

int follow_min_interval_s() {
  if (const char* v = getenv("HUBFS_FOLLOW_MIN_INTERVAL_S"); v && *v) {
    char* end = nullptr;
    const long n = strtol(v, &end, 10);
    if (*end == '\0' && n >= 1 && n <= kFollowMinIntervalS) return static_cast<int>(n);
  }
  return kFollowMinIntervalS;
}

BranchFollower::BranchFollower(HubClient& hub, RepoRef repo, std::shared_ptr<const ListingCache> listings,
                               FileSystem& fs, Env& env, std::chrono::milliseconds interval,
                               std::function<void(const ViewChange&)> invalidate)
    : hub_(hub),
      repo_(std::move(repo)),
      listings_(std::move(listings)),
      fs_(fs),
      env_(env),
      interval_(interval),
      invalidate_(std::move(invalidate)),
      worker_(env.new_executor(1)),
      timer_(env) {
  state_.commit = fs_.current_commit();
  schedule_next();
}

BranchFollower::~BranchFollower() {
  stop();
  worker_->drain();
}

void BranchFollower::stop() {
  stopping_.store(true);
  timer_.shutdown();
  invalidate_.close();  // waits for an invalidation under way
}

BranchFollower::State BranchFollower::state() const {
  std::lock_guard<std::mutex> lock(state_mu_);
  return state_;
}

void BranchFollower::schedule_next() {
  if (stopping_.load()) return;
  // The timer's function must not block: the poll (a request) goes to the worker.
  timer_.schedule_after(interval_, [this] {
    if (stopping_.load()) return;
    (void)worker_->post([this] {
      poll();
      schedule_next();
    });
  });
}

void BranchFollower::poll() {
  if (stopping_.load()) return;
  std::lock_guard<std::mutex> one_poll(poll_mu_);
  // The view the kernel was told about before the last swap, again: a lookup that began before
  // that swap may have answered the kernel after its invalidation.
  ViewChange again = fs_.retired_names();
  auto pinned = pin_revision(hub_, repo_, listings_.get(), /*offline=*/false);
  if (stopping_.load()) return;  // the transport's shutdown fails the poll: not the Hub's fault
  std::string logged;
  {
    std::lock_guard<std::mutex> lock(state_mu_);
    ++state_.polls;
    if (!pinned.ok()) {
      state_.last_error = pinned.status().message();
      if (!failing_) {
        failing_ = true;
        logged = "--follow: cannot ask where " + repo_.revision + " of " + repo_.id + " points now (" +
                 pinned.status().message() + "); the mount stays at commit " + state_.commit +
                 " and keeps asking every " + std::to_string(interval_.count() / 1000) +
                 " s (this is logged once until it answers again)";
      }
    } else {
      if (failing_) logged = "--follow: " + repo_.id + " answers again";
      failing_ = false;
      state_.last_error.clear();
      state_.checked_at = static_cast<int64_t>(std::chrono::duration_cast<std::chrono::seconds>(env_.system_now().time_since_epoch()).count());
    }
  }
  if (!logged.empty()) {
    if (pinned.ok()) log_info(logged);
    else log_warning(logged);
  }
  ViewChange change;
  if (pinned.ok() && pinned->commit != fs_.current_commit()) {
    const bool whole = pinned->file_count && *pinned->file_count <= kWholeRepoMaxFiles;
    change = fs_.advance(pinned->commit, static_cast<time_t>(pinned->last_modified), whole);
    if (!change.new_commit.empty()) {
      {
        std::lock_guard<std::mutex> lock(state_mu_);
        state_.commit = pinned->commit;
        ++state_.changes;
      }
      log_info("--follow: " + repo_.id + "@" + repo_.revision + " moved from commit " + change.old_commit + " to " +
             pinned->commit + "; new opens see it, open files keep reading the commit they were opened at");
    }
  }
  invalidate_.deliver(again, change);
}

}  // namespace hubfs
