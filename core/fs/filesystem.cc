#include "fs/filesystem.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <set>

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
  RemoteFile remote;  // files only; its locate names the commit of the view that made it
  time_t mtime = 0;   // that commit's date
  // Files: the reader's content epoch at the last open (see BlockReader::content_epoch).
  std::atomic<uint64_t> opened_epoch{0};
};

// A directory's children in one view, listed once on first use.
struct FileSystem::Listing {
  std::mutex list_mu;
  bool listed = false;
  std::map<std::string, Ino> children;
};

// What one commit shows: its directories' listings (made as they are first used) and, with
// --follow, the names it answered as missing. Replaced whole by advance().
struct FileSystem::View {
  RepoRef repo;  // revision = the commit
  time_t mtime = 0;
  bool list_whole_repo = false;
  std::mutex mu;  // a leaf: guards the two tables below, never held while listing
  std::unordered_map<Ino, std::unique_ptr<Listing>> dirs;
  std::set<std::pair<Ino, std::string>> negatives;
  bool idle_seen = false;  // retired_names found no operation on it (under view_mu_)

  Listing& listing(Ino dir) {
    std::lock_guard<std::mutex> lock(mu);
    auto& l = dirs[dir];
    if (!l) l = std::make_unique<Listing>();
    return *l;
  }
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
  if (!options_.owner) options_.owner = std::make_pair(getuid(), getgid());
  view_ = std::make_shared<View>();
  view_->repo = repo_;
  view_->mtime = options_.mtime;
  view_->list_whole_repo = options_.list_whole_repo;
  nodes_.emplace_back();  // inode 0 does not exist
  TreeEntry root;
  root.is_dir = true;
  root.path = options_.root_path;
  add_node(*view_, std::move(root));  // inode 1 = kRootIno
}

std::shared_ptr<FileSystem::View> FileSystem::view() const {
  std::lock_guard<std::mutex> lock(view_mu_);
  return view_;
}

std::string FileSystem::current_commit() const { return view()->repo.revision; }

FileSystem::~FileSystem() {
  // Under the table's lock (~HandleTable says why), before anything else of this object goes.
  handles_.clear();
}

FileSystem::Node* FileSystem::node(Ino ino) {
  std::shared_lock<std::shared_mutex> lock(nodes_mu_);
  if (ino == 0 || ino >= nodes_.size()) return nullptr;
  return nodes_[ino].get();
}

FileSystem::Node* FileSystem::node_for(const View& v, TreeEntry entry) {
  {
    std::shared_lock<std::shared_mutex> lock(nodes_mu_);
    if (auto it = by_path_.find(entry.path); it != by_path_.end()) {
      Node* known = nodes_[it->second].get();
      if (known->is_dir == entry.is_dir &&
          (entry.is_dir || (known->entry.size == entry.size && known->remote.content_id == entry.content_id())))
        return known;
    }
  }
  return add_node(v, std::move(entry));
}

FileSystem::Node* FileSystem::add_node(const View& v, TreeEntry entry) {
  auto n = std::make_unique<Node>();  // its reads name v's commit
  n->is_dir = entry.is_dir;
  n->mtime = v.mtime;
  if (!n->is_dir) {
    n->remote.path = entry.path;
    n->remote.content_id = entry.content_id();
    n->remote.size = entry.size;
    // Captures the client and the repo, never this object: queued read-ahead may call it while
    // the mount shuts down, and the client outlives the reader (see BlockReader::shutdown).
    if (options_.offline) {
      const std::string repo = options_.listings ? options_.listings->repo_label() : v.repo.id;
      n->remote.locate = [path = entry.path, repo](bool) -> Result<Location> {
        return Unavailable("/" + path + " of " + repo + ": this part of the file is not in the block cache, and "
                           "the mount is --offline (it never asks the Hub); remount without --offline when the "
                           "Hub can be reached to read it");
      };
    } else {
      n->remote.locate = [hub = &hub_, repo = v.repo, path = entry.path](bool refresh) {
        return hub->locate(repo, path, refresh);
      };
      if (options_.range_source) n->remote.source = options_.range_source(entry, n->remote.locate);
    }
  }
  n->entry = std::move(entry);
  std::unique_lock<std::shared_mutex> lock(nodes_mu_);
  n->ino = nodes_.size();
  by_path_[n->entry.path] = n->ino;
  nodes_.push_back(std::move(n));
  return nodes_.back().get();
}

Result<std::vector<TreeEntry>> FileSystem::listed_entries(const View& v, const std::string& path, Subtree* subtree) {
  if (options_.listings) {
    if (auto stored = options_.listings->load_dir(v.repo.revision, path)) return std::move(*stored);
  }
  if (options_.offline) {
    const std::string label = options_.listings ? options_.listings->repo_label() : v.repo.id;
    return Unavailable("directory /" + path + " of " + label +
                       " at commit " + v.repo.revision + " was never listed while the Hub could be reached, so "
                       "this --offline mount cannot show it; remount without --offline to list it");
  }
  const bool is_root = path == options_.root_path;
  if (!is_root || v.list_whole_repo) {
    const size_t budget = is_root ? kWholeRepoMaxFiles / 1000 + 1 : kSubtreePageBudget;
    auto all = hub_.list_subtree(v.repo, path, budget);
    // A damaged entry anywhere below (a size no file can have) fails the whole subtree's listing:
    // then this directory is listed alone, so the damage stays with the directory that holds it.
    if (!all.ok() && all.status().code() != Code::kCorrupt) return all.status();
    if (all.ok() && *all) {
      if (options_.on_hub_listing) options_.on_hub_listing(**all);
      // Grouped by parent, every directory of the subtree present (an empty one too), so each
      // is stored as if listed alone: a remount reads any of them without a request.
      Subtree& by_dir = *subtree;
      by_dir[path];
      for (TreeEntry& e : **all) {
        if (e.is_dir) by_dir[e.path];
        by_dir[parent_dir(e.path)].push_back(std::move(e));
      }
      for (const auto& [dir, entries] : by_dir) {
        if (options_.listings) (void)options_.listings->save_dir(v.repo.revision, dir, entries);
      }
      std::vector<TreeEntry> mine = std::move(by_dir[path]);
      by_dir.erase(path);
      return mine;
    }
    // Too big to take whole: this directory alone, its subdirectories each in turn.
  }
  auto entries = hub_.list_dir(v.repo, path);
  if (!entries.ok()) return entries;
  if (options_.on_hub_listing) options_.on_hub_listing(*entries);
  // Best effort: a listing that cannot be stored is only asked for again at the next mount.
  if (options_.listings) (void)options_.listings->save_dir(v.repo.revision, path, *entries);
  return entries;
}

void FileSystem::fill_children(View& v, Listing& dir, std::vector<TreeEntry> entries, Subtree* subtree) {
  for (auto& e : entries) {
    std::string name(base_name(e.path));
    if (name.empty() || name == "." || name == "..") continue;
    Node* child = nullptr;
    if (auto known = dir.children.find(name); known != dir.children.end()) {
      // Known before this listing (know_file), or a name the listing repeats.
      child = node(known->second);
      check_listed_agrees(v, *child, e);
      if (!child->is_dir || !e.is_dir) continue;
    } else {
      child = node_for(v, std::move(e));
      dir.children.emplace(std::move(name), child->ino);
    }
    if (!child->is_dir || !subtree) continue;
    auto it = subtree->find(child->entry.path);
    if (it == subtree->end()) continue;
    std::vector<TreeEntry> grandchildren = std::move(it->second);
    subtree->erase(it);
    Listing& sub = v.listing(child->ino);
    std::lock_guard<std::mutex> lock(sub.list_mu);  // parent before child (see the header)
    if (sub.listed) continue;
    fill_children(v, sub, std::move(grandchildren), subtree);
    sub.listed = true;
  }
}

void FileSystem::check_listed_agrees(const View& v, const Node& known, const TreeEntry& listed) const {
  if (known.is_dir && listed.is_dir) return;
  if (known.is_dir == listed.is_dir && known.entry.size == listed.size &&
      known.remote.content_id == listed.content_id()) {
    return;
  }
  // Both came from the Hub for this commit; if they differ, reads of this node go on with what
  // it was opened with (its bytes are verified against that content id, never mixed).
  log_error("/" + listed.path + " at commit " + v.repo.revision + ": the listing says " +
            (listed.is_dir ? "a directory" : std::to_string(listed.size) + " bytes, " + listed.content_id()) +
            ", but it was opened as " +
            (known.is_dir ? "a directory" : std::to_string(known.entry.size) + " bytes, " + known.remote.content_id) +
            " from its resolve answer");
}

std::optional<std::string> FileSystem::below_root(const std::string& path) const {
  const std::string& root = options_.root_path;
  if (path == root) return std::string();
  if (root.empty()) return path;
  if (path.size() > root.size() + 1 && path.starts_with(root) && path[root.size()] == '/') {
    return path.substr(root.size() + 1);
  }
  return std::nullopt;
}

void FileSystem::know_file(TreeEntry entry) {
  if (entry.is_dir) return;
  std::optional<std::string> below = below_root(entry.path);
  if (!below || below->empty()) return;  // outside the root, or the root itself
  std::string rel = std::move(*below);
  std::shared_ptr<View> v = view();
  Node* dir = node(kRootIno);
  std::string walked = options_.root_path;
  for (;;) {
    const size_t slash = rel.find('/');
    const std::string name = rel.substr(0, slash);
    if (name.empty() || name == "." || name == "..") return;
    Listing& listing = v->listing(dir->ino);
    std::lock_guard<std::mutex> lock(listing.list_mu);  // one directory at a time, parent first
    auto it = listing.children.find(name);
    if (slash == std::string::npos) {
      if (listing.listed || it != listing.children.end()) return;
      Node* file = node_for(*v, std::move(entry));
      listing.children.emplace(name, file->ino);
      return;
    }
    walked += (walked.empty() ? "" : "/") + name;
    Node* next = it != listing.children.end() ? node(it->second) : nullptr;
    if (!next) {
      if (listing.listed) return;  // listed without it: the probe is wrong, the listing decides
      TreeEntry sub;
      sub.path = walked;
      sub.is_dir = true;
      next = node_for(*v, std::move(sub));
      listing.children.emplace(name, next->ino);
    }
    if (!next->is_dir) return;
    dir = next;
    rel.erase(0, slash + 1);
  }
}

void FileSystem::know_listing(const std::string& dir, std::vector<TreeEntry> entries) {
  std::optional<std::string> below = below_root(dir);
  if (!below) return;
  const std::string& rel = *below;
  std::shared_ptr<View> v = view();
  Node* at = node(kRootIno);
  for (size_t start = 0; !rel.empty() && at;) {
    const size_t slash = rel.find('/', start);
    const std::string name = rel.substr(start, slash == std::string::npos ? std::string::npos : slash - start);
    Listing& listing = v->listing(at->ino);
    Node* next = nullptr;
    {
      std::lock_guard<std::mutex> lock(listing.list_mu);
      auto it = listing.children.find(name);
      if (it != listing.children.end()) next = node(it->second);
    }
    if (!next || !next->is_dir) return;  // not known without listing: its lookup lists as before
    at = next;
    if (slash == std::string::npos) break;
    start = slash + 1;
  }
  if (!at) return;
  Listing& listing = v->listing(at->ino);
  std::lock_guard<std::mutex> lock(listing.list_mu);
  if (listing.listed) return;
  fill_children(*v, listing, std::move(entries), nullptr);
  listing.listed = true;
}

bool FileSystem::finds_without_listing(const std::string& path) {
  std::shared_ptr<View> v = view();
  Node* at = node(kRootIno);
  for (size_t start = 0;;) {
    while (start < path.size() && path[start] == '/') ++start;
    if (start >= path.size()) return true;
    const size_t slash = path.find('/', start);
    const std::string name = path.substr(start, slash == std::string::npos ? std::string::npos : slash - start);
    if (!at || !at->is_dir) return true;  // ENOTDIR without a listing
    Listing& listing = v->listing(at->ino);
    std::lock_guard<std::mutex> lock(listing.list_mu);
    auto it = listing.children.find(name);
    if (it == listing.children.end()) return listing.listed;  // missing without a listing, or unknown
    at = node(it->second);
    if (slash == std::string::npos) return true;
    start = slash + 1;
  }
}

Status FileSystem::ensure_listed(View& v, Node* dir) {
  Listing& listing = v.listing(dir->ino);
  std::lock_guard<std::mutex> lock(listing.list_mu);
  if (listing.listed) return Status::Ok();
  Subtree subtree;
  auto entries = listed_entries(v, dir->entry.path, &subtree);
  if (!entries.ok()) return entries.status();  // not remembered: the next access tries again
  fill_children(v, listing, std::move(*entries), &subtree);
  listing.listed = true;
  return Status::Ok();
}

Status FileSystem::list_root() { return ensure_listed(*view(), node(kRootIno)); }

ViewChange FileSystem::names_of(View& v) {
  ViewChange change;
  change.old_commit = v.repo.revision;
  std::vector<std::pair<Ino, Listing*>> dirs;
  {
    std::lock_guard<std::mutex> lock(v.mu);
    for (const auto& [ino, listing] : v.dirs) dirs.emplace_back(ino, listing.get());
    change.entries.assign(v.negatives.begin(), v.negatives.end());
  }
  for (const auto& [ino, listing] : dirs) {
    change.dirs.push_back(ino);
    std::lock_guard<std::mutex> lock(listing->list_mu);
    for (const auto& [name, child] : listing->children) change.entries.emplace_back(ino, name);
  }
  return change;
}

ViewChange FileSystem::advance(const std::string& commit, time_t mtime, bool list_whole_repo) {
  auto next = std::make_shared<View>();
  next->repo = repo_;
  next->repo.revision = commit;
  next->mtime = mtime;
  next->list_whole_repo = list_whole_repo;
  std::shared_ptr<View> old;
  {
    std::lock_guard<std::mutex> lock(view_mu_);
    if (view_->repo.revision == commit) return {};
    old = view_;
    view_ = next;
    retired_ = old;
  }
  ViewChange change = names_of(*old);
  change.new_commit = commit;
  return change;
}

ViewChange FileSystem::retired_names() {
  std::shared_ptr<View> old;
  {
    std::lock_guard<std::mutex> lock(view_mu_);
    old = retired_;
  }
  if (!old) return {};
  // retired_ and `old` hold it; any other holder is an operation still answering from it.
  const bool idle = old.use_count() <= 2;
  ViewChange change = names_of(*old);
  change.new_commit = current_commit();
  {
    std::lock_guard<std::mutex> lock(view_mu_);
    // Forgotten once it was idle at an earlier call too: the last operation on it has long
    // answered the kernel, and this call's names are told after that answer.
    if (retired_ == old && idle && old->idle_seen) retired_.reset();
    else if (retired_ == old) old->idle_seen = idle;
  }
  return change;
}

struct stat FileSystem::attributes(const Node& n) const {
  struct stat st {};
  st.st_ino = n.ino;
  st.st_uid = options_.owner->first;
  st.st_gid = options_.owner->second;
  st.st_mtim.tv_sec = st.st_ctim.tv_sec = st.st_atim.tv_sec = n.mtime;
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
  std::shared_ptr<View> v = view();  // one view for the whole lookup
  Listing& listing = v->listing(parent);
  auto find_child = [&] {
    std::lock_guard<std::mutex> lock(listing.list_mu);
    auto it = listing.children.find(name);
    if (it != listing.children.end()) reply.ino = it->second;
  };
  // Names never leave a directory of one view, so one known before its listing (know_file)
  // needs none.
  find_child();
  if (reply.ino == 0) {
    if (Status st = ensure_listed(*v, dir); !st.ok()) return upstream(st, "listing /" + dir->entry.path);
    find_child();
  }
  if (reply.ino == 0 && options_.follow) {
    std::lock_guard<std::mutex> lock(v->mu);
    if (v->negatives.size() < kMaxRememberedNegatives) {
      v->negatives.emplace(parent, name);
    } else {
      // Too many to remember: this miss expires by itself within one interval instead.
      reply.timeout_s = std::min(options_.entry_timeout_s, options_.follow_interval_s);
      return reply;
    }
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
  std::shared_ptr<View> v = view();  // the handle lists one view, whole
  if (Status st = ensure_listed(*v, dir); !st.ok()) return upstream(st, "listing /" + dir->entry.path);
  auto handle = std::make_shared<DirHandle>();
  handle->entries.push_back({".", ino, true, 0});
  handle->entries.push_back({"..", ino, true, 0});  // the kernel fixes up ".." itself
  {
    Listing& listing = v->listing(ino);
    std::lock_guard<std::mutex> lock(listing.list_mu);
    for (auto& [name, child] : listing.children) handle->entries.push_back({name, child, false, 0});
  }
  for (size_t i = 0; i < handle->entries.size(); ++i) {
    DirEntry& e = handle->entries[i];
    e.next_offset = i + 1;
    if (i >= 2) e.is_dir = node(e.ino)->is_dir;
  }
  return handles_.add_dir(std::move(handle));
}

std::vector<DirEntry> FileSystem::readdir(uint64_t handle, uint64_t offset) {
  std::shared_ptr<DirHandle> dir = handles_.dir(handle);
  if (!dir) return {};
  if (offset >= dir->entries.size()) return {};
  return {dir->entries.begin() + static_cast<long>(offset), dir->entries.end()};
}

void FileSystem::releasedir(uint64_t handle) {
  handles_.remove_dir(handle);
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
  reply.handle = handles_.add_file(std::move(file));
  return reply;
}

FsResult<std::vector<BlockBytes>> FileSystem::read(uint64_t handle, uint64_t offset, size_t size) {
  std::shared_ptr<OpenFile> file = handles_.file(handle);
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
  handles_.remove_file(handle);
}

FsResult<uint64_t> FileSystem::hint(uint64_t handle, const std::vector<ByteRange>& ranges, HintRequests requests) {
  std::shared_ptr<OpenFile> file = handles_.file(handle);
  if (!file) return errno_only(EBADF);
  auto started = reader_.prefetch(file->node->remote, ranges, requests);
  if (!started.ok()) return FsError{EINVAL, started.status().message()};
  return started.value();
}

void FileSystem::discard(uint64_t handle) {
  if (std::shared_ptr<OpenFile> file = handles_.file(handle)) reader_.discard(file->node->remote, file->state);
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
