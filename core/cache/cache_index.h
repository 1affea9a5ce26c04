// Which repo files the cached content ids were read as, for `hubfs cache info` and
// `hubfs cache clear REPO`. Blocks are keyed by content id only (so identical files share them);
// this index is the only place that maps them back to repos and paths.
//
// One small file per (content id, repo, path), written to a temp file and renamed into place:
//
//   <cache_dir>/index/<shard>/<content stem>~<16 hex of sha256(repo, path)>
//
// <shard> and <content stem> are those of the content id's block files (block_file.h: the
// block files are "<content stem>.<index>"), so the entries of one content id sit next to each
// other. Several processes may record at once: there is no central file two writers could tear,
// and a writer never rewrites an entry that exists. The file holds one JSON object (IndexRecord).
// Entries are advisory: a missing or unreadable one only leaves blocks unattributed.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "common/status.h"

namespace hubfs {

struct IndexRecord {
  std::string repo;        // "datasets/org/name": type prefix (models/, datasets/, spaces/) + id
  std::string revision;    // as asked at mount time ("main", a tag, ...)
  std::string commit;      // what it was pinned to
  std::string path;        // inside the repo
  std::string content_id;  // the cache key ("sha256:<hex>", "oid:<hex>")
  uint64_t size = 0;       // the file's size
};

// An entry as found on disk.
struct IndexEntry {
  IndexRecord record;
  std::string file;        // its full path
  std::string stem;        // the content stem its blocks are named with
  int64_t mtime_ns = 0;
};

namespace cache_index {

// "<cache_dir>/index".
std::string index_dir(const std::string& cache_dir);
// The stem of a content id's block files: block_file::file_name(id, digest, i) is "<stem>.<i>".
std::string content_stem(std::string_view content_id);
// Writes the entry unless one for the same (content id, repo, path) exists. Best effort:
// returns why it could not write (the caller logs it once, never fails a read for it).
Status record(const std::string& cache_dir, const IndexRecord& record);
// Every readable entry (unparseable files are skipped; temp files are not entries).
std::vector<IndexEntry> read_all(const std::string& cache_dir);

// The budget the last mount ran with ("<cache_dir>/index/budget"), for `hubfs cache info`.
Status write_budget(const std::string& cache_dir, uint64_t budget_bytes);
std::optional<uint64_t> read_budget(const std::string& cache_dir);

}  // namespace cache_index
}  // namespace hubfs
