// Whether a read of an hf:// file (stack/hub_file.h) can be served without the network: then it
// runs on the caller's own thread even where the caller must stay interruptible (Python's main
// thread, which a Ctrl-C reaches). Handing such a read to a helper thread cost a thread and two
// wake-ups per read, several milliseconds each on a loaded machine, for what the disk cache or the
// memory tier answers in microseconds. A read that may wait on the Hub still goes to a helper,
// so a Ctrl-C ends the wait at once.
//
// The guess decides only which thread runs the read, never what it returns: the read itself is
// the reader's as always (its checks, epochs and refusals). A guess proved wrong (the block left
// the caches between the look and the read) costs a read that cannot be interrupted, bounded by
// the session's read timeout.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <mutex>
#include <set>
#include <string>

#include "stack/hub_file.h"

namespace hubfs {

// The block a handle's last read ended in (most likely still in the memory tier: the reads of
// one HDF5 open, say, fall in its file's first block). Thread-safe; a stale value only makes a
// guess wrong.
class RecentBlock {
 public:
  static constexpr uint64_t kNone = UINT64_MAX;
  uint64_t get() const { return index_.load(std::memory_order_relaxed); }
  // After a read of [offset, offset + len) of `file` that succeeded.
  void served(const HubFile& file, uint64_t offset, size_t len);

 private:
  std::atomic<uint64_t> index_{kNone};
};

// Blocks beyond this many in one read are not looked up one by one: such a read is long anyway,
// and runs on a helper.
constexpr uint64_t kMaxLocalProbeBlocks = 16;

// True when [offset, offset + len) of `file` needs no block from the Hub: nothing to read (empty,
// or at or past the end), or every block of it is `recent`, in the session's memory tier, or in
// its disk cache (a look at each block file's header).
bool reads_locally(const HubFile& file, uint64_t offset, size_t len, uint64_t recent = RecentBlock::kNone);

// What one session's FileSystem can look up without a request: directories whose listings were
// found stored in the cache directory at the session's commit (fs/listing_cache.h) once (from
// then on the FileSystem holds them: a pinned commit's listings never change), and the names on
// the way to each file opened before (a name never leaves its directory in a pinned view, so a
// lookup finds it again without listing that directory). Thread-safe.
class ListedDirs {
 public:
  // True when looking `path` up (a repo path, no leading '/') lists nothing from the Hub: each
  // directory on the way either holds the next name from an earlier open, or is stored. Asks the
  // session's FileSystem first (FileSystem::finds_without_listing: the first file and its
  // directory's listing, known since the session was built); reads each other directory's stored
  // listing the first time it is asked about.
  bool opens_locally(const RepoSession& session, const std::string& path);
  // `path` was opened: it and every directory above it are names its session finds again.
  void opened(const std::string& path);

 private:
  std::mutex mu_;  // a leaf: guards known_ and walked_
  std::set<std::string> known_;   // directories whose listing is stored
  std::set<std::string> walked_;  // paths an open passed through (directories and files)
};

}  // namespace hubfs
