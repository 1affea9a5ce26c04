#include "copy.h"

#include <dirent.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <iostream>
#include <thread>

#include "common/log.h"

namespace hubfs {
namespace {

std::atomic<bool> g_stop{false};
std::atomic<int> g_stop_signal{0};  // the signal that stopped the copy: the exit code is 128 + it
extern "C" void on_stop_signal(int sig) {
  g_stop_signal.store(sig);
  g_stop.store(true);
}

constexpr const char* kPartialInfix = ".hubfs-partial-";

// How often the copy looks for a stop signal while a read may be blocked on the network.
constexpr auto kStopPoll = std::chrono::milliseconds(50);
// Redraws at most this often: a terminal gets ~10 updates a second, not one per MiB.
constexpr auto kProgressInterval = std::chrono::milliseconds(100);
// A copy into a file starts the disk's writeback of every this many bytes as soon as they are
// written (sync_file_range, without waiting), so that the fsync before the rename finds little
// left to write: left to the end, the fsync of 300 MB took 0.16-0.25 s after the last byte came.
constexpr uint64_t kWritebackStep = 16ull << 20;

std::string human(double bytes) {
  const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  int u = 0;
  while (bytes >= 1024 && u < 4) {
    bytes /= 1024;
    ++u;
  }
  char buf[32];
  std::snprintf(buf, sizeof buf, u == 0 ? "%.0f %s" : "%.1f %s", bytes, units[u]);
  return buf;
}

Status write_all(int fd, const char* data, size_t n, const std::string& what) {
  while (n > 0) {
    ssize_t w = ::write(fd, data, n);
    if (w < 0) {
      if (errno == EINTR) continue;
      return IoError("writing " + what + ": " + strerror(errno));
    }
    data += w;
    n -= static_cast<size_t>(w);
  }
  return Status::Ok();
}

// Removes DEST.hubfs-partial-PID files beside `dest` whose process no longer exists (a copy killed
// by SIGKILL or a crash leaves its temp file); a live copy's temp file is left alone. Ours (the
// PID reused) goes too: this process has not created it.
void remove_stale_partials(const std::string& dest) {
  const size_t slash = dest.rfind('/');
  const std::string dir = slash == std::string::npos ? "." : dest.substr(0, slash == 0 ? 1 : slash);
  const std::string prefix = (slash == std::string::npos ? dest : dest.substr(slash + 1)) + kPartialInfix;
  DIR* d = ::opendir(dir.c_str());
  if (d == nullptr) return;  // the create below reports what is wrong with the directory
  while (const dirent* e = ::readdir(d)) {
    const std::string name = e->d_name;
    if (name.size() <= prefix.size() || name.compare(0, prefix.size(), prefix) != 0) continue;
    const std::string digits = name.substr(prefix.size());
    if (digits.find_first_not_of("0123456789") != std::string::npos || digits.size() > 9) continue;
    const pid_t pid = static_cast<pid_t>(std::stol(digits));
    if (pid != ::getpid() && (::kill(pid, 0) == 0 || errno != ESRCH)) continue;  // alive (or not ours to judge)
    const std::string path = dir + "/" + name;
    if (::unlink(path.c_str()) == 0) log_info("removed " + path + ", left by an interrupted copy");
  }
  ::closedir(d);
}

// What an existing DEST that is not writable means for a copy onto it; "" when it may be replaced.
std::string refusal_of_read_only(const std::string& dest, const struct stat& st, bool force) {
  if (force || !S_ISREG(st.st_mode)) return "";
  // access() says what the caller may write; root may write anything, so for root a file with no
  // write bit at all is the one a copy must not replace silently (cp(1) would open it for writing,
  // which succeeds for root; the rename hubfs does needs no permission on the file at all).
  const bool writable = ::access(dest.c_str(), W_OK) == 0 && (::geteuid() != 0 || (st.st_mode & 0222) != 0);
  if (writable) return "";
  return "cannot replace " + dest + ": " + strerror(EACCES) +
         " (it is read-only); make it writable, remove it, or pass --force to replace it";
}

}  // namespace

int run_copy(const CopyCommand& c) {
  auto fail = [](const Status& s) {
    std::cerr << "hubfs: " << s.message() << "\n";
    return 1;
  };
  auto url = parse_hf_url(c.url, c.revision);
  if (!url.ok()) return fail(url.status());
  if (url->path.empty()) return fail(InvalidArgument(c.url + " names a repo, not a file in it"));
  struct sigaction sa {};
  sa.sa_handler = on_stop_signal;
  sigaction(SIGINT, &sa, nullptr);
  sigaction(SIGTERM, &sa, nullptr);

  auto session = std::make_shared<RepoSession>(Env::real());
  // The copy hashes every byte it writes (copy_file) and drops the file's cached blocks when they
  // fail: the reader's own whole-file hash would be the same SHA-256 over the same bytes a second
  // time (0.2 s of CPU for 300 MB, on 2 cores shared with the network), so it is off here.
  SessionConfig config = c.session;
  config.verify_whole_files = false;
  if (Status st = open_repo_session(config, RepoSpec{url->repo, ""}, *session, {}, url->path); !st.ok()) return fail(st);
  auto file = HubFile::open(session, url->path);
  if (!file.ok()) return fail(file.status());

  // cp: DEST, or DEST/NAME when DEST is a directory; written to a temp file beside it. A DEST
  // that is a device or a pipe (/dev/null) is written directly, as cat's output is: there is
  // nothing to rename into place, and no temp file belongs beside it (in /dev).
  std::string dest = c.dest, temp;
  int fd = STDOUT_FILENO;
  if (!dest.empty()) {
    struct stat st {};
    bool exists = ::stat(dest.c_str(), &st) == 0;
    if (exists && S_ISDIR(st.st_mode)) {
      const size_t slash = url->path.rfind('/');
      dest += "/" + (slash == std::string::npos ? url->path : url->path.substr(slash + 1));
      exists = ::stat(dest.c_str(), &st) == 0;
    }
    // A symlink DEST stays a symlink: the file it points to is the one replaced.
    struct stat lst {};
    if (::lstat(dest.c_str(), &lst) == 0 && S_ISLNK(lst.st_mode)) {
      char target[PATH_MAX];
      if (!exists || ::realpath(dest.c_str(), target) == nullptr) {
        return fail(IoError("not writing through the dangling symlink " + dest + "; remove it or point it at a file"));
      }
      dest = target;
    }
    if (exists) {
      if (std::string refusal = refusal_of_read_only(dest, st, c.force); !refusal.empty()) {
        std::cerr << "hubfs: cp " << c.url << ": " << refusal << "\n";
        return 1;
      }
    }
    if (exists && (S_ISCHR(st.st_mode) || S_ISFIFO(st.st_mode) || S_ISSOCK(st.st_mode))) {
      fd = ::open(dest.c_str(), O_WRONLY | O_CLOEXEC);
      if (fd < 0) return fail(IoError("cannot open " + dest + " for writing (" + strerror(errno) + ")"));
    } else {
      remove_stale_partials(dest);
      temp = dest + kPartialInfix + std::to_string(getpid());
      fd = ::open(temp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
      if (fd < 0) {
        return fail(IoError("cannot create " + temp + " (" + strerror(errno) + "); check that the directory of " +
                            dest + " exists and is writable"));
      }
    }
  }
  const std::string where = !temp.empty() ? temp : dest.empty() ? std::string("stdout") : dest;
  const bool bar = !c.quiet && isatty(STDERR_FILENO);
  const auto started = std::chrono::steady_clock::now();
  auto last_draw = started - kProgressInterval;
  CopyOptions options;
  uint64_t written = 0, written_back = 0;
  options.sink = [&, fd](const char* data, size_t n) {
    if (Status st = write_all(fd, data, n, where); !st.ok()) return st;
    written += n;
    if (!temp.empty() && written - written_back >= kWritebackStep) {
      // Best effort: a failure here only leaves the work to the fsync.
      (void)::sync_file_range(fd, static_cast<off_t>(written_back), static_cast<off_t>(written - written_back),
                              SYNC_FILE_RANGE_WRITE);
      written_back = written;
    }
    return Status::Ok();
  };
  if (!temp.empty()) {
    // A copy that failed its hash starts over once (copy_file): the temp file starts over too.
    options.rewind = [&, fd]() -> Status {
      if (::ftruncate(fd, 0) != 0 || ::lseek(fd, 0, SEEK_SET) != 0) {
        return IoError("truncating " + temp + " to start the copy over: " + strerror(errno));
      }
      written = written_back = 0;
      return Status::Ok();
    };
  }
  options.stop = [] { return g_stop.load(); };
  options.progress = [&](uint64_t done, uint64_t total) {
    if (!bar) return;
    const auto now = std::chrono::steady_clock::now();
    if (done < total && now - last_draw < kProgressInterval) return;
    last_draw = now;
    const double seconds = std::chrono::duration<double>(now - started).count();
    const int pct = total ? static_cast<int>(100.0 * static_cast<double>(done) / static_cast<double>(total)) : 100;
    std::fprintf(stderr, "\r%s  %3d%%  %s / %s  %s/s   ", url->path.c_str(), pct, human(done).c_str(),
                 human(total).c_str(), human(seconds > 0 ? done / seconds : 0).c_str());
    std::fflush(stderr);
  };
  // A stop signal fails what is on the wire at once (a read may wait on a stalled request for
  // its whole timeout otherwise); the copy then ends, and its blocks fetched so far stay cached.
  std::atomic<bool> copying{true};
  std::thread watcher([&copying, stack = &session->stack] {
    while (copying.load()) {
      if (g_stop.load()) {
        stack->transport->shutdown();
        stack->curl->shutdown();
        stack->fetcher->shutdown();
        return;
      }
      std::this_thread::sleep_for(kStopPoll);
    }
  });
  Status st = copy_file(**file, options);
  copying.store(false);
  watcher.join();
  if (bar) std::fprintf(stderr, "\n");
  if (st.ok() && !temp.empty() && ::fsync(fd) != 0) st = IoError("flushing " + temp + ": " + strerror(errno));
  if (temp.empty() && fd != STDOUT_FILENO) (void)::close(fd);  // a device or a pipe
  if (!temp.empty()) {
    if (::close(fd) != 0 && st.ok()) st = IoError("closing " + temp + ": " + strerror(errno));
    if (st.ok() && ::rename(temp.c_str(), dest.c_str()) != 0) {
      st = IoError("renaming " + temp + " to " + dest + ": " + strerror(errno));
    }
    if (!st.ok()) ::unlink(temp.c_str());
  }
  if (!st.ok()) {
    const std::string why = g_stop.load()
                                ? std::string("interrupted; the blocks fetched so far stay cached: run it again to resume")
                                : st.message();
    std::cerr << "hubfs: " << (dest.empty() ? "cat " : "cp ") << c.url << ": " << why << "\n";
    return g_stop.load() ? 128 + g_stop_signal.load() : 1;
  }
  return 0;
}

}  // namespace hubfs
