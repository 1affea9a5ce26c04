// A block-aligned, content-keyed on-disk cache of remote file bytes.
//
// Blocks are keyed by (content id, block index). The content id is the file's sha256 (LFS) or
// git blob id, never its path or URL: a re-upload changes the id, so it can never be served
// stale bytes. One file per block, written to a temp file and renamed into place, with a header
// carrying the key, the length and a checksum that is verified on every read; a block that fails
// the check is deleted and reported as a miss. A byte budget is enforced least-recently-used
// first (hits touch the file). Several processes may share one directory. Nothing the disk does
// (ENOSPC, EACCES, a corrupt file) is ever an error to the caller: it costs a re-fetch.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstring>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include "common/env.h"
#include "cache/cache_disk.h"
#include "common/status.h"

namespace hubfs {

struct CacheOptions {
  std::string dir;                      // created 0700 if missing
  uint64_t budget_bytes = 10ull << 30;  // 10 GiB
  // Eviction frees down to this fraction of the budget, so the next pass (a directory re-scan)
  // comes only after another 10% of the budget has been written, not on every put.
  double low_water = 0.9;
  // A hit touches the block's mtime (the LRU clock: relatime mounts do not update atime) at most
  // this often per block: a metadata write on every read would cost more than the read, and
  // minute resolution is plenty to order blocks by last use.
  std::chrono::milliseconds touch_interval{60'000};
  // After a streak of failed puts (disk full, read-only), puts are skipped for this long so a
  // full disk does not cost a doomed write per block; then one put probes again.
  std::chrono::milliseconds write_backoff{5'000};
  // Most eviction candidates one directory scan keeps (the oldest; ~150 bytes each, so ~10 MiB).
  // A cache of millions of small blocks is then evicted over several scans instead of holding
  // an entry per block in memory.
  size_t eviction_batch = 1 << 16;
  // Time and the maintenance thread (a one-thread executor: the first scan, eviction passes, the
  // wait before retrying a pass that could not get under budget). Required (no default: the
  // stack's, or a test's); must outlive the cache.
  Env* env = nullptr;
};

struct CacheStats {
  uint64_t hits = 0;
  uint64_t misses = 0;
  uint64_t corrupt = 0;         // blocks that failed verification (deleted)
  uint64_t write_failures = 0;  // puts the disk refused (not errors to the reader)
  uint64_t evictions = 0;
  uint64_t bytes_used = 0;      // this process's estimate of the directory's size
  uint64_t writes_skipped = 0;  // puts not attempted while backing off after write failures
  uint64_t direct_reads = 0;    // hits read with O_DIRECT, past the page cache (get_file_into)
};

class BlockCache {
 public:
  // Fails only if the directory cannot be created or used at all (the message names it and the
  // fix). Does not scan existing blocks before returning: that happens in the background.
  static Result<std::unique_ptr<BlockCache>> open(CacheOptions options,
                                                  std::shared_ptr<CacheDisk> disk = posix_disk());
  virtual ~BlockCache() = default;

  // The verified bytes of the block, or nullopt (absent, or corrupt and now deleted).
  virtual std::optional<std::string> get(std::string_view content_id, uint64_t index) = 0;
  // The same verified bytes, read into out[0, length) (memory the caller lends: a block buffer
  // pool's, reader/block_buffers.h). True only for a good block of exactly `length` bytes; a
  // missing, corrupt (deleted, as by get()) or differently long block is false, counted as get()
  // counts it. The default reads through get().
  virtual bool get_into(std::string_view content_id, uint64_t index, char* out, size_t length) {
    std::optional<std::string> hit = get(content_id, index);
    if (!hit || hit->size() != length) return false;
    std::memcpy(out, hit->data(), length);
    return true;
  }
  // get_into, with the block's whole file read into `file` (`capacity` bytes the caller lends):
  // its data lands at file + block_file::kHeaderSize. Memory aligned to
  // CacheDisk::kDirectReadAlign, with room for the file rounded up to it, lets a file the page
  // cache does not hold be read straight into it (CacheDisk::read_file_into): no kernel copy, no
  // page-cache pages. Checked as get_into checks. The default reads through get_into.
  virtual bool get_file_into(std::string_view content_id, uint64_t index, char* file, size_t capacity,
                             size_t length);
  // Bytes [offset, offset + length) of the block, read into `out` without checking them against
  // the block's checksum (its header is checked: key, index, length): for a caller that checks
  // what it reads itself, where reading and checksumming the whole block for a part of it would
  // double the work (the Xet chunk cache checks every chunk's BLAKE3 hash). False when the
  // block is absent or does not hold those bytes; counted as a hit or a miss.
  virtual bool read_part(std::string_view content_id, uint64_t index, uint64_t offset, char* out, size_t length) = 0;
  // Stores the block; failures are counted, never reported.
  virtual void put(std::string_view content_id, uint64_t index, std::string_view data) = 0;
  // Deletes the block if present (a file whose content failed its hash: its blocks must not be
  // served again).
  virtual void remove(std::string_view content_id, uint64_t index) = 0;
  virtual CacheStats stats() const = 0;
  // Evicts now until the directory fits the budget (normally done in the background on put).
  virtual void enforce_budget() = 0;
};

}  // namespace hubfs
