#include "mount.h"

#include <fcntl.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstring>
#include <fstream>
#include <iostream>
#include <memory>
#include <optional>
#include <thread>

#include <nlohmann/json.hpp>

#include "cache/block_cache.h"
#include "cache/cache_index.h"
#include "common/log.h"
#include "common/url.h"
#include "hub/hub_client.h"
#include "fs/filesystem.h"
#include "fs/hub_namespace.h"
#include "fs/listing_cache.h"
#include "daemon.h"
#include "fuse_ops.h"
#include "mountpoint.h"
#include "net/curl_transport.h"
#include "net/quota_gate.h"
#include "net/range_fetcher.h"
#include "net/retrying_transport.h"
#include "reader/block_reader.h"
#include "reader/shared_blocks.h"
#include "shared/memcached_tier.h"

namespace hubfs {

namespace {

// FUSE worker threads: each blocks on one read at a time, and the kernel keeps up to
// max_background (64) requests queued; 32 threads keep the fetcher's 16+ requests busy while
// some threads wait on the disk cache.
constexpr unsigned kFuseThreads = 32;


// Everything a running mount owns, in construction order (destroyed in reverse).
struct Mount {
  std::unique_ptr<QuotaGate> quota;  // consulted by transport: outlives it
  std::shared_ptr<TokenWatcher> tokens;
  std::unique_ptr<CurlTransport> curl;
  std::unique_ptr<RetryingTransport> transport;
  std::unique_ptr<HubClient> hub;
  std::unique_ptr<BlockCache> cache;
  std::unique_ptr<RangeFetcher> fetcher;
  std::optional<SharedTierKey> shared_key;       // --shared-cache-key-file, read before anything else
  std::unique_ptr<MemcachedTier> shared_tier;    // null: no --shared-cache, or a private repo
  std::unique_ptr<SharedBlocks> shared_blocks;   // the reader's view of shared_tier
  std::unique_ptr<BlockReader> reader;
  std::unique_ptr<FsApi> fs;  // one repo's FileSystem, or the whole-Hub namespace
  fuse_session* session = nullptr;
  bool mounted = false;
  bool signals = false;

  ~Mount() {
    if (session) {
      if (signals) fuse_remove_signal_handlers(session);
      if (mounted) fuse_session_unmount(session);
      fuse_session_destroy(session);
    }
    // Retries waiting out a long Retry-After would hold up the reader's shutdown (it waits for
    // fetches in flight): answer them now, and fail what is still on the wire, so unmounting
    // is prompt. Then the reader drains while everything its tasks reach (fetcher, cache, hub)
    // still exists; members are destroyed in reverse order after this body.
    if (transport) transport->shutdown();
    if (curl) curl->shutdown();
    if (fetcher) fetcher->shutdown();  // fetches waiting to re-ask a refusing CDN end now
    if (reader) reader->shutdown();
  }
};

// `hubfs status`: the daemon's identity and live counters as one JSON object (fuse/status.h),
// read from the components' own stats. Called on FUSE threads while the session runs, so every
// component it reads exists (the Mount destroys the session first).
std::function<std::string()> status_provider(const Mount& m, const MountConfig& config, const std::string& mountpoint,
                                             const std::string& repo_label, const std::string& revision,
                                             const std::string& commit, const std::string& subfolder) {
  nlohmann::json fixed = {
      {"mountpoint", mountpoint},
      {"repo", repo_label},
      {"revision", revision},
      {"commit", commit},
      {"subfolder", subfolder},
      {"endpoint", url::url_for_log(config.endpoint)},
      {"cache_dir", config.cache_size == 0 ? nlohmann::json(nullptr) : nlohmann::json(config.cache_dir)},
      {"cache_size", config.cache_size},
      {"max_requests", config.max_requests},
      {"rate_limit_wait_s", config.rate_limit_wait_s},
      {"pid", static_cast<int64_t>(getpid())},
      {"started_at", static_cast<int64_t>(time(nullptr))},
  };
  const auto started = std::chrono::steady_clock::now();
  nlohmann::json shared_fixed = nullptr;
  if (!config.shared_cache.empty()) {
    shared_fixed = {{"servers", config.shared_cache},
                    {"enabled", m.shared_blocks != nullptr},
                    {"private", config.shared_cache_private}};
  }
  return [fixed, started, curl = m.curl.get(), transport = m.transport.get(), reader = &m.reader,
          cache = &m.cache, shared_fixed, shared = &m.shared_blocks, hub = m.hub.get(), quota = m.quota.get(),
          tokens = m.tokens] {
    nlohmann::json j = fixed;
    j["uptime_s"] = std::chrono::duration_cast<std::chrono::seconds>(std::chrono::steady_clock::now() - started).count();
    const CurlStats c = curl->stats();
    j["requests"] = c.requests;  // every upstream HTTP request: API calls, resolves, ranges
    j["in_flight"] = c.in_flight;
    j["queued"] = c.queued;
    j["hedges"] = c.hedges;
    j["hedge_wins"] = c.hedge_wins;
    j["retries"] = transport->retries();
    const HubClient::RequestCounts hub_counts = hub->request_counts();
    j["api_calls"] = hub_counts.api;     // since the mount started
    j["resolves"] = hub_counts.resolves;
    j["token"] = tokens->source();       // where the token in use comes from (never the token)
    // The Hub's quotas as it last announced them, per bucket, and what waits for them.
    nlohmann::json quotas = nlohmann::json::object();
    for (const auto& [name, q] : quota->snapshot()) {
      quotas[name] = {{"quota", q.quota},           {"window_s", q.window_s},
                      {"remaining", q.remaining},   {"resets_in_s", q.resets_in_s},
                      {"requests", q.requests},     {"rate_limited", q.rate_limited},
                      {"waiting", q.waiting},       {"waiting_until_s", q.waiting_until_s}};
    }
    j["quotas"] = std::move(quotas);
    const ReaderStats r = (*reader)->stats();
    j["range_requests"] = r.requests;
    j["bytes_fetched"] = r.bytes_fetched;
    j["blocks_fetched"] = r.blocks_fetched;
    j["errors"] = r.fetch_errors;
    j["memory_hits"] = r.memory_hits;
    j["disk_hits"] = r.disk_hits;
    j["memory_bytes"] = r.memory_bytes;
    j["read_ahead_bytes"] = r.read_ahead_bytes;
    j["hints"] = r.hints;
    j["hinted_bytes"] = r.hinted_bytes;
    j["files_verified"] = r.files_verified;
    j["verify_failures"] = r.verify_failures;
    if (*cache) {
      const CacheStats d = (*cache)->stats();
      j["disk_cache"] = {{"bytes_used", d.bytes_used}, {"evictions", d.evictions}, {"corrupt", d.corrupt},
                         {"write_failures", d.write_failures}};
    } else {
      j["disk_cache"] = nullptr;
    }
    j["shared_cache"] = shared_fixed;
    if (*shared) {
      const SharedBlocksStats st = (*shared)->stats();
      nlohmann::json& o = j["shared_cache"];
      o["hits"] = st.hits;
      o["misses"] = st.misses;
      o["corrupt"] = st.corrupt;
      o["bytes_read"] = st.bytes_read;
      o["offered"] = st.offered;
      o["stored"] = st.tier.puts;
      o["bytes_written"] = st.tier.put_bytes;
      o["dropped"] = st.tier.dropped;
      o["queued"] = st.tier.queued;
      o["skipped"] = st.tier.skipped;
      o["errors"] = st.tier.get_errors + st.tier.put_errors;
      o["nodes"] = st.tier.nodes;
      o["nodes_down"] = st.tier.nodes_down;
    }
    return j.dump();
  };
}

// `hubfs cache info` and `clear REPO` map content ids back to repo files through this index
// (cache/cache_index.h); best effort: a cache whose index cannot be written still serves reads.
std::function<void(const RemoteFile&)> index_recorder(const std::string& cache_dir, const std::string& repo_label,
                                                      const std::string& revision, const std::string& commit) {
  auto warned = std::make_shared<std::atomic<bool>>(false);
  return [cache_dir, repo_label, revision, commit, warned](const RemoteFile& f) {
    IndexRecord r{repo_label, revision, commit, f.path, f.content_id, f.size};
    if (Status s = cache_index::record(cache_dir, r); !s.ok() && !warned->exchange(true))
      log_warning("cache: cannot record " + f.path + " in the cache index (" + s.message() +
                  "); `hubfs cache info` will not attribute its blocks to " + repo_label);
  };
}

// --shared-cache: the shared block tier, unless the repo is private or gated and
// --shared-cache-private was not given (whoever reaches the servers could read its blocks).
// Contacts no server: a tier that is down costs Hub fetches, never the mount.
Status open_shared_tier(const MountConfig& config, const PinnedRevision& info, const std::string& repo_label,
                        uint32_t block_size, Mount& m) {
  if (config.shared_cache.empty()) return Status::Ok();
  if ((info.is_private || info.gated) && !config.shared_cache_private) {
    log_info("shared cache: not used for " + repo_label + ", which is " + (info.is_private ? "private" : "gated") +
             " (anyone who can reach the cache servers could read its blocks); --shared-cache-private "
             "shares it anyway");
    return Status::Ok();
  }
  MemcachedTierOptions options;
  options.servers = config.shared_cache;
  auto tier = MemcachedTier::create(options);
  if (!tier.ok()) return tier.status();
  m.shared_tier = std::move(tier).value();
  m.shared_blocks = std::make_unique<SharedBlocks>(*m.shared_tier, block_size, *m.shared_key);
  log_info("shared cache: " + m.shared_tier->describe());
  return Status::Ok();
}


// Transport, Hub client, block cache, fetcher and reader: what every mount kind shares.
Status build_stack(const MountConfig& config, Mount& m) {
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
    m.shared_key = std::move(key).value();
  }
  CurlOptions curl_options;
  curl_options.max_in_flight = config.max_requests;
  if (Status ca = choose_ca_bundle(config.ca_bundle, curl_options); !ca.ok()) return ca;
  curl_options.hedge = true;  // a CDN stalling on a cold object costs a duplicate, not the stall
  // HF_HUB_DOWNLOAD_TIMEOUT: huggingface_hub's read timeout of a download, i.e. how long a
  // transfer may go without a byte; the first byte keeps its own allowance unless that is shorter.
  if (config.stall_timeout_s) {
    curl_options.stall_timeout_ms = *config.stall_timeout_s * 1000L;
    curl_options.first_byte_timeout_ms = std::max(curl_options.first_byte_timeout_ms, curl_options.stall_timeout_ms);
  }
  m.curl = std::make_unique<CurlTransport>(curl_options);
  // A reader is waiting on every request: retry soon (200 ms doubling to 4 s, full jitter: ~3 s
  // at most over 5 attempts) rather than the library's 1 s to 8 s. A server that asks for more
  // (Retry-After, RateLimit) still gets what it asks.
  RetryPolicy retry_policy;
  retry_policy.base_delay = std::chrono::milliseconds(200);
  retry_policy.max_delay = std::chrono::milliseconds(4000);
  // The Hub's quotas: waited out (up to --rate-limit-wait per request), approached slowly.
  QuotaGateOptions quota_options;
  quota_options.endpoint = config.endpoint;
  quota_options.max_wait = std::chrono::seconds(config.rate_limit_wait_s);
  m.quota = std::make_unique<QuotaGate>(quota_options);
  retry_policy.quota = m.quota.get();
  m.transport = std::make_unique<RetryingTransport>(*m.curl, retry_policy);
  HubConfig hub_config;
  hub_config.endpoint = config.endpoint;
  if (config.metadata_timeout_s) hub_config.metadata_timeout = std::chrono::seconds(*config.metadata_timeout_s);
  // Followed while mounted: a token file rewritten (a refreshed or new login) is used from the
  // next request on.
  m.tokens = std::make_shared<TokenWatcher>();
  hub_config.token_source = [tokens = m.tokens] { return tokens->current(); };
  if (implicit_token_disabled()) {
    log_info("HF_HUB_DISABLE_IMPLICIT_TOKEN is set: no token is sent (private and gated repos cannot be read)");
  }
  m.hub = std::make_unique<HubClient>(hub_config, *m.transport);
  return Status::Ok();
}

// `repo`: the one repo of a single-repo mount (decides whether its blocks may go to the shared
// tier); null for a whole-Hub mount, whose repos are only known on first touch.
Status build_reader(const MountConfig& config, Mount& m, const PinnedRevision* repo = nullptr,
                    const std::string& repo_label = "") {
  if (config.cache_size == 0) {
    // --cache-size 0: no disk cache at all (nothing is written to the cache directory); blocks
    // live only in the reader's memory cache.
    log_info("--cache-size 0: no disk cache; every block not in memory is fetched again");
  } else {
    CacheOptions cache_options;
    cache_options.dir = config.cache_dir;
    cache_options.budget_bytes = config.cache_size;
    auto cache = BlockCache::open(cache_options);
    if (!cache.ok()) return cache.status();
    m.cache = std::move(cache).value();
    // The budget tells `hubfs cache info` what this cache is held to (best effort).
    (void)cache_index::write_budget(config.cache_dir, config.cache_size);
  }
  m.fetcher = std::make_unique<RangeFetcher>(*m.transport);
  ReaderOptions reader_options;
  reader_options.read_timeout = std::chrono::seconds(config.read_timeout_s);
  reader_options.quota_waiting_until = [quota = m.quota.get()] { return quota->waiting_until(); };
  reader_options.quota_max_wait = std::chrono::seconds(config.rate_limit_wait_s);
  reader_options.parallel_requests = static_cast<uint32_t>(config.max_requests);
  if (!config.shared_cache.empty()) {
    if (repo) {
      if (Status s = open_shared_tier(config, *repo, repo_label, reader_options.block_size, m); !s.ok()) return s;
    } else if (!config.shared_cache_private) {
      // A whole-Hub mount pins repos as they are touched, public and private alike, behind one
      // reader: without a per-repo decision, sharing must be asked for explicitly.
      return InvalidArgument("--shared-cache with --hub needs --shared-cache-private: a whole-Hub mount "
                             "cannot keep private and gated repos out of the shared tier (anyone who can "
                             "reach the cache servers could read their blocks)");
    } else {
      PinnedRevision any;
      if (Status s = open_shared_tier(config, any, "the whole Hub", reader_options.block_size, m); !s.ok()) return s;
    }
  }
  m.reader = std::make_unique<BlockReader>(m.cache.get(), *m.fetcher, reader_options, m.shared_blocks.get());
  return Status::Ok();
}

// One repo (or one directory of it), pinned now. Returns the FUSE fsname's repo part.
Result<std::string> build_repo_fs(const MountConfig& config, const std::string& mountpoint, bool offline, Mount& m) {
  auto spec = parse_repo_spec(config.repo_spec, config.repo_type, config.revision, config.subfolder);
  if (!spec.ok()) return spec.status();
  const std::string subfolder = spec->subfolder;
  const RepoRef repo = spec->repo;
  if (Status s = build_stack(config, m); !s.ok()) return s;

  // Listings live with the blocks; --cache-size 0 writes nothing to the cache directory.
  std::shared_ptr<const ListingCache> listings;
  if (config.cache_size != 0) listings = std::make_shared<ListingCache>(config.cache_dir, config.endpoint, repo);
  auto info = pin_revision(*m.hub, repo, listings.get(), offline);
  if (!info.ok()) return info.status();
  RepoRef pinned = repo;
  pinned.revision = info->commit;  // every later request names the commit: the view never moves
  const std::string repo_label = std::string(api_segment(repo.type)) + "/" + repo.id;
  if (offline && !listings->load_dir(info->commit, subfolder)) {
    return NotFound("--offline: the cache " + config.cache_dir + " holds " + repo_label + " at revision " +
                    repo.revision + " (commit " + info->commit + ") but not the listing of " +
                    (subfolder.empty() ? "its root" : "'" + subfolder + "'") +
                    ": mount it once without --offline while the Hub can be reached");
  }
  if (!subfolder.empty()) {
    // A subfolder mount shows that directory: it must be one, at this commit. The stored listing
    // of its parent answers that without a request (offline, its own listing was found above).
    const size_t slash = subfolder.rfind('/');
    const std::string parent = slash == std::string::npos ? "" : subfolder.substr(0, slash);
    std::optional<std::vector<TreeEntry>> found;
    if (listings) found = listings->load_dir(info->commit, parent);
    if (!found && offline) found = std::vector<TreeEntry>{TreeEntry{subfolder, true, 0, "", std::nullopt}};
    if (!found) {
      auto asked = m.hub->paths_info(pinned, {subfolder});
      if (!asked.ok()) return asked.status();
      found = std::move(*asked);
    }
    const TreeEntry* entry = nullptr;
    for (const auto& e : *found)
      if (e.path == subfolder) entry = &e;
    if (!entry) {
      return NotFound("subfolder '" + subfolder + "' does not exist in " + repo_label + " at revision " +
                      repo.revision + " (commit " + info->commit + "); check its spelling and case with the "
                      "repo's file browser, or mount the whole repo");
    }
    if (!entry->is_dir) {
      return InvalidArgument("'" + subfolder + "' in " + repo_label + " is a file, not a directory: a "
                             "subfolder mount shows a directory (mount its parent instead)");
    }
  }
  log_info("mounting " + repo_label + "@" + repo.revision + (subfolder.empty() ? "" : "/" + subfolder) +
           " (commit " + info->commit + ") at " + mountpoint +
           (offline ? ", offline: from the cache alone, blocks not cached fail with EIO" : ""));

  if (Status s = build_reader(config, m, &*info, repo_label); !s.ok()) return s;
  FsOptions fs_options;
  fs_options.mtime = static_cast<time_t>(info->last_modified);
  fs_options.root_path = subfolder;
  {
    auto base = status_provider(m, config, mountpoint, repo_label, repo.revision, info->commit, subfolder);
    fs_options.status_json = [base, gated = info->gated, is_private = info->is_private] {
      nlohmann::json j = nlohmann::json::parse(base());
      j["gated"] = gated;
      j["private"] = is_private;
      return j.dump();
    };
  }
  fs_options.listings = listings;
  fs_options.offline = offline;
  fs_options.list_whole_repo = info->file_count && *info->file_count <= kWholeRepoMaxFiles;
  if (m.cache) fs_options.on_open = index_recorder(config.cache_dir, repo_label, repo.revision, info->commit);
  auto fs = std::make_unique<FileSystem>(*m.hub, pinned, *m.reader, fs_options);
  // Paid by the first access anyway (a lookup lists its whole directory); here it is off the
  // first read's path. A remount of the same commit finds it in the listing cache.
  if (Status s = fs->list_root(); !s.ok()) log_warning("listing the root ahead of the first access: " + s.message());
  m.fs = std::move(fs);
  return repo.id;
}

// `--hub`: every repo of the endpoint under MNT/{datasets,models,spaces}/ORG/NAME[@REV], each
// pinned when first touched (fs/hub_namespace.h).
Result<std::string> build_hub_namespace(const MountConfig& config, const std::string& mountpoint, bool offline,
                                        Mount& m) {
  if (!config.repo_spec.empty() || config.subfolder || config.revision || config.repo_type) {
    return InvalidArgument("--hub mounts every repo (MNT/datasets/ORG/NAME@REV/...): it takes only a mountpoint, "
                           "no REPO, --revision, --repo-type or --subfolder");
  }
  if (offline && config.cache_size == 0) {
    return InvalidArgument("--offline mounts from the disk cache, and --cache-size 0 keeps none: drop --cache-size 0");
  }
  if (Status s = build_stack(config, m); !s.ok()) return s;
  if (Status s = build_reader(config, m); !s.ok()) return s;
  log_info("mounting the whole Hub at " + url::url_for_log(config.endpoint) + " at " + mountpoint +
           " (repos are pinned when first touched)" + (offline ? ", offline: from the cache alone" : ""));
  HubNamespaceOptions options;
  options.mtime = time(nullptr);
  options.pin = [hub = m.hub.get(), config, offline](const RepoRef& repo) -> Result<PinnedRevision> {
    std::unique_ptr<ListingCache> listings;
    if (config.cache_size != 0) listings = std::make_unique<ListingCache>(config.cache_dir, config.endpoint, repo);
    auto pinned = pin_revision(*hub, repo, listings.get(), offline);
    if (pinned.ok()) {
      log_info("pinned " + std::string(api_segment(repo.type)) + "/" + repo.id + "@" + repo.revision + " to commit " +
               pinned->commit);
    }
    return pinned;
  };
  options.repo_options = [config, offline, cached = m.cache != nullptr](const RepoRef& repo,
                                                                         const PinnedRevision& pinned) {
    const std::string label = std::string(api_segment(repo.type)) + "/" + repo.id;
    FsOptions o;
    o.mtime = static_cast<time_t>(pinned.last_modified);
    o.offline = offline;
    o.list_whole_repo = pinned.file_count && *pinned.file_count <= kWholeRepoMaxFiles;
    if (config.cache_size != 0) o.listings = std::make_shared<ListingCache>(config.cache_dir, config.endpoint, repo);
    if (cached) o.on_open = index_recorder(config.cache_dir, label, repo.revision, pinned.commit);
    return o;
  };
  // The daemon's status, plus the repos touched so far (the namespace is built just below; the
  // provider runs only once the session serves, after it exists).
  auto base = status_provider(m, config, mountpoint, "hub", "", "", "");
  options.status_json = [base, mp = &m] {
    nlohmann::json j = nlohmann::json::parse(base());
    nlohmann::json repos = nlohmann::json::array();
    for (const TouchedRepo& r : static_cast<HubNamespace*>(mp->fs.get())->touched())
      repos.push_back({{"path", r.path}, {"revision", r.revision}, {"commit", r.commit}});
    j["repos"] = std::move(repos);
    j["revision"] = nullptr;
    j["commit"] = nullptr;
    return j.dump();
  };
  m.fs = std::make_unique<HubNamespace>(*m.hub, *m.reader, std::move(options));
  return std::string("hub");
}

// Builds the whole stack and mounts it. On success the session is mounted but not yet served.
Status build_mount(const MountConfig& config, const std::string& mountpoint, Mount& m) {
  // HF_HUB_OFFLINE asks huggingface_hub for no network at all: the same as --offline here.
  const bool offline = config.offline || offline_requested();
  auto fsname = config.hub ? build_hub_namespace(config, mountpoint, offline, m)
                           : build_repo_fs(config, mountpoint, offline, m);
  if (!fsname.ok()) return fsname.status();

  std::vector<std::string> args = {"hubfs"};
  if (config.debug) args.push_back("-d");
  std::string opts = "ro,default_permissions,fsname=hubfs:" + *fsname + ",subtype=hubfs";
  for (const auto& o : config.fuse_options) {
    // libfuse 3 dropped "nonempty" (mounting over a non-empty directory is always allowed by
    // the kernel); hubfs checks it itself, in check_mountpoint.
    if (o != "nonempty") opts += "," + o;
  }
  args.push_back("-o");
  args.push_back(opts);
  std::vector<char*> argv;
  for (auto& a : args) argv.push_back(a.data());
  fuse_args fargs = FUSE_ARGS_INIT(static_cast<int>(argv.size()), argv.data());
  FsApi* api = m.fs.get();  // the adapter's userdata (fuse_ops.h)
  m.session = fuse_session_new(&fargs, &fuse_operations(), sizeof(fuse_lowlevel_ops), api);
  fuse_opt_free_args(&fargs);  // the session keeps copies of what it needs
  if (!m.session) {
    return InvalidArgument("FUSE rejected the mount options '" + opts + "' (see the message above)");
  }
  // libfuse installs its handlers only over the default action, so a daemon started with SIGINT
  // ignored (a script's background job: the shell ignores SIGINT for it) would ignore it for
  // good. A stop signal sent to the daemon is meant for it: SIGINT and SIGTERM go back to the
  // default first. SIGHUP is left as inherited (nohup means it).
  signal(SIGINT, SIG_DFL);
  signal(SIGTERM, SIG_DFL);
  if (fuse_set_signal_handlers(m.session) != 0) return Internal("cannot install signal handlers");
  m.signals = true;
  if (fuse_session_mount(m.session, mountpoint.c_str()) != 0) {
    return Unavailable("mounting at " + mountpoint + " failed (see the message above); "
                       "are you root or is fusermount3 installed?");
  }
  m.mounted = true;
  return Status::Ok();
}

// The kernel's read-ahead for a FUSE mount starts at 128 KiB, so a large read() reaches us as a
// trickle of 128 KiB requests, two in flight. Raising the mount's read_ahead_kb (root only; as
// gcsfuse does) lets the kernel send 1 MiB requests, many at once, which the fetcher turns into
// parallel ranges. The device comes from mountinfo, not from a stat of the mount: that would
// wait on our own loop.
constexpr unsigned kKernelReadAheadKb = 16 * 1024;  // 16 MiB: ~16 requests in flight per stream

void raise_kernel_read_ahead(const std::string& mountpoint) {
  auto device = mount_device(mountpoint);
  if (!device) return;
  std::string path = "/sys/class/bdi/" + *device + "/read_ahead_kb";
  std::ofstream f(path);
  if (f) f << kKernelReadAheadKb << "\n";
  if (!f) log_debug("cannot raise the kernel read-ahead (" + path + "); not root?");
}

int serve(Mount& m, const std::string& mountpoint) {
  raise_kernel_read_ahead(mountpoint);
  fuse_loop_config* loop = fuse_loop_cfg_create();
  fuse_loop_cfg_set_max_threads(loop, kFuseThreads);
  fuse_loop_cfg_set_idle_threads(loop, kFuseThreads / 2);
  // 0, or the number of the signal that ended the loop (SIGTERM, SIGINT, SIGHUP: a requested,
  // clean stop), or -1 on an error.
  int rc = fuse_session_loop_mt(m.session, loop);
  fuse_loop_cfg_destroy(loop);
  fuse_ops_quiesce();
  log_info("unmounting");
  return (rc == 0 || rc == SIGTERM || rc == SIGINT || rc == SIGHUP) ? 0 : 1;
}

}  // namespace

// The CA certificates TLS connections trust: --ca-bundle alone, else every bundle the
// environment names (find_ca_bundles: REQUESTS_CA_BUNDLE, CURL_CA_BUNDLE, SSL_CERT_FILE; one is
// passed as a file, several as the union of their PEM text), else libcurl's built-in store. A
// named bundle that cannot be read fails the mount here, naming where it came from, rather than
// as a TLS error later.
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

int run_mount(const MountConfig& config) {
  if (Status s = url::check_endpoint(config.endpoint); !s.ok()) {
    std::cerr << "hubfs: " << s.message() << "\n";
    return 2;
  }
  const bool nonempty = std::find(config.fuse_options.begin(), config.fuse_options.end(), "nonempty") !=
                        config.fuse_options.end();
  auto checked = check_mountpoint(config.mountpoint, nonempty);
  if (!checked.ok()) {
    std::cerr << "hubfs: " << checked.status().message() << "\n";
    return 1;
  }
  const std::string mountpoint = *checked;

  if (config.foreground) {
    Mount m;
    Status st = build_mount(config, mountpoint, m);
    if (!st.ok()) {
      std::cerr << "hubfs: " << st.message() << "\n";
      return 1;
    }
    return serve(m, mountpoint);
  }

  // Background: fork before any thread exists (curl, cache and FUSE threads all start in the
  // child, which builds and serves the Mount; see daemon.h).
  std::optional<Mount> m;
  return run_daemonized(
      mountpoint, config.log_file,
      [&] {
        m.emplace();
        Status st = build_mount(config, mountpoint, *m);
        if (!st.ok()) m.reset();  // its destructor unmounts whatever was set up
        return st;
      },
      [&] {
        int rc = serve(*m, mountpoint);
        m.reset();  // unmount before the daemon's _exit, which runs no destructors
        return rc;
      });
}

}  // namespace hubfs
