// Issue 42 through a real mount: nothing a warm read does needs the network. A partial read,
// then the daemon stops; a new one mounts the same cache, the page cache is dropped, and the same
// read makes no request beyond the branch's pin: for an LFS file (the bridge) and a Xet-stored
// one (no read token either). And after `hubfs prefetch` of the file, its reads make none. And
// a mount's --read-ahead cap holds what a cold partial read fetches to the read and the cap.
#include <fcntl.h>
#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <algorithm>
#include <filesystem>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "support/hubfs_daemon.h"
#include "support/local_hub.h"
#include "support/mount_harness.h"
#include "support/pattern.h"
#include "support/temp_dir.h"

namespace fs = std::filesystem;
using namespace hubfs::testing;

namespace HUBFS_UNITY_ID {

constexpr uint64_t kSeed = 42;
constexpr uint64_t kSize = (16ull << 20) + 777;
constexpr uint64_t kPartial = 6ull << 20;  // the partial read: its first 6 MiB

// The partial read of MNT/data.bin, front to back in 256 KiB reads; the count of wrong bytes.
size_t read_partial_of(const std::string& mnt) {
  const int fd = ::open((mnt + "/data.bin").c_str(), O_RDONLY);
  EXPECT_GE(fd, 0);
  if (fd < 0) return kPartial;
  std::string buf(256 << 10, '\0');
  size_t wrong = 0;
  for (uint64_t off = 0; off < kPartial; off += buf.size()) {
    const ssize_t n = ::pread(fd, buf.data(), buf.size(), static_cast<off_t>(off));
    EXPECT_EQ(n, static_cast<ssize_t>(buf.size()));
    if (n <= 0) break;
    wrong += count_pattern_mismatches(kSeed, off, buf.data(), static_cast<size_t>(n));
  }
  ::close(fd);
  return wrong;
}

class WarmMountTest : public ::testing::TestWithParam<bool> {
 protected:
  void SetUp() override {
    write_pattern_file((root_.path() / "datasets" / "lab" / "warm" / "data.bin").string(), kSeed, kSize);
    LocalHubOptions o;
    o.root = root_.str();
    o.xet = GetParam();
    hub_ = LocalHub::start(o);
    mnt_ = (work_.path() / "mnt").string();
    fs::create_directories(mnt_);
  }

  std::unique_ptr<HubfsDaemon> mount() {
    return HubfsDaemon::start(hub_->url(), "datasets/lab/warm", (work_.path() / "cache").string(), mnt_);
  }
  // An orderly stop (SIGTERM): every block fetched is on disk, every request counted.
  static void stop(std::unique_ptr<HubfsDaemon>& d) {
    d->signal(SIGTERM);
    auto status = d->wait_exit(std::chrono::seconds(60));
    ASSERT_TRUE(status.has_value()) << "the daemon did not stop";
    EXPECT_TRUE(WIFEXITED(*status) && WEXITSTATUS(*status) == 0) << describe_wait_status(*status);
    d.reset();
  }
  size_t read_partial() const { return read_partial_of(mnt_); }
  // Every request since the last reset was the branch's pin (at most one).
  void expect_only_the_pin() {
    const auto trace = hub_->trace();
    for (const auto& r : trace)
      EXPECT_NE(r["path"].get<std::string>().find("/revision/"), std::string::npos)
          << "a warm read made a request: " << r.dump();
    EXPECT_LE(trace.size(), 1u) << trace.dump();
    EXPECT_EQ(hub_->stats()["xet_token_requests"].get<uint64_t>(), 0u);
  }

  TempDir root_, work_;
  std::unique_ptr<LocalHub> hub_;
  std::string mnt_;
};

TEST_P(WarmMountTest, APartialReadAgainAfterARemountMakesNoRequestBeyondThePin) {
  auto cold = mount();
  EXPECT_EQ(read_partial(), 0u);
  stop(cold);
  ASSERT_GT(hub_->stats()["requests"].get<uint64_t>(), 1u);
  ASSERT_TRUE(drop_page_cache()) << "needs root";
  hub_->reset_stats();
  auto warm = mount();
  EXPECT_EQ(read_partial(), 0u);
  stop(warm);
  expect_only_the_pin();
}

TEST_P(WarmMountTest, ReadsAfterHubfsPrefetchMakeNoRequest) {
  auto daemon = mount();
  auto r = run_command(shell_quote(bin_path("hubfs")) + " prefetch " + shell_quote(mnt_ + "/data.bin"));
  ASSERT_EQ(r.exit_code, 0) << r.output;
  ASSERT_TRUE(drop_page_cache()) << "needs root";
  hub_->reset_stats();
  EXPECT_EQ(read_partial(), 0u);
  stop(daemon);
  const auto trace = hub_->trace();
  EXPECT_EQ(trace.size(), 0u) << "a read after prefetch made a request: " << trace.dump();
  // And on a remount of the same cache, only the pin.
  hub_->reset_stats();
  daemon = mount();
  EXPECT_EQ(read_partial(), 0u);
  stop(daemon);
  expect_only_the_pin();
}

// `--read-ahead SIZE` through a real mount: the partial read (6 MiB of 16) fetches what it reads
// plus at most the cap and the kernel's own read-ahead (two windows of read_ahead_kb, 1 MiB, past
// a stream's position: fuse/mount.cc); without the option the file's first 16 MiB come at once
// (the start window), which is what the cap is for. `hubfs status --json` shows the cap (null:
// none). Counted as the bytes the ranged requests cover (covered_bytes); kListings is left from
// when the listing's JSON bodies counted too. A Xet file's blocks come as whole chunks (up to 128
// KiB each) at either end of each range: 0.6-0.9 MB more here (with the reconstruction's JSON),
// allowed 2 MiB.
// The file bytes the ranged requests of `trace` cover, each byte of a path once: under load the
// transport sends a slow request a second time (a hedge, or a retry), and the server's
// bytes_sent would count it twice (the same test over hf:// did, in 2 runs of about 20).
uint64_t covered_bytes(const nlohmann::json& trace) {
  std::map<std::string, std::vector<std::pair<uint64_t, uint64_t>>> spans;  // by path: [first, end)
  for (const auto& r : trace) {
    // Bodies of file bytes only: a CDN's (LFS blobs, Xet xorbs) or a plain server's; not the
    // reconstruction queries (a range of the file, answered with JSON) nor the resolve's redirect.
    const std::string kind = r.value("kind", std::string());
    if ((kind != "cdn" && kind != "plain") || !r.contains("range") || !r["range"].is_string()) continue;
    const std::string range = r["range"].get<std::string>();  // bytes=FIRST-LAST
    const size_t eq = range.find('='), dash = range.find('-');
    if (eq == std::string::npos || dash == std::string::npos) continue;
    const uint64_t first = std::stoull(range.substr(eq + 1, dash - eq - 1));
    spans[r["path"].get<std::string>()].emplace_back(first, std::stoull(range.substr(dash + 1)) + 1);
  }
  uint64_t total = 0;
  for (auto& [path, ranges] : spans) {
    std::sort(ranges.begin(), ranges.end());
    uint64_t end = 0;
    for (const auto& [a, b] : ranges) {
      if (b > std::max(a, end)) total += b - std::max(a, end);
      end = std::max(end, b);
    }
  }
  return total;
}

class ReadAheadCapTest : public ::testing::TestWithParam<bool> {};

TEST_P(ReadAheadCapTest, AMountsReadAheadFetchesNoMoreThanItsCapPastTheReads) {
  TempDir root, work;
  write_pattern_file((root.path() / "datasets" / "lab" / "warm" / "data.bin").string(), kSeed, kSize);
  LocalHubOptions o;
  o.root = root.str();
  o.xet = GetParam();
  auto hub = LocalHub::start(o);
  const std::string mnt = (work.path() / "mnt").string();
  fs::create_directories(mnt);
  const std::string hubfs = shell_quote(bin_path("hubfs"));
  // The bytes a partial read made the server send, each time with an empty cache and the
  // given options, and the mount's status line for the cap.
  auto fetched = [&](const std::vector<std::string>& args, nlohmann::json* cap) {
    const std::string cache = (work.path() / ("cache" + std::to_string(args.size()) +
                                              (args.empty() ? "" : args.back()))).string();
    hub->reset_stats();
    auto d = HubfsDaemon::start(hub->url(), "datasets/lab/warm", cache, mnt, args);
    auto status = run_command_timeout(hubfs + " status --json " + shell_quote(mnt) + " 2>/dev/null",
                                      std::chrono::seconds(30));
    auto j = nlohmann::json::parse(status.output, nullptr, false);
    if (j.is_array() && !j.empty()) j = j[0];
    *cap = j.is_object() && j.contains("read_ahead_cap_bytes") ? j["read_ahead_cap_bytes"] : nlohmann::json("missing");
    EXPECT_EQ(read_partial_of(mnt), 0u);
    d->signal(SIGTERM);  // an orderly stop: every request has ended and been counted
    auto exit = d->wait_exit(std::chrono::seconds(60));
    EXPECT_TRUE(exit.has_value()) << "the daemon did not stop";
    return covered_bytes(hub->trace());
  };
  constexpr uint64_t kMiB = 1 << 20;
  const uint64_t kKernel = 2 * kMiB, kListings = 64 << 10, kXet = GetParam() ? 2 * kMiB : 0;
  nlohmann::json cap;
  const uint64_t off = fetched({"--read-ahead", "0"}, &cap);
  EXPECT_EQ(cap, 0) << "status: " << cap.dump();
  EXPECT_GE(off, kPartial);
  EXPECT_LE(off, kPartial + kKernel + kListings + kXet) << "read-ahead 0 fetched past the read";
  const uint64_t small = fetched({"--read-ahead", "2M"}, &cap);
  EXPECT_EQ(cap, 2 * kMiB) << "status: " << cap.dump();
  EXPECT_LE(small, kPartial + 2 * kMiB + kKernel + kListings + kXet) << "read-ahead 2M fetched past its cap";
  const uint64_t uncapped = fetched({}, &cap);
  EXPECT_TRUE(cap.is_null()) << "status: " << cap.dump();
  EXPECT_GE(uncapped, 16 * kMiB) << "without a cap the file's first 16 MiB come at once";
}

INSTANTIATE_TEST_SUITE_P(LfsAndXet, ReadAheadCapTest, ::testing::Values(false, true),
                         [](const ::testing::TestParamInfo<bool>& p) { return p.param ? "Xet" : "Lfs"; });

INSTANTIATE_TEST_SUITE_P(LfsAndXet, WarmMountTest, ::testing::Values(false, true),
                         [](const ::testing::TestParamInfo<bool>& p) { return p.param ? "Xet" : "Lfs"; });

}  // namespace HUBFS_UNITY_ID
