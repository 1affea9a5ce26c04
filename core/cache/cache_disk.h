// The one seam between the block cache and the disk. The cache does all its file work through
// CacheDisk, so tests can inject ENOSPC, permission errors, torn writes and flipped bits.
#pragma once

#include <cstdint>
#include <cstring>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "common/status.h"

namespace hubfs {

struct DiskEntry {
  std::string path;  // full path
  uint64_t size = 0;
  int64_t mtime_ns = 0;  // the cache's recency clock (hits touch it, at most once a minute)
};

// A file read as its first bytes (a header) and the rest, in separate strings.
struct SplitFile {
  std::string head;
  std::string rest;
};

class CacheDisk {
 public:
  virtual ~CacheDisk() = default;
  virtual Status make_dirs(const std::string& path, unsigned mode) = 0;
  // Reads a whole file of at most max_bytes (larger: kCorrupt). Missing: kNotFound.
  virtual Result<std::string> read_file(const std::string& path, uint64_t max_bytes) = 0;
  // read_file, split after head_bytes (head is shorter only if the file is), so a caller that
  // strips a header never moves the data. The POSIX disk reads both parts with one readv.
  virtual Result<SplitFile> read_file_split(const std::string& path, uint64_t head_bytes,
                                            uint64_t max_bytes) {
    Result<std::string> whole = read_file(path, max_bytes);
    if (!whole.ok()) return whole.status();
    SplitFile split;
    split.head = whole->substr(0, head_bytes);
    if (whole->size() > head_bytes) split.rest = whole->substr(head_bytes);
    return split;
  }
  // Reads a file's first head_len bytes into `head` and its bytes [offset, offset + length) into
  // `out` (both must be there: a shorter file is kCorrupt); returns the file's size. For a reader
  // that needs part of a file and checks it itself. The POSIX disk opens the file once.
  virtual Result<uint64_t> read_part(const std::string& path, char* head, size_t head_len, uint64_t offset,
                                     char* out, size_t length) {
    Result<std::string> whole = read_file(path, UINT64_MAX);
    if (!whole.ok()) return whole.status();
    if (whole->size() < head_len || offset > whole->size() || whole->size() - offset < length) {
      return Corrupt(path + " is shorter than the part asked for");
    }
    std::memcpy(head, whole->data(), head_len);
    std::memcpy(out, whole->data() + offset, length);
    return static_cast<uint64_t>(whole->size());
  }
  // Reads a whole file of at most `capacity` bytes (larger: kCorrupt; missing: kNotFound) into
  // `buffer`, memory the caller lends. When the buffer is aligned to kDirectReadAlign, holds the
  // file rounded up to that, and the page cache holds none of the file, the POSIX disk reads it
  // with O_DIRECT, straight into the buffer: a read through the page cache costs the kernel a
  // copy and fresh pages for bytes the caller keeps anyway (docs/benchmarks.md, "Disk-tier reads
  // straight into the block buffers"). Otherwise, or where the file system refuses direct I/O,
  // an ordinary read. Bytes past the file's end in the buffer are unspecified.
  struct ReadInto {
    uint64_t size = 0;    // the file's bytes now at the start of the buffer
    bool direct = false;  // read with O_DIRECT
  };
  static constexpr size_t kDirectReadAlign = 4096;
  virtual Result<ReadInto> read_file_into(const std::string& path, char* buffer, size_t capacity) {
    Result<std::string> whole = read_file(path, capacity);
    if (!whole.ok()) return whole.status();
    std::memcpy(buffer, whole->data(), whole->size());
    return ReadInto{whole->size(), false};
  }
  // Creates a fresh file (O_EXCL) and writes all of head, then all of body, to it (two pieces so
  // a block file's header and its data, a slice of a response, need no copy into one buffer).
  virtual Status write_new_file(const std::string& path, std::string_view head, std::string_view body) = 0;
  Status write_new_file(const std::string& path, std::string_view data) { return write_new_file(path, data, {}); }
  virtual Status rename(const std::string& from, const std::string& to) = 0;  // atomic replace
  virtual Status remove(const std::string& path) = 0;
  virtual Status touch(const std::string& path) = 0;  // set mtime to now
  // Regular files under dir, recursively.
  virtual Result<std::vector<DiskEntry>> list_files(const std::string& dir) = 0;
};

// The real disk (POSIX calls).
std::shared_ptr<CacheDisk> posix_disk();

struct PosixDiskOptions {
  // fdatasync each new file before it is renamed into place. Off by default: a block torn by a
  // crash fails its length/checksum check and costs one re-fetch, while a sync per block costs
  // a disk flush on every cache fill (bench_cache_checksum measures both).
  bool sync_data = false;
};
std::shared_ptr<CacheDisk> posix_disk(PosixDiskOptions options);

}  // namespace hubfs
