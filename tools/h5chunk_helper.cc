#include "h5chunk_helper.h"

#include <signal.h>
#include <spawn.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <optional>

extern char** environ;

namespace h5chunk_cli {

std::atomic<pid_t> g_helper_pid{0};

namespace {

using hubfs::Code;
using hubfs::Status;

// The helper's output: frames of a type byte, a length (8 bytes, native order: both ends are
// the same binary on the same machine) and that many bytes.
constexpr char kData = 'D';   // the next bytes of the output, in order
constexpr char kError = 'E';  // the read failed: a Code byte, then the message; the last frame
constexpr char kDone = 'K';   // every byte was sent; the last frame
// H5Dread reads at most this much at a time in the helper, so that it holds one slab, not a
// second copy of a large output (a libhdf5 call per slab costs nothing at this size).
constexpr uint64_t kSlabBytes = uint64_t{64} << 20;
// For tests only: makes the helper crash (segv), exit without a result (exit) or never answer
// (hang) once it has opened the file, as a damaged file can make libhdf5 do. Read only by the
// hidden helper subcommand, which only the command itself starts.
constexpr const char* kTestFaultEnv = "H5CHUNK_HELPER_TEST_FAULT";
// For tests only: a smaller slab than kSlabBytes, so that small reads are cut into slabs.
constexpr const char* kTestSlabEnv = "H5CHUNK_HELPER_TEST_SLAB_BYTES";

bool write_all(int fd, const void* data, size_t n) {
  const char* p = static_cast<const char*>(data);
  while (n > 0) {
    const ssize_t w = ::write(fd, p, n);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) return false;
    p += w;
    n -= static_cast<size_t>(w);
  }
  return true;
}

// Reads exactly n bytes; false at end of input or on an error.
bool read_exact(int fd, void* data, size_t n) {
  char* p = static_cast<char*>(data);
  while (n > 0) {
    const ssize_t r = ::read(fd, p, n);
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) return false;
    p += r;
    n -= static_cast<size_t>(r);
  }
  return true;
}

bool write_frame(char type, const void* data, uint64_t n) {
  return write_all(STDOUT_FILENO, &type, 1) && write_all(STDOUT_FILENO, &n, sizeof n) &&
         write_all(STDOUT_FILENO, data, n);
}

int send_error(const Status& s) {
  std::string payload(1, static_cast<char>(s.code()));
  payload += s.message();
  write_frame(kError, payload.data(), payload.size());
  return 1;
}

// The selection `norm` resolved, as one Index per axis, with axis `split` cut to its output
// positions [k0, k1): the elements of those positions, in the same C order.
h5chunk::Selection slab(const h5chunk::NormalizedSelection& norm, size_t split, int64_t k0, int64_t k1) {
  using h5chunk::AxisSelection;
  using h5chunk::Index;
  h5chunk::Selection s;
  for (size_t d = 0; d < norm.axes.size(); ++d) {
    const AxisSelection& ax = norm.axes[d];
    const int64_t from = d == split ? k0 : 0, count = d == split ? k1 - k0 : ax.count;
    switch (ax.kind) {
      case AxisSelection::Kind::kInt: s.items.push_back(Index::Int(ax.start)); break;
      case AxisSelection::Kind::kRange: {
        const int64_t first = ax.start + from * ax.step, stop = first + count * ax.step;
        // A reversed slice through index 0 has no stop index (-1 would mean the last one).
        s.items.push_back(Index::Slice(first, stop < 0 ? std::nullopt : std::optional<int64_t>(stop), ax.step));
        break;
      }
      case AxisSelection::Kind::kList:
        s.items.push_back(Index::List({ax.indices.begin() + from, ax.indices.begin() + from + count}));
        break;
    }
  }
  return s;
}

std::string signal_text(int sig) {
  const char* abbrev = ::sigabbrev_np(sig);
  return "signal " + std::to_string(sig) + (abbrev ? std::string(", SIG") + abbrev : std::string());
}

// Ends the helper, whatever it is doing, and reaps it.
void stop(pid_t pid) {
  ::kill(pid, SIGKILL);
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
}

}  // namespace

Status read_in_helper(const HelperTarget& target, const std::string& dataset, const h5chunk::Selection& selection,
                      void* out, size_t bytes, const std::string& hazard) {
  const std::string source = "file '" + target.path + "', dataset '" + dataset + "'";
  int to_child[2], from_child[2];
  if (::pipe2(to_child, O_CLOEXEC) != 0) return hubfs::IoError("cannot make a pipe: " + std::string(std::strerror(errno)));
  if (::pipe2(from_child, O_CLOEXEC) != 0) {
    ::close(to_child[0]);
    ::close(to_child[1]);
    return hubfs::IoError("cannot make a pipe: " + std::string(std::strerror(errno)));
  }
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_adddup2(&actions, to_child[0], STDIN_FILENO);
  posix_spawn_file_actions_adddup2(&actions, from_child[1], STDOUT_FILENO);
  posix_spawn_file_actions_addclosefrom_np(&actions, STDERR_FILENO + 1);  // the session's sockets and files
  posix_spawnattr_t attr;
  posix_spawnattr_init(&attr);
  sigset_t defaults, none;
  sigemptyset(&defaults);
  for (int sig : {SIGINT, SIGTERM, SIGPIPE}) sigaddset(&defaults, sig);
  sigemptyset(&none);
  posix_spawnattr_setsigdefault(&attr, &defaults);
  posix_spawnattr_setsigmask(&attr, &none);
  posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETSIGDEF | POSIX_SPAWN_SETSIGMASK);

  std::vector<std::string> args = {"h5chunk", "h5dread-helper", target.path, dataset, "--parent",
                                   std::to_string(::getpid())};
  args.insert(args.end(), target.open_args.begin(), target.open_args.end());
  std::vector<char*> argv;
  for (std::string& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  pid_t pid = 0;
  const int spawned = ::posix_spawn(&pid, "/proc/self/exe", &actions, &attr, argv.data(), environ);
  posix_spawn_file_actions_destroy(&actions);
  posix_spawnattr_destroy(&attr);
  ::close(to_child[0]);
  ::close(from_child[1]);
  if (spawned != 0) {
    ::close(to_child[1]);
    ::close(from_child[0]);
    return hubfs::IoError(source + ": cannot start h5chunk's helper process for H5Dread: " + std::strerror(spawned));
  }
  g_helper_pid.store(pid);

  // The selection (any length: an index list can exceed an argument's limit). A helper that died
  // first must not kill the command with SIGPIPE: the signal is blocked, and taken if raised.
  {
    const std::string text = h5chunk::to_string(selection);
    sigset_t pipe_set, old;
    sigemptyset(&pipe_set);
    sigaddset(&pipe_set, SIGPIPE);
    pthread_sigmask(SIG_BLOCK, &pipe_set, &old);
    if (!write_all(to_child[1], text.data(), text.size()) && errno == EPIPE) {
      const timespec zero{0, 0};
      ::sigtimedwait(&pipe_set, nullptr, &zero);
    }
    pthread_sigmask(SIG_SETMASK, &old, nullptr);
    ::close(to_child[1]);
  }

  uint64_t got = 0;
  std::optional<Status> answer;  // set by the last frame
  std::string protocol_error;
  for (;;) {
    char type = 0;
    uint64_t n = 0;
    if (!read_exact(from_child[0], &type, 1)) break;  // the helper ended
    if (!read_exact(from_child[0], &n, sizeof n)) {
      protocol_error = "its output ends inside a frame";
      break;
    }
    if (type == kData) {
      if (n > bytes - got) {
        protocol_error = "it sent more than the " + std::to_string(bytes) + " bytes asked for";
        break;
      }
      if (!read_exact(from_child[0], static_cast<uint8_t*>(out) + got, n)) {
        protocol_error = "its output ends inside a frame";
        break;
      }
      got += n;
    } else if (type == kError && n >= 1 && n < (uint64_t{1} << 20)) {
      std::string payload(n, '\0');
      if (!read_exact(from_child[0], payload.data(), n)) {
        protocol_error = "its output ends inside a frame";
        break;
      }
      answer = Status(static_cast<Code>(payload[0]), payload.substr(1));
      if (answer->ok()) answer = hubfs::Internal("an error without a code");
      break;
    } else if (type == kDone && n == 0) {
      answer = got == bytes ? Status::Ok()
                            : hubfs::Internal(source + ": h5chunk's helper process returned " + std::to_string(got) +
                                              " of the " + std::to_string(bytes) + " bytes");
      break;
    } else {
      protocol_error = "it sent a frame of unknown type";
      break;
    }
  }
  ::close(from_child[0]);
  int status = 0;
  if (!protocol_error.empty()) {
    stop(pid);
    g_helper_pid.store(0);
    return hubfs::Internal(source + ": h5chunk's helper process for H5Dread failed: " + protocol_error);
  }
  while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  g_helper_pid.store(0);
  if (WIFSIGNALED(status)) {
    return hubfs::Corrupt(source + ": libhdf5 crashed reading it (" + signal_text(WTERMSIG(status)) +
                          ") in the helper process h5chunk runs H5Dread in, because of " + hazard +
                          ". The file is most likely damaged, and h5py or any libhdf5 reader would crash on it "
                          "too: get an intact copy");
  }
  if (answer) return *answer;
  return hubfs::Internal(source + ": h5chunk's helper process for H5Dread ended with status " +
                         std::to_string(WIFEXITED(status) ? WEXITSTATUS(status) : -1) + " and no result (" + hazard +
                         ")");
}

int helper_main(const std::string& path, const std::string& dataset, pid_t parent,
                const std::function<hubfs::Result<h5chunk::File>(const std::string&)>& open) {
  // Ends with the command, whichever way the command ends (it was started by posix_spawn from the
  // thread that reads, which outlives this helper).
  ::prctl(PR_SET_PDEATHSIG, SIGKILL);
  if (::getppid() != parent) return 2;  // the command ended before the line above
  std::string text;
  char buf[65536];
  for (ssize_t r; (r = ::read(STDIN_FILENO, buf, sizeof buf)) != 0;) {
    if (r < 0 && errno == EINTR) continue;
    if (r < 0) return send_error(hubfs::IoError("reading the selection: " + std::string(std::strerror(errno))));
    text.append(buf, static_cast<size_t>(r));
  }
  auto selection = h5chunk::parse_selection(text);
  if (!selection.ok()) return send_error(selection.status());
  auto file = open(path);
  if (!file.ok()) return send_error(file.status());
  auto dset = file->dataset(dataset);
  if (!dset.ok()) return send_error(dset.status());
  const h5chunk::DatasetInfo& info = dset->info();
  auto norm = h5chunk::normalize(*selection, info.shape);
  if (!norm.ok()) return send_error(norm.status());

  if (const char* fault = std::getenv(kTestFaultEnv)) {
    if (std::strcmp(fault, "segv") == 0) ::raise(SIGSEGV);
    if (std::strcmp(fault, "exit") == 0) ::_exit(3);
    if (std::strcmp(fault, "hang") == 0) ::pause();
  }

  // Slabs along the first axis the output keeps (the axes before it are single indices), in
  // whole chunks of it where the axis is a unit-step slice, so no chunk is decoded twice.
  const size_t elem = info.element.size;
  const char* slab_env = std::getenv(kTestSlabEnv);
  const uint64_t slab_bytes = slab_env ? std::max<uint64_t>(1, std::strtoull(slab_env, nullptr, 10)) : kSlabBytes;
  size_t split = 0;
  while (split < norm->axes.size() && !norm->axes[split].kept()) ++split;
  uint64_t row_bytes = elem;  // bytes per output position of the split axis
  for (size_t d = split + 1; d < norm->axes.size(); ++d) row_bytes *= uint64_t(norm->axes[d].count);
  const int64_t total = split < norm->axes.size() ? norm->axes[split].count : 1;
  int64_t rows = std::max<int64_t>(1, int64_t(slab_bytes / std::max<uint64_t>(row_bytes, 1)));
  const bool aligned = split < norm->axes.size() && norm->axes[split].kind == h5chunk::AxisSelection::Kind::kRange &&
                       norm->axes[split].step == 1 && split < info.chunk.size() && info.chunk[split] > 0;
  const int64_t chunk = aligned ? int64_t(info.chunk[split]) : 1;
  rows = std::max(chunk, rows / chunk * chunk);
  std::vector<uint8_t> slab_buf;
  h5chunk::ReadOptions options;
  options.route = h5chunk::Route::kH5Dread;  // the command checked the chunks before starting this
  for (int64_t k0 = 0; k0 < total;) {
    int64_t k1 = std::min(total, k0 + rows);
    if (aligned && k1 < total) {  // end at a chunk boundary of the dataset's axis
      const int64_t first = norm->axes[split].start;
      k1 = std::max(k0 + 1, (first + k1) / chunk * chunk - first);
    }
    const h5chunk::Selection part =
        split < norm->axes.size() ? slab(*norm, split, k0, k1) : *selection;  // a scalar: read whole
    const uint64_t n = uint64_t(k1 - k0) * row_bytes;
    slab_buf.resize(n);
    auto stats = dset->read_into(part, slab_buf.data(), n, options);
    if (!stats.ok()) return send_error(stats.status());
    if (!write_frame(kData, slab_buf.data(), n)) return 1;  // the command is gone
    k0 = k1;
  }
  return write_frame(kDone, nullptr, 0) ? 0 : 1;
}

}  // namespace h5chunk_cli
