#include "mountpoint.h"

#include <dirent.h>
#include <fcntl.h>
#include <limits.h>
#include <stdlib.h>
#include <poll.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/xattr.h>
#include <sys/statvfs.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <cstdlib>
#include <cstring>
#include <iostream>
#include <memory>
#include <mutex>
#include <optional>
#include <thread>
#include <fstream>
#include <sstream>

#include <nlohmann/json.hpp>

#include "common/log.h"

namespace hubfs {
namespace {

// What /proc/self/mountinfo says is mounted at a path.
struct MountEntry {
  std::string fstype;  // "fuse.hubfs" for ours
  std::string device;  // "major:minor"
};

// Mount points are listed with octal escapes for space, tab, newline and backslash.
std::string unescape_mountinfo(const std::string& field) {
  auto octal = [](char c) { return c >= '0' && c <= '7'; };
  std::string out;
  for (size_t i = 0; i < field.size(); ++i) {
    if (field[i] == '\\' && i + 3 < field.size() &&
        octal(field[i + 1]) && octal(field[i + 2]) && octal(field[i + 3])) {
      out.push_back(static_cast<char>((field[i + 1] - '0') * 64 + (field[i + 2] - '0') * 8 + (field[i + 3] - '0')));
      i += 3;
      continue;
    }
    out.push_back(field[i]);
  }
  return out;
}

// The entry for `path` if it is itself a mount point (the last one mounted there wins).
std::optional<MountEntry> mount_at(const std::string& path) {
  std::ifstream in("/proc/self/mountinfo");
  std::string line;
  std::optional<MountEntry> found;
  while (std::getline(in, line)) {
    std::istringstream fields(line);
    std::string id, parent, dev, root, point, options, field;
    fields >> id >> parent >> dev >> root >> point >> options;
    if (unescape_mountinfo(point) != path) continue;
    // Optional fields end at "-"; the filesystem type follows.
    while (fields >> field && field != "-") {}
    MountEntry e;
    e.device = dev;
    fields >> e.fstype;
    found = e;
  }
  return found;
}

}  // namespace

bool is_mount_point(const std::string& path) { return mount_at(path).has_value(); }

std::optional<std::string> mount_device(const std::string& path) {
  auto entry = mount_at(path);
  if (!entry) return std::nullopt;
  return entry->device;
}

std::vector<HubfsMountEntry> list_hubfs_mounts() {
  std::ifstream in("/proc/self/mountinfo");
  std::string line;
  std::vector<HubfsMountEntry> mounts;
  while (std::getline(in, line)) {
    std::istringstream fields(line);
    std::string id, parent, dev, root, point, options, field, fstype, source;
    fields >> id >> parent >> dev >> root >> point >> options;
    while (fields >> field && field != "-") {}
    fields >> fstype >> source;
    if (fstype == "fuse.hubfs") mounts.push_back({unescape_mountinfo(point), unescape_mountinfo(source)});
  }
  return mounts;
}

// A FUSE mount whose daemon is gone answers ENOTCONN to anything not cached in the kernel;
// statfs is never cached (a plain stat of the root may still succeed from the attribute cache).
bool is_dead_fuse_mount(const std::string& path) {
  struct statvfs st {};
  return statvfs(path.c_str(), &st) != 0 && (errno == ENOTCONN || errno == ECONNABORTED);
}

// Lazily detaches a mount (root), else asks fusermount3 to (a user's own FUSE mount).
Status detach_mount(const std::string& path) {
  if (umount2(path.c_str(), MNT_DETACH) == 0) return Status::Ok();
  int err = errno;
  pid_t pid = fork();
  if (pid == 0) {
    int devnull = open("/dev/null", O_WRONLY);
    if (devnull >= 0) dup2(devnull, 2);
    execlp("fusermount3", "fusermount3", "-u", "-z", path.c_str(), static_cast<char*>(nullptr));
    _exit(127);
  }
  int status = 0;
  if (pid > 0) waitpid(pid, &status, 0);
  if (pid > 0 && WIFEXITED(status) && WEXITSTATUS(status) == 0) return Status::Ok();
  return Unavailable("cannot unmount " + path + ": " + strerror(err));
}

// The absolute path of a directory that may itself be a dead mount (realpath of a dead FUSE
// mount fails with ENOTCONN): resolve its parent and append the last component.
std::string absolute_mountpoint(const std::string& path) {
  char real[PATH_MAX];
  if (realpath(path.c_str(), real)) return real;
  std::string trimmed = path;
  while (trimmed.size() > 1 && trimmed.back() == '/') trimmed.pop_back();
  size_t slash = trimmed.rfind('/');
  std::string parent = slash == std::string::npos ? "." : (slash == 0 ? "/" : trimmed.substr(0, slash));
  std::string name = slash == std::string::npos ? trimmed : trimmed.substr(slash + 1);
  if (!realpath(parent.c_str(), real)) return path;
  std::string out = real;
  if (out != "/") out += "/";
  return out + name;
}

namespace {

bool has_entries(const std::string& dir) {
  DIR* d = opendir(dir.c_str());
  if (!d) return false;
  bool any = false;
  while (dirent* e = readdir(d)) {
    if (std::strcmp(e->d_name, ".") != 0 && std::strcmp(e->d_name, "..") != 0) {
      any = true;
      break;
    }
  }
  closedir(d);
  return any;
}

}  // namespace

// A dead hubfs mount left by a daemon that was killed is cleared here, so remounting needs no
// manual fusermount.
Result<std::string> check_mountpoint(const std::string& mountpoint, bool allow_nonempty) {
  const std::string path = absolute_mountpoint(mountpoint);
  if (auto entry = mount_at(path); entry && is_dead_fuse_mount(path)) {
    if (entry->fstype != "fuse.hubfs") {
      return Status(Code::kInvalidArgument,
                    "mountpoint " + path + " is a dead FUSE mount (" + entry->fstype +
                        ", its daemon exited); clear it with: fusermount3 -uz " + path);
    }
    if (Status s = detach_mount(path); !s.ok()) {
      return Status(Code::kUnavailable, "mountpoint " + path + " is a dead hubfs mount (its daemon exited) and " +
                                            s.message() + "; clear it with: hubfs unmount " + path);
    }
    log_info("cleared a dead hubfs mount at " + path + " (its daemon had exited)");
  }
  struct stat st {};
  if (stat(path.c_str(), &st) != 0) {
    if (errno == ENOTCONN) {
      return Status(Code::kInvalidArgument,
                    "mountpoint " + path + " is a dead FUSE mount (its daemon exited); "
                    "clear it with: hubfs unmount " + path);
    }
    return Status(Code::kNotFound, "mountpoint " + mountpoint + " does not exist: create it with "
                                   "mkdir -p " + mountpoint);
  }
  if (!S_ISDIR(st.st_mode)) {
    return Status(Code::kInvalidArgument, "mountpoint " + mountpoint + " is not a directory");
  }
  if (is_mount_point(path)) {
    return Status(Code::kInvalidArgument, "mountpoint " + path +
                                              " is busy: something is already mounted there; "
                                              "unmount it first (hubfs unmount " + path + ")");
  }
  if (!allow_nonempty && has_entries(path)) {
    return Status(Code::kInvalidArgument,
                  "mountpoint " + path + " is not empty; choose an empty directory, or pass -o nonempty "
                  "to mount over it (its contents are hidden while mounted)");
  }
  if (access("/dev/fuse", R_OK | W_OK) != 0) {
    const int err = errno;
    if (err == EACCES && geteuid() != 0) {
      // libfuse opens /dev/fuse itself and only then hands the mount to fusermount3.
      return Status(Code::kUnavailable,
                    "/dev/fuse is not readable and writable by this user (Permission denied): a user's "
                    "mount needs it mode 0666, as Debian's udev rule makes it (a container's --device "
                    "/dev/fuse is 0600: chmod 0666 /dev/fuse in it), and fusermount3 installed setuid "
                    "root (package fuse3); or mount as root");
    }
    return Status(Code::kUnavailable,
                  std::string("/dev/fuse is not usable (") + strerror(err) +
                      "): install fuse3 and load the module (modprobe fuse), or in a container "
                      "pass --device /dev/fuse --cap-add SYS_ADMIN");
  }
  return path;
}

Status check_fuse_options_allowed(const std::vector<std::string>& fuse_options) {
  if (geteuid() == 0) return Status::Ok();
  const bool other = std::find(fuse_options.begin(), fuse_options.end(), "allow_other") != fuse_options.end();
  const bool root = std::find(fuse_options.begin(), fuse_options.end(), "allow_root") != fuse_options.end();
  if (!other && !root) return Status::Ok();
  // fusermount3 reads the same file and refuses the same way, but its message then comes
  // after the mount was half set up; say it first, with the fix.
  std::ifstream conf("/etc/fuse.conf");
  std::string line;
  while (std::getline(conf, line)) {
    const size_t start = line.find_first_not_of(" \t");
    if (start != std::string::npos && line.compare(start, 16, "user_allow_other") == 0) return Status::Ok();
  }
  return Status(Code::kPermissionDenied,
                std::string("-o ") + (other ? "allow_other" : "allow_root") +
                    " is refused to users other than root unless /etc/fuse.conf has the line "
                    "user_allow_other: add it (as root), or mount without it (then only you can read the mount)");
}

namespace {

// How long `hubfs unmount` waits for a mount to answer before giving up: a daemon that is
// stopped (SIGSTOP, a debugger) never answers, and the command must not hang with it. As long
// as `hubfs status` waits (a live daemon answers in milliseconds).
constexpr auto kStateAnswerTimeout = std::chrono::seconds(3);

// What run_unmount learns about the mountpoint; every step may ask the daemon (resolving the
// path stats the mount's root, is_dead_fuse_mount asks statfs).
struct MountState {
  std::string path;
  bool mounted = false;
  bool dead = false;
  pid_t daemon_pid = 0;  // as the daemon reports it (0: unknown)
  int daemon_pidfd = -1;  // taken before the unmount, so a reused PID is never waited for
};

// How long `hubfs unmount` waits, after the unmount, for the daemon to exit: it finishes its
// cache writes (the index, queued shared-tier stores: at most kDrainTime) and tears the stack
// down first (docs/constants.md, kDaemonExitWait). A script may remove the cache once the
// command returned 0.
constexpr auto kDaemonExitWait = std::chrono::seconds(30);

// The PID a live hubfs mount's daemon reports in its status (user.hubfs.status), if it is a
// hubfs process this process can see (another PID namespace's number would name someone else).
pid_t daemon_pid_of(const std::string& path) {
  // Sized first: a whole-Hub mount's status lists every repo touched.
  const ssize_t size = ::getxattr(path.c_str(), "user.hubfs.status", nullptr, 0);
  if (size <= 0) return 0;
  std::string buf(static_cast<size_t>(size) + 4096, '\0');  // room for counters that grew meanwhile
  const ssize_t n = ::getxattr(path.c_str(), "user.hubfs.status", buf.data(), buf.size());
  if (n <= 0) return 0;
  auto status = nlohmann::json::parse(buf.substr(0, static_cast<size_t>(n)), nullptr, false);
  if (!status.is_object() || !status.contains("pid") || !status["pid"].is_number_integer()) return 0;
  const pid_t pid = status["pid"].get<pid_t>();
  std::ifstream comm("/proc/" + std::to_string(pid) + "/comm");
  std::string name;
  std::getline(comm, name);
  return pid > 0 && name.rfind("hubfs", 0) == 0 ? pid : 0;
}

// Whether `pid` has exited (a zombie has: its memory and files are released).
bool process_gone(pid_t pid) {
  std::ifstream stat("/proc/" + std::to_string(pid) + "/stat");
  std::string line;
  if (!std::getline(stat, line)) return true;
  const size_t paren = line.rfind(')');
  return paren == std::string::npos || paren + 2 >= line.size() || line[paren + 2] == 'Z' || line[paren + 2] == 'X';
}

// Waits up to kDaemonExitWait for the daemon to exit; false if it is still running then.
bool wait_for_daemon_exit(const MountState& state) {
  const auto deadline = std::chrono::steady_clock::now() + kDaemonExitWait;
  if (state.daemon_pidfd >= 0) {
    // Readable once the process has exited.
    pollfd p{state.daemon_pidfd, POLLIN, 0};
    for (;;) {
      const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
      if (left.count() <= 0) return false;
      const int r = ::poll(&p, 1, static_cast<int>(left.count()));
      if (r > 0) return true;
      if (r < 0 && errno != EINTR) break;  // fall back to looking at /proc
    }
  }
  // Kernels before 5.3 (no pidfd): look every 10 ms.
  while (!process_gone(state.daemon_pid)) {
    if (std::chrono::steady_clock::now() >= deadline) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return true;
}

// MountState of `mountpoint`, found on a thread of its own; nothing if that takes longer than
// kStateAnswerTimeout. A thread still blocked then is left behind: it ends with the process (the
// kernel lets a process that exits abandon a FUSE request its daemon has not read).
std::optional<MountState> mount_state_within_timeout(const std::string& mountpoint) {
  struct Shared {
    std::mutex mu;
    std::condition_variable cv;
    std::optional<MountState> state;
  };
  auto shared = std::make_shared<Shared>();
  std::thread([shared, mountpoint] {
    MountState s;
    s.path = absolute_mountpoint(mountpoint);
    s.mounted = is_mount_point(s.path);
    s.dead = s.mounted && is_dead_fuse_mount(s.path);
    if (s.mounted && !s.dead) {
      s.daemon_pid = daemon_pid_of(s.path);
      if (s.daemon_pid > 0) s.daemon_pidfd = static_cast<int>(::syscall(SYS_pidfd_open, s.daemon_pid, 0));
    }
    std::lock_guard<std::mutex> lock(shared->mu);
    shared->state = std::move(s);
    shared->cv.notify_all();
  }).detach();
  std::unique_lock<std::mutex> lock(shared->mu);
  shared->cv.wait_for(lock, kStateAnswerTimeout, [&] { return shared->state.has_value(); });
  return shared->state;
}

}  // namespace

int run_unmount(const std::string& mountpoint) {
  const auto state = mount_state_within_timeout(mountpoint);
  if (!state) {
    std::cerr << "hubfs: " << mountpoint << " does not answer within " << kStateAnswerTimeout.count()
              << " s: its daemon is stopped (SIGSTOP, a debugger) or stuck; resume it (kill -CONT PID; "
                 "hubfs status lists it as not responding) and unmount again, or detach the mount without "
                 "it: umount -l " << mountpoint << " (as a user: fusermount3 -uz " << mountpoint << ")\n";
    // The thread still blocked on the mount cannot be joined: leave without exit-time handlers
    // (LeakSanitizer's, under ASan, stops every thread first and would wait for that one for ever).
    std::cout.flush();
    std::cerr.flush();
    std::_Exit(1);
  }
  const std::string& path = state->path;
  if (!state->mounted) {
    std::cerr << "hubfs: " << mountpoint << " is not mounted\n";
    return 1;
  }
  // A mount whose daemon died (SIGKILL, OOM) cannot answer an orderly unmount's requests:
  // detach it.
  if (state->dead) {
    if (Status s = detach_mount(path); !s.ok()) {
      std::cerr << "hubfs: " << s.message() << "\n";
      return 1;
    }
    return 0;
  }
  // Done once the daemon has exited, its cache writes with it (or after kDaemonExitWait, saying so).
  auto unmounted = [&state, &path]() {
    if (state->daemon_pid <= 0) return 0;
    const bool exited = wait_for_daemon_exit(*state);
    if (state->daemon_pidfd >= 0) ::close(state->daemon_pidfd);
    if (exited) return 0;
    std::cerr << "hubfs: " << path << " is unmounted, but its daemon (pid " << state->daemon_pid
              << ") is still running after " << kDaemonExitWait.count()
              << " s, so its cache writes may not be done: wait for it to exit (tail --pid="
              << state->daemon_pid << " -f /dev/null) before removing or copying its cache\n";
    return 1;
  };
  // Root unmounts directly; others go through the setuid helper, as FUSE intends.
  if (umount2(path.c_str(), 0) == 0) return unmounted();
  int err = errno;
  if (err == EBUSY) {
    std::cerr << "hubfs: " << path << " is busy: a process still uses it (see: fuser -vm " << path
              << "); close it and retry\n";
    return 1;
  }
  pid_t pid = fork();
  if (pid == 0) {
    execlp("fusermount3", "fusermount3", "-u", path.c_str(), static_cast<char*>(nullptr));
    _exit(127);
  }
  int status = 0;
  if (pid > 0) waitpid(pid, &status, 0);
  if (pid > 0 && WIFEXITED(status) && WEXITSTATUS(status) == 0) return unmounted();
  std::cerr << "hubfs: cannot unmount " << path << ": " << strerror(err) << "\n";
  return 1;
}

}  // namespace hubfs
