// Where a mount keeps what the Hub told it about a repo, next to the blocks, so that a remount of
// the same commit lists nothing and `--offline` can mount from the cache alone:
//
//   <cache_dir>/listings/<endpoint key>/<repo key>/<commit>/<dir key>.json   one directory's listing
//   <cache_dir>/listings/<endpoint key>/<repo key>/refs/<revision key>.json  revision -> commit
//
// <endpoint key> is 16 hex digits of sha256(endpoint) (the endpoint may carry credentials: they
// never reach a file name); <repo key> is "datasets~org~name" (repo_key()), readable and free of
// '/' and "..", so `hubfs cache clear REPO` finds a repo's listings under every endpoint;
// <dir key> and <revision key> are 16 hex digits of sha256 of the name. Documents are opaque
// text here (core/fs/listing_cache.h gives them their meaning).
//
// Multi-process safe like the blocks: a document is written to a temp file and renamed into
// place, so a reader sees a whole old one, a whole new one, or none. Every file is 0600 and every
// directory 0700 (a private repo's file names must not become readable to other users).
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "common/env.h"
#include "common/status.h"

namespace hubfs::listing_store {

// "<cache_dir>/listings".
std::string listings_dir(const std::string& cache_dir);
// "datasets/org/name" -> "datasets~org~name"; any byte outside [A-Za-z0-9._-] becomes %XX.
std::string repo_key(const std::string& repo_label);
// The directory holding one repo's documents as seen from one endpoint.
std::string repo_dir(const std::string& cache_dir, const std::string& endpoint, const std::string& repo_label);
// Paths of the two kinds of document under repo_dir.
std::string dir_document(const std::string& repo_dir, const std::string& commit, const std::string& dir);
std::string ref_document(const std::string& repo_dir, const std::string& revision);
// One file's record at a commit (ListingCache::save_file), beside that commit's listings.
std::string file_document(const std::string& repo_dir, const std::string& commit, const std::string& path);

// Temp file + rename; best effort (the caller decides whether to log).
Status write(const std::string& path, const std::string& text);
// The whole document, or nothing (missing, unreadable, larger than any listing we write).
std::optional<std::string> read(const std::string& path);

struct Usage {
  uint64_t files = 0;
  uint64_t bytes = 0;
};
// Every document (all repos, or those of one repo label), temp files excluded.
Usage usage(const std::string& cache_dir, const std::string& repo_label = {});
// Removes every document (all repos, or one repo's under every endpoint) and stale temp files;
// directories stay (a writer recreates what it needs anyway). Returns what was removed.
Usage remove(Env& env, const std::string& cache_dir, const std::string& repo_label = {});

}  // namespace hubfs::listing_store
