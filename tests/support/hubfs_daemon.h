// Runs `hubfs mount -f` as a child of the test, so a lifecycle or stress test owns the daemon:
// its pid (to signal it, to sample its RSS and open fds), its exit status (reaped, so "exited"
// is exact) and its stderr (the log, and any AddressSanitizer/UBSan report).
#pragma once

#include <sys/types.h>

#include <chrono>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace hubfs::testing {

class HubfsDaemon {
 public:
  // Spawns `hubfs mount -f --endpoint E --cache-dir C [extra_args] REPO MOUNTPOINT` and waits (at
  // most 60 s) until the mountpoint answers. Throws std::runtime_error with the daemon's stderr
  // if it exits first or never answers.
  static std::unique_ptr<HubfsDaemon> start(const std::string& endpoint, const std::string& repo,
                                            const std::string& cache_dir, const std::string& mountpoint,
                                            const std::vector<std::string>& extra_args = {});
  // If the daemon still runs: lazy unmount, SIGKILL, reap. Never blocks for long.
  ~HubfsDaemon();
  HubfsDaemon(const HubfsDaemon&) = delete;
  HubfsDaemon& operator=(const HubfsDaemon&) = delete;

  pid_t pid() const { return pid_; }
  const std::string& mountpoint() const { return mountpoint_; }
  // Sends a signal (no-op once reaped).
  void signal(int sig);
  // Waits up to `timeout` for the daemon to exit; returns its wait status, or nullopt if it is
  // still running. Once it returned a status, returns the same status again.
  std::optional<int> wait_exit(std::chrono::milliseconds timeout);
  bool exited() const { return status_.has_value(); }
  // Everything the daemon wrote to stderr so far (the tail if it is long).
  std::string stderr_text(size_t max_bytes = 16384) const;
  // The sanitizer reports in stderr ("ERROR: AddressSanitizer", "runtime error:", ...), or "".
  std::string sanitizer_reports() const;

 private:
  HubfsDaemon() = default;
  pid_t pid_ = -1;
  int stderr_fd_ = -1;
  std::string mountpoint_;
  std::optional<int> status_;
};

// True when `path` (as given, not resolved: it may be a dead mount) is listed in
// /proc/self/mountinfo.
bool is_mounted(const std::string& path);
// Resident set size of a process in bytes (VmRSS), or -1 if it is gone.
long long process_rss_bytes(pid_t pid);
// Open file descriptors of a process, or -1 if it is gone.
int process_fd_count(pid_t pid);
// "exited with 0", "killed by signal 9", ...
std::string describe_wait_status(int status);
// Runs `command` with a bound: kills its process group after `timeout`. exit_code -1 on timeout.
struct TimedResult {
  int exit_code = -1;
  bool timed_out = false;
  std::string output;  // stdout and stderr
};
TimedResult run_command_timeout(const std::string& command, std::chrono::milliseconds timeout);

}  // namespace hubfs::testing
