// Test helpers for reads that skip the page cache (CacheDisk::read_file_into).
#pragma once

#include <fcntl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cstdint>
#include <string>

namespace hubfs::testing {

// Drops a file's pages from the page cache: written back first, so none is dirty, then
// POSIX_FADV_DONTNEED, which drops clean pages nobody maps. True when the call succeeded.
inline bool evict_from_page_cache(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return false;
  const bool ok = ::fdatasync(fd) == 0 && ::posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED) == 0;
  ::close(fd);
  return ok;
}

// Whether the posix disk can read `path` with O_DIRECT here: its file system reports direct
// I/O alignments a 4 KiB-aligned buffer meets (statx), and the kernel answers cachestat (6.5).
// Elsewhere (tmpfs, an older kernel) the same reads go through the page cache, and the tests
// check their bytes alike.
inline bool direct_reads_possible(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return false;
  bool ok = false;
#if defined(STATX_DIOALIGN) && defined(__linux__) && (defined(__x86_64__) || defined(__aarch64__))
  struct statx stx;
  struct {
    uint64_t off, len;
  } range = {0, 0};
  struct {
    uint64_t nr_cache, nr_dirty, nr_writeback, nr_evicted, nr_recently_evicted;
  } stat = {};
  ok = ::statx(fd, "", AT_EMPTY_PATH, STATX_DIOALIGN, &stx) == 0 && (stx.stx_mask & STATX_DIOALIGN) &&
       stx.stx_dio_mem_align && stx.stx_dio_offset_align && stx.stx_dio_mem_align <= 4096 &&
       stx.stx_dio_offset_align <= 4096 && ::syscall(451, fd, &range, &stat, 0) == 0;
#endif
  ::close(fd);
  return ok;
}

}  // namespace hubfs::testing
