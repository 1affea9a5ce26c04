// The Hugging Face Hub's HTTP contract for a read-only client (see shared notes hub-api.md):
// revision pinning, lazy paginated listing, resolve with redirect reuse, tokens, errors.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "common/http.h"
#include "common/status.h"

namespace hubfs {

enum class RepoType { kModel, kDataset, kSpace };

struct RepoRef {
  RepoType type = RepoType::kModel;
  std::string id;                 // "org/name"
  std::string revision = "main";  // branch, tag, 40-hex sha, or refs/pr/N
};

// Parses "[models/|datasets/|spaces/]ORG/NAME[@REVISION]". An explicit type or revision (from
// --repo-type / --revision) wins over the spec; a conflict between them is an error.
Result<RepoRef> parse_repo_ref(std::string_view spec, std::optional<std::string> type_override = {},
                               std::optional<std::string> revision_override = {});

// "models", "datasets", "spaces" (API path) and "", "datasets/", "spaces/" (resolve prefix).
std::string_view api_segment(RepoType type);
std::string_view resolve_prefix(RepoType type);
// Percent-encodes everything but unreserved characters: a revision is one path segment.
std::string encode_segment(std::string_view s);
// Percent-encodes a repo path, keeping its slashes.
std::string encode_path(std::string_view path);

struct TokenSources {
  std::function<const char*(const char*)> getenv = ::getenv;
  std::function<std::optional<std::string>(const std::string&)> read_file;  // default: the file
};
// HF_TOKEN, HUGGING_FACE_HUB_TOKEN, HF_TOKEN_PATH, $HF_HOME/token, $XDG_CACHE_HOME/huggingface/token,
// ~/.cache/huggingface/token; whitespace stripped; empty means none.
std::optional<std::string> find_token(const TokenSources& sources = {});

struct RepoInfo {
  std::string sha;            // the commit the revision points at
  int64_t last_modified = 0;  // unix seconds (the commit date; 0 when unknown)
  bool is_private = false;
  bool gated = false;
};

struct TreeEntry {
  std::string path;            // full repo-relative path
  bool is_dir = false;
  uint64_t size = 0;           // the real size (LFS size for LFS files)
  std::string oid;             // git blob (or tree) id
  std::optional<std::string> lfs_sha256;

  // The cache key: "sha256:<hex>" for LFS files, "oid:<hex>" otherwise.
  std::string content_id() const { return lfs_sha256 ? "sha256:" + *lfs_sha256 : "oid:" + oid; }
};

struct HubConfig {
  std::string endpoint = "https://huggingface.co";  // no trailing slash
  std::optional<std::string> token;                 // never logged
};

class HubClient {
 public:
  HubClient(HubConfig config, HttpTransport& transport);

  // Resolves the revision to its commit. Errors name the cause and the fix: repo not found or
  // private ("set HF_TOKEN ..."), gated, revision not found, endpoint unreachable.
  Result<RepoInfo> repo_info(const RepoRef& repo);

  // One directory ("" is the root), all pages (Link rel="next"). Directory missing: kNotFound.
  Result<std::vector<TreeEntry>> list_dir(const RepoRef& repo, std::string_view dir);

  // Where the file's bytes are: the CDN location of the 302 (no Authorization header: it is
  // signed), or the resolve URL itself with Authorization for files served directly.
  // Remembered per (repo, path) until it expires or refresh=true (after a 403).
  Result<Location> locate(const RepoRef& repo, std::string_view path, bool refresh = false);

  const HubConfig& config() const { return config_; }

 private:
  Headers auth_headers_for(std::string_view url) const;

  HubConfig config_;
  HttpTransport& transport_;
  std::mutex mu_;
  std::unordered_map<std::string, Location> locations_;
};

}  // namespace hubfs
