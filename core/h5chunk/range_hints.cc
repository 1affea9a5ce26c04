#include "h5chunk/range_hints.h"

#include <sys/ioctl.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <memory>

#include "hubfs/range_hint.h"

namespace h5chunk {
namespace {

// cachestat(2)'s arguments, as in linux/mman.h from 6.5 (Debian 12's headers predate it; 451 is
// its number in every architecture's table but alpha's).
struct CachestatRange {
  uint64_t off;
  uint64_t len;
};
struct Cachestat {
  uint64_t nr_cache;
  uint64_t nr_dirty;
  uint64_t nr_writeback;
  uint64_t nr_evicted;
  uint64_t nr_recently_evicted;
};
constexpr long kSysCachestat = 451;

}  // namespace

std::vector<std::pair<uint64_t, uint64_t>> ranges_not_in_page_cache(
    int fd, const std::vector<std::pair<uint64_t, uint64_t>>& ranges) {
  static const uint64_t page = static_cast<uint64_t>(::sysconf(_SC_PAGESIZE));
  std::vector<std::pair<uint64_t, uint64_t>> out;
  for (size_t i = 0; i < ranges.size(); ++i) {
    auto [offset, length] = ranges[i];
    if (length == 0) continue;
    CachestatRange range{offset, length};
    Cachestat stat{};
    if (::syscall(kSysCachestat, fd, &range, &stat, 0) != 0) {
      out.insert(out.end(), ranges.begin() + static_cast<long>(i), ranges.end());  // cannot tell: keep them
      return out;
    }
    const uint64_t pages = (offset + length - 1) / page - offset / page + 1;
    if (stat.nr_cache < pages) out.emplace_back(offset, length);
  }
  return out;
}

bool send_range_hints(int fd, uint64_t file_size, const std::vector<std::pair<uint64_t, uint64_t>>& ranges) {
  auto hint = std::make_unique<hubfs_hint>();  // 16 KiB: not on the stack
  bool accepted = false;
  size_t i = 0;
  while (i < ranges.size()) {
    *hint = hubfs_hint{};
    hint->version = HUBFS_HINT_VERSION;
    for (; i < ranges.size() && hint->count < HUBFS_HINT_MAX_RANGES; ++i) {
      auto [offset, length] = ranges[i];
      // One bad range would make the whole hint invalid: leave such ranges to the reads, which
      // report them properly.
      if (length == 0 || offset >= file_size || length > file_size - offset) continue;
      hint->ranges[hint->count++] = {offset, length};
    }
    if (hint->count == 0) continue;
    if (::ioctl(fd, HUBFS_IOC_HINT, hint.get()) != 0) return accepted;  // not hubfs: stop asking
    accepted = true;
  }
  return accepted;
}

}  // namespace h5chunk
