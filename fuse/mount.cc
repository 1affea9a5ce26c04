#include "mount.h"

#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/mount.h>
#include <dirent.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/sysmacros.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstring>
#include <fstream>
#include <iostream>
#include <memory>
#include <optional>
#include <sstream>
#include <thread>

#include "cache/block_cache.h"
#include "cache/cache_index.h"
#include "common/log.h"
#include "common/url.h"
#include "hub/hub_client.h"
#include "fs/filesystem.h"
#include "fuse_ops.h"
#include "net/curl_transport.h"
#include "net/range_fetcher.h"
#include "net/retrying_transport.h"
#include "reader/block_reader.h"

namespace hubfs {

namespace {

// FUSE worker threads: each blocks on one read at a time, and the kernel keeps up to
// max_background (64) requests queued; 32 threads keep the fetcher's 16+ requests busy while
// some threads wait on the disk cache.
constexpr unsigned kFuseThreads = 32;

std::string env_or(const char* name, const std::string& fallback) {
  const char* v = getenv(name);
  return v && *v ? std::string(v) : fallback;
}

// What /proc/self/mountinfo says is mounted at a path.
struct MountEntry {
  std::string fstype;  // "fuse.hubfs" for ours
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
    fields >> e.fstype;
    found = e;
  }
  return found;
}

bool is_mount_point(const std::string& path) { return mount_at(path).has_value(); }

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

// The checks that can fail before anything starts, each naming the cause and the fix. A dead
// hubfs mount left by a daemon that was killed is cleared here, so remounting needs no manual
// fusermount.
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
    return Status(Code::kUnavailable,
                  std::string("/dev/fuse is not usable (") + strerror(errno) +
                      "): install fuse3 and load the module (modprobe fuse), or in a container "
                      "pass --device /dev/fuse --cap-add SYS_ADMIN");
  }
  return path;
}

// Everything a running mount owns, in construction order (destroyed in reverse).
struct Mount {
  std::unique_ptr<CurlTransport> curl;
  std::unique_ptr<RetryingTransport> transport;
  std::unique_ptr<HubClient> hub;
  std::unique_ptr<BlockCache> cache;
  std::unique_ptr<RangeFetcher> fetcher;
  std::unique_ptr<BlockReader> reader;
  std::unique_ptr<FileSystem> fs;
  fuse_session* session = nullptr;
  bool mounted = false;
  bool signals = false;

  ~Mount() {
    if (session) {
      if (signals) fuse_remove_signal_handlers(session);
      if (mounted) fuse_session_unmount(session);
      fuse_session_destroy(session);
    }
    // Retries waiting out a long Retry-After would hold up the reader's shutdown (it waits for
    // fetches in flight): answer them now, and fail what is still on the wire, so unmounting
    // is prompt. Then the reader drains while everything its tasks reach (fetcher, cache, hub)
    // still exists; members are destroyed in reverse order after this body.
    if (transport) transport->shutdown();
    if (curl) curl->shutdown();
    if (reader) reader->shutdown();
  }
};

// The CA bundle TLS connections trust: --ca-bundle, else the environment as huggingface_hub
// and curl read it (find_ca_bundle), else libcurl's built-in store. A named bundle that cannot
// be read fails the mount here, naming where it came from, rather than as a TLS error later.
Result<std::string> choose_ca_bundle(const std::string& flag) {
  std::string source = "--ca-bundle";
  std::string path = flag;
  if (path.empty()) {
    auto found = find_ca_bundle();
    if (!found) return std::string();
    source = found->source;
    path = found->path;
  }
  if (access(path.c_str(), R_OK) != 0) {
    return InvalidArgument("the CA bundle " + path + " (from " + source + ") cannot be read (" +
                           strerror(errno) + "); point " + source + " at a PEM file of trusted CA "
                           "certificates, or unset it to use the system's");
  }
  return path;
}

// Builds the whole stack and mounts it. On success the session is mounted but not yet served.
Status build_mount(const MountConfig& config, const std::string& mountpoint, Mount& m) {
  auto repo = parse_repo_ref(config.repo_spec, config.repo_type, config.revision);
  if (!repo.ok()) return repo.status();
  if (offline_requested()) {
    // A mount must pin the revision and list the repo: it cannot start without the Hub.
    return Unavailable("HF_HUB_OFFLINE is set, and mounting needs to reach the Hub; unset it "
                       "to mount");
  }

  CurlOptions curl_options;
  curl_options.max_in_flight = config.max_requests;
  if (auto ca = choose_ca_bundle(config.ca_bundle); ca.ok()) {
    curl_options.ca_bundle = *ca;
  } else {
    return ca.status();
  }
  curl_options.hedge = true;  // a CDN stalling on a cold object costs a duplicate, not the stall
  m.curl = std::make_unique<CurlTransport>(curl_options);
  // A reader is waiting on every request: retry soon (200 ms doubling to 4 s, full jitter: ~3 s
  // at most over 5 attempts) rather than the library's 1 s to 8 s. A server that asks for more
  // (Retry-After, RateLimit) still gets what it asks.
  RetryPolicy retry_policy;
  retry_policy.base_delay = std::chrono::milliseconds(200);
  retry_policy.max_delay = std::chrono::milliseconds(4000);
  m.transport = std::make_unique<RetryingTransport>(*m.curl, retry_policy);
  HubConfig hub_config;
  hub_config.endpoint = config.endpoint;
  hub_config.token = find_token();
  m.hub = std::make_unique<HubClient>(hub_config, *m.transport);

  auto info = m.hub->repo_info(*repo);
  if (!info.ok()) return info.status();
  RepoRef pinned = *repo;
  pinned.revision = info->sha;  // every later request names the commit: the view never moves
  log_info("mounting " + repo->id + "@" + repo->revision + " (commit " + info->sha + ") at " + mountpoint);

  if (config.cache_size == 0) {
    // --cache-size 0: no disk cache at all (nothing is written to the cache directory); blocks
    // live only in the reader's memory cache.
    log_info("--cache-size 0: no disk cache; every block not in memory is fetched again");
  } else {
    CacheOptions cache_options;
    cache_options.dir = config.cache_dir;
    cache_options.budget_bytes = config.cache_size;
    auto cache = BlockCache::open(cache_options);
    if (!cache.ok()) return cache.status();
    m.cache = std::move(cache).value();
  }
  m.fetcher = std::make_unique<RangeFetcher>(*m.transport);
  ReaderOptions reader_options;
  reader_options.read_timeout = std::chrono::seconds(config.read_timeout_s);
  reader_options.parallel_requests = static_cast<uint32_t>(config.max_requests);
  m.reader = std::make_unique<BlockReader>(m.cache.get(), *m.fetcher, reader_options);
  FsOptions fs_options;
  fs_options.mtime = static_cast<time_t>(info->last_modified);
  if (m.cache) {
    // `hubfs cache info` and `clear REPO` map content ids back to repo files through this index;
    // the budget tells `info` what this cache is held to. Both are best effort: a cache whose
    // index cannot be written still serves reads.
    (void)cache_index::write_budget(config.cache_dir, config.cache_size);
    auto warned = std::make_shared<std::atomic<bool>>(false);
    fs_options.on_open = [dir = config.cache_dir,
                          repo_label = std::string(api_segment(repo->type)) + "/" + repo->id,
                          revision = repo->revision, commit = info->sha, warned](const RemoteFile& f) {
      IndexRecord r{repo_label, revision, commit, f.path, f.content_id, f.size};
      if (Status s = cache_index::record(dir, r); !s.ok() && !warned->exchange(true))
        log_warning("cache: cannot record " + f.path + " in the cache index (" + s.message() +
                    "); `hubfs cache info` will not attribute its blocks to " + repo_label);
    };
  }
  m.fs = std::make_unique<FileSystem>(*m.hub, pinned, *m.reader, fs_options);

  std::vector<std::string> args = {"hubfs"};
  if (config.debug) args.push_back("-d");
  std::string opts = "ro,default_permissions,fsname=hubfs:" + repo->id + ",subtype=hubfs";
  for (const auto& o : config.fuse_options) {
    // libfuse 3 dropped "nonempty" (mounting over a non-empty directory is always allowed by
    // the kernel); hubfs checks it itself, in check_mountpoint.
    if (o != "nonempty") opts += "," + o;
  }
  args.push_back("-o");
  args.push_back(opts);
  std::vector<char*> argv;
  for (auto& a : args) argv.push_back(a.data());
  fuse_args fargs = FUSE_ARGS_INIT(static_cast<int>(argv.size()), argv.data());
  m.session = fuse_session_new(&fargs, &fuse_operations(), sizeof(fuse_lowlevel_ops), m.fs.get());
  fuse_opt_free_args(&fargs);  // the session keeps copies of what it needs
  if (!m.session) {
    return InvalidArgument("FUSE rejected the mount options '" + opts + "' (see the message above)");
  }
  if (fuse_set_signal_handlers(m.session) != 0) return Internal("cannot install signal handlers");
  m.signals = true;
  if (fuse_session_mount(m.session, mountpoint.c_str()) != 0) {
    return Unavailable("mounting at " + mountpoint + " failed (see the message above); "
                       "are you root or is fusermount3 installed?");
  }
  m.mounted = true;
  return Status::Ok();
}

// The kernel's read-ahead for a FUSE mount starts at 128 KiB, so a large read() reaches us as a
// trickle of 128 KiB requests, two in flight. Raising the mount's read_ahead_kb (root only; as
// gcsfuse does) lets the kernel send 1 MiB requests, many at once, which the fetcher turns into
// parallel ranges. Runs on its own thread: stat() of the mountpoint answers only once we serve.
constexpr unsigned kKernelReadAheadKb = 16 * 1024;  // 16 MiB: ~16 requests in flight per stream

void raise_kernel_read_ahead(const std::string& mountpoint) {
  std::thread([mountpoint] {
    struct stat st {};
    if (stat(mountpoint.c_str(), &st) != 0) return;
    std::string path = "/sys/class/bdi/" + std::to_string(major(st.st_dev)) + ":" +
                       std::to_string(minor(st.st_dev)) + "/read_ahead_kb";
    std::ofstream f(path);
    if (f) f << kKernelReadAheadKb << "\n";
    if (!f) log_debug("cannot raise the kernel read-ahead (" + path + "); not root?");
  }).detach();
}

int serve(Mount& m, const std::string& mountpoint) {
  raise_kernel_read_ahead(mountpoint);
  fuse_loop_config* loop = fuse_loop_cfg_create();
  fuse_loop_cfg_set_max_threads(loop, kFuseThreads);
  fuse_loop_cfg_set_idle_threads(loop, kFuseThreads / 2);
  // 0, or the number of the signal that ended the loop (SIGTERM, SIGINT, SIGHUP: a requested,
  // clean stop), or -1 on an error.
  int rc = fuse_session_loop_mt(m.session, loop);
  fuse_loop_cfg_destroy(loop);
  fuse_ops_quiesce();
  log_info("unmounting");
  return (rc == 0 || rc == SIGTERM || rc == SIGINT || rc == SIGHUP) ? 0 : 1;
}

void write_all(int fd, const std::string& s) {
  size_t off = 0;
  while (off < s.size()) {
    ssize_t n = write(fd, s.data() + off, s.size() - off);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return;
    off += static_cast<size_t>(n);
  }
}

}  // namespace

std::string default_endpoint() { return find_endpoint(); }

std::string default_cache_dir() {
  if (const char* d = getenv("HUBFS_CACHE_DIR"); d && *d) return d;
  if (const char* x = getenv("XDG_CACHE_HOME"); x && *x) return std::string(x) + "/hubfs";
  return env_or("HOME", "/root") + "/.cache/hubfs";
}

Result<uint64_t> parse_size(const std::string& text) {
  if (text.empty()) return InvalidArgument("empty size");
  size_t pos = 0;
  double value = 0;
  try {
    value = std::stod(text, &pos);
  } catch (...) {
    return InvalidArgument("'" + text + "' is not a size (examples: 4096, 512M, 10G)");
  }
  std::string suffix = text.substr(pos);
  if (!suffix.empty() && (suffix.back() == 'B' || suffix.back() == 'b')) suffix.pop_back();
  if (!suffix.empty() && (suffix.back() == 'i')) suffix.pop_back();
  double scale = 1;
  if (suffix.size() > 1) return InvalidArgument("'" + text + "' has an unknown suffix (use K, M, G or T)");
  if (!suffix.empty()) {
    switch (toupper(suffix[0])) {
      case 'K': scale = 1024.0; break;
      case 'M': scale = 1024.0 * 1024; break;
      case 'G': scale = 1024.0 * 1024 * 1024; break;
      case 'T': scale = 1024.0 * 1024 * 1024 * 1024; break;
      default: return InvalidArgument("'" + text + "' has an unknown suffix (use K, M, G or T)");
    }
  }
  if (!(value >= 0) || value * scale > 1.8e19) return InvalidArgument("'" + text + "' is out of range");
  return static_cast<uint64_t>(std::llround(value * scale));
}

namespace {
int detach_and_serve(Mount& m, const std::string& mountpoint, int verdict_fd);
}  // namespace

int run_mount(const MountConfig& config) {
  if (Status s = url::check_endpoint(config.endpoint); !s.ok()) {
    std::cerr << "hubfs: " << s.message() << "\n";
    return 2;
  }
  const bool nonempty = std::find(config.fuse_options.begin(), config.fuse_options.end(), "nonempty") !=
                        config.fuse_options.end();
  auto checked = check_mountpoint(config.mountpoint, nonempty);
  if (!checked.ok()) {
    std::cerr << "hubfs: " << checked.status().message() << "\n";
    return 1;
  }
  const std::string mountpoint = *checked;

  if (config.foreground) {
    Mount m;
    Status st = build_mount(config, mountpoint, m);
    if (!st.ok()) {
      std::cerr << "hubfs: " << st.message() << "\n";
      return 1;
    }
    return serve(m, mountpoint);
  }

  // Background: fork before any thread exists (curl, cache and FUSE threads all start in the
  // child); the parent waits on a pipe for the child's verdict and then for the mount to answer.
  int pipefd[2];
  if (pipe2(pipefd, O_CLOEXEC) != 0) {
    std::cerr << "hubfs: pipe: " << strerror(errno) << "\n";
    return 1;
  }
  pid_t pid = fork();
  if (pid < 0) {
    std::cerr << "hubfs: fork: " << strerror(errno) << "\n";
    return 1;
  }
  if (pid > 0) {
    close(pipefd[1]);
    std::string verdict;
    char buf[4096];
    ssize_t n;
    while ((n = read(pipefd[0], buf, sizeof buf)) != 0) {
      if (n < 0 && errno == EINTR) continue;
      if (n < 0) break;
      verdict.append(buf, static_cast<size_t>(n));
    }
    close(pipefd[0]);
    if (verdict.rfind("OK", 0) != 0) {
      int status = 0;
      waitpid(pid, &status, 0);
      std::cerr << "hubfs: " << (verdict.empty() ? "the mount process died while starting" : verdict.substr(4))
                << "\n";
      return 1;
    }
    // The kernel answers this stat only once the daemon serves requests: when it returns, the
    // mount is usable.
    struct stat st {};
    if (stat(mountpoint.c_str(), &st) != 0) {
      std::cerr << "hubfs: the mount at " << mountpoint << " does not answer: " << strerror(errno) << "\n";
      return 1;
    }
    return 0;
  }

  close(pipefd[0]);
  setsid();
  // In the background the log goes to --log-file or nowhere: never to the user's terminal,
  // which has moved on. Startup errors reach the user through the pipe instead.
  std::FILE* log = nullptr;
  if (!config.log_file.empty()) log = std::fopen(config.log_file.c_str(), "a");
  set_log_file(log ? log : std::fopen("/dev/null", "a"));
  int rc = 1;
  {
    // Scoped so the Mount's destructor (which unmounts) runs before _exit, which runs none.
    Mount m;
    Status st = build_mount(config, mountpoint, m);
    if (!st.ok()) {
      if (log) log_error(st.message());  // the parent prints it to the user's stderr
      write_all(pipefd[1], "ERR " + st.message());
      close(pipefd[1]);
    } else {
      rc = detach_and_serve(m, mountpoint, pipefd[1]);
    }
  }
  _exit(rc);
}

namespace {

int detach_and_serve(Mount& m, const std::string& mountpoint, int verdict_fd) {
  // Detach from the terminal: stdio to /dev/null (the log file, if any, keeps its own stream).
  int devnull = open("/dev/null", O_RDWR);
  if (devnull >= 0) {
    dup2(devnull, 0);
    dup2(devnull, 1);
    dup2(devnull, 2);
    if (devnull > 2) close(devnull);
  }
  if (chdir("/") != 0) {}
  write_all(verdict_fd, "OK\n");
  close(verdict_fd);
  return serve(m, mountpoint);
}

}  // namespace

int run_unmount(const std::string& mountpoint) {
  const std::string path = absolute_mountpoint(mountpoint);
  if (!is_mount_point(path)) {
    std::cerr << "hubfs: " << mountpoint << " is not mounted\n";
    return 1;
  }
  // A mount whose daemon died (SIGKILL, OOM) cannot answer an orderly unmount's requests:
  // detach it.
  if (is_dead_fuse_mount(path)) {
    if (Status s = detach_mount(path); !s.ok()) {
      std::cerr << "hubfs: " << s.message() << "\n";
      return 1;
    }
    return 0;
  }
  // Root unmounts directly; others go through the setuid helper, as FUSE intends.
  if (umount2(path.c_str(), 0) == 0) return 0;
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
  if (pid > 0 && WIFEXITED(status) && WEXITSTATUS(status) == 0) return 0;
  std::cerr << "hubfs: cannot unmount " << path << ": " << strerror(err) << "\n";
  return 1;
}

}  // namespace hubfs
