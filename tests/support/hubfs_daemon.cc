#include "support/hubfs_daemon.h"

#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <stdlib.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <stdexcept>
#include <thread>

#include "support/mount_harness.h"

extern char** environ;

namespace hubfs::testing {
namespace {

using Clock = std::chrono::steady_clock;

// A daemon builds its stack (repo info, listing) before it mounts; under ASan on a loaded
// 2-core machine that can take a while, but a minute means it is stuck.
constexpr auto kStartTimeout = std::chrono::seconds(60);

std::string read_fd_tail(int fd, size_t max_bytes) {
  struct stat st {};
  if (fd < 0 || fstat(fd, &st) != 0) return "";
  off_t size = st.st_size;
  off_t from = size > static_cast<off_t>(max_bytes) ? size - static_cast<off_t>(max_bytes) : 0;
  std::string s(static_cast<size_t>(size - from), '\0');
  ssize_t n = pread(fd, s.data(), s.size(), from);
  s.resize(n > 0 ? static_cast<size_t>(n) : 0);
  return from > 0 ? "..." + s : s;
}

}  // namespace

bool is_mounted(const std::string& path) {
  std::ifstream in("/proc/self/mountinfo");
  std::string line;
  while (std::getline(in, line)) {
    std::istringstream fields(line);
    std::string id, parent, dev, root, point;
    fields >> id >> parent >> dev >> root >> point;
    if (point == path) return true;
  }
  return false;
}

long long process_rss_bytes(pid_t pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/status");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("VmRSS:", 0) == 0) return std::stoll(line.substr(6)) * 1024;  // "VmRSS: N kB"
  }
  return -1;
}

int process_fd_count(pid_t pid) {
  DIR* d = opendir(("/proc/" + std::to_string(pid) + "/fd").c_str());
  if (!d) return -1;
  int n = 0;
  while (dirent* e = readdir(d)) {
    if (e->d_name[0] != '.') ++n;
  }
  closedir(d);
  return n;
}

std::string describe_wait_status(int status) {
  if (WIFEXITED(status)) return "exited with " + std::to_string(WEXITSTATUS(status));
  if (WIFSIGNALED(status)) return "killed by signal " + std::to_string(WTERMSIG(status));
  return "wait status " + std::to_string(status);
}

TimedResult run_command_timeout(const std::string& command, std::chrono::milliseconds timeout) {
  TimedResult result;
  std::string out_path = (std::filesystem::temp_directory_path() / "hubfs-cmd-XXXXXX").string();
  int out_fd = mkostemp(out_path.data(), O_CLOEXEC);
  if (out_fd < 0) throw std::runtime_error(std::string("mkostemp: ") + strerror(errno));
  unlink(out_path.c_str());
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, STDIN_FILENO, "/dev/null", O_RDONLY, 0);
  posix_spawn_file_actions_adddup2(&actions, out_fd, STDOUT_FILENO);
  posix_spawn_file_actions_adddup2(&actions, out_fd, STDERR_FILENO);
  posix_spawnattr_t attr;
  posix_spawnattr_init(&attr);
  posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETPGROUP);  // its own group: killable as a whole
  posix_spawnattr_setpgroup(&attr, 0);
  const char* argv[] = {"/bin/sh", "-c", command.c_str(), nullptr};
  pid_t pid = -1;
  int rc = posix_spawn(&pid, "/bin/sh", &actions, &attr, const_cast<char**>(argv), environ);
  posix_spawn_file_actions_destroy(&actions);
  posix_spawnattr_destroy(&attr);
  if (rc != 0) {
    close(out_fd);
    throw std::runtime_error(std::string("posix_spawn /bin/sh: ") + strerror(rc));
  }
  auto deadline = Clock::now() + timeout;
  int status = 0;
  while (true) {
    pid_t r = waitpid(pid, &status, WNOHANG);
    if (r == pid) break;
    if (Clock::now() >= deadline) {
      result.timed_out = true;
      kill(-pid, SIGKILL);
      waitpid(pid, &status, 0);
      break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  if (!result.timed_out && WIFEXITED(status)) result.exit_code = WEXITSTATUS(status);
  result.output = read_fd_tail(out_fd, 1 << 20);
  close(out_fd);
  return result;
}

std::unique_ptr<HubfsDaemon> HubfsDaemon::start(const std::string& endpoint, const std::string& repo,
                                                const std::string& cache_dir, const std::string& mountpoint,
                                                const std::vector<std::string>& extra_args) {
  std::unique_ptr<HubfsDaemon> d(new HubfsDaemon());
  d->mountpoint_ = mountpoint;
  std::string err_path = (std::filesystem::temp_directory_path() / "hubfs-daemon-stderr-XXXXXX").string();
  d->stderr_fd_ = mkostemp(err_path.data(), O_CLOEXEC | O_APPEND);
  if (d->stderr_fd_ < 0) throw std::runtime_error(std::string("mkostemp: ") + strerror(errno));
  unlink(err_path.c_str());

  std::vector<std::string> args = {bin_path("hubfs"), "mount", "-f", "--endpoint", endpoint, "--cache-dir", cache_dir};
  args.insert(args.end(), extra_args.begin(), extra_args.end());
  args.push_back(repo);
  args.push_back(mountpoint);
  std::vector<char*> argv;
  for (auto& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, STDIN_FILENO, "/dev/null", O_RDONLY, 0);
  posix_spawn_file_actions_adddup2(&actions, d->stderr_fd_, STDOUT_FILENO);
  posix_spawn_file_actions_adddup2(&actions, d->stderr_fd_, STDERR_FILENO);
  int rc = posix_spawn(&d->pid_, argv[0], &actions, nullptr, argv.data(), environ);
  posix_spawn_file_actions_destroy(&actions);
  if (rc != 0) {
    d->pid_ = -1;
    throw std::runtime_error("posix_spawn " + args[0] + ": " + strerror(rc));
  }

  auto deadline = Clock::now() + kStartTimeout;
  while (true) {
    if (auto st = d->wait_exit(std::chrono::milliseconds(0))) {
      throw std::runtime_error("hubfs mount -f " + describe_wait_status(*st) + " before mounting; stderr:\n" +
                               d->stderr_text());
    }
    struct stat sb {};
    if (is_mounted(mountpoint) && stat(mountpoint.c_str(), &sb) == 0) return d;
    if (Clock::now() >= deadline) {
      std::string err = d->stderr_text();
      throw std::runtime_error("hubfs mount -f did not answer at " + mountpoint + " within 60 s; stderr:\n" + err);
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
}

HubfsDaemon::~HubfsDaemon() {
  if (pid_ > 0 && !status_) {
    umount2(mountpoint_.c_str(), MNT_DETACH);
    if (!wait_exit(std::chrono::seconds(5))) {
      ::kill(pid_, SIGKILL);
      wait_exit(std::chrono::seconds(30));
    }
  }
  // A daemon that died by a signal leaves a dead mount behind. (Not after a clean exit: the
  // mountpoint may already carry the next mount.)
  if (status_ && WIFSIGNALED(*status_) && is_mounted(mountpoint_)) umount2(mountpoint_.c_str(), MNT_DETACH);
  if (stderr_fd_ >= 0) close(stderr_fd_);
}

void HubfsDaemon::signal(int sig) {
  if (pid_ > 0 && !status_) ::kill(pid_, sig);
}

std::optional<int> HubfsDaemon::wait_exit(std::chrono::milliseconds timeout) {
  if (status_ || pid_ <= 0) return status_;
  auto deadline = Clock::now() + timeout;
  while (true) {
    int st = 0;
    pid_t r = waitpid(pid_, &st, WNOHANG);
    if (r == pid_) {
      status_ = st;
      return status_;
    }
    if (Clock::now() >= deadline) return std::nullopt;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
}

std::string HubfsDaemon::stderr_text(size_t max_bytes) const { return read_fd_tail(stderr_fd_, max_bytes); }

std::string HubfsDaemon::sanitizer_reports() const {
  std::string all = read_fd_tail(stderr_fd_, 64 << 20);
  std::string out;
  for (const char* marker : {"ERROR: AddressSanitizer", "ERROR: LeakSanitizer", "runtime error:",
                             "WARNING: ThreadSanitizer", "ERROR: ThreadSanitizer"}) {
    size_t at = all.find(marker);
    if (at != std::string::npos) {
      size_t from = all.rfind('\n', at);
      from = from == std::string::npos ? 0 : from + 1;
      out += all.substr(from, 4000) + "\n";
    }
  }
  return out;
}

}  // namespace hubfs::testing
