// h5chunk: read HDF5 datasets through the chunk-parallel reader, describe files, and compare
// the reader with H5Dread.
//
//   h5chunk read FILE DATASET [SELECTION] [-o OUT] [--threads N] [--route auto|fast|h5dread]
//   h5chunk info FILE [DATASET] [--json]
//   h5chunk bench FILE DATASET [SELECTION] [--threads N] [--repeat R]
//
// FILE may be hf://[datasets/|spaces/]ORG/NAME[@REVISION]/PATH: read without a mount, through
// hubfs's reader and block cache in-process (h5hub/hub_byte_source.h), as `hubfs cat` reads.
#include <fcntl.h>
#include <hdf5.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <iostream>
#include <mutex>
#include <nlohmann/json.hpp>
#include <optional>
#include <set>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "h5chunk/h5chunk.h"
#include "h5chunk_args.h"
#include "common/log.h"
#include "h5chunk_helper.h"
#include "h5hub/hub_byte_source.h"

namespace {

using h5chunk::Dataset;
using h5chunk::File;
using json = nlohmann::json;

// A read is worth a progress bar when it takes long enough to wonder about: at the ~1 GB/s of a
// cold local read, 64 MiB is a few tenths of a second (and far longer over a mount).
constexpr uint64_t kProgressBarBytes = 64ull << 20;
// Redraw at most this often: a terminal repaint per chunk would cost more than the chunk.
constexpr auto kRedrawEvery = std::chrono::milliseconds(100);

// ---------------------------------------------------------------------------------------------
// Ctrl-C. SIGINT and SIGTERM end the process at once from their handler, with 128 + the signal
// (130 for Ctrl-C), after removing the output file being written. Ending at once is what makes it
// prompt wherever the command is: waiting on a stalled network read (which a read's cancel flag
// would end only after its helper threads), inside libhdf5, or writing the output. Nothing is
// lost: the command only reads, and the block cache survives a process that stops anywhere (as it
// survives a killed mount). A signal inherited as ignored (a script's background job) is taken too.

// The temp file being written (a path that outlives the command), removed on a signal; set
// before the file is created, so that a signal never leaves it behind.
std::atomic<const char*> g_partial_output{nullptr};

extern "C" void on_stop_signal(int sig) {
  // Only async-signal-safe calls.
  if (const pid_t helper = h5chunk_cli::g_helper_pid.load(); helper > 0) ::kill(helper, SIGKILL);
  if (const char* partial = g_partial_output.load()) ::unlink(partial);
  const char msg[] = "h5chunk: interrupted\n";
  (void)!::write(STDERR_FILENO, msg, sizeof msg - 1);
  ::_exit(128 + sig);
}

void take_stop_signals() {
  struct sigaction sa {};
  sa.sa_handler = on_stop_signal;
  sigfillset(&sa.sa_mask);
  sigaction(SIGINT, &sa, nullptr);
  sigaction(SIGTERM, &sa, nullptr);
}

// The -o file: written as OUT.h5chunk-partial-PID and renamed over OUT once complete, so that an
// interrupted or failed read leaves neither. A device or pipe (/dev/stdout) is written directly.
class OutputFile {
 public:
  ~OutputFile() {
    if (fd_ >= 0) ::close(fd_);
    if (!temp_.empty()) ::unlink(temp_.c_str());
    g_partial_output.store(nullptr);
  }
  hubfs::Status open(const std::string& dest) {
    dest_ = dest;
    struct stat st {};
    if (::stat(dest.c_str(), &st) == 0 && (S_ISCHR(st.st_mode) || S_ISFIFO(st.st_mode) || S_ISSOCK(st.st_mode))) {
      fd_ = ::open(dest.c_str(), O_WRONLY | O_CLOEXEC);
      if (fd_ < 0) return hubfs::IoError("cannot open '" + dest + "' for writing: " + std::strerror(errno));
      return hubfs::Status::Ok();
    }
    temp_ = dest + ".h5chunk-partial-" + std::to_string(::getpid());
    g_partial_output.store(temp_.c_str());
    fd_ = ::open(temp_.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd_ < 0) {
      return hubfs::IoError("cannot create '" + temp_ + "': " + std::strerror(errno) + "; check that the directory of '" +
                            dest + "' exists and is writable");
    }
    return hubfs::Status::Ok();
  }
  hubfs::Status write_all(const uint8_t* data, size_t n) {
    while (n > 0) {
      const ssize_t w = ::write(fd_, data, n);
      if (w < 0 && errno == EINTR) continue;
      if (w < 0) return hubfs::IoError("cannot write '" + dest_ + "': " + std::strerror(errno));
      data += w;
      n -= static_cast<size_t>(w);
    }
    return hubfs::Status::Ok();
  }
  // Puts the complete file in place (a signal after the rename finds no temp file to remove).
  hubfs::Status commit() {
    const int fd = std::exchange(fd_, -1);
    if (::close(fd) != 0) return hubfs::IoError("cannot write '" + dest_ + "': " + std::strerror(errno));
    if (temp_.empty()) return hubfs::Status::Ok();
    if (::rename(temp_.c_str(), dest_.c_str()) != 0) {
      return hubfs::IoError("cannot rename '" + temp_ + "' to '" + dest_ + "': " + std::strerror(errno));
    }
    g_partial_output.store(nullptr);
    temp_.clear();
    return hubfs::Status::Ok();
  }

 private:
  std::string dest_, temp_;
  int fd_ = -1;
};

// One JSON line. Text from a damaged file (a filter's name in a fallback cause) need not be
// UTF-8: invalid bytes become U+FFFD rather than an exception that aborted the command.
std::string json_text(const json& j) { return j.dump(-1, ' ', false, json::error_handler_t::replace); }

int fail(const std::string& message) {
  std::fprintf(stderr, "h5chunk: %s\n", message.c_str());
  return 1;
}

double ms_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
}

// Chunks a selection touches (for the progress bar's denominator): per axis, the distinct
// chunk indices of the selected indices, multiplied.
uint64_t touched_chunks(const h5chunk::DatasetInfo& info, const h5chunk::NormalizedSelection& sel) {
  if (info.chunk.empty()) return 0;
  uint64_t total = 1;
  for (size_t d = 0; d < sel.axes.size(); ++d) {
    const auto& ax = sel.axes[d];
    const uint64_t c = info.chunk[d];
    if (ax.count == 0) return 0;
    if (ax.kind == h5chunk::AxisSelection::Kind::kList || (ax.step != 1 && ax.step != -1)) {
      std::set<uint64_t> grid;
      for (int64_t k = 0; k < ax.count; ++k) grid.insert(uint64_t(ax.index(k)) / c);
      total *= grid.size();
    } else {  // a contiguous run of indices, either way round
      const uint64_t first = uint64_t(ax.index(0)), last = uint64_t(ax.index(ax.count - 1));
      total *= std::max(first, last) / c - std::min(first, last) / c + 1;
    }
  }
  return total;
}

// "[=========>          ] 9/16 chunks, 81.2 MB" on stderr, redrawn in place.
class ProgressBar {
 public:
  explicit ProgressBar(uint64_t chunks) : total_(chunks), start_(std::chrono::steady_clock::now()) {}
  ~ProgressBar() {
    if (drawn_) std::fprintf(stderr, "\r\033[K");
  }
  void tick(uint64_t bytes) {
    std::lock_guard<std::mutex> lock(mu_);
    ++done_;
    bytes_ += bytes;
    auto now = std::chrono::steady_clock::now();
    if (now - last_ < kRedrawEvery && done_ != total_) return;
    last_ = now;
    drawn_ = true;
    const int width = 30;
    int filled = total_ ? int(width * std::min<uint64_t>(done_, total_) / total_) : 0;
    std::string bar(filled, '=');
    if (filled < width) bar += '>' + std::string(width - filled - 1, ' ');
    std::fprintf(stderr, "\r[%s] %llu/%llu chunks, %.1f MB", bar.c_str(), (unsigned long long)done_,
                 (unsigned long long)total_, bytes_ / 1e6);
    std::fflush(stderr);
  }

 private:
  std::mutex mu_;
  uint64_t total_, done_ = 0, bytes_ = 0;
  bool drawn_ = false;
  std::chrono::steady_clock::time_point start_, last_{};
};

// Where hf:// files come from: --revision, --endpoint, --cache-dir as parsed.
h5chunk_cli::HubOptions g_hub;
// The commit an hf:// file was opened at: the helper process reopens it there.
std::string g_hub_commit;

bool is_hf_url(const std::string& path) { return path.rfind("hf://", 0) == 0; }

// A local path (or one on a mount), or an hf:// URL read in-process.
hubfs::Result<File> open_file(const std::string& path, h5chunk::Options options = {}) {
  if (!is_hf_url(path)) return File::open(path, std::move(options));
  hubfs::SessionConfig config;
  config.endpoint = g_hub.endpoint.empty() ? hubfs::default_endpoint() : g_hub.endpoint;
  while (!config.endpoint.empty() && config.endpoint.back() == '/') config.endpoint.pop_back();
  config.cache_dir = g_hub.cache_dir.empty() ? hubfs::default_cache_dir() : g_hub.cache_dir;
  if (hubfs::Status st = hubfs::apply_environment_timeouts(config); !st.ok()) return st;
  auto source = hubfs::open_hf_source(path, config, hubfs::Env::real(), g_hub.revision);
  if (!source.ok()) return source.status();
  g_hub_commit = (*source)->file()->session()->info.commit;
  return File::open(std::move(*source), std::move(options));
}

// How the helper process reopens `path` as this command opened it.
h5chunk_cli::HelperTarget helper_target(const std::string& path) {
  h5chunk_cli::HelperTarget t{path, {}};
  if (!is_hf_url(path)) return t;
  if (!g_hub_commit.empty()) t.open_args.insert(t.open_args.end(), {"--revision", g_hub_commit});
  if (!g_hub.endpoint.empty()) t.open_args.insert(t.open_args.end(), {"--endpoint", g_hub.endpoint});
  if (!g_hub.cache_dir.empty()) t.open_args.insert(t.open_args.end(), {"--cache-dir", g_hub.cache_dir});
  return t;
}

struct Opened {
  File file;
  Dataset dataset;
  h5chunk::Selection selection;
  h5chunk::NormalizedSelection normalized;
};

hubfs::Result<Opened> open_selection(const std::string& path, const std::string& name,
                                     const std::string& selection, unsigned threads) {
  h5chunk::Options options;
  options.threads = threads;
  auto file = open_file(path, options);
  if (!file.ok()) return file.status();
  auto dset = file->dataset(name);
  if (!dset.ok()) return dset.status();
  auto sel = h5chunk::parse_selection(selection);
  if (!sel.ok()) return sel.status();
  auto norm = h5chunk::normalize(*sel, dset->info().shape);
  if (!norm.ok()) return norm.status();
  return Opened{std::move(*file), std::move(*dset), std::move(*sel), std::move(*norm)};
}

// --route: "fast" is the fast path whatever the read's size, or an error naming why it cannot
// (Route::kFastOnly, not the library's kFastPath, which quietly falls back).
h5chunk::Route parse_route(const std::string& route) {
  if (route == "fast") return h5chunk::Route::kFastOnly;
  if (route == "h5dread") return h5chunk::Route::kH5Dread;
  return h5chunk::Route::kAuto;  // CLI11 admits only the three names
}

int cmd_read(const std::string& path, const std::string& name, const std::string& selection,
             const std::string& out_path, unsigned threads, const std::string& route) {
  auto opened = open_selection(path, name, selection, threads);
  if (!opened.ok()) return fail(opened.status().message());
  const auto& info = opened->dataset.info();
  if (!info.readable) return fail(info.refusal);
  const uint64_t bytes = opened->normalized.num_elements * info.element.size;

  std::unique_ptr<ProgressBar> bar;
  h5chunk::ReadOptions ro;
  ro.route = parse_route(route);
  // An H5Dread libhdf5 might crash on runs in the helper process (h5chunk_helper.h).
  std::string helper_hazard;
  ro.isolated_h5dread = [&](const h5chunk::Selection& sel, void* dst, size_t n, const std::string& hazard) {
    helper_hazard = hazard;
    return h5chunk_cli::read_in_helper(helper_target(path), name, sel, dst, n, hazard);
  };
  if (isatty(STDERR_FILENO) && bytes >= kProgressBarBytes) {
    bar = std::make_unique<ProgressBar>(touched_chunks(info, opened->normalized));
    ro.progress = [&bar](uint64_t b) { bar->tick(b); };
  }
  auto t0 = std::chrono::steady_clock::now();
  auto array = opened->dataset.read(opened->selection, ro);
  const double ms = ms_since(t0);
  bar.reset();
  if (!array.ok()) return fail(array.status().message());

  if (!out_path.empty()) {
    OutputFile out;
    hubfs::Status st = out.open(out_path);
    if (st.ok()) st = out.write_all(array->data(), array->nbytes());
    if (st.ok()) st = out.commit();
    if (!st.ok()) return fail(st.message());
  }
  json line = {{"shape", array->shape()},
               // numpy's dtype for the bytes written (native order): np.dtype(ast.literal_eval(s))
               {"dtype", info.numeric ? std::string(h5chunk::dtype_name(array->dtype())) : info.type_text},
               {"numpy", info.element.numpy},
               {"bytes", array->nbytes()},
               {"fast_path", array->stats.fast_path},
               {"ms", std::round(ms * 1000) / 1000}};
  if (!array->stats.fast_path) line["fallback"] = array->stats.fallback_cause;
  if (!helper_hazard.empty()) line["helper_process"] = helper_hazard;
  // libhdf5 read these virtual sources as fill values (a local file; hf:// refuses instead).
  if (!info.missing_sources.empty()) line["missing_sources"] = info.missing_sources;
  std::cout << json_text(line) << std::endl;
  return 0;
}

json describe(const Dataset& d) {
  const auto& info = d.info();
  json j = {{"path", info.path}, {"shape", info.shape}, {"dtype", info.type_text},
            {"bytes", info.nbytes}, {"layout", info.layout}};
  if (info.readable) j["numpy"] = info.element.numpy_stored;
  if (!info.chunk.empty()) {
    uint64_t n = 1;
    for (size_t i = 0; i < info.chunk.size(); ++i) n *= (info.shape[i] + info.chunk[i] - 1) / info.chunk[i];
    j["chunk"] = info.chunk;
    j["chunks"] = n;
  }
  json filters = json::array();
  for (const auto& f : info.filters) {
    filters.push_back({{"id", f.id}, {"name", f.name}, {"cd_values", f.cd_values}});
  }
  j["filters"] = filters;
  if (!info.missing_sources.empty()) j["missing_sources"] = info.missing_sources;
  if (!info.refusal.empty()) j["refusal"] = info.refusal;  // every read fails with this
  j["fast_path"] = info.fast_path_blocker.empty();
  if (!info.fast_path_blocker.empty()) {
    j["why_not"] = "the dataset " + info.fast_path_blocker;
    j["fix"] = info.fix;
  }
  return j;
}

std::string shape_text(const json& shape) {
  std::string s = "(";
  for (size_t i = 0; i < shape.size(); ++i) s += (i ? ", " : "") + std::to_string(shape[i].get<uint64_t>());
  return s + (shape.size() == 1 ? ",)" : ")");
}

int cmd_info(const std::string& path, const std::string& name, bool as_json) {
  auto file = open_file(path);
  if (!file.ok()) return fail(file.status().message());
  std::vector<std::string> names;
  if (!name.empty()) {
    names.push_back(name);
  } else {
    auto all = file->dataset_paths();
    if (!all.ok()) return fail(all.status().message());
    names = *all;
  }
  for (const auto& n : names) {
    auto d = file->dataset(n);
    if (!d.ok()) return fail(d.status().message());
    json j = describe(*d);
    if (as_json) {
      std::cout << json_text(j) << "\n";
      continue;
    }
    std::cout << j["path"].get<std::string>() << "\n"
              << "  " << j["dtype"].get<std::string>() << " " << shape_text(j["shape"]) << ", "
              << j["bytes"].get<uint64_t>() << " bytes\n";
    if (j.contains("numpy")) std::cout << "  numpy dtype: " << j["numpy"].get<std::string>() << "\n";
    std::cout
              << "  layout: " << j["layout"].get<std::string>();
    if (j.contains("chunk")) {
      std::cout << ", chunks " << shape_text(j["chunk"]) << " x " << j["chunks"].get<uint64_t>();
    }
    std::cout << "\n  filters:";
    if (j["filters"].empty()) std::cout << " none";
    for (const auto& f : j["filters"]) {
      std::cout << " " << f["name"].get<std::string>() << " (" << f["id"].get<unsigned>() << ")";
    }
    if (j.contains("missing_sources")) {
      std::cout << "\n  missing virtual sources (libhdf5 reads them as fill values):";
      for (const auto& m : j["missing_sources"]) std::cout << "\n    " << m.get<std::string>();
    }
    if (j.contains("refusal")) std::cout << "\n  unreadable: " << j["refusal"].get<std::string>();
    std::cout << "\n  fast path: ";
    if (j["fast_path"].get<bool>()) {
      std::cout << "yes\n";
    } else {
      std::cout << "no, " << j["why_not"].get<std::string>() << ". " << j["fix"].get<std::string>()
                << "\n";
    }
  }
  return 0;
}

int cmd_bench(const std::string& path, const std::string& name, const std::string& selection,
              unsigned threads, int repeat) {
  auto opened = open_selection(path, name, selection, threads);
  if (!opened.ok()) return fail(opened.status().message());
  const auto& info = opened->dataset.info();
  if (!info.readable) return fail(info.refusal);
  const uint64_t bytes = opened->normalized.num_elements * info.element.size;
  // One output buffer for both readers, touched before timing (first-touch page faults on
  // these machines cost more than decoding and would swamp the comparison).
  std::unique_ptr<uint8_t[]> buf(new uint8_t[std::max<uint64_t>(bytes, 1)]);
  std::memset(buf.get(), 0, bytes);

  auto time_route = [&](h5chunk::Route route, h5chunk::ReadStats* stats) -> hubfs::Result<double> {
    double best = 1e300;
    for (int i = 0; i < repeat; ++i) {
      h5chunk::ReadOptions ro;
      ro.route = route;
      auto t0 = std::chrono::steady_clock::now();
      auto s = opened->dataset.read_into(opened->selection, buf.get(), bytes, ro);
      double ms = ms_since(t0);
      if (!s.ok()) return s.status();
      *stats = *s;
      best = std::min(best, ms);
    }
    return best;
  };
  h5chunk::ReadStats fast_stats, ref_stats;
  auto ref = time_route(h5chunk::Route::kH5Dread, &ref_stats);
  if (!ref.ok()) return fail(ref.status().message());
  auto fast = time_route(h5chunk::Route::kFastPath, &fast_stats);
  if (!fast.ok()) return fail(fast.status().message());
  json line = {{"bytes", bytes},
               {"threads", opened->file.threads()},
               {"repeat", repeat},
               {"h5chunk_ms", *fast},
               {"h5dread_ms", *ref},
               {"h5chunk_gbps", bytes / (*fast * 1e6)},
               {"h5dread_gbps", bytes / (*ref * 1e6)},
               {"speedup", *ref / *fast},
               {"fast_path", fast_stats.fast_path},
               {"chunks", fast_stats.chunks}};
  if (!fast_stats.fast_path) line["fallback"] = fast_stats.fallback_cause;
  if (!info.missing_sources.empty()) line["missing_sources"] = info.missing_sources;
  std::cout << json_text(line) << std::endl;
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  // No libhdf5 teardown at exit. On some damaged files (a layout message of rank 0, a fixed
  // array failing its checksum) libhdf5's own error path in H5Dopen keeps an internal reference
  // to the file after every id h5chunk holds is closed (H5Fget_obj_count is 0), and its exit
  // handler then prints "infinite loop closing library" with its internal state. h5chunk only
  // reads: the process's exit closes the file, and there is nothing to flush.
  H5dont_atexit();
  // The helper process (h5chunk_helper.h) keeps SIGINT's default: the command kills it, and a
  // Ctrl-C reaching both ends it silently, while the command says it was interrupted.
  if (!(argc > 1 && std::strcmp(argv[1], "h5dread-helper") == 0)) take_stop_signals();
  // hf:// reads log as the mount does (HUBFS_LOG_LEVEL=debug shows each fetch and hint).
  if (!hubfs::set_log_level_from_env()) {
    std::fprintf(stderr, "h5chunk: HUBFS_LOG_LEVEL must be debug, info, warning or error\n");
    return 2;
  }
  h5chunk_cli::Args args;
  if (const int rc = h5chunk_cli::parse_args(argc, argv, args); rc >= 0) return rc;
  g_hub = args.hub;
  switch (args.command) {
    case h5chunk_cli::Command::kHelper:
      return h5chunk_cli::helper_main(args.file, args.dataset, args.helper_parent,
                                      [](const std::string& p) { return open_file(p); });
    case h5chunk_cli::Command::kRead:
      return cmd_read(args.file, args.dataset, args.selection, args.out, args.threads, args.route);
    case h5chunk_cli::Command::kInfo:
      return cmd_info(args.file, args.dataset, args.as_json);
    case h5chunk_cli::Command::kBench:
      return cmd_bench(args.file, args.dataset, args.selection, args.threads, args.repeat);
  }
  return 1;
}
