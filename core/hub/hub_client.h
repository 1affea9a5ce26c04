// The Hugging Face Hub's HTTP contract for a read-only client (see docs/hub-http-contract.md):
// revision pinning, lazy paginated listing, resolve with redirect reuse, tokens, errors.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <functional>
#include <future>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "common/env.h"
#include "common/single_flight.h"
#include "common/http.h"
#include "common/latency_histogram.h"
#include "common/status.h"
#include "common/url.h"
#include "hub/environment.h"
#include "hub/repo_ref.h"

namespace hubfs {

struct RepoInfo {
  std::string sha;            // the commit the revision points at
  int64_t last_modified = 0;  // unix seconds (the commit date; 0 when unknown)
  bool is_private = false;
  bool gated = false;
  // How many files the commit holds ("siblings"), when the Hub said: a small repo is listed
  // whole in one recursive listing instead of one request per directory.
  std::optional<size_t> file_count;
};

struct TreeEntry {
  std::string path;            // full repo-relative path
  bool is_dir = false;
  uint64_t size = 0;           // the real size (LFS size for LFS files)
  std::string oid;             // git blob (or tree) id
  std::optional<std::string> lfs_sha256;
  // The Xet hash (64 hex digits, Xet's text form) of a Xet-stored file: its bytes can be read
  // natively from the CAS service (core/xet/xet_source.h). Absent for other files.
  std::optional<std::string> xet_hash;

  // The cache key: "sha256:<hex>" for LFS files, "oid:<hex>" otherwise.
  std::string content_id() const { return lfs_sha256 ? "sha256:" + *lfs_sha256 : "oid:" + oid; }
};

struct HubConfig {
  std::string endpoint = "https://huggingface.co";  // no trailing slash (one is stripped)
  std::optional<std::string> token;                 // never logged
  // When set, asked before every request instead of `token` (a TokenWatcher following a token
  // file that is rewritten while mounted). Must be thread-safe and cheap.
  std::function<std::optional<std::string>()> token_source;
  std::string user_agent = "hubfs/0.1.0";           // the Hub asks clients to name themselves
  // Both clocks the client reads: the steady one decides when a remembered Location is stale,
  // wall time reads absolute expiry stamps in signed URLs (X-Amz-Date, Expires=<unix>). Tests
  // pass a manual Env and move time without sleeping. Required (no default: the stack's, or a
  // test's); must outlive the client.
  Env* env = nullptr;
  // A listing larger than this is refused rather than held in memory: the Hub advises fewer
  // than 10k files per folder, so 10x that is generous (entries are a few hundred bytes each).
  size_t max_dir_entries = 100000;
  // Pages are ~1000 entries; 1000 pages covers max_dir_entries even with short pages, and
  // guarantees a server that always offers a fresh "next" cannot keep us listing forever.
  size_t max_dir_pages = 1000;
  // The timeout of every request this client sends (API calls and resolves: metadata, as
  // huggingface_hub's HF_HUB_ETAG_TIMEOUT), replacing the transport's first-byte and stall
  // timeouts (HttpRequest::timeout). Unset: the transport's.
  std::optional<std::chrono::milliseconds> metadata_timeout;
};

namespace hub_errors {
struct Context;  // hub/hub_errors.h
}

// Thread-safe: FUSE threads share one client. Every call ends (bounded pages and redirects;
// the transport bounds each request's time).
class HubClient {
 public:
  HubClient(HubConfig config, HttpTransport& transport);

  // Resolves the revision to its commit. Errors name the cause and the fix: repo not found or
  // private ("set HF_TOKEN ..."), gated, revision not found, endpoint unreachable.
  Result<RepoInfo> repo_info(const RepoRef& repo);

  // One directory ("" is the root), all pages (Link rel="next"). Directory missing: kNotFound.
  // Only direct children of `dir` are returned (anything else the server sends is dropped),
  // each path once.
  Result<std::vector<TreeEntry>> list_dir(const RepoRef& repo, std::string_view dir);

  // Everything below `dir` ("" is the root), from the recursive listing (recursive=true, all its
  // pages): one request per ~1000 entries instead of one per directory. Only descendants of
  // `dir` are kept, each path once. When the subtree needs more than `page_budget` pages, stops
  // there and returns nullopt (the caller lists directory by directory instead: a huge subtree
  // is not walked for one `ls`). Errors as list_dir.
  Result<std::optional<std::vector<TreeEntry>>> list_subtree(const RepoRef& repo, std::string_view dir,
                                                              size_t page_budget);

  // Requests sent so far, by the Hub's quota bucket: "api" (/api/: repo info, listings,
  // paths-info) and "resolvers" (/resolve/ HEADs, each redirect hop counted). For `hubfs status`.
  struct RequestCounts {
    uint64_t api = 0;
    uint64_t resolves = 0;
  };
  RequestCounts request_counts() const;
  // How long each of those requests took, retries and quota holds included (on the Env's clock),
  // one observation per request counted above.
  LatencySnapshot latency() const { return latency_.snapshot(); }

  // Entries for those of `paths` that exist (missing ones are simply absent), in one or a few
  // POST paths-info requests. Lets a stat of one path skip listing its whole parent.
  Result<std::vector<TreeEntry>> paths_info(const RepoRef& repo, const std::vector<std::string>& paths);

  // Where the file's bytes are: the CDN location of the 302 (no Authorization header: it is
  // signed), or the resolve URL itself with Authorization for files served directly.
  // Remembered per (repo, revision, path) until it expires or refresh=true (after a 403).
  // `expires` already includes a safety margin: past it, call locate again. Concurrent calls
  // for one path share a single resolve.
  // `quota_waited`: how long this call waited for the resolve to be held for the Hub's quota
  // (every hop's HttpResponse::quota_waited); a caller sharing another's resolve gets that but
  // at most the time it waited for it; a location remembered from earlier has none.
  Result<Location> locate(const RepoRef& repo, std::string_view path, bool refresh = false);

  // What one resolve answer says of an LFS or Xet file (huggingface_hub's get_hf_file_metadata
  // reads the same headers): the commit it was served from (X-Repo-Commit), its size
  // (X-Linked-Size), its sha256 (X-Linked-Etag), its Xet hash (X-Xet-Hash) and, for a file on
  // the CDN, the signed location.
  struct FileProbe {
    std::string commit;
    TreeEntry entry;                  // path, size, oid or lfs_sha256, xet_hash
    std::optional<Location> location; // a cross-origin redirect's; none for a file served directly
  };
  // HEAD resolve/{revision as named}/{path}: lets a door that opens one file learn all of the
  // above in one round trip, beside the revision's pin, instead of pinning, listing and then
  // resolving in turn. Counted as a resolve. kUnsupported when the answer lacks any of commit,
  // size or identity, or carries one in a form the Hub does not send (the caller then lists as
  // before; so is a file served directly, which has no linked sha256); errors as locate.
  Result<FileProbe> probe_file(const RepoRef& repo, std::string_view path);
  // Keeps `location` as locate's answer for (pinned repo, path): a probe's, once its commit is
  // known to be the pinned one. The signed URL names the content, not the revision.
  void adopt_location(const RepoRef& pinned, std::string_view path, const Location& location);

  // A read token for the Xet storage service (GET /api/{type}s/{id}/xet-read-token/{rev}):
  // where the CAS service is, the bearer token it takes, and when that expires. Counted as an
  // API request. Errors as repo_info.
  struct XetToken {
    std::string cas_url;       // no trailing slash
    std::string access_token;  // never logged
    WallTime expires;
  };
  Result<XetToken> xet_read_token(const RepoRef& repo);

  const HubConfig& config() const { return config_; }
  // The token the next request carries (token_source, else token); never logged.
  std::optional<std::string> current_token() const;

 private:
  // Authorization only for URLs on the endpoint's own scheme, host and port.
  Headers auth_headers_for(std::string_view url) const;
  Headers request_headers_for(std::string_view url) const;
  // An API request that follows redirects itself (renamed repos answer with one), recomputing
  // headers per hop so the token never leaves the endpoint. Returns the final answer, whatever
  // its status, and the URL that gave it; a transport failure becomes a Status.
  struct Answer {
    HttpResponse response;
    std::string url;
  };
  Result<Answer> fetch_api(HttpRequest request, const hub_errors::Context& ctx);
  // The pages of one tree listing of `dir` (normalized), entries `keep` accepts, each path once,
  // at most max_entries of them. More than `page_budget` pages: nullopt when `budget_is_soft`,
  // else kUnsupported.
  Result<std::optional<std::vector<TreeEntry>>> fetch_tree(const RepoRef& repo, const std::string& dir, bool recursive,
                                                           size_t page_budget, bool budget_is_soft);
  // The location of `path`; `answer` (optional) receives the response that ended the walk (the
  // 2xx or the cross-origin redirect), whose headers describe the file.
  Result<Location> resolve_location(const RepoRef& repo, std::string_view path, HttpResponse* answer = nullptr);
  MonotonicClock::time_point expiry_of(const std::string& signed_url) const;
  void remember_location(const std::string& key, const Location& location);

  HubConfig config_;
  // The endpoint as messages show it: userinfo (user:password@) removed.
  std::string shown_endpoint_;
  HttpTransport& transport_;
  std::atomic<uint64_t> api_requests_{0};
  std::atomic<uint64_t> resolve_requests_{0};
  LatencyHistogram latency_;
  std::mutex mu_;  // guards locations_; taken inside resolving_'s (its probe)
  std::unordered_map<std::string, Location> locations_;
  // Resolves in flight, so concurrent locate() calls of one path wait for one answer.
  SingleFlight<std::string, Result<Location>> resolving_;
};

}  // namespace hubfs
