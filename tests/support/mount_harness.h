// Drives the real `hubfs` binary for integration tests and benchmarks: mounts a repo of a local
// Hub server in the background (as a user would), unmounts on destruction, runs shell commands.
#pragma once

#include <memory>
#include <string>
#include <vector>

namespace hubfs::testing {

struct CommandResult {
  int exit_code = -1;   // -1 when it did not exit (killed by a signal)
  int wait_status = -1;  // as pclose gave it: WIFSIGNALED/WTERMSIG tell a crash
  std::string output;  // stdout and stderr together
};

// Runs `command` with /bin/sh; captures its output (bounded to 64 MiB).
CommandResult run_command(const std::string& command);

// Single-quotes s for /bin/sh.
std::string shell_quote(const std::string& s);

// The path of a program built into build/bin.
std::string bin_path(const std::string& name);

// Empties the kernel's page cache (root only), so the next read of a file reaches its filesystem.
bool drop_page_cache();
// A whole file's bytes ("" if it cannot be read).
std::string read_all(const std::string& path);
// n deterministic pseudo-random bytes for `seed`.
std::string random_bytes(size_t n, unsigned seed);

class HubfsMount {
 public:
  // Mounts `repo` from `endpoint` at a new directory, with the given cache dir and extra args
  // (repo "" with extra arg "--hub": the whole-Hub mount).
  // Throws std::runtime_error with hubfs's own message if the mount fails.
  static std::unique_ptr<HubfsMount> start(const std::string& endpoint, const std::string& repo,
                                           const std::string& cache_dir,
                                           const std::vector<std::string>& extra_args = {});
  ~HubfsMount();  // unmounts (retrying while busy) and removes the directory

  const std::string& path() const { return path_; }
  std::string operator/(const std::string& rel) const { return path_ + "/" + rel; }
  // The daemon's log file (--log-file).
  const std::string& log_path() const { return log_; }

 private:
  std::string path_;
  std::string log_;
};

}  // namespace hubfs::testing
