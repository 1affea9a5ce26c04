#include "hub/hub_client.h"

#include "common/url.h"

#include <algorithm>
#include <unordered_set>

#include "common/text.h"
#include "hub/hub_errors.h"
#include "hub/hub_json.h"
#include <nlohmann/json.hpp>
#include "common/url.h"

namespace hubfs {
namespace {

using std::chrono::seconds;

// The Hub's own page size for tree listings; asking for it explicitly keeps the page count
// (one round trip each) predictable if the server default ever shrinks.
constexpr int kTreePageLimit = 1000;
// A tree page of 1000 entries and the repo info of a repo with a long sibling list are both
// far below this (estimated, not measured); it exists to stop a runaway body.
constexpr uint64_t kMaxJsonBody = 64ull << 20;
// A HEAD answer has no body; anything bigger than an error page is not worth keeping.
constexpr uint64_t kMaxHeadBody = 64 << 10;
// Renamed repos add one same-host hop and the CDN one more; 5 is ample and ends any loop.
constexpr int kMaxRedirects = 5;
// A URL we cannot date is re-resolved after this: well inside the ~1 h the Hub signs for.
constexpr seconds kDefaultLocationTtl{600};
// Stop using a signed URL this long before it expires, so a range request started near the
// end (and retried with backoff) still reaches the CDN while the signature holds.
constexpr seconds kExpiryMargin{60};
// An "Expires=" further away than this is not believed (a skewed clock or a foreign scheme).
constexpr seconds kMaxTrustedLifetime{7 * 24 * 3600};
// Signed URLs are around 1 KB (estimate): 10k remembered files keep this table to ~10 MB.
constexpr size_t kMaxRememberedLocations = 10000;
// Paths per paths-info POST: keeps each form body to a few KB even for deep paths.
constexpr size_t kPathsInfoBatch = 100;

// Checks a repo path before it is put in a URL; "" only when allow_root. Leading and trailing
// slashes are dropped; empty, "." and ".." segments are refused (URL normalisation would
// otherwise reinterpret them).
Result<std::string> normalize_repo_path(std::string_view path, bool allow_root) {
  while (!path.empty() && path.front() == '/') path.remove_prefix(1);
  while (!path.empty() && path.back() == '/') path.remove_suffix(1);
  if (path.empty()) {
    if (allow_root) return std::string();
    return InvalidArgument("empty file path: name a file inside the repository");
  }
  size_t start = 0;
  while (start <= path.size()) {
    size_t slash = path.find('/', start);
    std::string_view seg = path.substr(start, slash == std::string_view::npos ? std::string_view::npos : slash - start);
    if (seg.empty() || seg == "." || seg == "..") {
      return InvalidArgument("path '" + std::string(path) +
                             "' has an empty, '.' or '..' segment: give a plain repo-relative path like dir/file");
    }
    for (unsigned char c : seg) {
      if (c < 0x20 || c == 0x7f) {
        return InvalidArgument("path '" + std::string(path) + "' contains a control character");
      }
    }
    if (slash == std::string_view::npos) break;
    start = slash + 1;
  }
  return std::string(path);
}

// True when `path` names a direct child of `dir` ("" is the root).
bool is_direct_child(std::string_view path, std::string_view dir) {
  std::string_view name = path;
  if (!dir.empty()) {
    if (path.size() <= dir.size() + 1 || path.substr(0, dir.size()) != dir || path[dir.size()] != '/') return false;
    name = path.substr(dir.size() + 1);
  }
  return !name.empty() && name.find('/') == std::string_view::npos && name != "." && name != "..";
}

// True when `path` is strictly below `dir` ("" is the root) and has no empty, "." or ".."
// segment (a recursive listing names every descendant by its full path).
bool is_descendant(std::string_view path, std::string_view dir) {
  std::string_view rest = path;
  if (!dir.empty()) {
    if (path.size() <= dir.size() + 1 || path.substr(0, dir.size()) != dir || path[dir.size()] != '/') return false;
    rest = path.substr(dir.size() + 1);
  }
  size_t start = 0;
  while (true) {
    size_t slash = rest.find('/', start);
    std::string_view seg = rest.substr(start, slash == std::string_view::npos ? std::string_view::npos : slash - start);
    if (seg.empty() || seg == "." || seg == "..") return false;
    if (slash == std::string_view::npos) return true;
    start = slash + 1;
  }
}

bool is_redirect(long status) {
  return status == 301 || status == 302 || status == 303 || status == 307 || status == 308;
}

// "20240101T000000Z" (X-Amz-Date) -> unix seconds.
std::optional<int64_t> parse_amz_date(std::string_view s) {
  if (s.size() != 16 || s[8] != 'T' || s[15] != 'Z') return std::nullopt;
  std::string iso = std::string(s.substr(0, 4)) + "-" + std::string(s.substr(4, 2)) + "-" +
                    std::string(s.substr(6, 2)) + "T" + std::string(s.substr(9, 2)) + ":" +
                    std::string(s.substr(11, 2)) + ":" + std::string(s.substr(13, 2)) + "Z";
  return hub_json::parse_iso8601(iso);
}

std::optional<int64_t> parse_seconds(const std::optional<std::string>& s) {
  if (!s || s->empty() || s->size() > 18) return std::nullopt;
  int64_t v = 0;
  for (char c : *s) {
    if (c < '0' || c > '9') return std::nullopt;
    v = v * 10 + (c - '0');
  }
  return v;
}

std::string location_key(const RepoRef& repo, std::string_view path) {
  std::string key(type_name(repo.type));
  key += '\0';
  key += repo.id;
  key += '\0';
  key += repo.revision;
  key += '\0';
  key += path;
  return key;
}

}  // namespace

HubClient::HubClient(HubConfig config, HttpTransport& transport)
    : config_(std::move(config)), transport_(transport) {
  env_of(config_.env, "HubClient");
  while (!config_.endpoint.empty() && config_.endpoint.back() == '/') config_.endpoint.pop_back();
  if (config_.token && config_.token->empty()) config_.token.reset();
  shown_endpoint_ = url::url_for_log(config_.endpoint);
}

std::optional<std::string> HubClient::current_token() const {
  if (config_.token_source) return config_.token_source();
  return config_.token;
}

Headers HubClient::auth_headers_for(std::string_view url) const {
  if (!url::same_origin(url, config_.endpoint)) return {};
  auto token = current_token();
  if (!token || token->empty()) return {};
  return {{"Authorization", "Bearer " + *token}};
}

Headers HubClient::request_headers_for(std::string_view url) const {
  Headers h = auth_headers_for(url);
  h.emplace_back("User-Agent", config_.user_agent);
  return h;
}

Result<HubClient::Answer> HubClient::fetch_api(HttpRequest request, const hub_errors::Context& ctx) {
  // request.headers holds only what this call needs beyond Authorization and User-Agent.
  for (int hop = 0;; ++hop) {
    HttpRequest sent = request;
    sent.timeout = config_.metadata_timeout;
    api_requests_.fetch_add(1, std::memory_order_relaxed);
    sent.headers = request_headers_for(request.url);
    sent.headers.insert(sent.headers.end(), request.headers.begin(), request.headers.end());
    const auto sent_at = config_.env->now();
    auto resp = transport_.perform(std::move(sent));
    latency_.observe(config_.env->now() - sent_at);
    if (!resp.ok()) return hub_errors::from_transport(resp.status(), url::host_for_messages(request.url), ctx);
    // 307/308 repeat the request as is; 301/302/303 only make sense to follow for a GET.
    const bool follow = resp->status == 307 || resp->status == 308 ||
                        (is_redirect(resp->status) && request.method == "GET");
    auto location = resp->header("location");
    auto target = follow && location ? url::resolve_reference(request.url, *location) : std::nullopt;
    if (!target || !url::origin_of(*target)) return Answer{std::move(*resp), std::move(request.url)};
    if (hop == kMaxRedirects) {
      return Unavailable(shown_endpoint_ + " redirected a request for repository '" + ctx.repo->id +
                         "' more than " + std::to_string(kMaxRedirects) +
                         " times: the server is redirecting in a loop; check --endpoint / HF_ENDPOINT");
    }
    request.url = std::move(*target);
  }
}

Result<RepoInfo> HubClient::repo_info(const RepoRef& repo) {
  if (Status s = check_revision(repo.revision); !s.ok()) return s;
  const std::optional<std::string> token = current_token();
  hub_errors::Context ctx{shown_endpoint_, &repo, std::nullopt, false, &token};
  HttpRequest req;
  req.url = config_.endpoint + "/api/" + std::string(api_segment(repo.type)) + "/" + repo.id + "/revision/" +
            encode_segment(repo.revision);
  req.max_body = kMaxJsonBody;
  auto answer = fetch_api(std::move(req), ctx);
  if (!answer.ok()) return answer.status();
  if (answer->response.status != 200) return hub_errors::from_response(answer->response, ctx);
  return hub_json::parse_repo_info(answer->response.body, shown_endpoint_);
}

Result<HubClient::XetToken> HubClient::xet_read_token(const RepoRef& repo) {
  if (Status s = check_revision(repo.revision); !s.ok()) return s;
  const std::optional<std::string> token = current_token();
  hub_errors::Context ctx{shown_endpoint_, &repo, std::nullopt, false, &token};
  HttpRequest req;
  req.url = config_.endpoint + "/api/" + std::string(api_segment(repo.type)) + "/" + repo.id + "/xet-read-token/" +
            encode_segment(repo.revision);
  req.max_body = kMaxJsonBody;
  auto answer = fetch_api(std::move(req), ctx);
  if (!answer.ok()) return answer.status();
  if (answer->response.status != 200) return hub_errors::from_response(answer->response, ctx);
  // huggingface.js reads the JSON body, huggingface_hub the X-Xet-* headers: the body first.
  XetToken t;
  int64_t exp = -1;
  auto j = nlohmann::json::parse(answer->response.body, nullptr, false);
  if (j.is_object()) {
    t.cas_url = j.value("casUrl", "");
    t.access_token = j.value("accessToken", "");
    if (auto e = j.find("exp"); e != j.end() && e->is_number_integer()) exp = e->get<int64_t>();
  }
  if (t.cas_url.empty()) t.cas_url = answer->response.header("x-xet-cas-url").value_or("");
  if (t.access_token.empty()) t.access_token = answer->response.header("x-xet-access-token").value_or("");
  if (exp < 0) {
    const std::string e = answer->response.header("x-xet-token-expiration").value_or("");
    if (!e.empty() && e.size() < 19 && e.find_first_not_of("0123456789") == std::string::npos) exp = std::stoll(e);
  }
  while (!t.cas_url.empty() && t.cas_url.back() == '/') t.cas_url.pop_back();
  if (t.cas_url.empty() || t.access_token.empty() || exp < 0 ||
      !(t.cas_url.starts_with("http://") || t.cas_url.starts_with("https://"))) {
    return Unavailable("the Xet read token answer of " + repo.id + " lacks casUrl, accessToken or exp (or the CAS URL "
                   "is not http(s)); its files are read through the Hub's bridge instead");
  }
  t.expires = WallTime(std::chrono::seconds(exp));
  return t;
}

Result<std::vector<TreeEntry>> HubClient::list_dir(const RepoRef& repo, std::string_view dir_in) {
  if (Status s = check_revision(repo.revision); !s.ok()) return s;
  auto dir = normalize_repo_path(dir_in, /*allow_root=*/true);
  if (!dir.ok()) return dir.status();
  auto listed = fetch_tree(repo, *dir, /*recursive=*/false, config_.max_dir_pages, /*budget_is_soft=*/false);
  if (!listed.ok()) return listed.status();
  return std::move(**listed);
}

Result<std::optional<std::vector<TreeEntry>>> HubClient::list_subtree(const RepoRef& repo, std::string_view dir_in,
                                                                      size_t page_budget) {
  if (Status s = check_revision(repo.revision); !s.ok()) return s;
  auto dir = normalize_repo_path(dir_in, /*allow_root=*/true);
  if (!dir.ok()) return dir.status();
  return fetch_tree(repo, *dir, /*recursive=*/true, std::min(page_budget, config_.max_dir_pages),
                    /*budget_is_soft=*/true);
}

HubClient::RequestCounts HubClient::request_counts() const {
  return {api_requests_.load(std::memory_order_relaxed), resolve_requests_.load(std::memory_order_relaxed)};
}

Result<std::optional<std::vector<TreeEntry>>> HubClient::fetch_tree(const RepoRef& repo, const std::string& dir,
                                                                    bool recursive, size_t page_budget,
                                                                    bool budget_is_soft) {
  const std::optional<std::string> token = current_token();
  hub_errors::Context ctx{shown_endpoint_, &repo, dir, true, &token};
  const std::string where = dir.empty() ? "the root directory" : "directory '" + dir + "'";

  std::string page_url = config_.endpoint + "/api/" + std::string(api_segment(repo.type)) + "/" + repo.id +
                         "/tree/" + encode_segment(repo.revision) + (dir.empty() ? "" : "/" + encode_path(dir)) +
                         (recursive ? "?recursive=true" : "?recursive=false") +
                         "&limit=" + std::to_string(kTreePageLimit);
  std::vector<TreeEntry> entries;
  std::unordered_set<std::string> seen_paths;
  std::unordered_set<std::string> seen_pages;
  for (size_t page = 0; page < page_budget; ++page) {
    seen_pages.insert(page_url);
    HttpRequest req;
    req.url = page_url;
    req.max_body = kMaxJsonBody;
    auto answer = fetch_api(std::move(req), ctx);
    if (!answer.ok()) return answer.status();
    const HttpResponse& resp = answer->response;
    if (resp.status != 200) {
      Status refused = hub_errors::from_response(resp, ctx);
      // The token goes to the endpoint's host only (huggingface_hub drops Authorization on a
      // redirect to another host, and a Link is no different): a next page elsewhere that wants
      // one is refused, and the message must say why, not blame the token.
      if (page > 0 && !url::same_origin(answer->url, config_.endpoint) && (resp.status == 401 || resp.status == 403)) {
        return refused.with_context("listing " + where + " of repository '" + repo.id + "': page " +
                                    std::to_string(page + 1) + " is on " + url::host_for_messages(answer->url) +
                                    ", another host than " + shown_endpoint_ +
                                    " (its next-page link says so), and hubfs sends the token only to " +
                                    shown_endpoint_ + "; that host refused the page without it");
      }
      return refused;
    }
    auto parsed = hub_json::parse_tree_entries(resp.body, url::host_for_messages(answer->url));
    if (!parsed.ok()) return parsed.status();
    for (TreeEntry& e : *parsed) {
      // The server's paths are trusted only as far as they are inside what was asked (direct
      // children, or descendants for a recursive listing): anything else would show up under
      // the wrong name, or twice.
      const bool inside = recursive ? is_descendant(e.path, dir) : is_direct_child(e.path, dir);
      if (!inside || !seen_paths.insert(e.path).second) continue;
      entries.push_back(std::move(e));
    }
    if (entries.size() > config_.max_dir_entries) {
      if (budget_is_soft) return std::optional<std::vector<TreeEntry>>();
      return Unsupported(where + " of repository '" + repo.id + "' has more than " +
                         std::to_string(config_.max_dir_entries) +
                         " entries: hubfs does not list directories this large; read its files by path instead");
    }
    auto next = url::next_link(resp.headers);
    if (!next) return std::optional<std::vector<TreeEntry>>(std::move(entries));
    auto next_url = url::resolve_reference(answer->url, *next);
    if (!next_url || !url::origin_of(*next_url)) {
      return Corrupt("listing " + where + " of repository '" + repo.id + "' at " + shown_endpoint_ +
                     ": the next-page link is not an http(s) URL; is --endpoint a Hugging Face Hub?");
    }
    if (seen_pages.count(*next_url)) {
      return Corrupt("listing " + where + " of repository '" + repo.id + "' at " + shown_endpoint_ +
                     ": the server's next-page link points back to a page already read; stopped instead of "
                     "looping forever; retry later");
    }
    page_url = std::move(*next_url);
  }
  if (budget_is_soft) return std::optional<std::vector<TreeEntry>>();
  return Unsupported("listing " + where + " of repository '" + repo.id + "' did not end after " +
                     std::to_string(config_.max_dir_pages) +
                     " pages: hubfs does not list directories this large; read its files by path instead");
}

Result<std::vector<TreeEntry>> HubClient::paths_info(const RepoRef& repo, const std::vector<std::string>& paths) {
  if (Status s = check_revision(repo.revision); !s.ok()) return s;
  std::vector<std::string> wanted;
  wanted.reserve(paths.size());
  for (const auto& p : paths) {
    auto n = normalize_repo_path(p, /*allow_root=*/false);
    if (!n.ok()) return n.status();
    wanted.push_back(std::move(*n));
  }
  const std::optional<std::string> token = current_token();
  hub_errors::Context ctx{shown_endpoint_, &repo, std::nullopt, false, &token};
  const std::string url = config_.endpoint + "/api/" + std::string(api_segment(repo.type)) + "/" + repo.id +
                          "/paths-info/" + encode_segment(repo.revision);
  std::vector<TreeEntry> found;
  for (size_t start = 0; start < wanted.size(); start += kPathsInfoBatch) {
    size_t end = std::min(wanted.size(), start + kPathsInfoBatch);
    std::unordered_set<std::string> batch(wanted.begin() + start, wanted.begin() + end);
    HttpRequest req;
    req.method = "POST";
    req.url = url;
    req.headers = {{"Content-Type", "application/x-www-form-urlencoded"}};
    for (size_t i = start; i < end; ++i) {
      if (i > start) req.body += '&';
      req.body += "paths=" + encode_segment(wanted[i]);
    }
    req.max_body = kMaxJsonBody;
    auto answer = fetch_api(std::move(req), ctx);
    if (!answer.ok()) return answer.status();
    if (answer->response.status != 200) return hub_errors::from_response(answer->response, ctx);
    auto parsed = hub_json::parse_tree_entries(answer->response.body, shown_endpoint_);
    if (!parsed.ok()) return parsed.status();
    for (TreeEntry& e : *parsed) {
      // Only what was asked, once each: a duplicate request path must not double an entry.
      if (batch.erase(e.path)) found.push_back(std::move(e));
    }
  }
  return found;
}

Result<Location> HubClient::locate(const RepoRef& repo, std::string_view path_in, bool refresh) {
  if (Status s = check_revision(repo.revision); !s.ok()) return s;
  auto path = normalize_repo_path(path_in, /*allow_root=*/false);
  if (!path.ok()) return path.status();
  const std::string key = location_key(repo, *path);

  // A location still valid comes from memory (unless this is a refresh); someone resolving this
  // path right now is joined: their answer is as fresh as ours would be.
  auto remembered = [&]() -> std::optional<Result<Location>> {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = locations_.find(key);
    if (it != locations_.end() && config_.env->now() < it->second.expires) return Result<Location>(it->second);
    return std::nullopt;
  };
  auto ticket = refresh ? resolving_.join(key) : resolving_.join(key, remembered);
  if (ticket.stored) return *resolving_.wait(ticket.flight, Deadline::never());
  if (!ticket.leader) {
    // When this caller joined, read once it has: the first clock read of a joining caller is
    // then a sign that it is in the flight (tests/hub/quota_hold_test.cc waits on it).
    const auto joined = config_.env->now();
    // The resolve bounds itself (its requests' deadlines): no deadline of our own.
    Result<Location> shared = *resolving_.wait(ticket.flight, Deadline::never());
    // This caller waited for the quota as long as the resolve was held, but only from when it
    // joined: at most the time it spent here.
    if (shared.ok()) {
      const auto here = std::chrono::duration_cast<std::chrono::milliseconds>(config_.env->now() - joined);
      shared->quota_waited = std::clamp(here, std::chrono::milliseconds(0), shared->quota_waited);
    }
    return shared;
  }

  Result<Location> result = resolve_location(repo, *path);
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (result.ok()) {
      Location remembered = *result;
      remembered.quota_waited = std::chrono::milliseconds(0);  // a later caller waits for nothing
      remember_location(key, remembered);
    } else {
      locations_.erase(key);  // a failed refresh must not leave the stale URL in use
    }
  }
  // After the store: a locate joining from here on finds the location there (SingleFlight).
  resolving_.complete(key, result);
  return result;
}

void HubClient::remember_location(const std::string& key, const Location& location) {
  const auto now = config_.env->now();
  if (location.expires <= now) {
    locations_.erase(key);
    return;
  }
  if (locations_.size() >= kMaxRememberedLocations && !locations_.count(key)) {
    std::erase_if(locations_, [now](const auto& kv) { return kv.second.expires <= now; });
    // Still full of live URLs: forget one; it costs one more resolve if that file is read again.
    if (locations_.size() >= kMaxRememberedLocations) locations_.erase(locations_.begin());
  }
  locations_.insert_or_assign(key, location);
}

Result<Location> HubClient::resolve_location(const RepoRef& repo, std::string_view path, HttpResponse* answer) {
  const std::optional<std::string> token = current_token();
  hub_errors::Context ctx{shown_endpoint_, &repo, std::string(path), false, &token};
  std::string current = resolve_url(config_.endpoint, repo, path);
  // Held for the Hub's quota, over every hop: the time the caller's read lost to the quota.
  std::chrono::milliseconds quota_waited{0};
  for (int hop = 0; hop <= kMaxRedirects; ++hop) {
    HttpRequest req;
    req.method = "HEAD";
    req.url = current;
    req.headers = request_headers_for(current);
    // A compressed answer would misstate the length the Hub reports for the file.
    req.headers.emplace_back("Accept-Encoding", "identity");
    req.max_body = kMaxHeadBody;
    req.timeout = config_.metadata_timeout;
    resolve_requests_.fetch_add(1, std::memory_order_relaxed);
    const auto sent_at = config_.env->now();
    auto resp = transport_.perform(std::move(req));
    latency_.observe(config_.env->now() - sent_at);
    if (!resp.ok()) return hub_errors::from_transport(resp.status(), url::host_for_messages(current), ctx);
    quota_waited += resp->quota_waited;
    if (resp->status >= 200 && resp->status < 300) {
      if (answer) *answer = *resp;
      // Served directly: the URL stays valid, and it is on the endpoint, so it carries the token.
      return Location{current, auth_headers_for(current), MonotonicClock::time_point::max(), quota_waited};
    }
    if (!is_redirect(resp->status)) return hub_errors::from_response(*resp, ctx);

    auto location = resp->header("location");
    if (!location || location->empty()) {
      return Unavailable(shown_endpoint_ + " answered HTTP " + std::to_string(resp->status) + " for file '" +
                         std::string(path) + "' without a Location header: a proxy may be stripping it; check "
                         "--endpoint / HF_ENDPOINT");
    }
    auto target = url::resolve_reference(current, *location);
    if (!target || !url::origin_of(*target)) {
      return Corrupt(shown_endpoint_ + " redirected file '" + std::string(path) +
                     "' to something that is not an http(s) URL; check --endpoint / HF_ENDPOINT");
    }
    if (url::same_origin(*target, config_.endpoint)) {
      // Same host (a renamed repo): follow it ourselves, the token may go along.
      current = std::move(*target);
      continue;
    }
    if (answer) *answer = *resp;
    // Another host (the CDN): the URL is signed, so it travels without the token.
    return Location{*target, {}, expiry_of(*target), quota_waited};
  }
  return Unavailable("resolving file '" + std::string(path) + "' of repository '" + repo.id + "' at " +
                     shown_endpoint_ + " took more than " + std::to_string(kMaxRedirects) +
                     " redirects: the server is redirecting in a loop; check --endpoint / HF_ENDPOINT");
}

namespace {

// An ETag's value: W/ (a proxy's weak form) and the quotes dropped, hex lowercased.
std::string bare_etag(std::string v) {
  if (v.starts_with("W/")) v.erase(0, 2);
  if (v.size() >= 2 && v.front() == '"' && v.back() == '"') v = v.substr(1, v.size() - 2);
  return ascii_lower(std::move(v));
}

// A header's byte count: digits only, at most what a listing may claim.
std::optional<uint64_t> header_size(const std::optional<std::string>& v) {
  if (!v || v->empty() || v->size() > 16 || v->find_first_not_of("0123456789") != std::string::npos) return std::nullopt;
  const uint64_t n = std::stoull(*v);
  if (n > hub_json::kMaxListedSize) return std::nullopt;
  return n;
}

}  // namespace

Result<HubClient::FileProbe> HubClient::probe_file(const RepoRef& repo, std::string_view path_in) {
  if (Status s = check_revision(repo.revision); !s.ok()) return s;
  auto path = normalize_repo_path(path_in, /*allow_root=*/false);
  if (!path.ok()) return path.status();
  HttpResponse answer;
  auto location = resolve_location(repo, *path, &answer);
  if (!location.ok()) return location.status();
  auto lacking = [&](const std::string& what) {
    return Unsupported("the resolve answer for '" + *path + "' " + what);
  };
  FileProbe p;
  p.commit = ascii_lower(answer.header("x-repo-commit").value_or(""));
  if (!is_hex(p.commit, 40)) return lacking("names no commit (X-Repo-Commit)");
  p.entry.path = *path;
  // Only LFS (and Xet) files are described from here: their sha256 is the linked ETag, which
  // the whole-file hash checks. A small file served directly would be named by its plain ETag,
  // which a proxy or mirror may compute its own way (then every read of it would fail its hash):
  // its listing names it instead, and it is small enough that the listing costs little.
  const auto linked_etag = answer.header("x-linked-etag");
  if (!linked_etag) return lacking("links no sha256 (X-Linked-Etag): a file served directly is listed");
  std::string sha = bare_etag(*linked_etag);
  if (!is_hex(sha, 64)) return lacking("links an ETag that is no sha256");
  p.entry.lfs_sha256 = std::move(sha);
  auto size = header_size(answer.header("x-linked-size"));
  if (!size) return lacking("gives no size it could be read at (X-Linked-Size)");
  p.entry.size = *size;
  const bool direct = answer.status >= 200 && answer.status < 300;
  if (auto xet = answer.header("x-xet-hash"); xet && is_hex(*xet, 64)) p.entry.xet_hash = ascii_lower(*xet);
  if (!direct) p.location = *location;
  return p;
}

void HubClient::adopt_location(const RepoRef& pinned, std::string_view path_in, const Location& location) {
  auto path = normalize_repo_path(path_in, /*allow_root=*/false);
  if (!path.ok()) return;
  Location kept = location;
  kept.quota_waited = std::chrono::milliseconds(0);  // a later caller waits for nothing
  std::lock_guard<std::mutex> lock(mu_);
  remember_location(location_key(pinned, *path), kept);
}

MonotonicClock::time_point HubClient::expiry_of(const std::string& signed_url) const {
  const int64_t wall_now =
      std::chrono::duration_cast<seconds>(config_.env->system_now().time_since_epoch()).count();
  seconds lifetime = kDefaultLocationTtl;
  if (auto amz_expires = parse_seconds(url::query_param(signed_url, "X-Amz-Expires"))) {
    lifetime = seconds(*amz_expires);
    // Signed at X-Amz-Date: part of the lifetime may be gone already. A stamp our clock
    // disagrees with (in the future, or past expiry while the Hub just handed it out) means a
    // skewed clock: then assume it was signed now.
    if (auto signed_at = parse_amz_date(url::query_param(signed_url, "X-Amz-Date").value_or(""))) {
      int64_t remaining = *signed_at + *amz_expires - wall_now;
      if (remaining > 0 && remaining <= *amz_expires) lifetime = seconds(remaining);
    }
  } else {
    auto expires = parse_seconds(url::query_param(signed_url, "Expires"));
    if (!expires) expires = parse_seconds(url::query_param(signed_url, "expires"));
    if (expires) {
      int64_t remaining = *expires - wall_now;
      if (remaining > 0 && remaining <= kMaxTrustedLifetime.count()) lifetime = seconds(remaining);
    }
  }
  return config_.env->now() + std::max(lifetime - kExpiryMargin, seconds(0));
}

}  // namespace hubfs
