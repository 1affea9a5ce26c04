#include "cache/cache_admin.h"

#include <sys/stat.h>

#include <algorithm>
#include <filesystem>
#include <chrono>
#include <cstdio>
#include <map>
#include <set>
#include <sstream>
#include <unordered_map>

#include "cache/block_cache.h"
#include "cache/block_file.h"
#include "cache/cache_disk.h"
#include "cache/cache_key.h"
#include "cache/content_verifier.h"
#include "cache/listing_store.h"
#include "common/counter_file.h"
#include "cache/chunk_run_name.h"

namespace hubfs::cache_admin {
namespace {

// A temp file this old belongs to a writer that crashed (a put takes milliseconds); younger
// ones are writes in flight, left alone. The same rule as the block cache's own scans.
constexpr std::chrono::hours kStaleTempAge{1};
// Prune drops index entries whose content has no block left, but only entries at least this
// old: a mount records a file when it opens it, before its first block lands.
constexpr std::chrono::minutes kIndexGraceAge{10};

// Wall time, compared with the files' mtimes (which the kernel stamps on its own clock).
int64_t now_ns(const Env& env) {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(env.system_now().time_since_epoch()).count();
}

std::string base_name(const std::string& path) { return path.substr(path.rfind('/') + 1); }

struct BlockFile {
  DiskEntry entry;
  std::string stem;  // "" for a file that is not named like a block
  uint64_t index = 0;
};

struct Listing {
  std::vector<BlockFile> blocks;
  std::vector<DiskEntry> temps;
};

// "<stem>.<index>" -> stem and index.
bool split_block_name(const std::string& name, std::string& stem, uint64_t& index) {
  const size_t dot = name.rfind('.');
  if (dot == std::string::npos || dot == 0 || dot + 1 == name.size()) return false;
  index = 0;
  for (size_t i = dot + 1; i < name.size(); ++i) {
    if (name[i] < '0' || name[i] > '9' || i - dot > 19) return false;
    index = index * 10 + static_cast<uint64_t>(name[i] - '0');
  }
  stem = name.substr(0, dot);
  return true;
}

Status check_cache_dir(const std::string& dir) {
  struct stat st {};
  if (::stat(dir.c_str(), &st) != 0 || !S_ISDIR(st.st_mode))
    return NotFound("cache directory " + dir +
                    " does not exist (nothing cached there yet?); name another with --cache-dir");
  const std::string blocks = dir + "/blocks", index = cache_index::index_dir(dir),
                    listings = listing_store::listings_dir(dir);
  if (::stat(blocks.c_str(), &st) != 0 && ::stat(index.c_str(), &st) != 0 && ::stat(listings.c_str(), &st) != 0)
    return InvalidArgument(dir + " is not a hubfs cache directory (it has no blocks/, index/ or listings/); "
                           "name the right one with --cache-dir");
  return Status::Ok();
}

Listing list_blocks(const std::string& cache_dir) {
  Listing out;
  auto listed = posix_disk()->list_files(cache_dir + "/blocks");
  if (!listed.ok()) return out;  // no block written yet
  for (DiskEntry& e : *listed) {
    const std::string name = base_name(e.path);
    if (block_file::is_temp_name(name)) {
      out.temps.push_back(std::move(e));
      continue;
    }
    BlockFile b;
    if (!split_block_name(name, b.stem, b.index)) b.stem.clear();
    b.entry = std::move(e);
    out.blocks.push_back(std::move(b));
  }
  return out;
}

// Removes temp files of crashed writers; returns the bytes of those left (writes in flight).
uint64_t sweep_temps(const Env& env, const std::vector<DiskEntry>& temps, const std::string& index_dir) {
  const int64_t stale_before = now_ns(env) - std::chrono::nanoseconds(kStaleTempAge).count();
  auto disk = posix_disk();
  uint64_t live = 0;
  for (const DiskEntry& t : temps) {
    if (t.mtime_ns < stale_before && disk->remove(t.path).ok()) continue;
    live += t.size;
  }
  if (auto listed = disk->list_files(index_dir); listed.ok()) {
    for (const DiskEntry& e : *listed)
      if (block_file::is_temp_name(base_name(e.path)) && e.mtime_ns < stale_before) (void)disk->remove(e.path);
  }
  return live;
}

// The digest a block file's header must carry, from its stem: "_h<64 hex>" carries it, any
// other stem is an escaped content id (block_file::file_name), unescaped here.
bool digest_of_stem(const std::string& stem, uint64_t index, block_file::Digest& digest) {
  auto nibble = [](char c) -> int {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    return -1;
  };
  if (stem.size() == 2 + 2 * digest.size() && stem.starts_with("_h")) {
    for (size_t i = 0; i < digest.size(); ++i) {
      int hi = nibble(stem[2 + 2 * i]), lo = nibble(stem[3 + 2 * i]);
      if (hi < 0 || lo < 0) return false;
      digest[i] = static_cast<uint8_t>(hi * 16 + lo);
    }
    return true;
  }
  std::string id;
  for (size_t i = 0; i < stem.size(); ++i) {
    if (stem[i] != '_') {
      id += stem[i];
      continue;
    }
    if (i + 1 == stem.size()) return false;
    char next = stem[++i];
    if (next == '_') id += '_';
    else if (next == 'c') id += ':';
    else return false;
  }
  digest = block_file::digest_content_id(id);
  // Only a name escaping produces is a block of that id.
  return block_file::file_name(id, digest, index) == stem + "." + std::to_string(index);
}

std::string fmt(double v, const char* unit) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.1f %s", v, unit);
  return buf;
}

}  // namespace

std::string human_bytes(uint64_t bytes) {
  static const char* kUnits[] = {"KiB", "MiB", "GiB", "TiB"};
  if (bytes < 1024) return std::to_string(bytes) + " B";
  double v = static_cast<double>(bytes) / 1024;
  int u = 0;
  while (v >= 1024 && u < 3) {
    v /= 1024;
    ++u;
  }
  return fmt(v, kUnits[u]);
}

Result<Usage> info(const std::string& cache_dir) {
  if (Status s = check_cache_dir(cache_dir); !s.ok()) return s;
  Usage usage;
  usage.cache_dir = cache_dir;
  usage.budget_bytes = cache_index::read_budget(cache_dir);
  Listing listing = list_blocks(cache_dir);
  struct StemUsage {
    uint64_t bytes = 0, blocks = 0;
    bool attributed = false;
  };
  std::unordered_map<std::string, StemUsage> by_stem;
  for (const BlockFile& b : listing.blocks) {
    usage.total_bytes += b.entry.size;
    usage.blocks += 1;
    StemUsage& s = by_stem[b.stem];
    s.bytes += b.entry.size;
    s.blocks += 1;
  }
  for (const DiskEntry& t : listing.temps) usage.total_bytes += t.size;
  const listing_store::Usage listings = listing_store::usage(cache_dir);
  usage.listing_files = listings.files;
  usage.listing_bytes = listings.bytes;
  {
    std::error_code ec;
    for (auto it = std::filesystem::recursive_directory_iterator(cache_dir + "/" + kXetChunkDir, ec);
         !ec && it != std::filesystem::recursive_directory_iterator(); it.increment(ec)) {
      if (!it->is_regular_file(ec)) continue;
      uint32_t first = 0, end = 0;  // a run of chunks [first, end) per file
      if (parse_chunk_run_name(it->path().filename().string(), "", &first, &end)) usage.xet_chunks += end - first;
      usage.xet_chunk_bytes += it->file_size(ec);
    }
    const counter_file::Totals served = counter_file::read(cache_dir + "/" + kXetSavedFile);
    if (auto it = served.find("chunks"); it != served.end()) usage.xet_served_chunks = it->second;
    if (auto it = served.find("bytes"); it != served.end()) usage.xet_served_bytes = it->second;
  }

  std::map<std::string, RepoUsage> repos;
  for (const IndexEntry& e : cache_index::read_all(cache_dir)) {
    auto it = by_stem.find(e.stem);
    if (it == by_stem.end()) continue;  // nothing of it is cached (any more)
    it->second.attributed = true;
    RepoUsage& r = repos[e.record.repo];
    r.repo = e.record.repo;
    r.files.push_back(FileUsage{e.record, it->second.bytes, it->second.blocks});
  }
  for (auto& [name, r] : repos) {
    // One content id read under two paths of the same repo is one set of blocks.
    std::set<std::string> counted;
    std::sort(r.files.begin(), r.files.end(),
              [](const FileUsage& a, const FileUsage& b) { return a.record.path < b.record.path; });
    for (const FileUsage& f : r.files) {
      if (!counted.insert(f.record.content_id).second) continue;
      r.bytes += f.bytes;
      r.blocks += f.blocks;
    }
    usage.repos.push_back(std::move(r));
  }
  std::stable_sort(usage.repos.begin(), usage.repos.end(),
                   [](const RepoUsage& a, const RepoUsage& b) { return a.bytes > b.bytes; });
  for (const auto& [stem, s] : by_stem) {
    if (s.attributed) continue;
    usage.unindexed_bytes += s.bytes;
    usage.unindexed_blocks += s.blocks;
  }
  return usage;
}

nlohmann::json to_json(const Usage& u) {
  nlohmann::json repos = nlohmann::json::array();
  for (const RepoUsage& r : u.repos) {
    nlohmann::json files = nlohmann::json::array();
    for (const FileUsage& f : r.files) {
      files.push_back({{"path", f.record.path},
                       {"revision", f.record.revision},
                       {"commit", f.record.commit},
                       {"content_id", f.record.content_id},
                       {"size", f.record.size},
                       {"bytes", f.bytes},
                       {"blocks", f.blocks}});
    }
    repos.push_back({{"repo", r.repo}, {"bytes", r.bytes}, {"blocks", r.blocks}, {"files", std::move(files)}});
  }
  return {{"cache_dir", u.cache_dir},
          {"total_bytes", u.total_bytes},
          {"blocks", u.blocks},
          {"budget_bytes", u.budget_bytes ? nlohmann::json(*u.budget_bytes) : nlohmann::json(nullptr)},
          {"repos", std::move(repos)},
          {"unindexed_bytes", u.unindexed_bytes},
          {"unindexed_blocks", u.unindexed_blocks},
          {"listing_files", u.listing_files},
          {"listing_bytes", u.listing_bytes},
          {"xet_chunks", u.xet_chunks},
          {"xet_chunk_bytes", u.xet_chunk_bytes},
          {"xet_served_chunks", u.xet_served_chunks},
          {"xet_served_bytes", u.xet_served_bytes}};
}

static std::string blocks_text(uint64_t n) { return std::to_string(n) + (n == 1 ? " block" : " blocks"); }

std::string to_text(const Usage& u) {
  std::ostringstream out;
  out << "cache " << u.cache_dir << ": " << human_bytes(u.total_bytes) << " in " << blocks_text(u.blocks);
  if (u.budget_bytes) {
    out << ", budget " << human_bytes(*u.budget_bytes) << " (the last mount's --cache-size)";
  } else {
    out << ", budget unknown (no mount has recorded one)";
  }
  out << "\n";
  for (const RepoUsage& r : u.repos) {
    out << "\n" << r.repo << "  " << human_bytes(r.bytes) << " in " << blocks_text(r.blocks) << "\n";
    for (const FileUsage& f : r.files) {
      // A file read in blocks of another size (hf://'s block_size) is listed once per size.
      const uint32_t block = parse_cache_key(f.record.content_id).block_size;
      out << "  " << f.record.path << "  " << human_bytes(f.bytes) << " in " << blocks_text(f.blocks)
          << (block == kDefaultBlockSize ? "" : " of " + human_bytes(block)) << " (file " << human_bytes(f.record.size)
          << "), " << f.record.revision;
      if (!f.record.commit.empty() && f.record.commit != f.record.revision) out << " @ " << f.record.commit.substr(0, 12);
      out << "\n";
    }
  }
  if (u.unindexed_blocks > 0) {
    out << "\nnot in the index (read before hubfs kept one, or its entry was removed): "
        << human_bytes(u.unindexed_bytes) << " in " << blocks_text(u.unindexed_blocks) << "\n";
  }
  if (u.listing_files > 0) {
    out << "\nlistings kept for remounts and --offline: " << human_bytes(u.listing_bytes) << " in "
        << u.listing_files << (u.listing_files == 1 ? " file" : " files") << "\n";
  }
  if (u.xet_chunks > 0) {
    out << "\nXet chunks, shared by every file and revision that holds them: " << u.xet_chunks
        << (u.xet_chunks == 1 ? " chunk" : " chunks") << " recorded in " << human_bytes(u.xet_chunk_bytes)
        << " (their hashes, and where their bytes lie in the blocks above)\n";
  }
  if (u.xet_served_chunks > 0) {
    out << "Xet chunks served from this cache instead of the network (shared with another file or revision): "
        << human_bytes(u.xet_served_bytes) << " in " << u.xet_served_chunks
        << (u.xet_served_chunks == 1 ? " chunk" : " chunks") << " since the cache was made or cleared\n";
  }
  if (u.repos.size() > 1) out << "\n(blocks of a file several repos share count for each of them)\n";
  return out.str();
}

Result<Removed> prune(Env& env, const std::string& cache_dir, uint64_t max_bytes) {
  if (Status s = check_cache_dir(cache_dir); !s.ok()) return s;
  Listing listing = list_blocks(cache_dir);
  Removed removed;
  uint64_t total = sweep_temps(env, listing.temps, cache_index::index_dir(cache_dir));
  for (const BlockFile& b : listing.blocks) total += b.entry.size;
  std::sort(listing.blocks.begin(), listing.blocks.end(), [](const BlockFile& a, const BlockFile& b) {
    return a.entry.mtime_ns != b.entry.mtime_ns ? a.entry.mtime_ns < b.entry.mtime_ns : a.entry.path < b.entry.path;
  });
  auto disk = posix_disk();
  std::set<std::string> remaining_stems;
  for (const BlockFile& b : listing.blocks) {
    if (total > max_bytes) {
      Status s = disk->remove(b.entry.path);
      if (s.ok()) {
        removed.blocks += 1;
        removed.bytes += b.entry.size;
      }
      // Gone already (a mount evicted it) frees the space just the same.
      if (s.ok() || s.code() == Code::kNotFound) {
        total -= b.entry.size;
        continue;
      }
    }
    remaining_stems.insert(b.stem);
  }
  removed.total_bytes_after = total;
  // Entries of content with nothing left cached only clutter `info`.
  const int64_t grace_before = now_ns(env) - std::chrono::nanoseconds(kIndexGraceAge).count();
  for (const IndexEntry& e : cache_index::read_all(cache_dir)) {
    if (!remaining_stems.count(e.stem) && e.mtime_ns < grace_before && disk->remove(e.file).ok())
      removed.index_entries += 1;
  }
  return removed;
}

Result<Removed> clear(Env& env, const std::string& cache_dir, const std::string& repo) {
  if (Status s = check_cache_dir(cache_dir); !s.ok()) return s;
  auto disk = posix_disk();
  Removed removed;
  std::vector<IndexEntry> entries = cache_index::read_all(cache_dir);
  Listing listing = list_blocks(cache_dir);
  std::set<std::string> doomed, shared;  // stems
  if (!repo.empty()) {
    for (const IndexEntry& e : entries)
      if (e.record.repo == repo) doomed.insert(e.stem);
    for (const IndexEntry& e : entries)
      if (e.record.repo != repo && doomed.count(e.stem)) shared.insert(e.stem);
    if (doomed.empty() && listing_store::usage(cache_dir, repo).files == 0)
      return NotFound("nothing of " + repo + " is recorded in " + cache_dir +
                      " (see `hubfs cache info` for the repos it holds)");
  } else {
    (void)sweep_temps(env, listing.temps, cache_index::index_dir(cache_dir));
  }
  for (const BlockFile& b : listing.blocks) {
    if (!repo.empty() && !doomed.count(b.stem)) continue;
    if (shared.count(b.stem)) {
      removed.kept_shared_blocks += 1;
      continue;
    }
    if (disk->remove(b.entry.path).ok()) {
      removed.blocks += 1;
      removed.bytes += b.entry.size;
    }
  }
  for (const IndexEntry& e : entries) {
    if (!repo.empty() && e.record.repo != repo) continue;
    if (disk->remove(e.file).ok()) removed.index_entries += 1;
  }
  // The repo's stored listings go too: after a clear, a remount lists afresh and --offline has
  // nothing of it (its blocks are gone anyway).
  removed.listing_files = listing_store::remove(env, cache_dir, repo).files;
  // Xet chunks belong to no one repo (any file may share them): only a whole clear takes them.
  if (repo.empty()) {
    std::error_code ec;
    std::filesystem::remove_all(cache_dir + "/" + kXetChunkDir, ec);
    std::filesystem::remove(cache_dir + "/" + kXetSavedFile, ec);
    // The plans' marker files pile up, one per file ever planned. A live plan holding one that
    // goes keeps its locks on the removed file, which no worker sees: at worst a worker fetches a
    // block the plan has on its way too, never a wrong byte (the plan makes the directory anew).
    std::filesystem::remove_all(cache_dir + "/" + kInflightDir, ec);
  }
  return removed;
}

Result<Verified> verify(const std::string& cache_dir) {
  if (Status s = check_cache_dir(cache_dir); !s.ok()) return s;
  auto disk = posix_disk();
  Verified v;
  for (const BlockFile& b : list_blocks(cache_dir).blocks) {
    block_file::Digest digest{};
    Status why;
    if (b.stem.empty() || !digest_of_stem(b.stem, b.index, digest)) {
      why = Corrupt("not named like a block file");
    } else {
      auto contents = disk->read_file(b.entry.path, block_file::kHeaderSize + block_file::kMaxDataBytes);
      if (!contents.ok() && contents.status().code() == Code::kNotFound) {
        v.vanished += 1;  // evicted by a mount meanwhile
        continue;
      }
      why = contents.ok() ? block_file::verify(*contents, digest, b.index) : contents.status();
    }
    v.checked += 1;
    if (why.ok()) continue;
    // A mount may rename a fresh copy over this path between our read and this removal; that
    // copy is lost and fetched again, which costs a request, never a wrong byte.
    (void)disk->remove(b.entry.path);
    v.bad += 1;
    v.bad_files.push_back(b.entry.path + ": " + why.message());
  }
  return v;
}

namespace {

// Missing blocks fetched in one request by --complete: 8 (8 MiB of the mount's, its read-ahead
// request size): few requests for a big file, and a bounded buffer.
constexpr uint64_t kFetchBlocks = 8;

std::string describe(const IndexRecord& r) { return r.repo + "/" + r.path + " (" + r.content_id + ")"; }

// One pass of `cache verify` over the content ids the index names (see verify_content).
class ContentPass {
 public:
  ContentPass(BlockCache& cache, const ContentVerifyOptions& options) : cache_(cache), options_(options) {}

  void run(const std::vector<std::vector<IndexRecord>>& files) {
    for (const auto& records : files) total_ += records.front().size;
    for (const auto& records : files) {
      check(records);
      done_ += records.front().size;
      report(0);
    }
  }
  ContentVerified result() && { return std::move(v_); }

 private:
  // A record's content id is its cache key: the file's blocks are of the size the key says.
  static uint64_t block_of(const IndexRecord& r) { return parse_cache_key(r.content_id).block_size; }
  uint64_t blocks_of(const IndexRecord& r) const { return (r.size + block_of(r) - 1) / block_of(r); }
  uint64_t block_length(const IndexRecord& r, uint64_t i) const {
    return std::min(block_of(r), r.size - i * block_of(r));
  }
  static std::unique_ptr<ContentVerifier> verifier_for(const IndexRecord& r) {
    return ContentVerifier::for_content(parse_cache_key(r.content_id).content_id, r.size);
  }

  // Never backwards: a file is gone through twice when it is completed or fetched again.
  void report(uint64_t within_file) {
    const uint64_t now = std::min(total_, done_ + within_file);
    if (!options_.progress || now < shown_) return;
    shown_ = now;
    options_.progress(now, total_);
  }

  // The block if it is cached whole (a block failing its checksum is deleted by get: a miss).
  std::optional<std::string> cached(const IndexRecord& r, uint64_t i) {
    auto block = cache_.get(r.content_id, i);
    if (!block || block->size() != block_length(r, i)) return std::nullopt;
    return block;
  }

  void check(const std::vector<IndexRecord>& records) {
    const IndexRecord& r = records.front();
    auto verifier = verifier_for(r);
    if (!verifier) return;  // not a hash we can compute: nothing to judge it by
    bool complete = true;
    uint64_t cached_bytes = 0;
    for (uint64_t i = 0; i < blocks_of(r); ++i) {
      auto block = cached(r, i);
      if (!block) {
        complete = false;
        continue;  // keep counting what is cached, for the report
      }
      cached_bytes += block->size();
      if (complete) verifier->update(*block);
      report(cached_bytes);
    }
    if (!complete) {
      if (cached_bytes > 0) complete_partial(records, cached_bytes);
      return;
    }
    v_.files_checked += 1;
    const ContentVerifier::Verdict verdict = verifier->finish();
    if (!verdict.match) bad(records, "its blocks hash to " + verdict.computed);
  }

  // A partly cached file: completed from the Hub and judged whole (--complete), else reported.
  void complete_partial(const std::vector<IndexRecord>& records, uint64_t cached_bytes) {
    const IndexRecord& r = records.front();
    std::string why_not;
    if (options_.hub) {
      const IndexRecord* source = nullptr;
      Status unmappable = pick_source(records, source);
      if (!source) {
        why_not = "no Hub URL for it: " + unmappable.message();
        v_.files_unmappable += 1;
      } else {
        auto verdict = hash_filling(*source);
        if (verdict.ok()) {
          v_.files_checked += 1;
          if (verdict->match) {
            v_.files_completed += 1;
          } else {
            bad(records, "completed from the Hub, it hashes to " + verdict->computed);
          }
          return;
        }
        why_not = verdict.status().message();
      }
    }
    v_.files_incomplete += 1;
    v_.unverifiable_bytes += cached_bytes;
    v_.unverifiable_files.push_back(describe(r) + ": " + std::to_string(cached_bytes) + " of " +
                                    std::to_string(r.size) + " bytes cached" +
                                    (why_not.empty() ? "" : "; not completed: " + why_not));
  }

  // The first record the Hub source can fetch (identical content under several names: any will
  // do), or null and why the first one cannot be.
  Status pick_source(const std::vector<IndexRecord>& records, const IndexRecord*& source) {
    Status first;
    for (const IndexRecord& r : records) {
      Status s = options_.hub->mappable(r);
      if (s.ok()) {
        source = &r;
        return s;
      }
      if (first.ok()) first = s;
    }
    return first;
  }

  // Hashes the file from its cached blocks, fetching the missing ones (and caching them) as it
  // goes. A fetched block is cached before the verdict: if the file turns out bad, every block
  // is purged anyway, and a mount reading it meanwhile gets what a read of its own would have.
  Result<ContentVerifier::Verdict> hash_filling(const IndexRecord& r) {
    auto verifier = verifier_for(r);
    const uint64_t blocks = blocks_of(r), block = block_of(r);
    uint64_t i = 0, fed = 0;
    auto feed = [&](std::string_view bytes) {
      verifier->update(bytes);
      fed += bytes.size();
      report(fed);
    };
    while (i < blocks) {
      if (auto block = cached(r, i)) {
        feed(*block);
        ++i;
        continue;
      }
      // A run of missing blocks, up to kFetchBlocks, fetched in one request.
      uint64_t end = i + 1;
      std::optional<std::string> after;
      while (end < blocks && end - i < kFetchBlocks && !(after = cached(r, end))) ++end;
      const uint64_t offset = i * block, length = std::min(end * block, r.size) - offset;
      auto bytes = fetch(r, offset, length);
      if (!bytes.ok()) return bytes.status();
      v_.bytes_fetched += length;
      for (uint64_t j = i; j < end; ++j)
        cache_.put(r.content_id, j, std::string_view(*bytes).substr((j - i) * block, block_length(r, j)));
      feed(*bytes);
      i = end;
      if (after) {
        feed(*after);
        ++i;
      }
    }
    return verifier->finish();
  }

  // One range from the Hub, unless an earlier answer says it cannot come (the Hub is down, the
  // repo refused us): then the same reason, without asking again.
  Result<std::string> fetch(const IndexRecord& r, uint64_t offset, uint64_t length) {
    if (!hub_down_.empty()) return Status(Code::kUnavailable, "not tried: " + hub_down_);
    if (auto it = refused_.find(r.repo); it != refused_.end())
      return Status(Code::kPermissionDenied, "not tried: " + it->second);
    auto bytes = options_.hub->fetch(r, offset, length);
    if (bytes.ok() && bytes->size() != length) {
      bytes = Corrupt("the Hub sent " + std::to_string(bytes->size()) + " bytes for a range of " +
                      std::to_string(length));
    }
    if (bytes.ok()) return bytes;
    const Status& s = bytes.status();
    v_.fetch_errors.push_back(r.repo + "/" + r.path + ": " + s.message());
    if (s.code() == Code::kUnavailable || s.code() == Code::kTimeout) hub_down_ = s.message();
    if (s.code() == Code::kPermissionDenied || s.code() == Code::kNotFound) refused_[r.repo] = s.message();
    return s;
  }

  // Deletes every block of the file, here and in the shared tier.
  void purge(const IndexRecord& r) {
    for (uint64_t i = 0; i < blocks_of(r); ++i) {
      cache_.remove(r.content_id, i);
      if (options_.shared && options_.shared_key) {
        std::string key = SharedBlockKey{options_.shared_key->id(), r.content_id, static_cast<uint32_t>(block_of(r)), i}.str();
        const size_t size = shared_envelope::size(key, block_length(r, i));
        options_.shared->remove(std::move(key), size);
        v_.shared_blocks_deleted += 1;
      }
    }
  }

  // A file whose whole hash differs from its content id: purged, then (--complete) fetched
  // again whole and verified; what still fails is purged again.
  void bad(const std::vector<IndexRecord>& records, const std::string& why) {
    const IndexRecord& r = records.front();
    purge(r);
    v_.files_bad += 1;
    std::string line = describe(r) + ": " + why + "; all its blocks were deleted";
    if (options_.shared && options_.shared_key) line += " (here and in the shared tier)";
    if (options_.hub) {
      const IndexRecord* source = nullptr;
      Status unmappable = pick_source(records, source);
      if (!source) {
        line += "; not fetched again: no Hub URL for it: " + unmappable.message();
      } else if (auto again = hash_filling(*source); !again.ok()) {
        line += "; not fetched again: " + again.status().message();
      } else if (again->match) {
        v_.files_refetched += 1;
        line += "; fetched again from the Hub: exact";
      } else {
        purge(r);
        line += "; fetched again, it still hashes to " + again->computed +
                " (the Hub, or something between it and us, serves other bytes than its content id): deleted "
                "again";
      }
    }
    v_.bad_files.push_back(std::move(line));
  }

  BlockCache& cache_;
  const ContentVerifyOptions& options_;
  ContentVerified v_;
  uint64_t total_ = 0, done_ = 0, shown_ = 0;
  std::string hub_down_;                     // why the Hub cannot be reached, once it could not
  std::map<std::string, std::string> refused_;  // repo -> why the Hub refused its files
};

}  // namespace

Result<ContentVerified> verify_content(const std::string& cache_dir, Env& env, const ContentVerifyOptions& options) {
  if (Status s = check_cache_dir(cache_dir); !s.ok()) return s;
  CacheOptions cache_options;
  cache_options.env = &env;
  cache_options.dir = cache_dir;
  cache_options.budget_bytes = UINT64_MAX;  // look, never evict
  auto cache = BlockCache::open(cache_options);
  if (!cache.ok()) return cache.status();
  // Each content id once, with every record naming it, in index order.
  std::vector<std::vector<IndexRecord>> files;
  std::unordered_map<std::string, size_t> slot;
  for (IndexEntry& e : cache_index::read_all(cache_dir)) {
    auto [it, fresh] = slot.emplace(e.record.content_id, files.size());
    if (fresh) files.emplace_back();
    files[it->second].push_back(std::move(e.record));
  }
  ContentPass pass(**cache, options);
  pass.run(files);
  return std::move(pass).result();
}

}  // namespace hubfs::cache_admin
