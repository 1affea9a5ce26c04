/* Range hints: a stable interface through which a process holding a file open on a hubfs mount
 * tells hubfs which byte ranges it is about to read, so hubfs fetches all of them at once (up to
 * --max-requests in flight, neighbours coalesced, shared with ordinary reads) instead of
 * guessing them one read at a time. The reads that follow wait on bytes already on their way.
 *
 * Use: fill a struct hubfs_hint and ioctl(fd, HUBFS_IOC_HINT, &hint) on a file opened read-only.
 * - Needs no privilege: any process that may read the file may hint it.
 * - On any file that is not on a hubfs mount the ioctl fails with ENOTTY (or EINVAL/ENOSYS on
 *   some filesystems) and does nothing: callers may hint unconditionally and ignore errors.
 * - A malformed hint (wrong version, count 0 or above HUBFS_HINT_MAX_RANGES, a zero-length
 *   range, a range past the end of the file) fails with EINVAL and changes nothing.
 * - Hints are advice: hubfs fetches what fits its read-ahead memory budget (256 MiB) and skips
 *   the rest; reads of skipped ranges are fetched on demand as usual. Ranges already cached cost
 *   no request. More than HUBFS_HINT_MAX_RANGES ranges: send several hints.
 * Python: buf = struct.pack("=II", 1, n) + b"".join(struct.pack("=QQ", o, l) for o, l in ranges)
 * padded with zero bytes to 16376, then fcntl.ioctl(fd, 0x7FF86801, buf) (the _IOW value on
 * x86-64 and arm64).
 * This header is C and C++, and depends only on the kernel's ioctl macros. */
#ifndef HUBFS_RANGE_HINT_H
#define HUBFS_RANGE_HINT_H

#include <linux/ioctl.h>
#include <stdint.h>

#define HUBFS_HINT_VERSION 1
/* The most ranges one hint carries: the whole struct must fit the 14-bit ioctl size field. */
#define HUBFS_HINT_MAX_RANGES 1023

struct hubfs_range {
  uint64_t offset;
  uint64_t length;
};

struct hubfs_hint {
  uint32_t version; /* HUBFS_HINT_VERSION */
  uint32_t count;   /* ranges used, 1..HUBFS_HINT_MAX_RANGES */
  struct hubfs_range ranges[HUBFS_HINT_MAX_RANGES];
};

#define HUBFS_IOC_HINT _IOW('h', 0x01, struct hubfs_hint)

#endif
