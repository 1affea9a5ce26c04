#include "fs/listing_cache.h"

#include <ctime>

#include <nlohmann/json.hpp>

#include "cache/listing_store.h"
#include "common/text.h"
#include "common/url.h"
#include "hub/hub_json.h"

namespace hubfs {
namespace {

// Bumped when a document's meaning changes: an older or newer one then reads as absent.
constexpr int kFormat = 1;

bool is_direct_child(const std::string& path, const std::string& dir) {
  std::string_view name = path;
  if (!dir.empty()) {
    if (path.size() <= dir.size() + 1 || path.compare(0, dir.size(), dir) != 0 || path[dir.size()] != '/') return false;
    name = std::string_view(path).substr(dir.size() + 1);
  }
  return !name.empty() && name.find('/') == std::string_view::npos && name != "." && name != "..";
}

// The document, parsed, if it is one of ours about exactly this (endpoint, repo, ...).
std::optional<nlohmann::json> parse_document(const std::optional<std::string>& text, const std::string& endpoint,
                                             const std::string& repo) {
  if (!text) return std::nullopt;
  auto j = nlohmann::json::parse(*text, nullptr, /*allow_exceptions=*/false);
  if (!j.is_object()) return std::nullopt;
  auto field = [&](const char* key) -> std::string {
    auto it = j.find(key);
    return it != j.end() && it->is_string() ? it->get<std::string>() : std::string("\x01");
  };
  auto format = j.find("format");
  if (format == j.end() || !format->is_number_integer() || format->get<int>() != kFormat) return std::nullopt;
  if (field("endpoint") != endpoint || field("repo") != repo) return std::nullopt;
  return j;
}

}  // namespace

ListingCache::ListingCache(std::string cache_dir, std::string endpoint, const RepoRef& repo)
    : cache_dir_(std::move(cache_dir)),
      shown_endpoint_(url::url_for_log(endpoint)),
      repo_label_(std::string(api_segment(repo.type)) + "/" + repo.id),
      repo_dir_(listing_store::repo_dir(cache_dir_, endpoint, repo_label_)) {}

std::optional<std::vector<TreeEntry>> ListingCache::load_dir(const std::string& commit, const std::string& dir) const {
  auto j = parse_document(listing_store::read(listing_store::dir_document(repo_dir_, commit, dir)), shown_endpoint_,
                          repo_label_);
  if (!j) return std::nullopt;
  if (j->value("commit", "") != commit || j->value("dir", std::string("\x01")) != dir) return std::nullopt;
  auto entries = j->find("entries");
  auto count = j->find("count");
  if (entries == j->end() || !entries->is_array() || count == j->end() || !count->is_number_unsigned())
    return std::nullopt;
  // The entries are kept in the Hub's own format, so the Hub's parser reads them back.
  auto parsed = hub_json::parse_tree_entries(entries->dump(), "the listing cache");
  if (!parsed.ok() || parsed->size() != count->get<uint64_t>()) return std::nullopt;
  for (const TreeEntry& e : *parsed) {
    if (!is_direct_child(e.path, dir)) return std::nullopt;
    if (e.lfs_sha256 && !is_lower_hex(*e.lfs_sha256, 64)) return std::nullopt;
  }
  return std::move(parsed).value();
}

namespace {

// An entry in the Hub's own format, so the Hub's parser reads it back.
nlohmann::json entry_json(const TreeEntry& e) {
  nlohmann::json item = {{"type", e.is_dir ? "directory" : "file"}, {"path", e.path}, {"oid", e.oid}};
  item["size"] = e.size;
  if (e.lfs_sha256) item["lfs"] = {{"oid", *e.lfs_sha256}, {"size", e.size}};
  if (e.xet_hash) item["xetHash"] = *e.xet_hash;
  return item;
}

}  // namespace

std::optional<TreeEntry> ListingCache::load_file(const std::string& commit, const std::string& path) const {
  auto j = parse_document(listing_store::read(listing_store::file_document(repo_dir_, commit, path)), shown_endpoint_,
                          repo_label_);
  if (!j) return std::nullopt;
  if (j->value("commit", "") != commit || j->value("file", std::string("\x01")) != path) return std::nullopt;
  auto entries = j->find("entries");
  if (entries == j->end() || !entries->is_array()) return std::nullopt;
  auto parsed = hub_json::parse_tree_entries(entries->dump(), "the listing cache");
  if (!parsed.ok() || parsed->size() != 1) return std::nullopt;
  TreeEntry& e = parsed->front();
  if (e.is_dir || e.path != path || (e.lfs_sha256 && !is_lower_hex(*e.lfs_sha256, 64))) return std::nullopt;
  if (!e.lfs_sha256 && !is_lower_hex(e.oid, 40)) return std::nullopt;
  return std::move(e);
}

Status ListingCache::save_file(const std::string& commit, const TreeEntry& entry) const {
  nlohmann::json doc = {{"format", kFormat}, {"endpoint", shown_endpoint_}, {"repo", repo_label_},
                        {"commit", commit},  {"file", entry.path},          {"entries", nlohmann::json::array({entry_json(entry)})}};
  return listing_store::write(listing_store::file_document(repo_dir_, commit, entry.path), doc.dump() + "\n");
}

Status ListingCache::save_dir(const std::string& commit, const std::string& dir,
                              const std::vector<TreeEntry>& entries) const {
  nlohmann::json list = nlohmann::json::array();
  for (const TreeEntry& e : entries) list.push_back(entry_json(e));
  nlohmann::json doc = {{"format", kFormat},  {"endpoint", shown_endpoint_}, {"repo", repo_label_},
                        {"commit", commit},   {"dir", dir},                  {"count", entries.size()},
                        {"entries", std::move(list)}};
  return listing_store::write(listing_store::dir_document(repo_dir_, commit, dir), doc.dump() + "\n");
}

std::optional<PinnedRevision> ListingCache::load_ref(const std::string& revision) const {
  auto j = parse_document(listing_store::read(listing_store::ref_document(repo_dir_, revision)), shown_endpoint_,
                          repo_label_);
  if (!j || j->value("revision", std::string("\x01")) != revision) return std::nullopt;
  PinnedRevision p;
  p.commit = j->value("commit", "");
  if (!is_lower_hex(p.commit, 40)) return std::nullopt;
  auto number = [&](const char* key) -> int64_t {
    auto it = j->find(key);
    return it != j->end() && it->is_number_integer() ? it->get<int64_t>() : 0;
  };
  p.last_modified = number("last_modified");
  p.resolved_at = number("resolved_at");
  auto priv = j->find("private");
  p.is_private = priv != j->end() && priv->is_boolean() && priv->get<bool>();
  auto gated = j->find("gated");
  p.gated = gated != j->end() && gated->is_boolean() && gated->get<bool>();
  return p;
}

Status ListingCache::save_ref(const std::string& revision, const PinnedRevision& pinned) const {
  nlohmann::json doc = {{"format", kFormat},
                        {"endpoint", shown_endpoint_},
                        {"repo", repo_label_},
                        {"revision", revision},
                        {"commit", pinned.commit},
                        {"last_modified", pinned.last_modified},
                        {"private", pinned.is_private},
                        {"gated", pinned.gated},
                        {"resolved_at", pinned.resolved_at}};  // stamped by the caller (pin_revision)
  return listing_store::write(listing_store::ref_document(repo_dir_, revision), doc.dump() + "\n");
}

std::optional<PinnedRevision> stored_commit_pin(const RepoRef& repo, const ListingCache* listings) {
  if (!listings || !is_lower_hex(repo.revision, 40)) return std::nullopt;
  // Stored by an earlier pin of the commit, or of a branch that pointed at it.
  auto stored = listings->load_ref(repo.revision);
  if (!stored || stored->commit != repo.revision) return std::nullopt;
  return stored;
}

namespace {

// Whether a stored record answers a pin as `pinned` does, but for when it was resolved.
bool same_answer(const std::optional<PinnedRevision>& stored, const PinnedRevision& pinned) {
  return stored && stored->commit == pinned.commit && stored->last_modified == pinned.last_modified &&
         stored->is_private == pinned.is_private && stored->gated == pinned.gated;
}

Result<PinnedRevision> pin(HubClient& hub, const RepoRef& repo, const ListingCache* listings, bool offline,
                           std::function<void()>* store_later) {
  const std::string label = std::string(api_segment(repo.type)) + "/" + repo.id;
  if (offline) {
    if (!listings) {
      return InvalidArgument("--offline mounts from the disk cache, and --cache-size 0 keeps none: drop "
                             "--cache-size 0, or mount without --offline");
    }
    if (auto stored = listings->load_ref(repo.revision)) return std::move(*stored);
    if (is_lower_hex(repo.revision, 40)) return PinnedRevision{repo.revision, 0, false, false, 0, std::nullopt};
    return NotFound("--offline: the cache " + listings->cache_dir() + " holds no listing of " + label +
                    " at revision " + repo.revision + " from " + url::url_for_log(hub.config().endpoint) +
                    ": mount it once without --offline while the Hub can be reached (offline, a revision "
                    "resolves to the commit it pointed at then)");
  }
  // Reopening a pinned commit costs no request.
  if (auto stored = stored_commit_pin(repo, listings)) return std::move(*stored);
  auto info = hub.repo_info(repo);
  if (!info.ok()) {
    const Code code = info.status().code();
    if (listings && (code == Code::kUnavailable || code == Code::kTimeout)) {
      if (auto stored = listings->load_ref(repo.revision)) {
        char when[32] = "an earlier mount";
        const time_t t = static_cast<time_t>(stored->resolved_at);
        struct tm tm {};
        if (t > 0 && gmtime_r(&t, &tm)) strftime(when, sizeof when, "%Y-%m-%d %H:%M UTC", &tm);
        return Status(code, info.status().message() + "; the cache holds " + label + " at revision " + repo.revision +
                                " (commit " + stored->commit + ", resolved " + when +
                                "): add --offline to mount it from the cache");
      }
    }
    return info.status();
  }
  // Resolved now, on the Hub client's Env's wall clock.
  const int64_t now_s =
      std::chrono::duration_cast<std::chrono::seconds>(hub.config().env->system_now().time_since_epoch()).count();
  PinnedRevision pinned{info->sha, info->last_modified, info->is_private, info->gated, now_s, info->file_count};
  // Best effort: without it only a later --offline mount of this revision is impossible.
  if (listings) {
    auto store_revision = [listings, revision = repo.revision, pinned] { (void)listings->save_ref(revision, pinned); };
    if (!store_later) {
      store_revision();
      if (repo.revision != pinned.commit) (void)listings->save_ref(pinned.commit, pinned);
    } else if (repo.revision != pinned.commit && same_answer(listings->load_ref(pinned.commit), pinned)) {
      *store_later = [store_revision, listings, pinned] {
        store_revision();
        (void)listings->save_ref(pinned.commit, pinned);
      };
    } else {
      (void)listings->save_ref(pinned.commit, pinned);  // new to the cache: stored before anyone is handed it
      if (repo.revision != pinned.commit) *store_later = store_revision;
    }
  }
  return pinned;
}

}  // namespace

Result<PinnedRevision> pin_revision(HubClient& hub, const RepoRef& repo, const ListingCache* listings, bool offline) {
  return pin(hub, repo, listings, offline, nullptr);
}

Result<PinnedRevision> pin_revision_storing_later(HubClient& hub, const RepoRef& repo, const ListingCache* listings,
                                                  std::function<void()>* store_later) {
  *store_later = nullptr;
  return pin(hub, repo, listings, /*offline=*/false, store_later);
}

}  // namespace hubfs
