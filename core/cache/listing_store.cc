#include "cache/listing_store.h"

#include <openssl/evp.h>
#include <unistd.h>

#include <atomic>
#include <chrono>

#include "cache/block_file.h"
#include "cache/cache_disk.h"

namespace hubfs::listing_store {
namespace {

// A directory listing is a few hundred bytes per entry, and HubConfig::max_dir_entries caps a
// directory at 100k entries: 64 MiB is more than any document we write. A larger file is not ours.
constexpr uint64_t kMaxDocumentBytes = 64ull << 20;
// A temp file this old was left by a writer that crashed (writing one takes milliseconds); the
// same rule as the block cache's and the index's temp files.
constexpr std::chrono::hours kStaleTempAge{1};

std::string short_hash(const std::string& text) {
  unsigned char d[32];
  unsigned int len = 0;
  if (EVP_Digest(text.data(), text.size(), d, &len, EVP_sha256(), nullptr) != 1) return "0";
  static const char kDigits[] = "0123456789abcdef";
  std::string out;
  for (int i = 0; i < 8; ++i) {  // 64 bits: a collision would need 2^32 names in one repo
    out += kDigits[d[i] >> 4];
    out += kDigits[d[i] & 0xF];
  }
  return out;
}

bool is_commit_sha(const std::string& s) {
  if (s.size() != 40) return false;
  for (char c : s)
    if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'))) return false;
  return true;
}

std::string base_name(const std::string& path) { return path.substr(path.rfind('/') + 1); }

std::string temp_path(const std::string& dir) {
  static std::atomic<uint64_t> counter{0};
  return dir + "/" + std::string(block_file::kTempPrefix) + std::to_string(::getpid()) + "." +
         std::to_string(::gettid()) + "." + std::to_string(counter.fetch_add(1));
}

// The documents to count or remove: every repo's, or one repo's under every endpoint.
std::vector<DiskEntry> documents(const std::string& cache_dir, const std::string& repo_label, bool with_temps) {
  auto disk = posix_disk();
  std::vector<DiskEntry> out;
  auto listed = disk->list_files(listings_dir(cache_dir));
  if (!listed.ok()) return out;  // no listing stored yet
  const std::string wanted = repo_label.empty() ? "" : "/" + repo_key(repo_label) + "/";
  const std::string root = listings_dir(cache_dir) + "/";
  for (DiskEntry& e : *listed) {
    if (!with_temps && block_file::is_temp_name(base_name(e.path))) continue;
    if (!wanted.empty()) {
      // listings/<endpoint key>/<repo key>/...: the repo key is the second component.
      const std::string rel = e.path.substr(root.size());
      const size_t slash = rel.find('/');
      if (slash == std::string::npos || rel.compare(slash, wanted.size(), wanted) != 0) continue;
    }
    out.push_back(std::move(e));
  }
  return out;
}

}  // namespace

std::string listings_dir(const std::string& cache_dir) { return cache_dir + "/listings"; }

std::string repo_key(const std::string& repo_label) {
  static const char kDigits[] = "0123456789ABCDEF";
  std::string out;
  for (unsigned char c : repo_label) {
    if (c == '/') {
      out += '~';
    } else if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '.' ||
               c == '_' || c == '-') {
      out += static_cast<char>(c);
    } else {
      out += '%';
      out += kDigits[c >> 4];
      out += kDigits[c & 0xF];
    }
  }
  // A label is never empty or all dots in practice; keep even a hostile one inside its parent.
  if (out.empty() || out.find_first_not_of('.') == std::string::npos) out = "%2E" + out;
  return out;
}

std::string repo_dir(const std::string& cache_dir, const std::string& endpoint, const std::string& repo_label) {
  return listings_dir(cache_dir) + "/" + short_hash(endpoint) + "/" + repo_key(repo_label);
}

std::string dir_document(const std::string& repo_dir, const std::string& commit, const std::string& dir) {
  // Commits are 40-hex shas (the mount pins one); anything else is hashed, never used as a name.
  const std::string commit_name = is_commit_sha(commit) ? commit : "c" + short_hash(commit);
  return repo_dir + "/" + commit_name + "/" + short_hash(dir) + ".json";
}

std::string file_document(const std::string& repo_dir, const std::string& commit, const std::string& path) {
  const std::string commit_name = is_commit_sha(commit) ? commit : "c" + short_hash(commit);
  return repo_dir + "/" + commit_name + "/f" + short_hash(path) + ".json";  // never a listing's name
}

std::string ref_document(const std::string& repo_dir, const std::string& revision) {
  return repo_dir + "/refs/" + short_hash(revision) + ".json";
}

Status write(const std::string& path, const std::string& text) {
  auto disk = posix_disk();
  const std::string dir = path.substr(0, path.rfind('/'));
  if (Status s = disk->make_dirs(dir, 0700); !s.ok()) return s;
  const std::string tmp = temp_path(dir);
  Status s = disk->write_new_file(tmp, text);  // 0600
  if (s.ok()) s = disk->rename(tmp, path);
  if (!s.ok()) (void)disk->remove(tmp);
  return s;
}

std::optional<std::string> read(const std::string& path) {
  auto text = posix_disk()->read_file(path, kMaxDocumentBytes);
  if (!text.ok()) return std::nullopt;
  return std::move(text).value();
}

Usage usage(const std::string& cache_dir, const std::string& repo_label) {
  Usage u;
  for (const DiskEntry& e : documents(cache_dir, repo_label, /*with_temps=*/false)) {
    u.files += 1;
    u.bytes += e.size;
  }
  return u;
}

Usage remove(Env& env, const std::string& cache_dir, const std::string& repo_label) {
  auto disk = posix_disk();
  // Wall time, compared with the files' mtimes (which the kernel stamps on its own clock).
  const int64_t now_ns =
      std::chrono::duration_cast<std::chrono::nanoseconds>(env.system_now().time_since_epoch()).count();
  const int64_t stale_before = now_ns - std::chrono::nanoseconds(kStaleTempAge).count();
  Usage removed;
  for (const DiskEntry& e : documents(cache_dir, repo_label, /*with_temps=*/true)) {
    if (block_file::is_temp_name(base_name(e.path))) {
      if (e.mtime_ns < stale_before) (void)disk->remove(e.path);  // younger: a write in flight
      continue;
    }
    if (disk->remove(e.path).ok()) {
      removed.files += 1;
      removed.bytes += e.size;
    }
  }
  return removed;
}

}  // namespace hubfs::listing_store
