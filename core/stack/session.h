// One repo (or one directory of it) pinned to a commit, with its FileSystem over the stack
// (stack/stack.h): what a mount (fuse/mount.cc), hubfs.open in Python and `hubfs cat|cp` open.
// Reading a file of it without a mount: stack/hub_file.h.
#pragma once

#include <functional>
#include <memory>
#include <string>

#include "cache/cache_key.h"
#include "common/env.h"
#include "common/status.h"
#include "common/task_queue.h"
#include "fs/filesystem.h"
#include "hub/environment.h"
#include "hub/repo_ref.h"
#include "stack/config.h"
#include "stack/stack.h"

namespace hubfs {

// `hubfs cache info` and `clear REPO` map content ids back to repo files through this index
// (cache/cache_index.h); best effort. Each file is recorded under its cache key for blocks of
// `block_size` (cache/cache_key.h), so the tools find the blocks of every size.
std::function<void(const RemoteFile&)> index_recorder(const std::string& cache_dir, const std::string& repo_label,
                                                      const std::string& revision, const std::string& commit,
                                                      uint32_t block_size = kDefaultBlockSize);

// One repo (or one directory of it) pinned to a commit, with its FileSystem over the stack.
struct RepoSession {
  // env: the stack's (Stack::env); must outlive the session.
  explicit RepoSession(Env& env) : stack(env) {}
  RepoRef repo;           // as named: revision as asked ("main", a tag, a sha)
  std::string subfolder;  // the directory the FileSystem's root shows ("" = the repo's root)
  std::string label;      // "datasets/ORG/NAME"
  PinnedRevision info;    // the commit it is pinned to, private/gated
  bool offline = false;
  Stack stack;
  // Work open_repo_session runs beside its build: the pin (waited for), the first file's probe
  // (one slow to answer is not waited for: see open_repo_session) and the first blocks loaded
  // from the disk cache. Drained after the stack's shutdown, which ends its requests, and before
  // the stack goes.
  std::unique_ptr<Executor> background;
  std::unique_ptr<FileSystem> fs;  // declared last: destroyed first

  ~RepoSession() {
    stack.shutdown();  // fetches in flight end before the FileSystem and the stack go
    fs.reset();
  }
};

// Pins spec's repo (offline: from the stored listings), checks its subfolder, builds the stack
// and the FileSystem with the listings kept in the cache. A pin that asks the Hub runs on
// RepoSession::background while the reader and its disk cache are built (a disk cache that
// exists already: none is made before the pin has found the repo; and no shared tier: whether
// the repo may use it is the pin's answer); nothing is read before the pin has answered. `customize` may add to the FileSystem's
// options before it is built (the mount adds its status attribute). Lists the root ahead of the
// first access (a failure there is only logged).
//
// `first_file`: the repo path of the file the caller opens next (the hf:// doors open one file
// per session they make). Unless the cache knows it at the commit this revision was pinned to
// last (a stored listing of its directory, or its own record), its HEAD resolve runs beside the
// pin (HubClient::probe_file), on RepoSession::background; one not answered within a second of
// the pin (or the pin's own time, if longer: a probe held for the resolvers' quota, say) is not
// waited for. If it was served from the pinned commit, the FileSystem knows
// the file from it (FileSystem::know_file), its CDN location is kept, its record is stored
// (ListingCache::save_file: the next session, offline ones too, needs no request for it) and
// the root is not listed ahead: the file's first block is one round trip after the pin instead
// of three (the listing, the resolve, the block). A first file the cache knows (its entry in its
// directory's stored listing, or its own record) is known the same way, with no request: the
// root is not listed ahead either; that stored listing of its directory, read at the commit
// the pin confirms, is the FileSystem's listing of it (FileSystem::know_listing; up to
// kKnownListingMax entries), so its siblings' lookups read nothing more. Whatever else is
// looked up lists as before. While a branch's
// pin is out, the first blocks of that file and of up to 15 files after it in its directory's
// stored listing load from the disk cache into memory (never fetched; blocks are keyed by
// content, so a branch that moved reads its own), for the opens that follow.
// Whether open_repo_session(config, spec, s, {}, first_file) asks the Hub nothing: offline, or a
// commit sha whose pin the cache holds, with the first file known from the cache at it (without
// one: the root's listing stored). A caller that must stay interruptible while it waits on the
// Hub (Python's main thread) builds such a session on its own thread. Reads a few stored
// documents.
bool session_needs_no_request(const SessionConfig& config, const RepoSpec& spec, const std::string& first_file);

Status open_repo_session(const SessionConfig& config, const RepoSpec& spec, RepoSession& s,
                         const std::function<void(RepoSession&, FsOptions&)>& customize = {},
                         const std::string& first_file = "");

}  // namespace hubfs
