#include "prefetch.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <iostream>
#include <memory>
#include <mutex>

#include <nlohmann/json.hpp>

#include "h5chunk/h5chunk.h"
#include "hubfs/range_hint.h"

namespace hubfs {
namespace {

using Clock = std::chrono::steady_clock;

// Bytes hinted ahead of the read position: within the mount's read-ahead budget (256 MiB), and
// enough for every request slot to carry several 8 MiB requests.
constexpr uint64_t kHintWindow = 128ull << 20;
// Read pieces: the kernel's largest FUSE read.
constexpr size_t kPiece = 1u << 20;

std::atomic<bool> g_interrupted{false};

void on_sigint(int) { g_interrupted.store(true); }

// Progress on a terminal: bytes, rate, ETA, redrawn at most 5 times a second.
class Progress {
 public:
  Progress(uint64_t total, bool show) : total_(total), show_(show), start_(Clock::now()) {}
  void add(uint64_t n) {
    std::lock_guard<std::mutex> lock(mu_);  // h5chunk reports from its worker threads
    done_ += n;
    auto now = Clock::now();
    if (!show_ || now - last_draw_ < std::chrono::milliseconds(200)) return;
    last_draw_ = now;
    draw(now);
  }
  void finish() {
    std::lock_guard<std::mutex> lock(mu_);
    if (!show_) return;
    draw(Clock::now());
    std::fputc('\n', stderr);
  }
  uint64_t done() const {
    std::lock_guard<std::mutex> lock(mu_);
    return done_;
  }
  double seconds() const { return std::chrono::duration<double>(Clock::now() - start_).count(); }

 private:
  void draw(Clock::time_point now) {
    double secs = std::chrono::duration<double>(now - start_).count();
    double rate = secs > 0 ? static_cast<double>(done_) / secs : 0;
    if (total_ == 0) {  // a dataset selection: its compressed size is known only at the end
      std::fprintf(stderr, "\rprefetch: %.1f MB  %.1f MB/s   ", static_cast<double>(done_) / 1e6, rate / 1e6);
    } else {
      double eta = rate > 0 && total_ > done_ ? static_cast<double>(total_ - done_) / rate : 0;
      std::fprintf(stderr, "\rprefetch: %.1f / %.1f MB  %.1f MB/s  ETA %.0f s   ", static_cast<double>(done_) / 1e6,
                   static_cast<double>(total_) / 1e6, rate / 1e6, eta);
    }
    std::fflush(stderr);
  }
  mutable std::mutex mu_;
  uint64_t total_;
  bool show_;
  Clock::time_point start_;
  Clock::time_point last_draw_{};
  uint64_t done_ = 0;
};

void hint(int fd, uint64_t offset, uint64_t length) {
  auto h = std::make_unique<hubfs_hint>();
  h->version = HUBFS_HINT_VERSION;
  h->count = 1;
  h->ranges[0] = {offset, length};
  (void)::ioctl(fd, HUBFS_IOC_HINT, h.get());  // advice: a refusal only costs speed
}

// Reads a whole file through the mount (its bytes are then in the block cache), hinting the
// window ahead of the reads so every request slot stays busy.
bool prefetch_file(const std::string& path, Progress& progress, std::string* error) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    *error = "cannot open " + path + ": " + std::strerror(errno);
    return false;
  }
  struct stat st {};
  ::fstat(fd, &st);
  const uint64_t size = static_cast<uint64_t>(st.st_size);
  ::posix_fadvise(fd, 0, 0, POSIX_FADV_RANDOM);  // our hints say what to fetch, not the kernel
  std::unique_ptr<char[]> buf(new char[kPiece]);
  uint64_t hinted_to = 0;
  bool ok = true;
  for (uint64_t off = 0; off < size && !g_interrupted.load(); off += kPiece) {
    if (hinted_to < size && hinted_to < off + kHintWindow / 2) {
      uint64_t from = std::max(hinted_to, off);
      uint64_t len = std::min(size - from, kHintWindow - (from - off));
      hint(fd, from, len);
      hinted_to = from + len;
    }
    ssize_t n = ::pread(fd, buf.get(), std::min<uint64_t>(kPiece, size - off), static_cast<off_t>(off));
    if (n < 0 && errno == EINTR) break;  // Ctrl-C
    if (n <= 0) {
      *error = "reading " + path + " at " + std::to_string(off) + ": " + (n < 0 ? std::strerror(errno) : "end of file");
      ok = false;
      break;
    }
    progress.add(static_cast<uint64_t>(n));
  }
  ::close(fd);
  return ok;
}

}  // namespace

int run_prefetch(const PrefetchConfig& config) {
  struct sigaction sa {};
  sa.sa_handler = on_sigint;  // no SA_RESTART: a pread in progress returns EINTR
  sigaction(SIGINT, &sa, nullptr);
  sigaction(SIGTERM, &sa, nullptr);
  const bool tty = ::isatty(2) && !config.json;

  std::vector<std::string> files;
  uint64_t total = 0;
  for (const auto& p : config.paths) {
    std::error_code ec;
    if (std::filesystem::is_directory(p, ec)) {
      for (auto it = std::filesystem::recursive_directory_iterator(p, ec); !ec && it != decltype(it)(); it.increment(ec)) {
        if (it->is_regular_file(ec)) {
          files.push_back(it->path().string());
          total += it->file_size(ec);
        }
      }
    } else if (std::filesystem::is_regular_file(p, ec)) {
      files.push_back(p);
      total += std::filesystem::file_size(p, ec);
    } else {
      std::cerr << "hubfs prefetch: " << p << " is not a file or directory" << (ec ? ": " + ec.message() : "") << "\n";
      return 1;
    }
  }

  Progress progress(config.dataset ? 0 : total, tty);
  std::string error;
  bool ok = true;
  if (config.dataset) {
    if (files.size() != 1) {
      std::cerr << "hubfs prefetch: --dataset needs exactly one HDF5 file\n";
      return 1;
    }
    // h5chunk reads the selection: it opens the file (its metadata comes through the mount),
    // hints every chunk at once, and reads them; the decoded array is dropped.
    auto file = h5chunk::File::open(files[0]);
    if (!file.ok()) {
      std::cerr << "hubfs prefetch: " << file.status().message() << "\n";
      return 1;
    }
    auto ds = file->dataset(*config.dataset);
    if (!ds.ok()) {
      std::cerr << "hubfs prefetch: " << ds.status().message() << "\n";
      return 1;
    }
    h5chunk::ReadOptions options;
    options.cancel = &g_interrupted;
    options.route = h5chunk::Route::kFastPath;
    options.progress = [&progress](uint64_t compressed) { progress.add(compressed); };
    auto array = ds->read(config.selection, options);
    if (!array.ok() && !g_interrupted.load()) {
      error = array.status().message();
      ok = false;
    }
  } else {
    for (const auto& f : files) {
      if (g_interrupted.load()) break;
      if (!prefetch_file(f, progress, &error)) {
        ok = false;
        break;
      }
    }
  }
  progress.finish();
  const bool interrupted = g_interrupted.load();
  if (!tty || config.json) {
    nlohmann::json summary = {{"files", files.size()},
                              {"bytes", progress.done()},
                              {"seconds", progress.seconds()},
                              {"interrupted", interrupted},
                              {"ok", ok}};
    std::cout << summary.dump() << "\n";
  }
  if (!ok) {
    std::cerr << "hubfs prefetch: " << error << "\n";
    return 1;
  }
  return interrupted ? 130 : 0;
}

}  // namespace hubfs
