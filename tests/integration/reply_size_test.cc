// The size of the kernel's read requests on a real mount (issue 42 item 3, "larger replies"):
// libfuse 3.14 asks for max_pages 256, so a request carries up to 1 MiB, one block; and the
// mount raises its read_ahead_kb to 1 MiB, so buffered sequential reads come as whole-block
// requests too, not as the kernel's default 128 KiB. Counted by the daemon's kernel_reads.
#include <fcntl.h>
#include <sys/mount.h>
#include <sys/xattr.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <memory>
#include <string>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "support/hubfs_daemon.h"
#include "support/local_hub.h"
#include "support/pattern.h"
#include "support/temp_dir.h"

namespace fs = std::filesystem;
using namespace hubfs::testing;

namespace HUBFS_UNITY_ID {

constexpr uint64_t kSeed = 5;
constexpr uint64_t kSize = (24ull << 20) + 99;
constexpr size_t kMiB = 1u << 20;

class ReplySizeTest : public ::testing::Test {
 protected:
  void SetUp() override {
    write_pattern_file((root_.path() / "datasets" / "r" / "s" / "data.bin").string(), kSeed, kSize);
    LocalHubOptions o;
    o.root = root_.str();
    hub_ = LocalHub::start(o);
    mnt_ = (work_.path() / "mnt").string();
    fs::create_directories(mnt_);
    daemon_ = HubfsDaemon::start(hub_->url(), "datasets/r/s", (work_.path() / "cache").string(), mnt_);
  }
  void TearDown() override {
    daemon_.reset();
    for (int i = 0; i < 5 && is_mounted(mnt_); ++i) umount2(mnt_.c_str(), MNT_DETACH);
  }
  // (requests, bytes) the kernel has sent the daemon so far.
  std::pair<uint64_t, uint64_t> kernel_reads() const {
    char buf[8192];
    const ssize_t n = getxattr(mnt_.c_str(), "user.hubfs.status", buf, sizeof buf);
    EXPECT_GT(n, 0) << strerror(errno);
    auto j = nlohmann::json::parse(std::string(buf, n > 0 ? static_cast<size_t>(n) : 0), nullptr, false);
    if (!j.is_object() || !j.contains("kernel_reads")) return {0, 0};
    return {j["kernel_reads"].get<uint64_t>(), j["kernel_read_bytes"].get<uint64_t>()};
  }
  // A page-aligned buffer (O_DIRECT pins the caller's pages: an unaligned 1 MiB spans 257).
  static std::unique_ptr<char, decltype(&std::free)> aligned(size_t bytes) {
    void* p = nullptr;
    if (posix_memalign(&p, 4096, bytes) != 0) p = nullptr;
    return {static_cast<char*>(p), &std::free};
  }

  TempDir root_, work_;
  std::unique_ptr<LocalHub> hub_;
  std::string mnt_;
  std::unique_ptr<HubfsDaemon> daemon_;
};

TEST_F(ReplySizeTest, AnODirectReadOfFourMiBIsFourRequestsOfOneMiB) {
  const int fd = open((mnt_ + "/data.bin").c_str(), O_RDONLY | O_DIRECT);
  ASSERT_GE(fd, 0) << strerror(errno);
  auto buf = aligned(4 * kMiB);
  ASSERT_NE(buf, nullptr);
  const auto before = kernel_reads();
  const off_t off = 3 * kMiB;
  ASSERT_EQ(pread(fd, buf.get(), 4 * kMiB, off), static_cast<ssize_t>(4 * kMiB)) << strerror(errno);
  const auto after = kernel_reads();
  close(fd);
  EXPECT_EQ(count_pattern_mismatches(kSeed, off, buf.get(), 4 * kMiB), 0u);
  EXPECT_EQ(after.first - before.first, 4u) << "O_DIRECT requests should carry 1 MiB each (max_pages 256)";
  EXPECT_EQ(after.second - before.second, 4 * kMiB);
}

TEST_F(ReplySizeTest, ABufferedSequentialReadComesInRequestsOfAtLeastHalfAMiB) {
  const int fd = open((mnt_ + "/data.bin").c_str(), O_RDONLY);
  ASSERT_GE(fd, 0) << strerror(errno);
  std::string buf(kMiB, '\0');
  const auto before = kernel_reads();
  constexpr uint64_t kRead = 16 * kMiB;
  size_t wrong = 0;
  for (uint64_t off = 0; off < kRead; off += kMiB) {
    ASSERT_EQ(pread(fd, buf.data(), kMiB, static_cast<off_t>(off)), static_cast<ssize_t>(kMiB));
    wrong += count_pattern_mismatches(kSeed, off, buf.data(), kMiB);
  }
  const auto after = kernel_reads();
  close(fd);
  EXPECT_EQ(wrong, 0u);
  const uint64_t requests = after.first - before.first;
  const uint64_t bytes = after.second - before.second;
  ASSERT_GE(bytes, kRead);  // the kernel's own read-ahead may have asked for more
  // At the kernel's default read-ahead (128 KiB) this read is 128 requests; at 1 MiB, about 16.
  EXPECT_LE(requests * (kMiB / 2), bytes) << requests << " requests for " << bytes
                                          << " bytes: is the mount's read_ahead_kb still raised (root)?";
}

// A request that is not block-aligned is answered from two blocks at once (a reply of two
// pieces, written with one writev): exact, whether the kernel asks for it directly (O_DIRECT, at
// the reader's unaligned offset) or for its page cache (page-aligned, not block-aligned).
TEST_F(ReplySizeTest, RequestsSpanningTwoBlocksAreExact) {
  const uint64_t off = 5 * kMiB + kMiB / 2 + 123;
  const size_t len = 3 * kMiB + 4567;
  auto buf = aligned(len);
  ASSERT_NE(buf, nullptr);
  for (int flags : {O_RDONLY | O_DIRECT, O_RDONLY}) {
    const int fd = open((mnt_ + "/data.bin").c_str(), flags);
    ASSERT_GE(fd, 0) << strerror(errno);
    const auto before = kernel_reads();
    std::memset(buf.get(), 0, len);
    EXPECT_EQ(pread(fd, buf.get(), len, static_cast<off_t>(off)), static_cast<ssize_t>(len)) << strerror(errno);
    const auto after = kernel_reads();
    close(fd);
    EXPECT_EQ(count_pattern_mismatches(kSeed, off, buf.get(), len), 0u) << (flags & O_DIRECT ? "O_DIRECT" : "buffered");
    EXPECT_GE(after.second - before.second, len - 2 * 4096) << "the read should have reached the daemon";
  }
}

}  // namespace HUBFS_UNITY_ID
