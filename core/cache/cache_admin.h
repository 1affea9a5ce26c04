// `hubfs cache info|prune|clear|verify`: offline work on a block cache directory.
//
// Every operation is safe while mounts use the same directory: blocks are whole files that
// appear by rename, and a mount that finds a block missing (because prune or clear removed it)
// fetches it again, as it does after its own eviction. Directories are never removed (a mount's
// put recreates a missing shard anyway); only block files, index entries, and temp files left by
// crashed writers (older than an hour) are.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "cache/cache_index.h"
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
};

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
Result<Removed> prune(const std::string& cache_dir, uint64_t max_bytes);
// Everything (repo empty), or the blocks of one repo's files ("datasets/org/name") except
// those of content ids another repo's file also uses, and that repo's index entries and stored
// listings (under every endpoint).
Result<Removed> clear(const std::string& cache_dir, const std::string& repo = {});

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
  uint64_t files_incomplete = 0;  // some block missing: cannot be judged
  // Each partly cached file: "repo/path (content id): N of M bytes cached". A partial read has no
  // whole-file hash to check against, so these blocks are NOT verified (beyond their CRC-32C,
  // which only proves they are what was written, not what the Hub holds).
  std::vector<std::string> unverifiable_files;
  uint64_t unverifiable_bytes = 0;
  uint64_t files_bad = 0;         // hash differs from the content id: all blocks deleted
  std::vector<std::string> bad_files;  // "repo/path (content id): why"
};
// Re-hashes every complete file the index names (sha256 for LFS files, the git blob id for
// small ones) from its cached blocks and deletes every block of a file whose hash differs from
// its content id. Blocks are 1 MiB (the mount's default block size).
Result<ContentVerified> verify_content(const std::string& cache_dir);

// "1.5 GiB", "812 KiB", "17 B".
std::string human_bytes(uint64_t bytes);

}  // namespace hubfs::cache_admin
