// What the FUSE adapter (fuse/fuse_ops.cc) calls: one repo's FileSystem (fs/filesystem.h) or
// the whole-Hub namespace above many of them (fs/hub_namespace.h). Every call is thread-safe;
// none touches FUSE, so both are unit-tested without root or /dev/fuse.
#pragma once

#include <sys/stat.h>
#include <sys/statvfs.h>

#include <cerrno>
#include <cstdint>
#include <string>
#include <variant>
#include <vector>

#include "net/byte_range.h"
#include "reader/block_bytes.h"
#include "reader/hint_requests.h"

namespace hubfs {

// A failed operation: the errno for the kernel and, for upstream failures worth a log line, why.
struct FsError {
  int code = EIO;
  std::string reason;  // empty when the errno says it all (ENOENT, EROFS ...)
};

// An error the errno says all of (ENOENT, ENOTDIR ...).
inline FsError errno_only(int code) { return FsError{code, {}}; }

template <typename T>
class FsResult {
 public:
  FsResult(T value) : v_(std::move(value)) {}        // NOLINT: implicit by design
  FsResult(FsError error) : v_(std::move(error)) {}  // NOLINT
  bool ok() const { return std::holds_alternative<T>(v_); }
  T& value() { return std::get<T>(v_); }
  const FsError& error() const { return std::get<FsError>(v_); }

 private:
  std::variant<T, FsError> v_;
};

using Ino = uint64_t;
inline constexpr Ino kRootIno = 1;

// The kernel may keep an answer about a pinned commit for as long as it likes: a day.
inline constexpr double kStableTimeoutS = 86400;

struct EntryReply {
  Ino ino = 0;  // 0: the name does not exist (a negative entry the kernel may cache)
  struct stat attr {};
  // How long the kernel may keep this answer (positive or negative).
  double timeout_s = kStableTimeoutS;
};

struct DirEntry {
  std::string name;
  Ino ino = 0;
  bool is_dir = false;
  uint64_t next_offset = 0;  // where a readdir continuing after this entry starts
};

struct OpenReply {
  uint64_t handle = 0;
  // Whether the kernel may keep the pages it cached of this file on an earlier open.
  bool keep_cache = true;
};

class FsApi {
 public:
  virtual ~FsApi() = default;

  virtual FsResult<EntryReply> lookup(Ino parent, const std::string& name) = 0;
  virtual FsResult<struct stat> getattr(Ino ino) = 0;
  // Directory handles hold a snapshot of the listing.
  virtual FsResult<uint64_t> opendir(Ino ino) = 0;
  // Entries from `offset` on (0 = the start, then an entry's next_offset), "." and ".." first.
  virtual std::vector<DirEntry> readdir(uint64_t handle, uint64_t offset) = 0;
  virtual void releasedir(uint64_t handle) = 0;
  // flags as open(2): anything but read-only is EROFS.
  virtual FsResult<OpenReply> open(Ino ino, int flags) = 0;
  // The bytes [offset, offset + size) cut at end of file, as slices of cached blocks (no copy).
  virtual FsResult<std::vector<BlockBytes>> read(uint64_t handle, uint64_t offset, size_t size) = 0;
  virtual void release(uint64_t handle) = 0;
  // A range hint on an open file (include/hubfs/range_hint.h), its runs cut into requests as
  // `requests` says: EINVAL for a malformed one.
  virtual FsResult<uint64_t> hint(uint64_t handle, const std::vector<ByteRange>& ranges, HintRequests requests) = 0;
  virtual FsResult<std::string> getxattr(Ino ino, const std::string& name) = 0;
  // NUL-separated names.
  virtual FsResult<std::string> listxattr(Ino ino) = 0;
  virtual struct statvfs statfs() = 0;

  // How long the kernel may keep attributes.
  virtual double attr_timeout_s() const = 0;
  // Whether the kernel may cache directory `ino`'s listing (false where entries appear later).
  virtual bool listing_is_stable(Ino ino) const = 0;
};

}  // namespace hubfs
