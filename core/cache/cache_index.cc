#include "cache/cache_index.h"

#include <openssl/evp.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <nlohmann/json.hpp>

#include "cache/block_file.h"
#include "cache/cache_disk.h"

namespace hubfs::cache_index {
namespace {

// Entries are a few hundred bytes; anything much larger is not one of ours.
constexpr uint64_t kMaxEntryBytes = 64 * 1024;
// A record claiming a larger file is damaged: the bound listings have (hub_json::kMaxListedSize).
constexpr uint64_t kMaxRecordedSize = 1ull << 53;
constexpr char kKeySeparator = '~';  // never produced by block_file's escaping
constexpr const char* kBudgetFile = "budget";

std::string hex(const unsigned char* p, size_t n) {
  static const char kDigits[] = "0123456789abcdef";
  std::string out;
  for (size_t i = 0; i < n; ++i) {
    out += kDigits[p[i] >> 4];
    out += kDigits[p[i] & 0xF];
  }
  return out;
}

// 64 bits of sha256(repo NUL path): distinct (repo, path) pairs of one content id get distinct
// names; a collision would only merge two attributions.
std::string key_hash(const std::string& repo, const std::string& path) {
  std::string key = repo;
  key += '\0';
  key += path;
  unsigned char d[32];
  unsigned int len = 0;
  if (EVP_Digest(key.data(), key.size(), d, &len, EVP_sha256(), nullptr) != 1) return "0";
  return hex(d, 8);
}

// Unique per process and call, like the block cache's temp files (".tmp." prefix: skipped by
// readers, removed by `hubfs cache` once stale).
std::string temp_path(const std::string& dir) {
  static std::atomic<uint64_t> counter{0};
  return dir + "/" + std::string(block_file::kTempPrefix) + std::to_string(::getpid()) + "." +
         std::to_string(::gettid()) + "." + std::to_string(counter.fetch_add(1));
}

Status write_atomically(CacheDisk& disk, const std::string& dir, const std::string& path,
                        const std::string& contents) {
  if (Status s = disk.make_dirs(dir, 0700); !s.ok()) return s;
  const std::string tmp = temp_path(dir);
  Status s = disk.write_new_file(tmp, contents);
  if (s.ok()) s = disk.rename(tmp, path);
  if (!s.ok()) (void)disk.remove(tmp);
  return s;
}

}  // namespace

std::string index_dir(const std::string& cache_dir) { return cache_dir + "/index"; }

std::string content_stem(std::string_view content_id) {
  std::string name = block_file::file_name(content_id, block_file::digest_content_id(content_id), 0);
  return name.substr(0, name.size() - 2);  // drop ".0"
}

Status record(const std::string& cache_dir, const IndexRecord& r) {
  const block_file::Digest digest = block_file::digest_content_id(r.content_id);
  const std::string dir = index_dir(cache_dir) + "/" + block_file::shard_name(digest);
  const std::string path = dir + "/" + content_stem(r.content_id) + kKeySeparator + key_hash(r.repo, r.path);
  struct stat st {};
  if (::stat(path.c_str(), &st) == 0) return Status::Ok();  // recorded before (maybe by another mount)
  nlohmann::json j = {{"repo", r.repo},     {"revision", r.revision},     {"commit", r.commit},
                      {"path", r.path},     {"content_id", r.content_id}, {"size", r.size}};
  return write_atomically(*posix_disk(), dir, path, j.dump() + "\n");
}

std::vector<IndexEntry> read_all(const std::string& cache_dir) {
  std::vector<IndexEntry> out;
  auto disk = posix_disk();
  auto listed = disk->list_files(index_dir(cache_dir));
  if (!listed.ok()) return out;  // no index yet
  for (const DiskEntry& e : *listed) {
    const std::string name = e.path.substr(e.path.rfind('/') + 1);
    const size_t sep = name.rfind(kKeySeparator);
    if (block_file::is_temp_name(name) || sep == std::string::npos) continue;
    auto text = disk->read_file(e.path, kMaxEntryBytes);
    if (!text.ok()) continue;  // removed meanwhile, or unreadable: unattributed, not an error
    auto j = nlohmann::json::parse(*text, nullptr, /*allow_exceptions=*/false);
    if (!j.is_object()) continue;
    IndexEntry entry;
    entry.file = e.path;
    entry.mtime_ns = e.mtime_ns;
    IndexRecord& r = entry.record;
    // Fields of the wrong type make the record damaged (json::value would throw on them).
    auto text_field = [&](const char* key) {
      auto it = j.find(key);
      return it != j.end() && it->is_string() ? it->get<std::string>() : std::string();
    };
    r.repo = text_field("repo");
    r.revision = text_field("revision");
    r.commit = text_field("commit");
    r.path = text_field("path");
    r.content_id = text_field("content_id");
    auto size = j.find("size");
    if (size == j.end() || !size->is_number_unsigned() || size->get<uint64_t>() > kMaxRecordedSize) continue;
    r.size = size->get<uint64_t>();
    if (r.repo.empty() || r.content_id.empty()) continue;
    entry.stem = content_stem(r.content_id);
    out.push_back(std::move(entry));
  }
  return out;
}

Status write_budget(const std::string& cache_dir, uint64_t budget_bytes) {
  const std::string dir = index_dir(cache_dir);
  return write_atomically(*posix_disk(), dir, dir + "/" + kBudgetFile, std::to_string(budget_bytes) + "\n");
}

std::optional<uint64_t> read_budget(const std::string& cache_dir) {
  auto text = posix_disk()->read_file(index_dir(cache_dir) + "/" + kBudgetFile, 64);
  if (!text.ok()) return std::nullopt;
  try {
    size_t used = 0;
    uint64_t v = std::stoull(*text, &used);
    return v;
  } catch (...) {
    return std::nullopt;
  }
}

}  // namespace hubfs::cache_index
