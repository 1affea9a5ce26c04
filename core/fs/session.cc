#include "fs/session.h"

#include <fcntl.h>
#include <stdlib.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cctype>
#include <cerrno>
#include <cmath>
#include <cstring>
#include <fstream>

#include "cache/cache_admin.h"
#include "cache/cache_index.h"
#include "cache/content_verifier.h"
#include "common/log.h"
#include "common/url.h"

namespace hubfs {

namespace {

std::string env_or(const char* name, const std::string& fallback) {
  const char* v = getenv(name);
  return v && *v ? std::string(v) : fallback;
}


// The shared block tier, unless the repo is private or gated and shared_cache_private was not
// given (whoever reaches the servers could read its blocks). Contacts no server: a tier that is
// down costs Hub fetches, never the session.
Status open_shared_tier(const SessionConfig& config, const PinnedRevision& info, const std::string& repo_label,
                        uint32_t block_size, Stack& s) {
  if (config.shared_cache.empty()) return Status::Ok();
  if ((info.is_private || info.gated) && !config.shared_cache_private) {
    log_info("shared cache: not used for " + repo_label + ", which is " + (info.is_private ? "private" : "gated") +
             " (anyone who can reach the cache servers could read its blocks); --shared-cache-private "
             "shares it anyway");
    return Status::Ok();
  }
  MemcachedTierOptions options;
  options.servers = config.shared_cache;
  options.env = s.env;
  auto tier = MemcachedTier::create(options);
  if (!tier.ok()) return tier.status();
  s.shared_tier = std::move(tier).value();
  s.shared_blocks = std::make_unique<SharedBlocks>(*s.shared_tier, block_size, *s.shared_key);
  log_info("shared cache: " + s.shared_tier->describe());
  return Status::Ok();
}

}  // namespace

// The CA certificates TLS connections trust: the ca_bundle option alone, else every bundle the
// environment names (find_ca_bundles: REQUESTS_CA_BUNDLE, CURL_CA_BUNDLE, SSL_CERT_FILE; one is
// passed as a file, several as the union of their PEM text), else libcurl's built-in store. A
// named bundle that cannot be read fails here, naming where it came from, rather than as a TLS
// error later.
Status choose_ca_bundle(const std::string& flag, CurlOptions& options) {
  std::vector<CaBundle> bundles;
  if (!flag.empty()) {
    bundles.push_back(CaBundle{flag, "--ca-bundle"});
  } else {
    bundles = find_ca_bundles();
  }
  std::string pem;
  for (const CaBundle& b : bundles) {
    std::ifstream in;
    if (access(b.path.c_str(), R_OK) == 0) in.open(b.path, std::ios::binary);
    if (!in.is_open()) {
      return InvalidArgument("the CA bundle " + b.path + " (from " + b.source + ") cannot be read (" +
                             strerror(errno) + "); point " + b.source + " at a PEM file of trusted CA "
                             "certificates, or unset it to use the system's");
    }
    pem.append(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
    if (!pem.empty() && pem.back() != '\n') pem += '\n';
  }
  if (bundles.size() == 1) {
    options.ca_bundle = bundles[0].path;
  } else if (bundles.size() > 1) {
    options.ca_pem = std::move(pem);
    std::string names;
    for (const CaBundle& b : bundles) names += (names.empty() ? "" : ", ") + b.source;
    log_info("trusting the CA certificates of " + names + " together");
  }
  return Status::Ok();
}

std::string default_endpoint() { return find_endpoint(); }

std::string default_cache_dir() {
  if (const char* d = getenv("HUBFS_CACHE_DIR"); d && *d) return d;
  if (const char* x = getenv("XDG_CACHE_HOME"); x && *x) return std::string(x) + "/hubfs";
  return env_or("HOME", "/root") + "/.cache/hubfs";
}

Status apply_environment_timeouts(SessionConfig& config) {
  auto env = env_timeouts();
  if (!env.ok()) return env.status();
  if (!config.metadata_timeout_s && env->etag) config.metadata_timeout_s = static_cast<int>(env->etag->count());
  if (!config.stall_timeout_s && env->download) config.stall_timeout_s = static_cast<int>(env->download->count());
  return Status::Ok();
}

Result<uint64_t> parse_size(const std::string& text) {
  if (text.empty()) return InvalidArgument("empty size");
  size_t pos = 0;
  double value = 0;
  try {
    value = std::stod(text, &pos);
  } catch (...) {
    return InvalidArgument("'" + text + "' is not a size (examples: 4096, 512M, 10G)");
  }
  std::string suffix = text.substr(pos);
  if (!suffix.empty() && (suffix.back() == 'B' || suffix.back() == 'b')) suffix.pop_back();
  if (!suffix.empty() && (suffix.back() == 'i')) suffix.pop_back();
  double scale = 1;
  if (suffix.size() > 1) return InvalidArgument("'" + text + "' has an unknown suffix (use K, M, G or T)");
  if (!suffix.empty()) {
    switch (toupper(suffix[0])) {
      case 'K': scale = 1024.0; break;
      case 'M': scale = 1024.0 * 1024; break;
      case 'G': scale = 1024.0 * 1024 * 1024; break;
      case 'T': scale = 1024.0 * 1024 * 1024 * 1024; break;
      default: return InvalidArgument("'" + text + "' has an unknown suffix (use K, M, G or T)");
    }
  }
  if (!(value >= 0) || value * scale > 1.8e19) return InvalidArgument("'" + text + "' is out of range");
  return static_cast<uint64_t>(std::llround(value * scale));
}

void Stack::shutdown() {
  // Retries waiting out a long Retry-After would hold up the reader's shutdown (it waits for
  // fetches in flight): answer them now, and fail what is still on the wire. Then the reader
  // drains while everything its tasks reach (fetcher, cache, hub) still exists.
  if (xet_router) xet_router->shutdown();  // first: what fails from here on is the shutdown
  if (transport) transport->shutdown();
  if (curl) curl->shutdown();
  if (fetcher) fetcher->shutdown();  // fetches waiting to re-ask a refusing CDN end now
  if (reader) reader->shutdown();
  if (xet) xet->shutdown();  // after the reader: its last fetches may still be reading here
}

Status build_stack(const SessionConfig& config, Stack& s) {
  if (!config.shared_cache.empty()) {
    // First, before any request: a tier nobody can trust is refused, not used.
    if (config.shared_cache_key_file.empty())
      return InvalidArgument(
          "--shared-cache needs --shared-cache-key-file F (-o shared_cache_key_file=F): a key every machine "
          "of the cluster shares, which authenticates the blocks in the tier (memcached lets anyone who "
          "reaches it write, and a forged block would be served); make one with `head -c 32 /dev/urandom > F; "
          "chmod 600 F` and copy it to every machine");
    auto key = SharedTierKey::from_file(config.shared_cache_key_file);
    if (!key.ok()) return key.status();
    s.shared_key = std::move(key).value();
  }
  CurlOptions curl_options;
  curl_options.env = s.env;
  curl_options.max_in_flight = config.max_requests;
  if (Status ca = choose_ca_bundle(config.ca_bundle, curl_options); !ca.ok()) return ca;
  curl_options.hedge = true;  // a CDN stalling on a cold object costs a duplicate, not the stall
  // HF_HUB_DOWNLOAD_TIMEOUT: huggingface_hub's read timeout of a download, i.e. how long a
  // transfer may go without a byte; the first byte keeps its own allowance unless that is shorter.
  if (config.stall_timeout_s) {
    curl_options.stall_timeout_ms = *config.stall_timeout_s * 1000L;
    curl_options.first_byte_timeout_ms = std::max(curl_options.first_byte_timeout_ms, curl_options.stall_timeout_ms);
  }
  s.curl = std::make_unique<CurlTransport>(curl_options);
  // A reader is waiting on every request: retry soon (200 ms doubling to 4 s, full jitter: ~3 s
  // at most over 5 attempts) rather than the library's 1 s to 8 s. A server that asks for more
  // (Retry-After, RateLimit) still gets what it asks.
  RetryPolicy retry_policy;
  retry_policy.base_delay = std::chrono::milliseconds(200);
  retry_policy.max_delay = std::chrono::milliseconds(4000);
  // The Hub's quotas: waited out (up to rate_limit_wait_s per request), approached slowly.
  QuotaGateOptions quota_options;
  quota_options.endpoint = config.endpoint;
  quota_options.max_wait = std::chrono::seconds(config.rate_limit_wait_s);
  quota_options.env = s.env;
  s.quota = std::make_unique<QuotaGate>(quota_options);
  retry_policy.quota = s.quota.get();
  s.transport = std::make_unique<RetryingTransport>(*s.curl, retry_policy, *s.env);
  HubConfig hub_config;
  hub_config.endpoint = config.endpoint;
  hub_config.env = s.env;
  if (config.metadata_timeout_s) hub_config.metadata_timeout = std::chrono::seconds(*config.metadata_timeout_s);
  // Followed while the session lives: a token file rewritten (a refreshed or new login) is used
  // from the next request on. A token the caller gave wins over the environment's.
  s.tokens = std::make_shared<TokenWatcher>(*s.env);
  if (config.token) {
    hub_config.token_source = [token = *config.token]() -> std::optional<std::string> {
      if (token.empty()) return std::nullopt;
      return token;
    };
  } else {
    hub_config.token_source = [tokens = s.tokens] { return tokens->current(); };
    if (implicit_token_disabled()) {
      log_info("HF_HUB_DISABLE_IMPLICIT_TOKEN is set: no token is sent (private and gated repos cannot be read)");
    }
  }
  s.hub = std::make_unique<HubClient>(hub_config, *s.transport);
  return Status::Ok();
}

Status build_reader(const SessionConfig& config, Stack& s, const PinnedRevision* repo, const std::string& repo_label) {
  if (config.cache_size == 0) {
    // cache_size 0: no disk cache at all (nothing is written to the cache directory); blocks
    // live only in the reader's memory cache.
    log_info("--cache-size 0: no disk cache; every block not in memory is fetched again");
  } else {
    CacheOptions cache_options;
    cache_options.dir = config.cache_dir;
    cache_options.budget_bytes = config.cache_size;
    cache_options.env = s.env;
    auto cache = BlockCache::open(cache_options);
    if (!cache.ok()) return cache.status();
    s.cache = std::move(cache).value();
    // The budget tells `hubfs cache info` what this cache is held to (best effort).
    (void)cache_index::write_budget(config.cache_dir, config.cache_size);
  }
  RangeFetcherOptions fetcher_options;
  fetcher_options.env = s.env;
  s.fetcher = std::make_unique<RangeFetcher>(*s.transport, fetcher_options);
  ReaderOptions reader_options;
  reader_options.read_timeout = std::chrono::seconds(config.read_timeout_s);
  reader_options.verify_whole_files = config.verify_whole_files;
  reader_options.quota_wait_end = [quota = s.quota.get()] { return quota->last_wait_end(); };
  reader_options.quota_max_wait = std::chrono::seconds(config.rate_limit_wait_s);
  reader_options.parallel_requests = static_cast<uint32_t>(config.max_requests);
  reader_options.memory_cache_bytes = config.memory_cache_bytes;
  reader_options.max_prefetch_bytes = std::min(reader_options.max_prefetch_bytes, config.memory_cache_bytes);
  reader_options.max_deferred_write_bytes = std::min(reader_options.max_deferred_write_bytes, config.memory_cache_bytes);
  if (!config.shared_cache.empty()) {
    if (repo) {
      if (Status st = open_shared_tier(config, *repo, repo_label, reader_options.block_size, s); !st.ok()) return st;
    } else if (!config.shared_cache_private) {
      // A whole-Hub mount pins repos as they are touched, public and private alike, behind one
      // reader: without a per-repo decision, sharing must be asked for explicitly.
      return InvalidArgument("--shared-cache with --hub needs --shared-cache-private: a whole-Hub mount "
                             "cannot keep private and gated repos out of the shared tier (anyone who can "
                             "reach the cache servers could read their blocks)");
    } else {
      PinnedRevision any;
      if (Status st = open_shared_tier(config, any, "the whole Hub", reader_options.block_size, s); !st.ok())
        return st;
    }
  }
  s.reader = std::make_unique<BlockReader>(s.cache.get(), *s.fetcher, reader_options, s.shared_blocks.get());
  return Status::Ok();
}

namespace {
// Bytes [offset, offset + length) of the file whose blocks `cache` keeps under `key`, blocks of
// block_size, into out; false unless every block holding them is there. Read without the blocks' own
// checksums: the chunk cache checks every chunk it reads back against its BLAKE3 hash.
bool read_cached_bytes(BlockCache& cache, const std::string& key, uint32_t block_size, uint64_t offset,
                       uint64_t length, char* out) {
  for (uint64_t at = offset, end = offset + length; at < end;) {
    const uint64_t index = at / block_size, in = at - index * block_size;
    const uint64_t n = std::min<uint64_t>(block_size - in, end - at);
    if (!cache.read_part(key, index, in, out + (at - offset), n)) return false;
    at += n;
  }
  return true;
}
}  // namespace

void build_xet(const SessionConfig& config, Stack& s, const RepoRef& pinned, FsOptions& fs_options) {
  if (xet_disabled()) {
    log_info("HF_HUB_DISABLE_XET is set: Xet-stored files are read through the Hub's bridge");
    return;
  }
  xet::XetReaderOptions options;
  options.threads = std::max(1, config.max_requests);
  options.env = s.env;
  const uint32_t block_size = s.reader ? s.reader->options().block_size : 0;
  if (config.cache_size != 0) {
    // Beside the blocks (docs/xet.md, "The chunk cache"): a fetched chunk is recorded where it
    // lies in a file the block cache holds, and read back from there; bounded by a quarter of
    // --cache-size (locations take a few hundred bytes per run; copies, written without a block
    // cache, their chunks' size).
    xet::ChunkCache::FileBytes file_bytes;
    if (s.cache && block_size != 0) {
      file_bytes = [cache = s.cache.get(), block_size](const std::string& key, uint64_t offset, uint64_t length,
                                                       char* out) {
        return read_cached_bytes(*cache, key, block_size, offset, length, out);
      };
    }
    s.chunk_cache = std::make_unique<xet::ChunkCache>(config.cache_dir + "/" + cache_admin::kXetChunkDir,
                                                      config.cache_size / 4, std::move(file_bytes));
    options.chunk_cache = s.chunk_cache.get();
  }
  xet::TokenSource tokens = [hub = s.hub.get(), pinned]() -> Result<xet::XetToken> {
    auto t = hub->xet_read_token(pinned);
    if (!t.ok()) return t.status();
    return xet::XetToken{t->cas_url, t->access_token, t->expires};
  };
  s.xet = std::make_unique<xet::XetReader>(*s.transport, std::move(tokens), options);
  s.xet_router = std::make_shared<XetRouter>(*s.xet, *s.fetcher);
  const bool locations = s.chunk_cache && s.chunk_cache->keeps_locations();
  fs_options.range_source = [router = s.xet_router, locations, block_size](const TreeEntry& e, const Locator& locate) {
    return router->source_for(e, locate, locations ? BlockReader::disk_key(e.content_id(), block_size) : std::string());
  };
}

std::function<void(const RemoteFile&)> index_recorder(const std::string& cache_dir, const std::string& repo_label,
                                                      const std::string& revision, const std::string& commit) {
  auto warned = std::make_shared<std::atomic<bool>>(false);
  return [cache_dir, repo_label, revision, commit, warned](const RemoteFile& f) {
    IndexRecord r{repo_label, revision, commit, f.path, f.content_id, f.size};
    if (Status st = cache_index::record(cache_dir, r); !st.ok() && !warned->exchange(true))
      log_warning("cache: cannot record " + f.path + " in the cache index (" + st.message() +
                  "); `hubfs cache info` will not attribute its blocks to " + repo_label);
  };
}

namespace {

// What the cache knows of `path` at `commit` without the Hub: nothing, a stored listing of its
// directory, or the file's own record (a probe's, stored by an earlier session).
struct StoredFirstFile {
  bool dir_listed = false;
  std::optional<TreeEntry> record;
  bool known() const { return dir_listed || record.has_value(); }
};
StoredFirstFile stored_first_file(const ListingCache* listings, const std::string& commit, const std::string& path) {
  StoredFirstFile out;
  if (!listings || path.empty()) return out;
  const size_t slash = path.rfind('/');
  out.dir_listed = listings->load_dir(commit, slash == std::string::npos ? "" : path.substr(0, slash)).has_value();
  if (!out.dir_listed) out.record = listings->load_file(commit, path);
  return out;
}

// A probe of the first file, started beside the pin (on `executor`, which must outlive `hub`'s
// requests: the session's background executor) and waited for after it, for a while (on
// `env`'s clock).
class FirstFileProbe {
 public:
  FirstFileProbe(Env& env, Executor& executor, HubClient& hub, const RepoRef& repo, const std::string& path)
      : env_(env), answer_(std::make_shared<OneShot<Result<HubClient::FileProbe>>>()) {
    if (!executor.post([&hub, repo, path, answer = answer_] { answer->set(hub.probe_file(repo, path)); })) {
      answer_->set(Unavailable("not probed"));
    }
  }
  // The probe's entry and location if the pin's commit served it within `grace`; nullopt
  // otherwise (the caller lists, which also produces the errors a missing or forbidden file
  // deserves; a probe still running finishes on the executor, unheard).
  std::optional<HubClient::FileProbe> wait(const std::string& commit, std::chrono::milliseconds grace) {
    std::optional<Result<HubClient::FileProbe>> answered = answer_->wait(Deadline::after(grace, env_.clock()));
    if (!answered) {
      log_debug("probe of the first file: no answer " + std::to_string(grace.count()) + " ms after the pin; listing instead");
      return std::nullopt;
    }
    Result<HubClient::FileProbe> r = std::move(*answered);
    if (!r.ok()) {
      log_debug("probe of the first file: " + r.status().message() + "; listing instead");
      return std::nullopt;
    }
    if (r->commit != commit) {
      log_debug("probe of the first file: served from commit " + r->commit + ", pinned " + commit + "; listing instead");
      return std::nullopt;
    }
    return std::move(*r);
  }

 private:
  Env& env_;
  std::shared_ptr<OneShot<Result<HubClient::FileProbe>>> answer_;
};

// How long the pin's caller waits, after the pin, for the first file's probe: a second, or as
// long as the pin itself took (a slow link). A probe slower than that is held somewhere (the
// resolvers' quota, a stalled connection): listing costs one round trip instead.
constexpr std::chrono::milliseconds kProbeGrace{1000};

}  // namespace

Status open_repo_session(const SessionConfig& config, const RepoSpec& spec, RepoSession& s,
                         const std::function<void(RepoSession&, FsOptions&)>& customize,
                         const std::string& first_file) {
  // HF_HUB_OFFLINE asks huggingface_hub for no network at all: the same as the offline option.
  const bool offline = config.offline || offline_requested();
  if (offline && config.cache_size == 0) {
    return InvalidArgument("offline reads come from the disk cache, and a cache size of 0 keeps none: "
                           "drop --cache-size 0 (cache_size=0)");
  }
  s.repo = spec.repo;
  s.subfolder = spec.subfolder;
  s.offline = offline;
  s.label = std::string(api_segment(spec.repo.type)) + "/" + spec.repo.id;
  if (Status st = build_stack(config, s.stack); !st.ok()) return st;

  // Listings live with the blocks; cache_size 0 writes nothing to the cache directory.
  std::shared_ptr<const ListingCache> listings;
  if (config.cache_size != 0) listings = std::make_shared<ListingCache>(config.cache_dir, config.endpoint, s.repo);
  // The first file is probed beside the pin unless the cache knows it at the commit this
  // revision was pinned to last (the pin then most likely confirms that commit).
  const bool may_probe = !offline && !first_file.empty() && spec.subfolder.empty();
  std::optional<FirstFileProbe> probe;
  std::optional<std::string> last_commit;  // what `stored_at_last` was read for
  StoredFirstFile stored_at_last;
  if (may_probe) {
    if (auto last = listings ? listings->load_ref(s.repo.revision) : std::nullopt) {
      last_commit = last->commit;
      stored_at_last = stored_first_file(listings.get(), last->commit, first_file);
    }
    if (!stored_at_last.known()) {
      s.background = s.stack.env->new_executor(1);
      probe.emplace(*s.stack.env, *s.background, *s.stack.hub, s.repo, first_file);
    }
  }
  const auto pin_started = s.stack.env->now();
  auto info = pin_revision(*s.stack.hub, s.repo, listings.get(), offline);
  if (!info.ok()) return info.status();
  std::optional<TreeEntry> first;  // known without listing its directory
  std::optional<Location> first_location;
  if (spec.subfolder.empty()) {
    // Read once: the pin usually confirms the commit the cache was asked about before it.
    StoredFirstFile stored = last_commit == info->commit ? std::move(stored_at_last)
                                                         : stored_first_file(listings.get(), info->commit, first_file);
    if (stored.record) first = std::move(stored.record);
    if (probe && !stored.known()) {
      const auto pin_took =
          std::chrono::duration_cast<std::chrono::milliseconds>(s.stack.env->now() - pin_started);
      if (auto probed = probe->wait(info->commit, std::max(kProbeGrace, pin_took))) {
        first = std::move(probed->entry);
        first_location = std::move(probed->location);
        // Best effort, as listings are: the next session opens this file without the Hub.
        if (listings) (void)listings->save_file(info->commit, *first);
      }
    }
  }
  s.info = *info;
  RepoRef pinned = s.repo;
  pinned.revision = info->commit;  // every later request names the commit: the view never moves
  const std::string& subfolder = s.subfolder;
  if (offline && !first && !listings->load_dir(info->commit, subfolder)) {
    return NotFound("offline: the cache " + config.cache_dir + " holds " + s.label + " at revision " +
                    s.repo.revision + " (commit " + info->commit + ") but not the listing of " +
                    (subfolder.empty() ? "its root" : "'" + subfolder + "'") +
                    ": read it once without --offline (HF_HUB_OFFLINE) while the Hub can be reached");
  }
  if (!subfolder.empty()) {
    // The subfolder must be a directory at this commit. The stored listing of its parent answers
    // that without a request (offline, its own listing was found above).
    const size_t slash = subfolder.rfind('/');
    const std::string parent = slash == std::string::npos ? "" : subfolder.substr(0, slash);
    std::optional<std::vector<TreeEntry>> found;
    if (listings) found = listings->load_dir(info->commit, parent);
    if (!found && offline) found = std::vector<TreeEntry>{TreeEntry{subfolder, true, 0, "", std::nullopt, std::nullopt}};
    if (!found) {
      auto asked = s.stack.hub->paths_info(pinned, {subfolder});
      if (!asked.ok()) return asked.status();
      found = std::move(*asked);
    }
    const TreeEntry* entry = nullptr;
    for (const auto& e : *found)
      if (e.path == subfolder) entry = &e;
    if (!entry) {
      return NotFound("subfolder '" + subfolder + "' does not exist in " + s.label + " at revision " +
                      s.repo.revision + " (commit " + info->commit + "); check its spelling and case with the "
                      "repo's file browser, or mount the whole repo");
    }
    if (!entry->is_dir) {
      return InvalidArgument("'" + subfolder + "' in " + s.label + " is a file, not a directory: a "
                             "subfolder mount shows a directory (mount its parent instead)");
    }
  }
  if (Status st = build_reader(config, s.stack, &s.info, s.label); !st.ok()) return st;
  FsOptions fs_options;
  fs_options.mtime = static_cast<time_t>(info->last_modified);
  fs_options.root_path = subfolder;
  fs_options.listings = listings;
  fs_options.offline = offline;
  fs_options.list_whole_repo = info->file_count && *info->file_count <= kWholeRepoMaxFiles;
  if (s.stack.cache) fs_options.on_open = index_recorder(config.cache_dir, s.label, s.repo.revision, info->commit);
  if (!offline) build_xet(config, s.stack, pinned, fs_options);
  if (customize) customize(s, fs_options);
  s.fs = std::make_unique<FileSystem>(*s.stack.hub, pinned, *s.stack.reader, fs_options);
  if (first) {
    // The first file is known without a listing; whatever else is asked for lists then.
    if (first_location) s.stack.hub->adopt_location(pinned, first->path, *first_location);
    s.fs->know_file(std::move(*first));
    return Status::Ok();
  }
  // Paid by the first access anyway (a lookup lists its whole directory); here it is off the
  // first read's path. A second session on the same commit finds it in the listing cache.
  if (Status st = s.fs->list_root(); !st.ok()) log_warning("listing the root ahead of the first access: " + st.message());
  return Status::Ok();
}

// ---- A file without a mount --------------------------------------------------------------

Result<HfUrl> parse_hf_url(std::string_view url, std::optional<std::string> revision_override) {
  constexpr std::string_view kScheme = "hf://";
  std::string_view rest = url;
  if (rest.substr(0, kScheme.size()) == kScheme) rest.remove_prefix(kScheme.size());
  while (!rest.empty() && rest.back() == '/') rest.remove_suffix(1);
  auto spec = parse_repo_spec(rest, std::nullopt, std::nullopt, std::nullopt);
  if (!spec.ok()) {
    return InvalidArgument("'" + std::string(url) + "' is not an hf:// URL of the form "
                           "hf://[datasets/|spaces/]ORG/NAME[@REVISION]/PATH (" + spec.status().message() + ")");
  }
  HfUrl out;
  out.repo = spec->repo;
  out.path = spec->subfolder;
  // HfFileSystem percent-encodes a revision holding '/' (refs%2Fpr%2F1): parse_repo_ref decodes it.
  if (revision_override) {
    const bool named = rest.find('@') != std::string_view::npos;
    if (named && out.repo.revision != *revision_override) {
      return InvalidArgument("'" + std::string(url) + "' names revision '" + out.repo.revision +
                             "' and the revision option says '" + *revision_override + "': give one of them");
    }
    out.repo.revision = *revision_override;
  }
  if (Status st = check_revision(out.repo.revision); !st.ok()) return st;
  return out;
}

int errno_of(const Status& s) {
  switch (s.code()) {
    case Code::kOk: return 0;
    case Code::kNotFound: return ENOENT;
    case Code::kPermissionDenied: return EACCES;
    case Code::kInvalidArgument: return EINVAL;
    case Code::kTimeout: return ETIMEDOUT;
    case Code::kUnavailable: return EHOSTUNREACH;
    default: return EIO;
  }
}

Status status_of(const FsError& e, const std::string& what) {
  std::string message = what + ": " + (e.reason.empty() ? std::string(strerror(e.code)) : e.reason);
  switch (e.code) {
    case ENOENT: return NotFound(std::move(message));
    case EACCES:
    case EPERM: return PermissionDenied(std::move(message));
    case ETIMEDOUT: return Timeout(std::move(message));
    case EISDIR:
    case ENOTDIR:
    case EINVAL:
    case EROFS: return InvalidArgument(std::move(message));
    default: return IoError(std::move(message));
  }
}

namespace {

// Splits "a/b/c" into its components; "" and "/" are the root. "." and ".." are refused (a repo
// path never holds them, and they would otherwise walk out of a subfolder).
Result<std::vector<std::string>> components(const std::string& path) {
  std::vector<std::string> parts;
  size_t start = 0;
  while (start <= path.size()) {
    size_t slash = path.find('/', start);
    if (slash == std::string::npos) slash = path.size();
    std::string part = path.substr(start, slash - start);
    if (part == "." || part == "..") return InvalidArgument("'" + path + "': repo paths hold no '.' or '..'");
    if (!part.empty()) parts.push_back(std::move(part));
    start = slash + 1;
  }
  return parts;
}

struct Found {
  Ino ino = 0;
  struct stat attr {};
};

Result<Found> walk(RepoSession& s, const std::string& path) {
  auto parts = components(path);
  if (!parts.ok()) return parts.status();
  Found at{kRootIno, {}};
  auto root = s.fs->getattr(kRootIno);
  if (!root.ok()) return status_of(root.error(), s.label);
  at.attr = root.value();
  std::string walked;
  for (const std::string& part : *parts) {
    walked += (walked.empty() ? "" : "/") + part;
    if (!S_ISDIR(at.attr.st_mode)) {
      return NotFound("'" + walked + "' in " + s.label + ": '" + walked.substr(0, walked.size() - part.size() - 1) +
                      "' is a file, not a directory");
    }
    auto e = s.fs->lookup(at.ino, part);
    if (!e.ok()) return status_of(e.error(), "listing '" + walked + "' in " + s.label);
    if (e.value().ino == 0) {
      return NotFound("'" + walked + "' does not exist in " + s.label + " at revision " + s.repo.revision +
                      " (commit " + s.info.commit + "); check its spelling and case");
    }
    at.ino = e.value().ino;
    at.attr = e.value().attr;
  }
  return at;
}

std::string joined(const std::string& dir, const std::string& name) {
  std::string d = dir;
  while (!d.empty() && d.back() == '/') d.pop_back();
  while (!d.empty() && d.front() == '/') d.erase(0, 1);
  return d.empty() ? name : d + "/" + name;
}

}  // namespace

Result<PathInfo> stat_path(RepoSession& s, const std::string& path) {
  auto found = walk(s, path);
  if (!found.ok()) return found.status();
  auto parts = components(path);
  std::string clean;
  for (const auto& p : *parts) clean += (clean.empty() ? "" : "/") + p;
  return PathInfo{clean, S_ISDIR(found->attr.st_mode), S_ISDIR(found->attr.st_mode)
                                                            ? 0
                                                            : static_cast<uint64_t>(found->attr.st_size)};
}

Result<std::vector<PathInfo>> list_dir(RepoSession& s, const std::string& path) {
  auto found = walk(s, path);
  if (!found.ok()) return found.status();
  if (!S_ISDIR(found->attr.st_mode)) return InvalidArgument("'" + path + "' in " + s.label + " is a file, not a directory");
  auto handle = s.fs->opendir(found->ino);
  if (!handle.ok()) return status_of(handle.error(), "listing '" + path + "' in " + s.label);
  std::vector<PathInfo> out;
  uint64_t offset = 0;
  Status failed = Status::Ok();
  for (;;) {
    std::vector<DirEntry> page = s.fs->readdir(handle.value(), offset);
    if (page.empty()) break;
    for (const DirEntry& e : page) {
      offset = e.next_offset;
      if (e.name == "." || e.name == "..") continue;
      PathInfo info{joined(path, e.name), e.is_dir, 0};
      if (!e.is_dir) {
        auto attr = s.fs->getattr(e.ino);
        if (!attr.ok()) {
          failed = status_of(attr.error(), "'" + info.path + "' in " + s.label);
          break;
        }
        info.size = static_cast<uint64_t>(attr.value().st_size);
      }
      out.push_back(std::move(info));
    }
    if (!failed.ok()) break;
  }
  s.fs->releasedir(handle.value());
  if (!failed.ok()) return failed;
  std::sort(out.begin(), out.end(), [](const PathInfo& a, const PathInfo& b) { return a.path < b.path; });
  return out;
}

Result<std::unique_ptr<HubFile>> HubFile::open(std::shared_ptr<RepoSession> session, const std::string& path) {
  auto found = walk(*session, path);
  if (!found.ok()) return found.status();
  if (S_ISDIR(found->attr.st_mode)) {
    return InvalidArgument("'" + path + "' in " + session->label + " is a directory, not a file (list it instead)");
  }
  auto opened = session->fs->open(found->ino, O_RDONLY);
  if (!opened.ok()) return status_of(opened.error(), "opening '" + path + "' in " + session->label);
  const uint64_t size = static_cast<uint64_t>(found->attr.st_size);
  // The listing's hash of the file, as the mount shows it in its extended attributes.
  std::string content_id;
  if (auto sha = session->fs->getxattr(found->ino, "user.hubfs.sha256"); sha.ok()) {
    content_id = "sha256:" + sha.value();
  } else if (auto oid = session->fs->getxattr(found->ino, "user.hubfs.oid"); oid.ok()) {
    content_id = "oid:" + oid.value();
  }
  return std::unique_ptr<HubFile>(
      new HubFile(std::move(session), path, opened.value().handle, size, std::move(content_id)));
}

HubFile::~HubFile() {
  if (handle_) session_->fs->release(handle_);
}

Status HubFile::reopen() {
  if (handle_) session_->fs->release(handle_);
  handle_ = 0;
  auto found = walk(*session_, path_);
  if (!found.ok()) return found.status();
  auto opened = session_->fs->open(found->ino, O_RDONLY);
  if (!opened.ok()) return status_of(opened.error(), "opening '" + path_ + "' in " + session_->label + " again");
  handle_ = opened.value().handle;
  return Status::Ok();
}

Result<std::vector<BlockBytes>> HubFile::read(uint64_t offset, size_t len) {
  if (offset >= size_ || len == 0) return std::vector<BlockBytes>{};
  auto r = session_->fs->read(handle_, offset, len);
  if (!r.ok()) return status_of(r.error(), "reading '" + path_ + "' in " + session_->label);
  return std::move(r.value());
}

Result<size_t> HubFile::pread(void* dst, uint64_t offset, size_t len) {
  // One FileSystem read serves at most 16 MiB (what the kernel could ask): loop to len or EOF.
  size_t copied = 0;
  while (copied < len) {
    auto slices = read(offset + copied, len - copied);
    if (!slices.ok()) return slices.status();
    if (slices->empty()) break;
    for (const BlockBytes& b : *slices) {
      std::memcpy(static_cast<char*>(dst) + copied, b.data(), b.size());
      copied += b.size();
    }
  }
  return copied;
}

void HubFile::discard_cached() { session_->fs->discard(handle_); }

Result<uint64_t> HubFile::hint(const std::vector<ByteRange>& ranges) {
  auto r = session_->fs->hint(handle_, ranges);
  if (!r.ok()) return status_of(r.error(), "hinting ranges of '" + path_ + "' in " + session_->label);
  return r.value();
}

// A copy's piece: the reader's block size, so each read is one block from the cache or one
// range on the wire; the hint keeps kCopyWindow of them in flight ahead of the sink, refilled by
// halves. 128 MiB: each refill of 64 MiB goes out as 16 requests of 4 MiB, which a bandwidth cap
// per connection needs (at 32 MiB, 16 requests of 1 MiB spent most of their time in the round
// trip: 300 MB at 50 ms / 400 Mbit/s per connection took 2.70 s against 2.12 s; 256 MiB: 2.45 s).
constexpr size_t kCopyPiece = 1u << 20;
constexpr uint64_t kCopyWindow = 128ull << 20;

namespace {

// Whole-file hashes that failed in the session's reader so far.
uint64_t hash_failures(const HubFile& file) {
  const auto& reader = file.session()->stack.reader;
  return reader ? reader->stats().verify_failures : 0;
}

Status copy_once(HubFile& file, const CopyOptions& options);

}  // namespace

Status copy_file(HubFile& file, const CopyOptions& options) {
  const uint64_t failures = hash_failures(file);
  Status st = copy_once(file, options);
  if (st.ok() || (options.stop && options.stop())) return st;
  // Only a failed hash is worth a second copy (the blocks that stayed cached make any other
  // failure's second try cheap, but an outage would only be waited out twice).
  if (st.code() != Code::kCorrupt && hash_failures(file) == failures) return st;
  if (options.sink && !options.rewind) return st;
  if (options.rewind) {
    if (Status r = options.rewind(); !r.ok()) return st;
  }
  if (Status r = file.reopen(); !r.ok()) return st;
  log_warning("'" + file.path() + "' failed its hash (" + st.message() +
              "); its blocks were dropped, copying it once more from the start");
  Status again = copy_once(file, options);
  if (!again.ok() && again.code() != Code::kUnavailable) {
    return Status(again.code(), again.message() + " (the second try; the first failed its hash)");
  }
  return again;
}

namespace {

Status copy_once(HubFile& file, const CopyOptions& options) {
  auto verifier = ContentVerifier::for_content(file.content_id(), file.size());
  if (!verifier) {
    return Unsupported("'" + file.path() + "' has no content hash hubfs can check (content id '" +
                       file.content_id() + "'): not copied unverified");
  }
  const uint64_t size = file.size();
  uint64_t done = 0;
  uint64_t hinted_to = 0;
  while (done < size) {
    if (options.stop && options.stop()) return Unavailable("interrupted: what was fetched stays cached, run it again to resume");
    if (hinted_to < std::min(size, done + kCopyWindow / 2)) {
      const uint64_t end = std::min(size, done + kCopyWindow);
      if (end > hinted_to) {
        (void)file.hint({{hinted_to, end - hinted_to}});  // best effort: the reads below fetch anyway
        hinted_to = end;
      }
    }
    auto slices = file.read(done, static_cast<size_t>(std::min<uint64_t>(kCopyPiece, size - done)));
    if (!slices.ok()) return slices.status();
    if (slices->empty()) return Corrupt("'" + file.path() + "' ended at byte " + std::to_string(done) +
                                        " of the " + std::to_string(size) + " its listing gives");
    for (const BlockBytes& b : *slices) {
      verifier->update(std::string_view(b.data(), b.size()));
      if (options.sink) {
        if (Status st = options.sink(b.data(), b.size()); !st.ok()) return st;
      }
      done += b.size();
    }
    if (options.progress) options.progress(done, size);
  }
  const ContentVerifier::Verdict verdict = verifier->finish();
  if (!verdict.match) {
    // The bad bytes may be cached blocks (and this session's reader may not hash them itself:
    // hubfs cp turns that off, since this hash covers the same bytes): they go, or every run
    // would copy them again.
    file.discard_cached();
    return Corrupt("'" + file.path() + "' does not match its content hash (" + file.content_id() + ", computed " +
                   verdict.computed + "): nothing was kept, and its cached blocks were dropped; run it again");
  }
  return Status::Ok();
}

}  // namespace

}  // namespace hubfs
