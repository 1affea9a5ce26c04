#include "support/mount_harness.h"

#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <random>
#include <filesystem>
#include <fstream>
#include <stdexcept>
#include <thread>

namespace hubfs::testing {

CommandResult run_command(const std::string& command) {
  CommandResult result;
  std::string full = command + " 2>&1";
  FILE* pipe = popen(full.c_str(), "r");
  if (!pipe) return result;
  char buf[65536];
  size_t n;
  while ((n = fread(buf, 1, sizeof buf, pipe)) > 0) {
    if (result.output.size() < (64u << 20)) result.output.append(buf, n);
  }
  int status = pclose(pipe);
  result.wait_status = status;
  result.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return result;
}

std::string shell_quote(const std::string& s) {
  std::string out = "'";
  for (char c : s) {
    if (c == '\'') out += "'\\''";
    else out += c;
  }
  return out + "'";
}

std::string bin_path(const std::string& name) { return std::string(HUBFS_BIN_DIR) + "/" + name; }

bool drop_page_cache() {
  sync();
  std::ofstream f("/proc/sys/vm/drop_caches");
  if (!f) return false;
  f << "3\n";
  return static_cast<bool>(f);
}

std::unique_ptr<HubfsMount> HubfsMount::start(const std::string& endpoint, const std::string& repo,
                                              const std::string& cache_dir,
                                              const std::vector<std::string>& extra_args) {
  auto m = std::unique_ptr<HubfsMount>(new HubfsMount());
  char tmpl[] = "/tmp/hubfs-mnt-XXXXXX";
  if (!mkdtemp(tmpl)) throw std::runtime_error("mkdtemp failed");
  m->path_ = tmpl;
  m->log_ = m->path_ + ".log";
  std::string cmd = shell_quote(bin_path("hubfs")) + " mount --endpoint " + shell_quote(endpoint) +
                    " --cache-dir " + shell_quote(cache_dir) + " --log-file " + shell_quote(m->log_);
  for (const auto& a : extra_args) cmd += " " + shell_quote(a);
  if (!repo.empty()) cmd += " " + shell_quote(repo);  // none for --hub
  cmd += " " + shell_quote(m->path_);
  auto r = run_command(cmd);
  if (r.exit_code != 0) {
    // The log goes into the error rather than being left behind in /tmp.
    std::string log = read_all(m->log_);
    std::error_code ec;
    std::filesystem::remove(m->path_, ec);
    std::filesystem::remove(m->log_, ec);
    m->path_.clear();
    throw std::runtime_error("hubfs mount failed (" + std::to_string(r.exit_code) + "): " + r.output +
                             (log.empty() ? "" : "; its log: " + log));
  }
  return m;
}

HubfsMount::~HubfsMount() {
  if (path_.empty()) return;
  // A process that just closed a file may still hold the mount for a moment: retry briefly.
  for (int attempt = 0; attempt < 50; ++attempt) {
    auto r = run_command(shell_quote(bin_path("hubfs")) + " unmount " + shell_quote(path_));
    if (r.exit_code == 0 || r.output.find("not mounted") != std::string::npos) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  std::error_code ec;
  std::filesystem::remove(path_, ec);
  std::filesystem::remove(log_, ec);
}

std::string read_all(const std::string& path) {
  // read(2) into the string, not an istreambuf_iterator: that copies a byte per call, which at
  // the test code's -O0 under TSan cost seconds per MiB-sized file (MountTest: 17 s of 25 in one
  // test went there).
  // Sized by fstat first (one byte more, to see the end in one read): grown by doubling from 64
  // KiB, a MiB-sized file cost a fresh allocation and a copy per doubling, and under TSan each
  // fresh page of the string's shadow too (docs/benchmarks.md, "Session 33: suite41").
  std::string out;
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return out;
  struct stat st {};
  if (::fstat(fd, &st) == 0 && st.st_size > 0) out.resize(static_cast<size_t>(st.st_size) + 1);
  size_t used = 0;
  for (;;) {
    if (out.size() - used < (1u << 16)) out.resize(std::max<size_t>(2 * out.size(), used + (1u << 16)));
    ssize_t n = ::read(fd, out.data() + used, out.size() - used);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;  // end of file, or an error: what was read so far, as the stream did
    used += static_cast<size_t>(n);
  }
  ::close(fd);
  out.resize(used);
  return out;
}

std::string random_bytes(size_t n, unsigned seed) {
  std::mt19937_64 rng(seed);
  std::string s(n, '\0');
  for (size_t i = 0; i + 8 <= n; i += 8) {
    uint64_t v = rng();
    memcpy(&s[i], &v, 8);
  }
  return s;
}

}  // namespace hubfs::testing
