// The filesystem itself, without FUSE: inodes built lazily from the Hub's listings, attributes,
// directory pages, reads as slices of cached blocks, extended attributes, and the errno each
// failure becomes. fuse/ only translates kernel requests to these calls and their answers back,
// so every behaviour here is unit-tested without root, /dev/fuse or a server process.
//
// Threads: every method is thread-safe (the FUSE loop calls from many threads at once).
// Lock order: a directory's Listing::list_mu (in one view), then its descendants' list_mu (a
// subtree listing fills them, parent first), then a View's mu or nodes_mu_ (leaves); never the
// other way round (listing a directory adds nodes while holding its list_mu). view_mu_ is a leaf, and
// so is the handle table's lock (fs/handle_table.h).
// No lock of this class is held while the BlockReader runs a read (reads may wait on the network
// for a long time).
#pragma once

#include <sys/stat.h>
#include <sys/statvfs.h>

#include <atomic>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <shared_mutex>
#include <string>
#include <unordered_map>
#include <utility>
#include <variant>
#include <vector>

#include "fs/fs_api.h"
#include "fs/handle_table.h"
#include "fs/listing_cache.h"
#include "hub/hub_client.h"
#include "reader/block_reader.h"

namespace hubfs {

struct FsOptions {
  // The revision is pinned to a commit, so nothing under the mount ever changes: the kernel may
  // keep names and attributes for as long as it likes.
  double entry_timeout_s = 86400;
  time_t mtime = 0;  // the commit date
  // The owner every file and directory shows (st_uid, st_gid); unset: the process's, read once
  // when the FileSystem is made (a getuid and a getgid per lookup were 6 system calls per
  // hf:// open of a file two directories down).
  std::optional<std::pair<uid_t, gid_t>> owner;
  // Called on every successful open() with the file being opened (the mount records which repo
  // file each cached content id was read as; see cache/cache_index.h). Must be cheap and
  // thread-safe: it runs on the FUSE thread, no lock of this class held.
  std::function<void(const RemoteFile&)> on_open;
  // The repo directory the mount's root shows ("" = the repo's root; "sub/dir" for a subfolder
  // mount). Paths under the mount map to it: /x is <root_path>/x in the repo.
  std::string root_path;
  // The daemon's live status as JSON (`hubfs status`): served as the extended attribute
  // user.hubfs.status of the root directory, listed there. Empty: no such attribute. Called on
  // the FUSE thread of every getxattr of it; must be thread-safe.
  std::function<std::string()> status_json;
  // Listings kept with the cache (fs/listing_cache.h): a directory stored for this commit is
  // read from there, one listed from the Hub is stored there. Null: the Hub is asked each mount.
  std::shared_ptr<const ListingCache> listings;
  // `--offline`: no request reaches the Hub. Directories come from `listings` only (one never
  // listed online fails with EIO, saying so) and a block not in the cache fails its read with
  // EIO at once, instead of waiting for a Hub that cannot answer.
  bool offline = false;
  // The repo is small enough (its repo info says how many files it has) to be listed whole at
  // once: the mount root's first listing is then one recursive listing of everything below it.
  bool list_whole_repo = false;
  // Where a file's bytes come from when not through its locate (RemoteFile::source): a Xet-stored
  // file's source from the Xet service (stack/xet_routing.h, set by the stack). Null or returning
  // null: the bridge. Never called for an offline mount.
  std::function<std::shared_ptr<RangeSource>(const TreeEntry&, const Locator&)> range_source;
  // Called with the entries of every listing that came from the Hub (not from `listings`), on
  // the thread that listed: the stack starts the Xet read token there when one is a Xet file
  // (XetReader::warm_token), so a mount's first cold read does not wait for it while a warm
  // remount, whose listings are stored, asks for nothing. Must be cheap and thread-safe.
  std::function<void(const std::vector<TreeEntry>&)> on_hub_listing;
  // `--follow`: the view may move to a newer commit (FileSystem::advance). Negative lookups are
  // then remembered per view, so that the kernel's cached "no such name" can be invalidated when
  // a new commit adds the name.
  bool follow = false;
  // With `follow`: the check interval, the timeout of a missing name the view cannot remember
  // (past kMaxRememberedNegatives).
  double follow_interval_s = 60;
};

// What the kernel may hold from a view that was replaced (FileSystem::advance): the names it was
// answered (found or not) by directory, and the directories whose attributes and listing pages it
// may cache. The mount invalidates them all (fuse_lowlevel_notify_inval_entry / _inval_inode).
struct ViewChange {
  std::string old_commit;
  std::string new_commit;
  std::vector<std::pair<Ino, std::string>> entries;
  std::vector<Ino> dirs;
  bool empty() const { return entries.empty() && dirs.empty(); }
};

// Negative answers remembered per view for invalidation (FsOptions::follow); past this many a
// missing name is answered with a timeout of one interval instead (FsOptions::follow_interval_s).
inline constexpr size_t kMaxRememberedNegatives = 65536;

// Request economy (docs/hub-http-contract.md, section 5): a directory below the mount root is
// listed with its whole subtree (recursive=true), if that subtree fits this many pages (~1000
// entries each), and directory by directory otherwise. A walk (`find`, `du`, a dataloader
// scanning shards) then costs a few requests, not one per directory, while an `ls` of one
// directory of a huge repo costs at most this many pages more than listing it alone.
inline constexpr size_t kSubtreePageBudget = 3;
// A repo with at most this many files ("siblings" in its repo info) is listed whole at mount:
// at most ~5 pages, about what listing five directories one by one would cost.
inline constexpr size_t kWholeRepoMaxFiles = 5000;

// The root's extended attribute holding FsOptions::status_json.
inline constexpr const char* kStatusXattr = "user.hubfs.status";

class FileSystem : public FsApi {
 public:
  // repo must be pinned (revision = commit sha). hub and reader must outlive this object.
  FileSystem(HubClient& hub, RepoRef repo, BlockReader& reader, FsOptions options);
  ~FileSystem() override;
  FileSystem(const FileSystem&) = delete;
  FileSystem& operator=(const FileSystem&) = delete;

  // Lists the root now (the mount calls it before it answers): the first lookup of nearly every
  // use, `ls` or an open, then costs no round trip. A failure is only returned: the next
  // access lists again.
  Status list_root();

  // A file learned of without a listing (a door's probe of the one file it opens:
  // HubClient::probe_file), shown in its directory before that directory is listed, with the
  // directories on its way: a lookup of its path is then answered without listing anything.
  // Any other lookup there, or a readdir, lists the directory as before; the listing keeps this
  // node (same inode) and logs an error if the two disagree on size or content. Does nothing for
  // a path outside the root, a directory, or a directory listed already (its listing is the
  // truth).
  void know_file(TreeEntry entry);
  // The listing of directory `dir` (a repo path, as stored) at this FileSystem's commit, read
  // from FsOptions::listings by the caller (open_repo_session reads the first file's directory
  // while its pin is out): the directory counts as listed, as if its first lookup had read that
  // same document. Nothing for a directory not known yet (know_file makes the first file's),
  // outside the root, or listed already.
  void know_listing(const std::string& dir, std::vector<TreeEntry> entries);
  // Whether looking `path` (relative to the root, as lookup walks it) up lists nothing: each
  // directory on its way holds the next name already, or is listed (a name missing there is
  // missing without a listing). Looks at memory only; a door that must stay interruptible
  // (Python's main thread) opens such a path on its own thread.
  bool finds_without_listing(const std::string& path);

  FsResult<EntryReply> lookup(Ino parent, const std::string& name) override;
  FsResult<struct stat> getattr(Ino ino) override;

  // Directory handles hold a snapshot of the listing (names never change under a pinned commit).
  FsResult<uint64_t> opendir(Ino ino) override;
  // Entries from `offset` on (0 = the start, then an entry's next_offset), "." and ".." first.
  std::vector<DirEntry> readdir(uint64_t handle, uint64_t offset) override;
  void releasedir(uint64_t handle) override;

  // flags as open(2): anything but read-only is EROFS. keep_cache is false once the file's
  // content failed verification since the last open (the kernel's pages may hold corrupt bytes).
  using OpenReply = hubfs::OpenReply;
  FsResult<OpenReply> open(Ino ino, int flags) override;
  // The bytes [offset, offset + size) cut at end of file, as slices of cached blocks (no copy).
  FsResult<std::vector<BlockBytes>> read(uint64_t handle, uint64_t offset, size_t size) override;
  void release(uint64_t handle) override;
  // A range hint on an open file (include/hubfs/range_hint.h): EINVAL for a malformed one.
  FsResult<uint64_t> hint(uint64_t handle, const std::vector<ByteRange>& ranges, HintRequests requests) override;
  // The handle's reader found the file's bytes corrupt by a hash of its own: they leave every
  // cache tier (BlockReader::discard). Not part of FsApi: the mount's reader hashes for itself.
  void discard(uint64_t handle);

  FsResult<std::string> getxattr(Ino ino, const std::string& name) override;
  // NUL-separated names.
  FsResult<std::string> listxattr(Ino ino) override;
  struct statvfs statfs() override;
  double attr_timeout_s() const override { return options_.entry_timeout_s; }
  // Nothing under a pinned commit changes: the kernel may keep every listing. Not with
  // `follow`: a listing the kernel read from a handle opened before a swap could be cached
  // after the swap's invalidation; each listing is then answered from the handle's snapshot.
  bool listing_is_stable(Ino) const override { return !options_.follow; }

  const FsOptions& options() const { return options_; }

  // `--follow` (FsOptions::follow): what new lookups, opens and listings see moves to `commit`
  // (dated `mtime`; `list_whole_repo` as FsOptions has it), atomically: each lookup or listing
  // works on one view from start to end, and a directory handle keeps the listing it was opened
  // with. A path whose entry is the same at the new commit (same kind, size and content id) keeps
  // its inode; a changed path gets a new inode, a deleted one is found no more. Open handles keep
  // reading what they opened (their node names its commit; blocks are keyed by content). Returns
  // what the replaced view told the kernel, to invalidate; empty if `commit` is the current one.
  ViewChange advance(const std::string& commit, time_t mtime, bool list_whole_repo);
  // The same names of the view replaced by the last advance, collected again: a lookup that
  // began before the swap may have answered the kernel after the invalidation. The follower
  // calls it at each poll; the view is forgotten after a call that found no operation on it,
  // when an earlier call found none either.
  ViewChange retired_names();
  // The commit new lookups see.
  std::string current_commit() const;

 private:
  struct Node;
  struct OpenFile;
  struct DirHandle;
  struct Listing;
  struct View;

  std::shared_ptr<View> view() const;
  Node* node(Ino ino);
  // `path` (a repo path) relative to FsOptions::root_path: "" for the root itself, nothing for a
  // path outside it.
  std::optional<std::string> below_root(const std::string& path) const;
  // The node for `entry` at view v: the one its path had if it is the same (a directory, or a
  // file of the same size and content id), else a new one whose reads name v's commit.
  Node* node_for(const View& v, TreeEntry entry);
  Node* add_node(const View& v, TreeEntry entry);
  Status ensure_listed(View& v, Node* dir);
  static ViewChange names_of(View& v);
  // A directory's entries: from the stored listings, else (online) from the Hub, then stored.
  // Online, a directory below the root (or the root of a small repo) is listed with its whole
  // subtree when that fits kSubtreePageBudget pages: *subtree then receives every descendant,
  // by parent directory, for fill_subtree.
  using Subtree = std::map<std::string, std::vector<TreeEntry>>;
  Result<std::vector<TreeEntry>> listed_entries(const View& v, const std::string& path, Subtree* subtree);
  // Adds `entries` as the children of `listing` (dir's, in view v); directories among them that
  // `subtree` lists are filled too (and marked listed), depth first. listing.list_mu held by the
  // caller.
  void fill_children(View& v, Listing& listing, std::vector<TreeEntry> entries, Subtree* subtree);
  // A name dir already had (a known file, a directory on its way) met again in its listing.
  void check_listed_agrees(const View& v, const Node& known, const TreeEntry& listed) const;
  struct stat attributes(const Node& n) const;

  HubClient& hub_;
  RepoRef repo_;  // as pinned at construction (revision = its commit); the view's may be newer
  BlockReader& reader_;
  FsOptions options_;
  // The view new operations see, and the one the last advance replaced. A leaf lock, held only
  // to copy or swap the pointers.
  mutable std::mutex view_mu_;
  std::shared_ptr<View> view_;
  std::shared_ptr<View> retired_;
  std::shared_mutex nodes_mu_;
  std::vector<std::unique_ptr<Node>> nodes_;  // index = inode number; 0 unused
  // The node each path was last given (under nodes_mu_): a later view reuses it if unchanged.
  std::unordered_map<std::string, Ino> by_path_;
  // Open files and directories by handle (fs/handle_table.h: a read holds its own reference).
  // Handles still open when the mount goes are freed with this object.
  HandleTable<OpenFile, DirHandle> handles_;
  // A read refused for lack of access was logged (once per mount of this repo).
  std::atomic<bool> access_denied_logged_{false};
};

}  // namespace hubfs
