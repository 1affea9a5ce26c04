// CacheDisk on POSIX calls. Every call retries EINTR and finishes short reads and writes; every
// descriptor is O_CLOEXEC so a fork+exec elsewhere in the process never inherits cache files.
#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <cstring>

#include "cache/cache_disk.h"

namespace hubfs {
namespace {

// The cache tree is <dir>/blocks/<shard>/<file>; anything deeper is not ours, and a bound keeps
// a pathological tree from exhausting descriptors or stack.
constexpr int kMaxListDepth = 8;

Status errno_status(const char* op, const std::string& path, int err) {
  std::string message = std::string(op) + " " + path + ": " + std::strerror(err);
  switch (err) {
    case ENOENT:
      return NotFound(std::move(message));
    case ELOOP:  // a symlink where a block belongs (opened O_NOFOLLOW): not a block, remove it
      return Corrupt(std::move(message));
    case EACCES:
    case EPERM:
    case EROFS:
      return PermissionDenied(std::move(message));  // all three: "may not write here"
    default:
      return IoError(std::move(message));
  }
}

class Fd {
 public:
  explicit Fd(int fd) : fd_(fd) {}
  ~Fd() {
    if (fd_ >= 0) ::close(fd_);
  }
  Fd(const Fd&) = delete;
  Fd& operator=(const Fd&) = delete;
  Fd& operator=(Fd&& other) noexcept {
    if (this != &other) {
      if (fd_ >= 0) ::close(fd_);
      fd_ = other.fd_;
      other.fd_ = -1;
    }
    return *this;
  }
  int get() const { return fd_; }
  // Closes now and reports the error: some filesystems (NFS) only report write errors here.
  int close() {
    int rc = ::close(fd_);
    fd_ = -1;
    return rc;
  }

 private:
  int fd_;
};

int open_retrying(const char* path, int flags, mode_t mode = 0) {
  int fd;
  do {
    fd = ::open(path, flags | O_CLOEXEC, mode);
  } while (fd < 0 && errno == EINTR);
  return fd;
}

// Opens a file of the cache for reading and returns its size in *size. O_NONBLOCK: opening a FIFO
// (or a device) planted where a block belongs must not block a disk thread; O_NOFOLLOW: nor may a
// symlink lead elsewhere. Both are then refused: only a regular file is opened.
Status open_regular(const std::string& path, Fd* fd, uint64_t* size) {
  *fd = Fd(open_retrying(path.c_str(), O_RDONLY | O_NONBLOCK | O_NOFOLLOW));
  if (fd->get() < 0) return errno_status("opening", path, errno);
  struct stat st;
  if (::fstat(fd->get(), &st) != 0) return errno_status("stat", path, errno);
  if (!S_ISREG(st.st_mode)) return Corrupt(path + " is not a regular file");
  *size = static_cast<uint64_t>(st.st_size);
  return Status::Ok();
}

// The alignment O_DIRECT needs of an open file's buffer and of its offsets and lengths
// (statx's STATX_DIOALIGN, Linux 6.1); 0 where the file system takes no direct I/O or does not
// say. Only alignments a kDirectReadAlign buffer meets count.
size_t direct_io_align(int fd) {
#ifdef STATX_DIOALIGN
  struct statx stx;
  if (::statx(fd, "", AT_EMPTY_PATH, STATX_DIOALIGN, &stx) != 0 || !(stx.stx_mask & STATX_DIOALIGN)) return 0;
  const size_t mem = stx.stx_dio_mem_align, offset = stx.stx_dio_offset_align;
  if (mem == 0 || offset == 0 || mem > CacheDisk::kDirectReadAlign || offset > CacheDisk::kDirectReadAlign) return 0;
  return std::max(mem, offset);
#else
  (void)fd;
  return 0;
#endif
}

// Whether the page cache holds none of the open file's pages, clean, dirty or under writeback
// (cachestat, Linux 6.5; not on older headers, so its number and structs are spelled here). False
// when the kernel cannot say: then the file is read as before, through the page cache. A file
// the page cache holds is cheaper read from there (no device read; a direct read of dirty pages
// would wait for their writeback first).
bool page_cache_holds_none(int fd) {
#if defined(__linux__) && (defined(__x86_64__) || defined(__aarch64__))
  constexpr long kCachestat = 451;  // the same on both (the unified syscall table)
  struct {
    uint64_t off, len;
  } range = {0, 0};  // len 0: to the end of the file
  struct {
    uint64_t nr_cache, nr_dirty, nr_writeback, nr_evicted, nr_recently_evicted;
  } stat = {};
  if (::syscall(kCachestat, fd, &range, &stat, 0) != 0) return false;
  return stat.nr_cache == 0 && stat.nr_dirty == 0 && stat.nr_writeback == 0;
#else
  (void)fd;
  return false;
#endif
}

class PosixDisk final : public CacheDisk {
 public:
  explicit PosixDisk(PosixDiskOptions options) : options_(options) {}

  Status make_dirs(const std::string& path, unsigned mode) override {
    if (path.empty()) return InvalidArgument("empty directory path");
    // Create each missing component in turn (mkdir -p), leaving existing ones as they are.
    for (size_t pos = 1; pos <= path.size(); ++pos) {
      if (pos != path.size() && path[pos] != '/') continue;
      std::string prefix = path.substr(0, pos);
      if (::mkdir(prefix.c_str(), mode) == 0) continue;
      int err = errno;
      struct stat st;
      if (err == EEXIST && ::stat(prefix.c_str(), &st) == 0 && S_ISDIR(st.st_mode)) continue;
      return errno_status("creating directory", prefix, err);
    }
    return Status::Ok();
  }

  Result<std::string> read_file(const std::string& path, uint64_t max_bytes) override {
    Fd fd(-1);
    uint64_t size = 0;
    if (Status s = open_regular(path, &fd, &size); !s.ok()) return s;
    if (size > max_bytes) return Corrupt(path + " is larger than any block");
    std::string data(static_cast<size_t>(size), '\0');
    size_t done = 0;
    while (done < data.size()) {  // normally one read; loops only on signals or a short read
      ssize_t n = ::read(fd.get(), data.data() + done, data.size() - done);
      if (n < 0 && errno == EINTR) continue;
      if (n < 0) return errno_status("reading", path, errno);
      if (n == 0) break;  // truncated under us: the caller's length check will reject it
      done += static_cast<size_t>(n);
    }
    data.resize(done);
    return data;
  }

  Result<uint64_t> read_part(const std::string& path, char* head, size_t head_len, uint64_t offset, char* out,
                             size_t length) override {
    Fd fd(-1);
    uint64_t size = 0;
    if (Status s = open_regular(path, &fd, &size); !s.ok()) return s;
    auto pread_exactly = [&](char* p, size_t n, uint64_t at) -> bool {
      while (n > 0) {
        ssize_t r = ::pread(fd.get(), p, n, static_cast<off_t>(at));
        if (r < 0 && errno == EINTR) continue;
        if (r <= 0) return false;
        p += r;
        n -= static_cast<size_t>(r);
        at += static_cast<uint64_t>(r);
      }
      return true;
    };
    if (!pread_exactly(head, head_len, 0) || !pread_exactly(out, length, offset)) {
      return Corrupt(path + " is shorter than the part asked for, or could not be read");
    }
    return size;
  }

  Result<ReadInto> read_file_into(const std::string& path, char* buffer, size_t capacity) override {
    Fd fd(-1);
    uint64_t size = 0;
    if (Status s = open_regular(path, &fd, &size); !s.ok()) return s;
    if (size > capacity) return Corrupt(path + " is larger than any block");
    if (size > 0 && reinterpret_cast<uintptr_t>(buffer) % kDirectReadAlign == 0 && page_cache_holds_none(fd.get())) {
      const size_t align = direct_io_align(fd.get());
      const size_t rounded = align ? (size + align - 1) / align * align : 0;
      if (align && rounded <= capacity && ::fcntl(fd.get(), F_SETFL, O_RDONLY | O_NONBLOCK | O_DIRECT) == 0) {
        ssize_t n;
        do {
          n = ::pread(fd.get(), buffer, rounded, 0);
        } while (n < 0 && errno == EINTR);
        if (n >= 0 && static_cast<uint64_t>(n) == size) return ReadInto{size, true};
        // Refused (EINVAL: an alignment the file system did not report) or short (a file cut
        // under us): read it again the ordinary way, which reports what it finds.
        if (::fcntl(fd.get(), F_SETFL, O_RDONLY | O_NONBLOCK) != 0) return errno_status("reading", path, errno);
      }
    }
    size_t done = 0;
    while (done < size) {  // normally one read; loops only on signals or a short read
      ssize_t n = ::pread(fd.get(), buffer + done, size - done, static_cast<off_t>(done));
      if (n < 0 && errno == EINTR) continue;
      if (n < 0) return errno_status("reading", path, errno);
      if (n == 0) break;  // truncated under us: the caller's length check will reject it
      done += static_cast<size_t>(n);
    }
    return ReadInto{done, false};
  }

  Result<SplitFile> read_file_split(const std::string& path, uint64_t head_bytes,
                                    uint64_t max_bytes) override {
    Fd fd(-1);
    uint64_t size = 0;
    if (Status s = open_regular(path, &fd, &size); !s.ok()) return s;
    if (size > max_bytes) return Corrupt(path + " is larger than any block");
    SplitFile split;
    split.head.resize(static_cast<size_t>(std::min(size, head_bytes)));
    split.rest.resize(static_cast<size_t>(size - split.head.size()));
    struct iovec iov[2] = {{split.head.data(), split.head.size()},
                           {split.rest.data(), split.rest.size()}};
    size_t done = 0;
    while (done < size) {  // normally one readv; loops only on signals or a short read
      // Skip what is already read: whole iovecs first, then into the current one.
      int first = done >= iov[0].iov_len ? 1 : 0;
      size_t into = first == 0 ? done : done - split.head.size();
      struct iovec left[2] = {iov[0], iov[1]};
      left[first].iov_base = static_cast<char*>(iov[first].iov_base) + into;
      left[first].iov_len = iov[first].iov_len - into;
      ssize_t n = ::readv(fd.get(), left + first, 2 - first);
      if (n < 0 && errno == EINTR) continue;
      if (n < 0) return errno_status("reading", path, errno);
      if (n == 0) break;  // truncated under us
      done += static_cast<size_t>(n);
    }
    if (done < size) {  // keep what was read; the caller's length check rejects it
      split.head.resize(std::min<size_t>(done, split.head.size()));
      split.rest.resize(done - split.head.size());
    }
    return split;
  }

  Status write_new_file(const std::string& path, std::string_view head, std::string_view body) override {
    Fd fd(open_retrying(path.c_str(), O_WRONLY | O_CREAT | O_EXCL, 0600));
    if (fd.get() < 0) return errno_status("creating", path, errno);
    std::string_view pieces[2] = {head, body};
    size_t first = 0;  // the first piece not yet written whole
    while (first < 2) {
      if (pieces[first].empty()) {
        ++first;
        continue;
      }
      iovec iov[2];
      int count = 0;
      for (size_t i = first; i < 2; ++i)
        if (!pieces[i].empty()) iov[count++] = iovec{const_cast<char*>(pieces[i].data()), pieces[i].size()};
      ssize_t n = ::writev(fd.get(), iov, count);
      if (n < 0 && errno == EINTR) continue;
      if (n < 0) return errno_status("writing", path, errno);
      if (n == 0) return errno_status("writing", path, ENOSPC);  // no progress: treat as full
      for (size_t left = static_cast<size_t>(n); left > 0 && first < 2; ++first) {
        const size_t take = std::min(left, pieces[first].size());
        pieces[first].remove_prefix(take);
        left -= take;
        if (!pieces[first].empty()) break;
      }
    }
    if (options_.sync_data) {
      int rc;
      do {
        rc = ::fdatasync(fd.get());
      } while (rc != 0 && errno == EINTR);
      if (rc != 0) return errno_status("syncing", path, errno);
    }
    if (fd.close() != 0 && errno != EINTR) return errno_status("closing", path, errno);
    return Status::Ok();
  }

  Status rename(const std::string& from, const std::string& to) override {
    if (::rename(from.c_str(), to.c_str()) != 0) return errno_status("renaming", from, errno);
    return Status::Ok();
  }

  Status remove(const std::string& path) override {
    if (::unlink(path.c_str()) != 0) return errno_status("removing", path, errno);
    return Status::Ok();
  }

  Status touch(const std::string& path) override {
    if (::utimensat(AT_FDCWD, path.c_str(), nullptr, 0) != 0)
      return errno_status("touching", path, errno);
    return Status::Ok();
  }

  Result<std::vector<DiskEntry>> list_files(const std::string& dir) override {
    std::vector<DiskEntry> out;
    int fd = open_retrying(dir.c_str(), O_RDONLY | O_DIRECTORY);
    if (fd < 0) return errno_status("listing", dir, errno);
    Status s = list_into(fd, dir, 0, out);
    if (!s.ok()) return s;
    return out;
  }

 private:
  // Takes ownership of dir_fd.
  Status list_into(int dir_fd, const std::string& dir, int depth, std::vector<DiskEntry>& out) {
    DIR* d = ::fdopendir(dir_fd);
    if (d == nullptr) {
      int err = errno;
      ::close(dir_fd);
      return errno_status("listing", dir, err);
    }
    Status status;
    while (true) {
      errno = 0;
      struct dirent* e = ::readdir(d);
      if (e == nullptr) {
        if (errno != 0) status = errno_status("listing", dir, errno);
        break;
      }
      std::string_view name = e->d_name;
      if (name == "." || name == "..") continue;
      struct stat st;
      // Entries may vanish between readdir and stat (another process evicting): skip them.
      if (::fstatat(::dirfd(d), e->d_name, &st, AT_SYMLINK_NOFOLLOW) != 0) continue;
      std::string path = dir + "/" + e->d_name;
      if (S_ISDIR(st.st_mode)) {
        if (depth + 1 >= kMaxListDepth) continue;
        int sub = ::openat(::dirfd(d), e->d_name, O_RDONLY | O_DIRECTORY | O_CLOEXEC | O_NOFOLLOW);
        if (sub < 0) continue;
        // Best effort below the top: a subdirectory we cannot read is skipped, not fatal.
        (void)list_into(sub, path, depth + 1, out);
      } else if (S_ISREG(st.st_mode)) {
        int64_t mtime_ns =
            static_cast<int64_t>(st.st_mtim.tv_sec) * 1000000000 + st.st_mtim.tv_nsec;
        out.push_back(DiskEntry{std::move(path), static_cast<uint64_t>(st.st_size), mtime_ns});
      }
    }
    ::closedir(d);
    return status;
  }

  PosixDiskOptions options_;
};

}  // namespace

std::shared_ptr<CacheDisk> posix_disk() { return posix_disk(PosixDiskOptions{}); }
std::shared_ptr<CacheDisk> posix_disk(PosixDiskOptions options) {
  return std::make_shared<PosixDisk>(options);
}

}  // namespace hubfs
