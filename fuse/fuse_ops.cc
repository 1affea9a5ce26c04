#include "fuse_ops.h"

#include <sys/uio.h>

#include <atomic>
#include <chrono>
#include <cerrno>
#include <cstring>
#include <vector>

#include "common/log.h"
#include "fs/fs_api.h"
#include "hubfs/range_hint.h"

namespace hubfs {
namespace {

FsApi* fs(fuse_req_t req) { return static_cast<FsApi*>(fuse_req_userdata(req)); }

// The kernel's read requests and the bytes replied to them: their mean is the reply size the
// kernel actually asks for (max_pages and read_ahead_kb decide it; docs/benchmarks.md).
std::atomic<uint64_t> g_reads{0};
std::atomic<uint64_t> g_read_bytes{0};

// Replies with the error, logging upstream failures (an errno alone, like ENOENT, is routine).
void reply_error(fuse_req_t req, const FsError& e) {
  if (!e.reason.empty()) log_warning(e.reason);
  fuse_reply_err(req, e.code);
}

void reply_erofs(fuse_req_t req) {
  fuse_reply_err(req, EROFS);
}

// The handlers, named as libfuse names them: in a namespace of their own, so that open, read
// and getxattr here never hide the C library's from a file compiled in the same unity batch.
namespace ops {

void lookup(fuse_req_t req, fuse_ino_t parent, const char* name) {
  auto r = fs(req)->lookup(parent, name);
  if (!r.ok()) return reply_error(req, r.error());
  fuse_entry_param e{};
  e.attr_timeout = e.entry_timeout = r.value().timeout_s;
  e.ino = r.value().ino;  // 0 with a timeout: a negative entry
  if (e.ino != 0) {
    e.generation = 1;
    e.attr = r.value().attr;
  }
  fuse_reply_entry(req, &e);
}

void getattr(fuse_req_t req, fuse_ino_t ino, fuse_file_info*) {
  auto r = fs(req)->getattr(ino);
  if (!r.ok()) return reply_error(req, r.error());
  fuse_reply_attr(req, &r.value(), fs(req)->attr_timeout_s());
}

void opendir(fuse_req_t req, fuse_ino_t ino, fuse_file_info* fi) {
  auto r = fs(req)->opendir(ino);
  if (!r.ok()) return reply_error(req, r.error());
  fi->fh = r.value();
  // A pinned commit's directory never changes: the kernel may cache its listing. The whole-Hub
  // namespace's own directories gain entries as repos are touched, and a --follow mount's
  // change with the commit: listed afresh each time (from the daemon's memory).
  const bool stable = fs(req)->listing_is_stable(ino);
  fi->cache_readdir = stable ? 1 : 0;
  fi->keep_cache = stable ? 1 : 0;
  fuse_reply_open(req, fi);
}

void readdir(fuse_req_t req, fuse_ino_t, size_t size, off_t off, fuse_file_info* fi) {
  std::vector<char> buf(size);
  size_t used = 0;
  for (const DirEntry& e : fs(req)->readdir(fi->fh, static_cast<uint64_t>(off))) {
    struct stat st {};
    st.st_ino = e.ino;
    st.st_mode = e.is_dir ? S_IFDIR : S_IFREG;
    size_t need = fuse_add_direntry(req, buf.data() + used, size - used, e.name.c_str(), &st,
                                    static_cast<off_t>(e.next_offset));
    if (need > size - used) break;
    used += need;
  }
  fuse_reply_buf(req, buf.data(), used);
}

void releasedir(fuse_req_t req, fuse_ino_t, fuse_file_info* fi) {
  fs(req)->releasedir(fi->fh);
  fuse_reply_err(req, 0);
}

void open(fuse_req_t req, fuse_ino_t ino, fuse_file_info* fi) {
  auto r = fs(req)->open(ino, fi->flags);
  if (!r.ok()) return reply_error(req, r.error());
  fi->fh = r.value().handle;
  // The content under this inode can never change (pinned commit, content-keyed): pages the
  // kernel cached on an earlier open stay valid, so a second read never reaches us. The one
  // exception: a file whose content failed verification since (its pages may be corrupt).
  fi->keep_cache = r.value().keep_cache ? 1 : 0;
  fuse_reply_open(req, fi);
}

void read(fuse_req_t req, fuse_ino_t, size_t size, off_t off, fuse_file_info* fi) {
  const bool debug = log_enabled(LogLevel::kDebug);
  const auto t0 = debug ? std::chrono::steady_clock::now() : std::chrono::steady_clock::time_point{};
  auto r = fs(req)->read(fi->fh, static_cast<uint64_t>(off), size);
  if (debug)
    log_debug("kernel read fh " + std::to_string(fi->fh) + " at " + std::to_string(off) + " +" + std::to_string(size) +
              ": " + std::to_string(std::chrono::duration_cast<std::chrono::microseconds>(
                                         std::chrono::steady_clock::now() - t0).count()) + " us");
  if (!r.ok()) return reply_error(req, r.error());
  // The reply is written straight from the cached blocks with one writev (no copy into a reply
  // buffer); the slices keep them alive until it returns. Not fuse_reply_data: libfuse 3.14
  // copies a reply of more than one piece into a fresh buffer first (fuse_send_data_iov_fallback),
  // and a request that spans two blocks, as most do, is two pieces.
  const auto& parts = r.value();
  size_t bytes = 0;
  for (const BlockBytes& p : parts) bytes += p.size();
  g_reads.fetch_add(1, std::memory_order_relaxed);
  g_read_bytes.fetch_add(bytes, std::memory_order_relaxed);
  if (parts.empty()) return (void)fuse_reply_buf(req, nullptr, 0);
  std::vector<iovec> iov(parts.size());
  for (size_t i = 0; i < parts.size(); ++i) {
    iov[i].iov_base = const_cast<char*>(parts[i].data());
    iov[i].iov_len = parts[i].size();
  }
  fuse_reply_iov(req, iov.data(), static_cast<int>(iov.size()));
}

void release(fuse_req_t req, fuse_ino_t, fuse_file_info* fi) {
  fs(req)->release(fi->fh);
  fuse_reply_err(req, 0);
}

// The xattr protocol: size 0 asks for the length; too small a buffer is ERANGE.
void reply_xattr(fuse_req_t req, const FsResult<std::string>& r, size_t size) {
  if (!r.ok()) return reply_error(req, r.error());
  const std::string& value = const_cast<FsResult<std::string>&>(r).value();
  if (size == 0) return (void)fuse_reply_xattr(req, value.size());
  if (size < value.size()) return (void)fuse_reply_err(req, ERANGE);
  fuse_reply_buf(req, value.data(), value.size());
}

// Range hints (include/hubfs/range_hint.h). Restricted FUSE ioctls carry exactly the bytes the
// command's size field names, so the kernel hands us the whole struct.
void ioctl(fuse_req_t req, fuse_ino_t, unsigned int cmd, void*, fuse_file_info* fi, unsigned flags,
           const void* in_buf, size_t in_bufsz, size_t) {
  if (cmd != HUBFS_IOC_HINT) return (void)fuse_reply_err(req, ENOTTY);
  if (flags & FUSE_IOCTL_COMPAT) return (void)fuse_reply_err(req, ENOSYS);  // 32-bit callers
  if (in_bufsz < sizeof(hubfs_hint)) return (void)fuse_reply_err(req, EINVAL);
  hubfs_hint hint;
  std::memcpy(&hint, in_buf, sizeof hint);
  if (hint.version != HUBFS_HINT_VERSION || hint.count == 0 || hint.count > HUBFS_HINT_MAX_RANGES)
    return (void)fuse_reply_err(req, EINVAL);
  std::vector<ByteRange> ranges(hint.count);
  for (uint32_t i = 0; i < hint.count; ++i) ranges[i] = ByteRange{hint.ranges[i].offset, hint.ranges[i].length};
  auto r = fs(req)->hint(fi->fh, ranges, hubfs::HintRequests::kSpread);
  if (!r.ok()) {
    if (!r.error().reason.empty()) log_debug(r.error().reason);  // the caller's mistake: not a warning
    return (void)fuse_reply_err(req, r.error().code);
  }
  fuse_reply_ioctl(req, 0, nullptr, 0);
}

void getxattr(fuse_req_t req, fuse_ino_t ino, const char* name, size_t size) {
  reply_xattr(req, fs(req)->getxattr(ino, name), size);
}

void listxattr(fuse_req_t req, fuse_ino_t ino, size_t size) {
  reply_xattr(req, fs(req)->listxattr(ino), size);
}

void statfs(fuse_req_t req, fuse_ino_t) {
  struct statvfs st = fs(req)->statfs();
  fuse_reply_statfs(req, &st);
}

void init(void*, fuse_conn_info* conn) {
  // One block per request, and room for many requests in flight: the parallelism that the
  // range fetcher turns into concurrent HTTP requests.
  conn->max_readahead = 16u << 20;  // the kernel still caps it at the mount's read_ahead_kb
  conn->max_background = 64;
  conn->congestion_threshold = 48;
}

}  // namespace ops
}  // namespace

KernelReadStats kernel_read_stats() {
  return KernelReadStats{g_reads.load(std::memory_order_relaxed), g_read_bytes.load(std::memory_order_relaxed)};
}

const fuse_lowlevel_ops& fuse_operations() {
  static const fuse_lowlevel_ops table = [] {
    fuse_lowlevel_ops o{};
    o.init = ops::init;
    o.lookup = ops::lookup;
    o.getattr = ops::getattr;
    o.opendir = ops::opendir;
    o.readdir = ops::readdir;
    o.releasedir = ops::releasedir;
    o.open = ops::open;
    o.read = ops::read;
    o.release = ops::release;
    o.getxattr = ops::getxattr;
    o.listxattr = ops::listxattr;
    o.statfs = ops::statfs;
    o.ioctl = ops::ioctl;
    // Read-only: everything that would change the tree answers EROFS.
    o.setattr = [](fuse_req_t r, fuse_ino_t, struct stat*, int, fuse_file_info*) { reply_erofs(r); };
    o.mknod = [](fuse_req_t r, fuse_ino_t, const char*, mode_t, dev_t) { reply_erofs(r); };
    o.mkdir = [](fuse_req_t r, fuse_ino_t, const char*, mode_t) { reply_erofs(r); };
    o.unlink = [](fuse_req_t r, fuse_ino_t, const char*) { reply_erofs(r); };
    o.rmdir = [](fuse_req_t r, fuse_ino_t, const char*) { reply_erofs(r); };
    o.symlink = [](fuse_req_t r, const char*, fuse_ino_t, const char*) { reply_erofs(r); };
    o.rename = [](fuse_req_t r, fuse_ino_t, const char*, fuse_ino_t, const char*, unsigned) { reply_erofs(r); };
    o.link = [](fuse_req_t r, fuse_ino_t, fuse_ino_t, const char*) { reply_erofs(r); };
    o.create = [](fuse_req_t r, fuse_ino_t, const char*, mode_t, fuse_file_info*) { reply_erofs(r); };
    o.write = [](fuse_req_t r, fuse_ino_t, const char*, size_t, off_t, fuse_file_info*) { reply_erofs(r); };
    o.setxattr = [](fuse_req_t r, fuse_ino_t, const char*, const char*, size_t, int) { reply_erofs(r); };
    o.removexattr = [](fuse_req_t r, fuse_ino_t, const char*) { reply_erofs(r); };
    return o;
  }();
  return table;
}

}  // namespace hubfs
