// `hubfs cache info|prune|clear|verify`: offline work on a block cache directory.
//
// Every operation is safe while mounts use the same directory: blocks are whole files that
// appear by rename, and a mount that finds a block missing (because prune or clear removed it)
// fetches it again, as it does after its own eviction. Directories are never removed (a mount's
// put recreates a missing shard anyway); only block files, index entries, and temp files left by
// crashed writers (older than an hour) are.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "cache/cache_index.h"
#include "shared/shared_store.h"
#include "common/env.h"
#include "common/status.h"

namespace hubfs::cache_admin {

struct FileUsage {
  IndexRecord record;
  uint64_t bytes = 0;   // on disk (block files, headers included: what the budget counts)
  uint64_t blocks = 0;
};

struct RepoUsage {
  std::string repo;
  uint64_t bytes = 0;   // blocks of content another repo shares count for both
  uint64_t blocks = 0;
  std::vector<FileUsage> files;  // files with at least one cached block, by path
};

struct Usage {
  std::string cache_dir;
  uint64_t total_bytes = 0;  // every block file (and temp files of writes in flight)
  uint64_t blocks = 0;
  std::optional<uint64_t> budget_bytes;  // the last mount's --cache-size, if one recorded it
  std::vector<RepoUsage> repos;          // by bytes, largest first
  uint64_t unindexed_bytes = 0;  // blocks no index entry names (read before the index existed)
  uint64_t unindexed_blocks = 0;
  uint64_t listing_files = 0;  // stored listings and pinned revisions (cache/listing_store.h)
  uint64_t listing_bytes = 0;
  // Decoded Xet chunks kept by xorb and index (core/xet/chunk_cache.h), shared by every file and
  // revision that holds them: what a second revision did not fetch again.
  uint64_t xet_chunks = 0;
  uint64_t xet_chunk_bytes = 0;
  // What reads took from those chunks instead of the network, over every mount of this cache
  // directory since it was made or cleared (kXetSavedFile): chunks another file or revision had
  // brought (dedup), or that outlived their file's evicted blocks.
  uint64_t xet_served_chunks = 0;
  uint64_t xet_served_bytes = 0;
};

// The chunk cache's directory under a cache directory (core/xet/chunk_cache.h).
inline constexpr const char* kXetChunkDir = "xet-chunks";
// Its count of what it served (common/counter_file.h; xet::ChunkCache::saved_path of the above).
inline constexpr const char* kXetSavedFile = "xet-chunks.saved";
// h5chunk.FrameDataset plans' in-flight markers: one empty file per file planned, kept there
// (python/h5chunk/_inflight.py names it too). Only a whole clear takes them.
inline constexpr const char* kInflightDir = "inflight";

// Fails only when the directory does not exist or is not a hubfs cache.
Result<Usage> info(const std::string& cache_dir);
nlohmann::json to_json(const Usage& usage);
std::string to_text(const Usage& usage);

struct Removed {
  uint64_t blocks = 0;
  uint64_t bytes = 0;
  uint64_t index_entries = 0;
  uint64_t kept_shared_blocks = 0;  // clear REPO: blocks another repo's file also uses
  uint64_t total_bytes_after = 0;   // prune: what the directory holds now
  uint64_t listing_files = 0;       // clear: stored listings removed (prune keeps them all)
};

// Removes least-recently-used blocks (oldest mtime first) until the blocks take at most
// max_bytes. Stored listings are kept: they are small (a few hundred bytes an entry), outside
// the block budget, and what a remount and an --offline mount need even when blocks are gone.
Result<Removed> prune(Env& env, const std::string& cache_dir, uint64_t max_bytes);
// Everything (repo empty), or the blocks of one repo's files ("datasets/org/name") except
// those of content ids another repo's file also uses, and that repo's index entries and stored
// listings (under every endpoint). A whole clear also takes the Xet chunks and the plans'
// in-flight marker files.
Result<Removed> clear(Env& env, const std::string& cache_dir, const std::string& repo = {});

struct Verified {
  uint64_t checked = 0;
  uint64_t bad = 0;       // failed the header/checksum check: deleted
  uint64_t vanished = 0;  // removed by a mount while we looked (evicted): not an error
  std::vector<std::string> bad_files;
};
// Re-checks every block's header and CRC-32C (block_file::verify) and deletes the bad ones.
Result<Verified> verify(const std::string& cache_dir);

struct ContentVerified {
  uint64_t files_checked = 0;     // content ids whose every block was cached: re-hashed
  uint64_t files_incomplete = 0;  // partly cached and left so (not judged): see unverifiable_files
  // Each partly cached file left unverified: "repo/path (content id): N of M bytes cached", then,
  // with --complete, why it could not be completed ("; not fetched: ..."). A partial read has no
  // whole-file hash to check against, so these blocks are NOT verified (beyond their CRC-32C,
  // which only proves they are what was written, not what the Hub holds).
  std::vector<std::string> unverifiable_files;
  uint64_t unverifiable_bytes = 0;
  uint64_t files_bad = 0;         // hash differs from the content id: all blocks deleted
  std::vector<std::string> bad_files;  // "repo/path (content id): why"
  // With --complete (ContentVerifyOptions::hub):
  uint64_t files_completed = 0;   // partly cached files filled from the Hub and verified whole
  uint64_t files_refetched = 0;   // bad files (of files_bad) fetched again whole and verified exact
  uint64_t files_unmappable = 0;  // of files_incomplete: no Hub URL known for them (see the reason)
  uint64_t bytes_fetched = 0;
  std::vector<std::string> fetch_errors;  // "repo/path: why" (each cause and its fix, once per repo)
  uint64_t shared_blocks_deleted = 0;     // deletes queued in the shared tier for bad files' blocks
};

// Where `cache verify --complete` gets the bytes a partly cached file lacks: the Hub, seen
// through a file's index record (repo, commit, path). Injectable, so the logic is tested
// without a server (tools/cache_verify.cc wires the real Hub).
struct HubSource {
  // OK when `fetch` can serve this file; otherwise why not, in words for the report (no commit
  // recorded, read through another endpoint, ...): the file is reported unverifiable, not fetched.
  std::function<Status(const IndexRecord&)> mappable;
  // Exactly `length` bytes at `offset` of the file at its recorded commit, or why not. An error
  // coded kUnavailable or kTimeout means the Hub cannot be reached: no further file is tried.
  // kPermissionDenied or kNotFound is taken to hold for the whole repo: its other files are
  // not tried either (the first error, with its fix, is reported once).
  std::function<Result<std::string>(const IndexRecord&, uint64_t offset, uint64_t length)> fetch;
};

struct ContentVerifyOptions {
  // --complete: fetch what partly cached files lack, verify them whole; refetch a bad file after
  // purging it. Unset: partly cached files are only reported.
  std::optional<HubSource> hub;
  // A shared tier (shared/shared_store.h) a bad file's blocks are deleted from as well, under the
  // key the machines sharing it hold. Both or neither.
  SharedStore* shared = nullptr;
  std::optional<SharedStoreKey> shared_key;
  // Called as the work advances: bytes of files gone through so far, of `total` (every indexed
  // file's size, each content once). On the calling thread.
  std::function<void(uint64_t done, uint64_t total)> progress;
};

// Re-hashes every complete file the index names (sha256 for LFS files, the git blob id for
// small ones) from its cached blocks and deletes every block of a file whose hash differs from
// its content id (from the shared tier too when one is given). Blocks are 1 MiB (the mount's
// default block size). With options.hub, partly cached files are completed from the Hub and
// verified whole, and bad files fetched again (see ContentVerifyOptions). `env`: the block
// cache's (the caller's: the real one in a main).
Result<ContentVerified> verify_content(const std::string& cache_dir, Env& env, const ContentVerifyOptions& options = {});

// "1.5 GiB", "812 KiB", "17 B".
std::string human_bytes(uint64_t bytes);

}  // namespace hubfs::cache_admin
