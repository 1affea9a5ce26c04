// A repo's listings and pinned revisions kept with the block cache (cache/listing_store.h says
// where), so a remount of the same commit asks the Hub for no listing, and an `--offline` mount
// serves a repo from the cache alone.
//
// What is kept: each directory's listing exactly as the Hub gave it for one commit (a pinned
// commit never changes, so a stored listing never goes stale), and for each revision a mount
// pinned, the commit it pointed at then (what `--offline` resolves a branch to).
//
// A document is trusted only whole: it must parse, name the same endpoint, repo, commit and
// directory it is looked up under, hold as many entries as it says, and each entry must be a
// direct child of its directory. Anything else (a torn or foreign file, a hash collision) reads
// as absent: the mount lists again online, and offline says the directory was never listed.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "common/status.h"
#include "hub/hub_client.h"

namespace hubfs {

// What a revision was pinned to when a mount last resolved it online.
struct PinnedRevision {
  std::string commit;
  int64_t last_modified = 0;  // the commit date (unix seconds), for file times
  bool is_private = false;
  bool gated = false;         // (stored records older than this field read as not gated)
  int64_t resolved_at = 0;    // when (unix seconds, the Env's wall time): messages say how old an offline view is
  // Files in the commit, when the Hub said (online pins only; not stored): decides whether the
  // repo is listed whole (FsOptions::list_whole_repo).
  std::optional<size_t> file_count;
};

// Thread-safe (no state beyond its names; every call is a file read or an atomic write).
class ListingCache {
 public:
  // endpoint as configured (it may carry credentials: it is hashed into a file name, and only
  // url_for_log's form is written into documents). repo: type and id (its revision is ignored).
  ListingCache(std::string cache_dir, std::string endpoint, const RepoRef& repo);

  std::optional<std::vector<TreeEntry>> load_dir(const std::string& commit, const std::string& dir) const;
  Status save_dir(const std::string& commit, const std::string& dir, const std::vector<TreeEntry>& entries) const;

  // One file's entry at a commit, as its resolve answer described it (open_repo_session's probe
  // of the file a door opens): the next session opens that file at this commit without the Hub,
  // as a stored listing of its directory would let it.
  std::optional<TreeEntry> load_file(const std::string& commit, const std::string& path) const;
  Status save_file(const std::string& commit, const TreeEntry& entry) const;

  std::optional<PinnedRevision> load_ref(const std::string& revision) const;
  Status save_ref(const std::string& revision, const PinnedRevision& pinned) const;

  const std::string& repo_label() const { return repo_label_; }
  const std::string& cache_dir() const { return cache_dir_; }

 private:
  std::string cache_dir_;
  std::string shown_endpoint_;  // credentials removed
  std::string repo_label_;      // "datasets/org/name"
  std::string repo_dir_;
};

// The record the cache holds of `repo.revision` when it is a commit sha pinned before (a commit
// never moves, so this answers its pin without the Hub); nothing for a branch or a tag, or with
// no record or no cache.
std::optional<PinnedRevision> stored_commit_pin(const RepoRef& repo, const ListingCache* listings);

// The commit `repo.revision` points at. Online: asked of the Hub, and remembered in `listings`
// (when given, under the revision and under the commit) for later offline mounts; a commit sha
// remembered is answered from there, online too (a commit never moves); when the Hub cannot be reached and `listings` remembers
// the revision, the error says that --offline would mount it. Offline: what `listings`
// remembers (a 40-hex revision is its own commit), never a request; nothing remembered is
// kNotFound saying to mount once online. `listings` null and offline: kInvalidArgument.
Result<PinnedRevision> pin_revision(HubClient& hub, const RepoRef& repo, const ListingCache* listings, bool offline);

// pin_revision online, storing before it returns only the record a worker may need at once: the
// commit's, when `listings` lacks it or holds another answer for it (a worker handed the commit,
// a pickled file, opens from that record without asking). What only refreshes the records (the
// revision's own, and the commit's time of resolution) is left in `store_later`, for the caller
// to run once it has handed the answer on: a record's atomic rename cost a fresh process's first
// open 10-13 ms on a busy ext4 disk (docs/benchmarks.md, session 29). `listings` must outlive it.
Result<PinnedRevision> pin_revision_storing_later(HubClient& hub, const RepoRef& repo, const ListingCache* listings,
                                                  std::function<void()>* store_later);

}  // namespace hubfs
