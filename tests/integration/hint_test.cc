// Range hints on a real mount (include/hubfs/range_hint.h): a hint for N ranges puts them in
// flight together before the first read; reads then wait on them (no second request); malformed
// hints fail with EINVAL and change nothing; on a file of another filesystem the ioctl is a
// harmless error.
#include <fcntl.h>
#include <sys/ioctl.h>
#include <sys/mount.h>
#include <sys/wait.h>
#include <sys/xattr.h>
#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <thread>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "hubfs/range_hint.h"
#include "support/hubfs_daemon.h"
#include "support/local_hub.h"
#include "support/mount_harness.h"
#include "support/pattern.h"
#include "support/temp_dir.h"

namespace fs = std::filesystem;
using namespace hubfs::testing;
using namespace std::chrono_literals;

namespace HUBFS_UNITY_ID {

constexpr uint64_t kSeed = 77;
constexpr uint64_t kSize = (100ull << 20) + 321;

class HintTest : public ::testing::Test {
 protected:
  void SetUp() override {
    write_pattern_file((root_.path() / "datasets" / "h" / "r" / "data.bin").string(), kSeed, kSize);
    LocalHubOptions o;
    o.root = root_.str();
    o.latency_ms = 400;  // long enough that hinted requests are visibly in flight together
    hub_ = LocalHub::start(o);
    mnt_ = (work_.path() / "mnt").string();
    fs::create_directories(mnt_);
    daemon_ = HubfsDaemon::start(hub_->url(), "datasets/h/r", (work_.path() / "cache").string(), mnt_);
    fd_ = open((mnt_ + "/data.bin").c_str(), O_RDONLY);
    ASSERT_GE(fd_, 0);
  }
  void TearDown() override {
    if (fd_ >= 0) close(fd_);
    daemon_.reset();
    for (int i = 0; i < 5 && is_mounted(mnt_); ++i) umount2(mnt_.c_str(), MNT_DETACH);
  }

  static hubfs_hint make_hint(const std::vector<std::pair<uint64_t, uint64_t>>& ranges) {
    hubfs_hint h{};
    h.version = HUBFS_HINT_VERSION;
    h.count = static_cast<uint32_t>(ranges.size());
    for (size_t i = 0; i < ranges.size(); ++i) h.ranges[i] = {ranges[i].first, ranges[i].second};
    return h;
  }
  uint64_t cdn_requests() { return hub_->stats()["cdn_requests"].get<uint64_t>(); }
  // The daemon's status attribute, parsed.
  nlohmann::json status() const {
    char buf[8192];
    ssize_t n = getxattr(mnt_.c_str(), "user.hubfs.status", buf, sizeof buf);
    EXPECT_GT(n, 0) << strerror(errno);
    return nlohmann::json::parse(std::string(buf, n > 0 ? static_cast<size_t>(n) : 0), nullptr, false);
  }
  // Bytes hints started fetching or checking so far. A hint decides what it starts before its
  // ioctl returns (BlockReader::prefetch counts them then), so reading this right after proves
  // it started nothing, with no wait for something that did not happen.
  uint64_t hinted_bytes() const { return status()["hinted_bytes"].get<uint64_t>(); }

  TempDir root_, work_;
  std::unique_ptr<LocalHub> hub_;
  std::string mnt_;
  std::unique_ptr<HubfsDaemon> daemon_;
  int fd_ = -1;
};

TEST_F(HintTest, HintedRangesAreInFlightTogetherBeforeAnyReadAndReadsShareThem) {
  // 12 ranges of 1 MiB, 8 MiB apart: no two coalesce, so each is its own request, and reading
  // them is not a sequential stream (no read-ahead of ours); the kernel's is off for this fd.
  ASSERT_EQ(posix_fadvise(fd_, 0, 0, POSIX_FADV_RANDOM), 0);
  std::vector<std::pair<uint64_t, uint64_t>> ranges;
  for (uint64_t i = 0; i < 12; ++i) ranges.push_back({i * (8ull << 20), 1ull << 20});
  hub_->reset_stats();
  hubfs_hint h = make_hint(ranges);
  ASSERT_EQ(ioctl(fd_, HUBFS_IOC_HINT, &h), 0) << strerror(errno);
  // Before any read: the server sees the hinted requests in flight together (bounded wait).
  uint64_t peak = 0;
  for (int i = 0; i < 200 && peak < ranges.size(); ++i) {
    peak = hub_->stats()["peak_concurrency"].get<uint64_t>();
    std::this_thread::sleep_for(10ms);
  }
  EXPECT_GE(peak, 10u) << "hinted ranges should be fetched concurrently";
  for (auto [off, len] : ranges) {
    std::string buf(len, '\0');
    ASSERT_EQ(pread(fd_, buf.data(), len, static_cast<off_t>(off)), static_cast<ssize_t>(len));
    EXPECT_EQ(count_pattern_mismatches(kSeed, off, buf.data(), len), 0u) << off;
  }
  // Reads waited on the hinted fetches: one request per range, no more.
  EXPECT_EQ(cdn_requests(), ranges.size());
  // A hint of what is cached now costs nothing: it starts no fetch.
  const uint64_t before = hinted_bytes();
  ASSERT_EQ(ioctl(fd_, HUBFS_IOC_HINT, &h), 0);
  EXPECT_EQ(hinted_bytes(), before) << "a hint of cached blocks must start nothing";
  EXPECT_EQ(cdn_requests(), ranges.size());
}

TEST_F(HintTest, MalformedHintsFailWithEinvalAndChangeNothing) {
  hub_->reset_stats();
  const uint64_t before = hinted_bytes();
  const uint64_t hints_before = status()["hints"].get<uint64_t>();
  hubfs_hint past_eof = make_hint({{0, 4096}, {kSize - 10, 11}});
  EXPECT_EQ(ioctl(fd_, HUBFS_IOC_HINT, &past_eof), -1);
  EXPECT_EQ(errno, EINVAL);
  hubfs_hint empty = make_hint({});
  EXPECT_EQ(ioctl(fd_, HUBFS_IOC_HINT, &empty), -1);
  EXPECT_EQ(errno, EINVAL);
  hubfs_hint zero = make_hint({{100, 0}});
  EXPECT_EQ(ioctl(fd_, HUBFS_IOC_HINT, &zero), -1);
  EXPECT_EQ(errno, EINVAL);
  hubfs_hint version = make_hint({{0, 4096}});
  version.version = 99;
  EXPECT_EQ(ioctl(fd_, HUBFS_IOC_HINT, &version), -1);
  EXPECT_EQ(errno, EINVAL);
  hubfs_hint too_many = make_hint({{0, 4096}});
  too_many.count = HUBFS_HINT_MAX_RANGES + 1;
  EXPECT_EQ(ioctl(fd_, HUBFS_IOC_HINT, &too_many), -1);
  EXPECT_EQ(errno, EINVAL);
  // Refused before anything was started: no hint counted, nothing hinted or fetched.
  EXPECT_EQ(status()["hints"].get<uint64_t>(), hints_before);
  EXPECT_EQ(hinted_bytes(), before) << "a malformed hint must not fetch anything";
  EXPECT_EQ(cdn_requests(), 0u);
}

TEST_F(HintTest, OnAnotherFilesystemTheHintIsAHarmlessError) {
  std::string path = (work_.path() / "local.bin").string();
  write_pattern_file(path, 1, 8192);
  int fd = open(path.c_str(), O_RDONLY);
  ASSERT_GE(fd, 0);
  hubfs_hint h = make_hint({{0, 4096}});
  EXPECT_EQ(ioctl(fd, HUBFS_IOC_HINT, &h), -1);
  EXPECT_TRUE(errno == ENOTTY || errno == EINVAL || errno == ENOSYS) << strerror(errno);
  std::string buf(8192, '\0');
  EXPECT_EQ(pread(fd, buf.data(), buf.size(), 0), 8192);
  EXPECT_EQ(count_pattern_mismatches(1, 0, buf.data(), buf.size()), 0u);
  close(fd);
}

}  // namespace

namespace HUBFS_UNITY_ID {

// An HDF5 file written by h5py (`make`: Python statements on the open file `f`) in repo
// datasets/h/<name>, served at 100 ms per request and mounted; unmounted when done.
struct H5OnAMount {
  TempDir root, work;
  std::unique_ptr<LocalHub> hub;
  std::unique_ptr<HubfsDaemon> daemon;
  std::string mnt;

  H5OnAMount(const std::string& name, const std::string& file, const std::string& make) {
    auto repo = root.path() / "datasets" / "h" / name;
    fs::create_directories(repo);
    const std::string h5 = (repo / file).string();
    auto made = run_command("/usr/bin/python3 -c " +
                            shell_quote("import h5py, numpy as np; f = h5py.File('" + h5 + "', 'w'); " + make));
    EXPECT_EQ(made.exit_code, 0) << made.output;
    LocalHubOptions o;
    o.root = root.str();
    o.latency_ms = 100;
    hub = LocalHub::start(o);
    mnt = (work.path() / "mnt").string();
    fs::create_directories(mnt);
    daemon = HubfsDaemon::start(hub->url(), "datasets/h/" + name, (work.path() / "cache").string(), mnt);
  }
  ~H5OnAMount() {
    daemon.reset();
    for (int i = 0; i < 5 && is_mounted(mnt); ++i) umount2(mnt.c_str(), MNT_DETACH);
  }
  // The daemon's status attribute, parsed.
  nlohmann::json status() const {
    char buf[8192];
    ssize_t n = getxattr(mnt.c_str(), "user.hubfs.status", buf, sizeof buf);
    EXPECT_GT(n, 0) << strerror(errno);
    return nlohmann::json::parse(std::string(buf, n > 0 ? static_cast<size_t>(n) : 0), nullptr, false);
  }
};

// h5chunk on a mount hints every chunk of a many-chunk read before reading: the daemon counts
// the hint (its status attribute) and the chunks go out together.
TEST(H5chunkHints, AManyChunkReadOnAMountIsHinted) {
  H5OnAMount m("five", "frames.h5",
               "f.create_dataset('x', data=np.arange(8 * 300000, dtype='float32').reshape(8, 300000), "
               "chunks=(1, 300000))");
  auto read = run_command(shell_quote(bin_path("h5chunk")) + " read " + shell_quote(m.mnt + "/frames.h5") +
                          " /x -o /dev/null");
  ASSERT_EQ(read.exit_code, 0) << read.output;
  auto status = m.status();
  EXPECT_GE(status["hints"].get<uint64_t>(), 1u) << status.dump();
  EXPECT_GE(m.hub->stats()["peak_concurrency"].get<uint64_t>(), 4u);
}

// A contiguous dataset's read on a mount is split into pieces of a few MiB that go out together
// (hinted, then read in parallel), big-endian values arriving native.
TEST(H5chunkHints, AContiguousReadOnAMountGoesOutInParallelPieces) {
  H5OnAMount m("flat", "flat.h5", "f.create_dataset('x', data=np.arange(6 << 20, dtype='>f4').reshape(24, -1))");
  const std::string out = (m.work.path() / "x.bin").string();
  auto read = run_command(shell_quote(bin_path("h5chunk")) + " read " + shell_quote(m.mnt + "/flat.h5") +
                          " /x -o " + shell_quote(out));
  ASSERT_EQ(read.exit_code, 0) << read.output;
  auto line = nlohmann::json::parse(read.output.substr(read.output.find('{')));
  EXPECT_EQ(line["fast_path"], true) << read.output;
  auto status = m.status();
  EXPECT_GE(status["hints"].get<uint64_t>(), 1u) << status.dump();
  EXPECT_GE(m.hub->stats()["peak_concurrency"].get<uint64_t>(), 4u);
  std::ifstream f(out, std::ios::binary);
  std::vector<float> got(6 << 20);
  f.read(reinterpret_cast<char*>(got.data()), std::streamsize(got.size() * sizeof(float)));
  ASSERT_TRUE(f.good());
  size_t wrong = 0;
  for (size_t i = 0; i < got.size(); ++i) wrong += got[i] != float(i);
  EXPECT_EQ(wrong, 0u);
}

}  // namespace

namespace HUBFS_UNITY_ID {

// `hubfs prefetch` warms the cache through hints: the first run fetches the file, the second
// makes no upstream request; not on a terminal it prints one JSON summary.
TEST_F(HintTest, PrefetchFetchesOnceAndASecondRunMakesNoRequest) {
  close(fd_);
  fd_ = -1;
  hub_->reset_stats();
  const std::string cmd = shell_quote(bin_path("hubfs")) + " prefetch " + shell_quote(mnt_ + "/data.bin");
  auto first = run_command(cmd);
  ASSERT_EQ(first.exit_code, 0) << first.output;
  auto summary = nlohmann::json::parse(first.output.substr(first.output.find('{')));
  EXPECT_EQ(summary["files"], 1);
  EXPECT_EQ(summary["bytes"].get<uint64_t>(), kSize);
  EXPECT_EQ(summary["ok"], true);
  EXPECT_EQ(summary["interrupted"], false);
  const uint64_t fetched = cdn_requests();
  EXPECT_GT(fetched, 0u);
  drop_page_cache();
  auto second = run_command(cmd);
  ASSERT_EQ(second.exit_code, 0) << second.output;
  EXPECT_EQ(cdn_requests(), fetched) << "a second prefetch must be served from the cache";
  // And the bytes are right.
  int fd = open((mnt_ + "/data.bin").c_str(), O_RDONLY);
  ASSERT_GE(fd, 0);
  std::string buf(1 << 20, '\0');
  ASSERT_EQ(pread(fd, buf.data(), buf.size(), 50 << 20), static_cast<ssize_t>(buf.size()));
  EXPECT_EQ(count_pattern_mismatches(kSeed, 50 << 20, buf.data(), buf.size()), 0u);
  close(fd);
}

}  // namespace

namespace HUBFS_UNITY_ID {

// Ctrl-C stops a prefetch cleanly (exit 130, the summary says so); what it fetched stays
// cached and a later run completes.
TEST_F(HintTest, PrefetchStopsCleanlyOnCtrlC) {
  const std::string cmd = shell_quote(bin_path("hubfs")) + " prefetch " + shell_quote(mnt_ + "/data.bin");
  // SIGINT once the prefetch is running, not at a fixed time: it installs its handler before
  // any read, so once its first request reaches the CDN the signal is handled. (At a fixed 0.6 s
  // a sanitized binary under load was still starting, and died of the signal with no summary.)
  // Each request waits 400 ms at the server, so the prefetch is still reading when signalled.
  const uint64_t before = cdn_requests();
  const std::string out_path = (work_.path() / "prefetch.out").string();
  const std::string script = "exec " + cmd + " >" + shell_quote(out_path) + " 2>&1";  // before fork: no malloc in the child
  const pid_t pid = fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    execl("/bin/sh", "sh", "-c", script.c_str(), static_cast<char*>(nullptr));
    _exit(127);
  }
  const auto give_up = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  while (cdn_requests() == before && std::chrono::steady_clock::now() < give_up) {
    std::this_thread::sleep_for(std::chrono::milliseconds(5));  // waits for another process
  }
  kill(pid, SIGINT);
  int status = 0;
  ASSERT_EQ(waitpid(pid, &status, 0), pid);
  CommandResult stopped;
  stopped.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  stopped.output = read_all(out_path);
  EXPECT_EQ(stopped.exit_code, 130) << stopped.output;
  ASSERT_NE(stopped.output.find('{'), std::string::npos) << "no summary: " << stopped.output;
  auto summary = nlohmann::json::parse(stopped.output.substr(stopped.output.find('{')));
  EXPECT_EQ(summary["interrupted"], true);
  EXPECT_LT(summary["bytes"].get<uint64_t>(), kSize);
  auto again = run_command(cmd);
  ASSERT_EQ(again.exit_code, 0) << again.output;
  EXPECT_EQ(nlohmann::json::parse(again.output.substr(again.output.find('{')))["bytes"].get<uint64_t>(), kSize);
}

}  // namespace
