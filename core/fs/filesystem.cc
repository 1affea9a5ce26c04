#include "fs/filesystem.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>

#include "common/log.h"

namespace hubfs {

namespace {

constexpr const char* kShaAttr = "user.hubfs.sha256";
constexpr const char* kOidAttr = "user.hubfs.oid";
// The kernel never asks for more than 1 MiB (max_pages 256); a larger ask is cut, not refused.
constexpr size_t kMaxRead = 16u << 20;

std::string_view base_name(std::string_view path) {
  auto slash = path.rfind('/');
  return slash == std::string_view::npos ? path : path.substr(slash + 1);
}

FsError upstream(const Status& s, const std::string& what) {
  return FsError{s.to_errno(), what + ": " + s.message()};
}

}  // namespace

struct FileSystem::Node {
  Ino ino = 0;
  bool is_dir = false;
  TreeEntry entry;    // path, size, oid, lfs sha256
  RemoteFile remote;  // files only
  // Directories: children by name, listed once on first use.
  std::mutex list_mu;
  bool listed = false;
  std::map<std::string, Ino> children;
  // Files: the reader's content epoch at the last open (see BlockReader::content_epoch).
  std::atomic<uint64_t> opened_epoch{0};
};

struct FileSystem::OpenFile {
  Node* node = nullptr;
  ReadState state;
};

struct FileSystem::DirHandle {
  std::vector<DirEntry> entries;
};

FileSystem::FileSystem(HubClient& hub, RepoRef repo, BlockReader& reader, FsOptions options)
    : hub_(hub), repo_(std::move(repo)), reader_(reader), options_(options) {
  nodes_.emplace_back();  // inode 0 does not exist
  TreeEntry root;
  root.is_dir = true;
  root.path = options_.root_path;
  add_node(std::move(root));  // inode 1 = kRootIno
}

FileSystem::~FileSystem() {
  // Under the lock: the FUSE threads that last touched the tables were joined inside libfuse,
  // an ordering ThreadSanitizer cannot see; the lock shows it.
  std::lock_guard<std::mutex> lock(handles_mu_);
  open_files_.clear();
  dir_handles_.clear();
}

FileSystem::Node* FileSystem::node(Ino ino) {
  std::shared_lock<std::shared_mutex> lock(nodes_mu_);
  if (ino == 0 || ino >= nodes_.size()) return nullptr;
  return nodes_[ino].get();
}

FileSystem::Node* FileSystem::add_node(TreeEntry entry) {
  auto n = std::make_unique<Node>();
  n->is_dir = entry.is_dir;
  if (!n->is_dir) {
    n->remote.path = entry.path;
    n->remote.content_id = entry.content_id();
    n->remote.size = entry.size;
    // Captures the client and the repo, never this object: queued read-ahead may call it while
    // the mount shuts down, and the client outlives the reader (see BlockReader::shutdown).
    if (options_.offline) {
      const std::string repo = options_.listings ? options_.listings->repo_label() : repo_.id;
      n->remote.locate = [path = entry.path, repo](bool) -> Result<Location> {
        return Unavailable("/" + path + " of " + repo + ": this part of the file is not in the block cache, and "
                           "the mount is --offline (it never asks the Hub); remount without --offline when the "
                           "Hub can be reached to read it");
      };
    } else {
      n->remote.locate = [hub = &hub_, repo = repo_, path = entry.path](bool refresh) {
        return hub->locate(repo, path, refresh);
      };
      if (options_.range_source) n->remote.source = options_.range_source(entry, n->remote.locate);
    }
  }
  n->entry = std::move(entry);
  std::unique_lock<std::shared_mutex> lock(nodes_mu_);
  n->ino = nodes_.size();
  nodes_.push_back(std::move(n));
  return nodes_.back().get();
}

Result<std::vector<TreeEntry>> FileSystem::listed_entries(const std::string& path, Subtree* subtree) {
  if (options_.listings) {
    if (auto stored = options_.listings->load_dir(repo_.revision, path)) return std::move(*stored);
  }
  if (options_.offline) {
    return Unavailable("directory /" + path + " of " + (options_.listings ? options_.listings->repo_label() : repo_.id) +
                       " at commit " + repo_.revision + " was never listed while the Hub could be reached, so "
                       "this --offline mount cannot show it; remount without --offline to list it");
  }
  const bool is_root = path == options_.root_path;
  if (!is_root || options_.list_whole_repo) {
    const size_t budget = is_root ? kWholeRepoMaxFiles / 1000 + 1 : kSubtreePageBudget;
    auto all = hub_.list_subtree(repo_, path, budget);
    // A damaged entry anywhere below (a size no file can have) fails the whole subtree's listing:
    // then this directory is listed alone, so the damage stays with the directory that holds it.
    if (!all.ok() && all.status().code() != Code::kCorrupt) return all.status();
    if (all.ok() && *all) {
      // Grouped by parent, every directory of the subtree present (an empty one too), so each
      // is stored as if listed alone: a remount reads any of them without a request.
      Subtree& by_dir = *subtree;
      by_dir[path];
      for (TreeEntry& e : **all) {
        if (e.is_dir) by_dir[e.path];
        const size_t slash = e.path.rfind('/');
        by_dir[slash == std::string::npos ? std::string() : e.path.substr(0, slash)].push_back(std::move(e));
      }
      for (const auto& [dir, entries] : by_dir) {
        if (options_.listings) (void)options_.listings->save_dir(repo_.revision, dir, entries);
      }
      std::vector<TreeEntry> mine = std::move(by_dir[path]);
      by_dir.erase(path);
      return mine;
    }
    // Too big to take whole: this directory alone, its subdirectories each in turn.
  }
  auto entries = hub_.list_dir(repo_, path);
  if (!entries.ok()) return entries;
  // Best effort: a listing that cannot be stored is only asked for again at the next mount.
  if (options_.listings) (void)options_.listings->save_dir(repo_.revision, path, *entries);
  return entries;
}

void FileSystem::fill_children(Node* dir, std::vector<TreeEntry> entries, Subtree* subtree) {
  for (auto& e : entries) {
    std::string name(base_name(e.path));
    if (name.empty() || name == "." || name == "..") continue;
    Node* child = nullptr;
    if (auto known = dir->children.find(name); known != dir->children.end()) {
      // Known before this listing (know_file), or a name the listing repeats.
      child = node(known->second);
      check_listed_agrees(*child, e);
      if (!child->is_dir || !e.is_dir) continue;
    } else {
      child = add_node(std::move(e));
      dir->children.emplace(std::move(name), child->ino);
    }
    if (!child->is_dir || !subtree) continue;
    auto it = subtree->find(child->entry.path);
    if (it == subtree->end()) continue;
    std::vector<TreeEntry> grandchildren = std::move(it->second);
    subtree->erase(it);
    std::lock_guard<std::mutex> lock(child->list_mu);  // parent before child (see the header)
    if (child->listed) continue;
    fill_children(child, std::move(grandchildren), subtree);
    child->listed = true;
  }
}

void FileSystem::check_listed_agrees(const Node& known, const TreeEntry& listed) const {
  if (known.is_dir && listed.is_dir) return;
  if (known.is_dir == listed.is_dir && known.entry.size == listed.size &&
      known.remote.content_id == listed.content_id()) {
    return;
  }
  // Both came from the Hub for this commit; if they differ, reads of this node go on with what
  // it was opened with (its bytes are verified against that content id, never mixed).
  log_error("/" + listed.path + " at commit " + repo_.revision + ": the listing says " +
            (listed.is_dir ? "a directory" : std::to_string(listed.size) + " bytes, " + listed.content_id()) +
            ", but it was opened as " +
            (known.is_dir ? "a directory" : std::to_string(known.entry.size) + " bytes, " + known.remote.content_id) +
            " from its resolve answer");
}

void FileSystem::know_file(TreeEntry entry) {
  if (entry.is_dir) return;
  const std::string& root = options_.root_path;
  std::string rel;
  if (root.empty()) {
    rel = entry.path;
  } else if (entry.path.size() > root.size() + 1 && entry.path.starts_with(root) && entry.path[root.size()] == '/') {
    rel = entry.path.substr(root.size() + 1);
  } else {
    return;
  }
  Node* dir = node(kRootIno);
  std::string walked = root;
  for (;;) {
    const size_t slash = rel.find('/');
    const std::string name = rel.substr(0, slash);
    if (name.empty() || name == "." || name == "..") return;
    std::lock_guard<std::mutex> lock(dir->list_mu);  // one directory at a time, parent first
    auto it = dir->children.find(name);
    if (slash == std::string::npos) {
      if (dir->listed || it != dir->children.end()) return;
      Node* file = add_node(std::move(entry));
      dir->children.emplace(name, file->ino);
      return;
    }
    walked += (walked.empty() ? "" : "/") + name;
    Node* next = it != dir->children.end() ? node(it->second) : nullptr;
    if (!next) {
      if (dir->listed) return;  // listed without it: the probe is wrong, the listing decides
      TreeEntry sub;
      sub.path = walked;
      sub.is_dir = true;
      next = add_node(std::move(sub));
      dir->children.emplace(name, next->ino);
    }
    if (!next->is_dir) return;
    dir = next;
    rel.erase(0, slash + 1);
  }
}

Status FileSystem::ensure_listed(Node* dir) {
  std::lock_guard<std::mutex> lock(dir->list_mu);
  if (dir->listed) return Status::Ok();
  Subtree subtree;
  auto entries = listed_entries(dir->entry.path, &subtree);
  if (!entries.ok()) return entries.status();  // not remembered: the next access tries again
  fill_children(dir, std::move(*entries), &subtree);
  dir->listed = true;
  return Status::Ok();
}

Status FileSystem::list_root() { return ensure_listed(node(kRootIno)); }

struct stat FileSystem::attributes(const Node& n) const {
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

FsResult<EntryReply> FileSystem::lookup(Ino parent, const std::string& name) {
  Node* dir = node(parent);
  if (!dir) return errno_only(ENOENT);
  if (!dir->is_dir) return errno_only(ENOTDIR);
  EntryReply reply;
  auto find_child = [&] {
    std::lock_guard<std::mutex> lock(dir->list_mu);
    auto it = dir->children.find(name);
    if (it != dir->children.end()) reply.ino = it->second;
  };
  // Names never leave a directory, so one known before its listing (know_file) needs none.
  find_child();
  if (reply.ino == 0) {
    if (Status st = ensure_listed(dir); !st.ok()) return upstream(st, "listing /" + dir->entry.path);
    find_child();
  }
  // ino 0 is a negative entry: HDF5 and Python probe for many files that are not there.
  if (reply.ino != 0) reply.attr = attributes(*node(reply.ino));
  reply.timeout_s = options_.entry_timeout_s;
  return reply;
}

FsResult<struct stat> FileSystem::getattr(Ino ino) {
  Node* n = node(ino);
  if (!n) return errno_only(ENOENT);
  return attributes(*n);
}

FsResult<uint64_t> FileSystem::opendir(Ino ino) {
  Node* dir = node(ino);
  if (!dir) return errno_only(ENOENT);
  if (!dir->is_dir) return errno_only(ENOTDIR);
  if (Status st = ensure_listed(dir); !st.ok()) return upstream(st, "listing /" + dir->entry.path);
  auto handle = std::make_shared<DirHandle>();
  handle->entries.push_back({".", ino, true, 0});
  handle->entries.push_back({"..", ino, true, 0});  // the kernel fixes up ".." itself
  {
    std::lock_guard<std::mutex> lock(dir->list_mu);
    for (auto& [name, child] : dir->children) handle->entries.push_back({name, child, false, 0});
  }
  for (size_t i = 0; i < handle->entries.size(); ++i) {
    DirEntry& e = handle->entries[i];
    e.next_offset = i + 1;
    if (i >= 2) e.is_dir = node(e.ino)->is_dir;
  }
  std::lock_guard<std::mutex> lock(handles_mu_);
  uint64_t id = next_handle_++;
  dir_handles_.emplace(id, std::move(handle));
  return id;
}

std::vector<DirEntry> FileSystem::readdir(uint64_t handle, uint64_t offset) {
  std::shared_ptr<DirHandle> dir;
  {
    std::lock_guard<std::mutex> lock(handles_mu_);
    auto it = dir_handles_.find(handle);
    if (it == dir_handles_.end()) return {};
    dir = it->second;
  }
  if (offset >= dir->entries.size()) return {};
  return {dir->entries.begin() + static_cast<long>(offset), dir->entries.end()};
}

void FileSystem::releasedir(uint64_t handle) {
  std::lock_guard<std::mutex> lock(handles_mu_);
  dir_handles_.erase(handle);
}

std::shared_ptr<FileSystem::OpenFile> FileSystem::open_file(uint64_t handle) {
  std::lock_guard<std::mutex> lock(handles_mu_);
  auto it = open_files_.find(handle);
  return it == open_files_.end() ? nullptr : it->second;
}

FsResult<FileSystem::OpenReply> FileSystem::open(Ino ino, int flags) {
  Node* n = node(ino);
  if (!n) return errno_only(ENOENT);
  if (n->is_dir) return errno_only(EISDIR);
  if ((flags & O_ACCMODE) != O_RDONLY || (flags & O_TRUNC)) return errno_only(EROFS);
  if (options_.on_open) options_.on_open(n->remote);
  auto file = std::make_shared<OpenFile>();
  file->node = n;
  const uint64_t epoch = reader_.content_epoch(n->remote);
  file->state.epoch = epoch;  // reads on this handle see only bytes fetched after any failure
  OpenReply reply;
  reply.keep_cache = n->opened_epoch.exchange(epoch) == epoch;
  std::lock_guard<std::mutex> lock(handles_mu_);
  reply.handle = next_handle_++;
  open_files_.emplace(reply.handle, std::move(file));
  return reply;
}

FsResult<std::vector<BlockBytes>> FileSystem::read(uint64_t handle, uint64_t offset, size_t size) {
  std::shared_ptr<OpenFile> file = open_file(handle);
  if (!file) return errno_only(EBADF);
  auto slices = reader_.read_slices(file->node->remote, offset, std::min(size, kMaxRead), &file->state);
  if (!slices.ok() && slices.status().code() == Code::kPermissionDenied) {
    // A gated repo whose conditions were not accepted, an invalid token: the program sees
    // EACCES ("Permission denied"), not an I/O error, and the log says once per mount what to
    // do (the message names the repo page and the fix); the same cause on every later file
    // would only bury it.
    std::string reason;
    if (!access_denied_logged_.exchange(true)) {
      reason = "reading /" + file->node->entry.path + ": " + slices.status().message() +
               " (further reads refused for this reason are not logged)";
    }
    return FsError{EACCES, std::move(reason)};
  }
  // Whatever else went wrong upstream (a missing object, a timeout, a bad range), the file
  // exists: to the program reading it this is an I/O error.
  if (!slices.ok()) return FsError{EIO, "reading /" + file->node->entry.path + ": " + slices.status().message()};
  return std::move(slices).value();
}

void FileSystem::release(uint64_t handle) {
  std::lock_guard<std::mutex> lock(handles_mu_);
  open_files_.erase(handle);
}

FsResult<uint64_t> FileSystem::hint(uint64_t handle, const std::vector<ByteRange>& ranges) {
  std::shared_ptr<OpenFile> file = open_file(handle);
  if (!file) return errno_only(EBADF);
  auto started = reader_.prefetch(file->node->remote, ranges);
  if (!started.ok()) return FsError{EINVAL, started.status().message()};
  return started.value();
}

void FileSystem::discard(uint64_t handle) {
  if (std::shared_ptr<OpenFile> file = open_file(handle)) reader_.discard(file->node->remote, file->state);
}

FsResult<std::string> FileSystem::getxattr(Ino ino, const std::string& name) {
  Node* n = node(ino);
  if (!n) return errno_only(ENOENT);
  if (ino == kRootIno && options_.status_json && name == kStatusXattr) return options_.status_json();
  if (!n->is_dir && n->entry.lfs_sha256 && name == kShaAttr) return *n->entry.lfs_sha256;
  if (!n->is_dir && !n->entry.lfs_sha256 && name == kOidAttr) return n->entry.oid;
  return errno_only(ENODATA);
}

FsResult<std::string> FileSystem::listxattr(Ino ino) {
  Node* n = node(ino);
  if (!n) return errno_only(ENOENT);
  if (ino == kRootIno && options_.status_json) return std::string(kStatusXattr) + '\0';
  if (n->is_dir) return std::string();
  return std::string(n->entry.lfs_sha256 ? kShaAttr : kOidAttr) + '\0';
}

struct statvfs FileSystem::statfs() {
  struct statvfs st {};
  st.f_bsize = st.f_frsize = reader_.options().block_size;
  st.f_namemax = 255;
  std::shared_lock<std::shared_mutex> lock(nodes_mu_);
  st.f_files = nodes_.size();
  return st;
}

}  // namespace hubfs
