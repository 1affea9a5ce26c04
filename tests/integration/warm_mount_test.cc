// Issue 42 through a real mount: nothing a warm read does needs the network. A partial read,
// then the daemon stops; a new one mounts the same cache, the page cache is dropped, and the same
// read makes no request beyond the branch's pin: for an LFS file (the bridge) and a Xet-stored
// one (no read token either). And after `hubfs prefetch` of the file, its reads make none.
#include <fcntl.h>
#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <string>

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
  // The partial read, front to back in 256 KiB reads; the count of wrong bytes.
  size_t read_partial() const {
    const int fd = ::open((mnt_ + "/data.bin").c_str(), O_RDONLY);
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

INSTANTIATE_TEST_SUITE_P(LfsAndXet, WarmMountTest, ::testing::Values(false, true),
                         [](const ::testing::TestParamInfo<bool>& p) { return p.param ? "Xet" : "Lfs"; });

}  // namespace HUBFS_UNITY_ID
