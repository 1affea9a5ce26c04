// What h5chunk leaves out of a hubfs range hint (core/h5chunk/range_hints.h): ranges whose every
// page the kernel's page cache holds, which a mount serves without its daemon.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <string>
#include <utility>
#include <vector>

#include "h5chunk/range_hints.h"
#include "support/temp_dir.h"

namespace h5chunk {
namespace HUBFS_UNITY_ID {

using Ranges = std::vector<std::pair<uint64_t, uint64_t>>;

// Whether this kernel has cachestat(2) (Linux 6.5+): without it every range is kept.
bool kernel_has_cachestat(int fd) {
  struct {
    uint64_t off, len;
  } range{0, 1};
  uint64_t stat[5] = {};
  return ::syscall(451, fd, &range, stat, 0) == 0 || errno != ENOSYS;
}

TEST(RangeHintsTest, RangesInThePageCacheAreLeftOutAndDroppedPagesKept) {
  hubfs::testing::TempDir dir;
  const std::string path = (dir / "f").string();
  const uint64_t page = static_cast<uint64_t>(::sysconf(_SC_PAGESIZE));
  const std::string bytes(16 * page, 'x');
  const int fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0600);
  ASSERT_GE(fd, 0);
  ASSERT_EQ(::pwrite(fd, bytes.data(), bytes.size(), 0), static_cast<ssize_t>(bytes.size()));
  ASSERT_EQ(::fsync(fd), 0);  // clean pages: DONTNEED below drops them
  const Ranges all = {{page / 2, page}, {4 * page, 2 * page}, {12 * page + 1, 10}};
  if (!kernel_has_cachestat(fd)) {
    EXPECT_EQ(ranges_not_in_page_cache(fd, all), all);  // cannot tell: hint everything, as before
    ::close(fd);
    return;
  }
  // Just written: every page cached, nothing to hint.
  EXPECT_TRUE(ranges_not_in_page_cache(fd, all).empty());
  // Every page dropped, then pages 0 and 12 read back (without read-ahead): the ranges on them
  // alone are left out; one with a page of its two gone (pages 0-1) is kept. (Whole-file drops:
  // a part of a large folio cannot be dropped on its own.)
  ASSERT_EQ(::posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED), 0);
  ASSERT_EQ(::posix_fadvise(fd, 0, 0, POSIX_FADV_RANDOM), 0);
  char one[1];
  ASSERT_EQ(::pread(fd, one, 1, 0), 1);
  ASSERT_EQ(::pread(fd, one, 1, static_cast<off_t>(12 * page)), 1);
  EXPECT_EQ(ranges_not_in_page_cache(fd, all), (Ranges{{page / 2, page}, {4 * page, 2 * page}}));
  // Zero-length ranges name no bytes: left out.
  EXPECT_TRUE(ranges_not_in_page_cache(fd, {{0, 0}}).empty());
  ::close(fd);
}

}  // namespace HUBFS_UNITY_ID
}  // namespace h5chunk
