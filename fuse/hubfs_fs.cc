#include "hubfs_fs.h"

#include <sys/xattr.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <iostream>

#include "common/log.h"

namespace hubfs {

namespace {

constexpr const char* kShaAttr = "user.hubfs.sha256";
constexpr const char* kOidAttr = "user.hubfs.oid";
constexpr size_t kMaxRead = 1u << 20;  // the kernel never asks for more (max_pages 256)

HubFs* self(fuse_req_t req) { return static_cast<HubFs*>(fuse_req_userdata(req)); }

std::string_view base_name(std::string_view path) {
  auto slash = path.rfind('/');
  return slash == std::string_view::npos ? path : path.substr(slash + 1);
}

void reply_erofs(fuse_req_t req) { fuse_reply_err(req, EROFS); }

}  // namespace

HubFs::HubFs(HubClient& hub, RepoRef repo, BlockReader& reader, FsOptions options)
    : hub_(hub), repo_(std::move(repo)), reader_(reader), options_(options) {
  nodes_.emplace_back();  // inode 0 does not exist
  TreeEntry root;
  root.is_dir = true;
  add_node(std::move(root));  // inode 1 = FUSE_ROOT_ID
}

HubFs::Node* HubFs::node(fuse_ino_t ino) {
  std::shared_lock<std::shared_mutex> lock(nodes_mu_);
  if (ino == 0 || ino >= nodes_.size()) return nullptr;
  return nodes_[ino].get();
}

HubFs::Node* HubFs::add_node(TreeEntry entry) {
  auto n = std::make_unique<Node>();
  n->is_dir = entry.is_dir;
  if (!n->is_dir) {
    n->remote.path = entry.path;
    n->remote.content_id = entry.content_id();
    n->remote.size = entry.size;
    // Captures the client and the repo, never this HubFs: queued read-ahead may call it while
    // the mount shuts down, and the client outlives the reader (see BlockReader::shutdown).
    n->remote.locate = [hub = &hub_, repo = repo_, path = entry.path](bool refresh) {
      return hub->locate(repo, path, refresh);
    };
  }
  n->entry = std::move(entry);
  std::unique_lock<std::shared_mutex> lock(nodes_mu_);
  n->ino = nodes_.size();
  nodes_.push_back(std::move(n));
  return nodes_.back().get();
}

Status HubFs::ensure_listed(Node* dir) {
  std::lock_guard<std::mutex> lock(dir->list_mu);
  if (dir->listed) return Status::Ok();
  auto entries = hub_.list_dir(repo_, dir->entry.path);
  if (!entries.ok()) return entries.status();  // not remembered: the next access tries again
  for (auto& e : *entries) {
    std::string name(base_name(e.path));
    if (name.empty() || name == "." || name == ".." || dir->children.count(name)) continue;
    Node* child = add_node(std::move(e));
    dir->children.emplace(std::move(name), child->ino);
  }
  dir->listed = true;
  return Status::Ok();
}

struct stat HubFs::attributes(const Node& n) const {
  struct stat st {};
  st.st_ino = n.ino;
  st.st_uid = getuid();
  st.st_gid = getgid();
  st.st_mtim.tv_sec = st.st_ctim.tv_sec = st.st_atim.tv_sec = options_.mtime;
  if (n.is_dir) {
    st.st_mode = S_IFDIR | 0555;
    st.st_nlink = 2;
  } else {
    st.st_mode = S_IFREG | 0444;
    st.st_nlink = 1;
    st.st_size = static_cast<off_t>(n.entry.size);
    st.st_blocks = static_cast<blkcnt_t>((n.entry.size + 511) / 512);
  }
  st.st_blksize = static_cast<blksize_t>(reader_.options().block_size);
  return st;
}

void HubFs::reply_error(fuse_req_t req, const Status& status, const char* op, const Node* n) {
  log_warning(std::string(op) + " " + (n ? "/" + n->entry.path : std::string("?")) + ": " +
              status.message());
  fuse_reply_err(req, status.to_errno());
}

void HubFs::lookup(fuse_req_t req, fuse_ino_t parent, const char* name) {
  Node* dir = node(parent);
  if (!dir || !dir->is_dir) return (void)fuse_reply_err(req, ENOTDIR);
  Status st = ensure_listed(dir);
  if (!st.ok()) return reply_error(req, st, "listing", dir);
  fuse_entry_param e{};
  e.attr_timeout = e.entry_timeout = options_.entry_timeout_s;
  fuse_ino_t ino = 0;
  {
    std::lock_guard<std::mutex> lock(dir->list_mu);
    auto it = dir->children.find(name);
    if (it != dir->children.end()) ino = it->second;
  }
  if (ino == 0) {
    // ino 0 with a timeout is a negative entry: the kernel remembers the name does not exist
    // (HDF5 and Python probe for many files that are not there).
    return (void)fuse_reply_entry(req, &e);
  }
  e.ino = ino;
  e.generation = 1;
  e.attr = attributes(*node(ino));
  fuse_reply_entry(req, &e);
}

void HubFs::getattr(fuse_req_t req, fuse_ino_t ino) {
  Node* n = node(ino);
  if (!n) return (void)fuse_reply_err(req, ENOENT);
  struct stat st = attributes(*n);
  fuse_reply_attr(req, &st, options_.entry_timeout_s);
}

void HubFs::opendir(fuse_req_t req, fuse_ino_t ino, fuse_file_info* fi) {
  Node* dir = node(ino);
  if (!dir) return (void)fuse_reply_err(req, ENOENT);
  if (!dir->is_dir) return (void)fuse_reply_err(req, ENOTDIR);
  Status st = ensure_listed(dir);
  if (!st.ok()) return reply_error(req, st, "listing", dir);
  auto listing = std::make_unique<DirListing>();
  listing->entries.emplace_back(".", ino);
  listing->entries.emplace_back("..", ino);  // the kernel fixes up ".." itself
  {
    std::lock_guard<std::mutex> lock(dir->list_mu);
    for (auto& [name, child] : dir->children) listing->entries.emplace_back(name, child);
  }
  fi->fh = reinterpret_cast<uint64_t>(listing.release());
  fi->cache_readdir = 1;  // immutable: the kernel may cache the listing
  fi->keep_cache = 1;
  fuse_reply_open(req, fi);
}

void HubFs::readdir(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off, fuse_file_info* fi) {
  auto* listing = reinterpret_cast<DirListing*>(fi->fh);
  std::vector<char> buf(size);
  size_t used = 0;
  for (size_t i = static_cast<size_t>(off); i < listing->entries.size(); ++i) {
    const auto& [name, child] = listing->entries[i];
    struct stat st {};
    st.st_ino = child;
    Node* n = node(child);
    st.st_mode = (n && n->is_dir) ? S_IFDIR : S_IFREG;
    size_t need = fuse_add_direntry(req, buf.data() + used, size - used, name.c_str(), &st,
                                    static_cast<off_t>(i + 1));
    if (need > size - used) break;
    used += need;
  }
  fuse_reply_buf(req, buf.data(), used);
}

void HubFs::releasedir(fuse_req_t req, fuse_ino_t, fuse_file_info* fi) {
  delete reinterpret_cast<DirListing*>(fi->fh);
  fuse_reply_err(req, 0);
}

void HubFs::open(fuse_req_t req, fuse_ino_t ino, fuse_file_info* fi) {
  Node* n = node(ino);
  if (!n) return (void)fuse_reply_err(req, ENOENT);
  if (n->is_dir) return (void)fuse_reply_err(req, EISDIR);
  if ((fi->flags & O_ACCMODE) != O_RDONLY || (fi->flags & O_TRUNC)) return reply_erofs(req);
  auto* handle = new OpenFile{n, {}};
  fi->fh = reinterpret_cast<uint64_t>(handle);
  // The content under this inode can never change (pinned commit, content-keyed): pages the
  // kernel cached on an earlier open stay valid, so a second read never reaches us.
  fi->keep_cache = 1;
  fuse_reply_open(req, fi);
}

void HubFs::read(fuse_req_t req, fuse_ino_t, size_t size, off_t off, fuse_file_info* fi) {
  auto* handle = reinterpret_cast<OpenFile*>(fi->fh);
  size = std::min(size, kMaxRead * 16);
  auto slices = reader_.read_slices(handle->node->remote, static_cast<uint64_t>(off), size, &handle->state);
  if (!slices.ok()) {
    // Whatever went wrong upstream (a missing object, a timeout, a bad range), the file exists:
    // to the program reading it this is an I/O error.
    log_warning("reading /" + handle->node->entry.path + ": " + slices.status().message());
    return (void)fuse_reply_err(req, EIO);
  }
  // The reply is written straight from the cached blocks (no copy into a reply buffer); the
  // slices keep them alive until fuse_reply_data returns.
  const auto& parts = *slices;
  std::vector<char> storage(sizeof(fuse_bufvec) + sizeof(fuse_buf) * (parts.empty() ? 0 : parts.size() - 1));
  auto* bufv = reinterpret_cast<fuse_bufvec*>(storage.data());
  *bufv = FUSE_BUFVEC_INIT(0);
  bufv->count = parts.size();
  for (size_t i = 0; i < parts.size(); ++i) {
    bufv->buf[i] = fuse_buf{};
    bufv->buf[i].size = parts[i].size();
    bufv->buf[i].mem = const_cast<char*>(parts[i].data());
  }
  if (parts.empty()) return (void)fuse_reply_buf(req, nullptr, 0);
  fuse_reply_data(req, bufv, FUSE_BUF_NO_SPLICE);
}

void HubFs::release(fuse_req_t req, fuse_ino_t, fuse_file_info* fi) {
  delete reinterpret_cast<OpenFile*>(fi->fh);
  fuse_reply_err(req, 0);
}

void HubFs::getxattr(fuse_req_t req, fuse_ino_t ino, const char* name, size_t size) {
  Node* n = node(ino);
  if (!n) return (void)fuse_reply_err(req, ENOENT);
  std::string value;
  if (!n->is_dir && n->entry.lfs_sha256 && std::strcmp(name, kShaAttr) == 0) {
    value = *n->entry.lfs_sha256;
  } else if (!n->is_dir && !n->entry.lfs_sha256 && std::strcmp(name, kOidAttr) == 0) {
    value = n->entry.oid;
  } else {
    return (void)fuse_reply_err(req, ENODATA);
  }
  if (size == 0) return (void)fuse_reply_xattr(req, value.size());
  if (size < value.size()) return (void)fuse_reply_err(req, ERANGE);
  fuse_reply_buf(req, value.data(), value.size());
}

void HubFs::listxattr(fuse_req_t req, fuse_ino_t ino, size_t size) {
  Node* n = node(ino);
  if (!n) return (void)fuse_reply_err(req, ENOENT);
  std::string names;
  if (!n->is_dir) names = std::string(n->entry.lfs_sha256 ? kShaAttr : kOidAttr) + '\0';
  if (size == 0) return (void)fuse_reply_xattr(req, names.size());
  if (size < names.size()) return (void)fuse_reply_err(req, ERANGE);
  fuse_reply_buf(req, names.data(), names.size());
}

void HubFs::statfs(fuse_req_t req, fuse_ino_t) {
  struct statvfs st {};
  st.f_bsize = st.f_frsize = reader_.options().block_size;
  st.f_namemax = 255;
  std::shared_lock<std::shared_mutex> lock(nodes_mu_);
  st.f_files = nodes_.size();
  fuse_reply_statfs(req, &st);
}

const fuse_lowlevel_ops& HubFs::operations() {
  static const fuse_lowlevel_ops ops = [] {
    fuse_lowlevel_ops o{};
    o.init = [](void*, fuse_conn_info* conn) {
      // One block per request, and room for many requests in flight: the parallelism that the
      // range fetcher turns into concurrent HTTP requests.
      conn->max_readahead = 16u << 20;  // the kernel still caps it at the mount's read_ahead_kb
      conn->max_background = 64;
      conn->congestion_threshold = 48;
    };
    o.lookup = [](fuse_req_t r, fuse_ino_t p, const char* n) { self(r)->lookup(r, p, n); };
    o.getattr = [](fuse_req_t r, fuse_ino_t i, fuse_file_info*) { self(r)->getattr(r, i); };
    o.opendir = [](fuse_req_t r, fuse_ino_t i, fuse_file_info* f) { self(r)->opendir(r, i, f); };
    o.readdir = [](fuse_req_t r, fuse_ino_t i, size_t s, off_t o2, fuse_file_info* f) {
      self(r)->readdir(r, i, s, o2, f);
    };
    o.releasedir = [](fuse_req_t r, fuse_ino_t i, fuse_file_info* f) { self(r)->releasedir(r, i, f); };
    o.open = [](fuse_req_t r, fuse_ino_t i, fuse_file_info* f) { self(r)->open(r, i, f); };
    o.read = [](fuse_req_t r, fuse_ino_t i, size_t s, off_t o2, fuse_file_info* f) {
      self(r)->read(r, i, s, o2, f);
    };
    o.release = [](fuse_req_t r, fuse_ino_t i, fuse_file_info* f) { self(r)->release(r, i, f); };
    o.getxattr = [](fuse_req_t r, fuse_ino_t i, const char* n, size_t s) { self(r)->getxattr(r, i, n, s); };
    o.listxattr = [](fuse_req_t r, fuse_ino_t i, size_t s) { self(r)->listxattr(r, i, s); };
    o.statfs = [](fuse_req_t r, fuse_ino_t i) { self(r)->statfs(r, i); };
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
  return ops;
}

}  // namespace hubfs
