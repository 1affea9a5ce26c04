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
#include <cerrno>
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
#include "common/text.h"
#include "common/url.h"
#include "hub/hub_client.h"
#include "fs/filesystem.h"
#include "fs/follow.h"
#include "fs/hub_namespace.h"
#include "fs/listing_cache.h"
#include "daemon.h"
#include "fuse_ops.h"
#include "metrics.h"
#include "mountpoint.h"
#include "session_loop.h"
#include "net/curl_transport.h"
#include "net/quota_gate.h"
#include "net/range_fetcher.h"
#include "net/retrying_transport.h"
#include "reader/block_reader.h"
#include "reader/shared_blocks.h"
#include "shared/memcached/memcached_store.h"

namespace hubfs {

namespace {

// FUSE worker threads (session_loop.h): each blocks on one read at a time, and the kernel keeps
// up to max_background (64) requests queued; 32 threads keep the fetcher's 16+ requests busy while
// some threads wait on the disk cache. The loop starts them as requests need them and keeps each
// one it started.
constexpr unsigned kFuseThreads = 32;


// Everything a running mount owns. The stack and FileSystem are stack/session.h's, as every
// door builds them; the FUSE session is destroyed first, then the stack shuts down, then the
// filesystem and the stack go.
struct Mount {
  std::unique_ptr<RepoSession> repo;  // a one-repo mount
  std::unique_ptr<Stack> hub_stack;   // a whole-Hub mount: its stack,
  std::unique_ptr<FsApi> hub_fs;      // and its namespace (declared after the stack: destroyed first)
  fuse_session* session = nullptr;
  bool mounted = false;
  bool signals = false;
  // The status JSON (as user.hubfs.status serves it), and --metrics's server of it.
  std::function<std::string()> status_json;
  std::shared_ptr<std::string> metrics_address = std::make_shared<std::string>();  // "" = none
  std::unique_ptr<MetricsServer> metrics;
  // --follow: the branch's poller, and the session it tells the kernel through (set once the
  // session is mounted, cleared before it goes).
  std::unique_ptr<BranchFollower> follower;
  std::atomic<fuse_session*> notify_session{nullptr};

  FsApi* fs() const { return repo ? static_cast<FsApi*>(repo->fs.get()) : hub_fs.get(); }

  ~Mount() {
    metrics.reset();  // it reads the components torn down below
    if (follower) follower->stop();  // no invalidation reaches the session from here on
    notify_session.store(nullptr);
    if (session) {
      if (signals) fuse_remove_signal_handlers(session);
      if (mounted) fuse_session_unmount(session);
      fuse_session_destroy(session);
    }
    if (repo) repo->stack.shutdown();  // a poll waiting on the network fails now
    follower.reset();                  // waits for it: it reads the FileSystem and the Hub client
    repo.reset();  // ~RepoSession: the stack shuts down, then the FileSystem and the stack go
    if (hub_stack) hub_stack->shutdown();
    hub_fs.reset();
    hub_stack.reset();
  }
};

// A latency histogram in the status JSON: its bucket bounds (seconds), the count in each (not
// cumulative; the last is above every bound), their total and the sum of the durations.
nlohmann::json latency_json(const LatencySnapshot& s) {
  return {{"le", LatencyHistogram::kBoundsS}, {"counts", s.counts}, {"count", s.count}, {"sum_s", s.sum_s}};
}

// `hubfs status`: the daemon's identity and live counters as one JSON object (fuse/status.h),
// read from the components' own stats. Called on FUSE threads while the session runs, so every
// component it reads exists (the Mount destroys the session first).
std::function<std::string()> status_provider(const Stack& m, const MountConfig& config, const std::string& mountpoint,
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
      {"read_ahead_cap_bytes",
       config.read_ahead_bytes == UINT64_MAX ? nlohmann::json(nullptr) : nlohmann::json(config.read_ahead_bytes)},
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
    // Read-ahead fetched and not (yet) read: its waste, once the reads are over.
    j["read_ahead_unread_bytes"] = r.read_ahead_bytes - std::min(r.read_ahead_bytes, r.read_ahead_used_bytes);
    j["hints"] = r.hints;
    const KernelReadStats k = kernel_read_stats();
    j["kernel_reads"] = k.reads;  // the kernel's read requests answered, and their bytes
    j["kernel_read_bytes"] = k.bytes;
    j["hinted_bytes"] = r.hinted_bytes;
    j["files_verified"] = r.files_verified;
    j["files_verified_by_source"] = r.files_verified_by_source;
    j["verify_failures"] = r.verify_failures;
    // Read latencies (docs/usage.md, "Metrics"): the Hub's requests (one per api_calls and
    // resolves), range requests for content (one per range_requests), disk hits (one per
    // disk_hits) and blocks asked of the shared tier; null for a tier the mount has not.
    j["latency"] = {{"hub", latency_json(hub->latency())},
                    {"cdn", latency_json(r.cdn_latency)},
                    {"disk", *cache ? latency_json(r.disk_latency) : nlohmann::json(nullptr)},
                    {"shared", *shared ? latency_json(r.shared_latency) : nlohmann::json(nullptr)}};
    if (*cache) {
      const CacheStats d = (*cache)->stats();
      j["disk_cache"] = {{"bytes_used", d.bytes_used}, {"evictions", d.evictions}, {"corrupt", d.corrupt},
                         {"write_failures", d.write_failures}, {"direct_reads", d.direct_reads}};
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

// The native Xet reads of a repo's stack (docs/xet.md), or null without them (HF_HUB_DISABLE_XET,
// --offline). Partial reads are not content-verified: the service gives no chunk hashes, so only a
// file read whole is checked (its Merkle root against its Xet hash); `unverified_bytes` counts
// what was served of files not (yet) checked whole.
nlohmann::json xet_status(const Stack& stack) {
  if (!stack.xet) return nullptr;
  const xet::XetReaderStats x = stack.xet->stats();
  return {{"reconstruction_version", x.reconstruction_version},
          {"token_requests", x.token_requests},
          {"reconstructions", x.reconstructions},
          {"xorb_requests", x.xorb_requests},
          {"xorb_bytes", x.xorb_bytes},
          {"served_bytes", x.served_bytes},
          {"chunk_cache_bytes", x.cache_bytes},
          {"files_verified", x.files_verified},
          {"file_hash_mismatches", x.file_hash_mismatches},
          {"unverified_bytes", x.unverified_bytes},
          {"partial_reads", "not content-verified (the Xet service gives no chunk hashes); whole files are"},
          {"retries", x.retries},
          {"whole_read_refetches", x.whole_read_refetches},
          {"service_errors", x.service_errors},
          {"bridge_fallbacks", stack.xet_router ? stack.xet_router->fallbacks() : 0}};
}

// --follow: a new commit was installed; the kernel forgets what it was told of the old view
// (names found or missing, directories' attributes and cached listing pages). On the follower's
// thread, never a FUSE request's. A name or inode the kernel does not hold answers ENOENT.
void invalidate_kernel(fuse_session* session, const ViewChange& change) {
  size_t done = 0;
  for (const auto& [parent, name] : change.entries)
    if (fuse_lowlevel_notify_inval_entry(session, parent, name.data(), name.size()) == 0) ++done;
  for (Ino dir : change.dirs)
    if (fuse_lowlevel_notify_inval_inode(session, dir, 0, 0) == 0) ++done;
  log_debug("--follow: the kernel dropped " + std::to_string(done) + " of " +
            std::to_string(change.entries.size() + change.dirs.size()) + " entries and directories of commit " +
            change.old_commit);
}

// One repo (or one directory of it), pinned now (stack/session.h). Returns the FUSE fsname's repo part.
Result<std::string> build_repo_fs(const MountConfig& config, const std::string& mountpoint, Mount& m) {
  auto spec = parse_repo_spec(config.repo_spec, config.repo_type, config.revision, config.subfolder);
  if (!spec.ok()) return spec.status();
  if (config.follow_s > 0) {
    if (config.offline || offline_requested())
      return InvalidArgument("--follow asks the Hub where the revision points, and --offline (HF_HUB_OFFLINE) "
                             "asks it nothing: drop one of them");
    if (is_hex(spec->repo.revision, 40))
      return InvalidArgument("--follow follows a branch or tag, and " + spec->repo.revision +
                             " is a commit, which never moves: mount a branch (@main) or drop --follow");
  }
  m.repo = std::make_unique<RepoSession>(Env::real());
  Status st = open_repo_session(config, *spec, *m.repo, [&](RepoSession& s, FsOptions& fs_options) {
    auto base = status_provider(s.stack, config, mountpoint, s.label, s.repo.revision, s.info.commit, s.subfolder);
    fs_options.status_json = [base, gated = s.info.gated, is_private = s.info.is_private, stack = &s.stack,
                              metrics = m.metrics_address, mp = &m] {
      nlohmann::json j = nlohmann::json::parse(base());
      j["gated"] = gated;
      j["private"] = is_private;
      j["xet"] = xet_status(*stack);
      j["metrics"] = metrics->empty() ? nlohmann::json(nullptr) : nlohmann::json(*metrics);
      // --follow: the commit shown now and when the Hub was last asked; null without it.
      j["follow"] = nullptr;
      if (const BranchFollower* f = mp->follower.get()) {
        const BranchFollower::State followed = f->state();
        j["commit"] = followed.commit;
        const auto or_null = [](bool none, nlohmann::json v) { return none ? nlohmann::json(nullptr) : v; };
        j["follow"] = {{"interval_s", f->interval().count() / 1000},
                       {"checked_at", or_null(followed.checked_at == 0, followed.checked_at)},
                       {"polls", followed.polls},
                       {"changes", followed.changes},
                       {"last_error", or_null(followed.last_error.empty(), followed.last_error)}};
      }
      return j.dump();
    };
    fs_options.follow = config.follow_s > 0;
    fs_options.follow_interval_s = config.follow_s;
    if (fs_options.follow && fs_options.on_open) {
      // The cache index names the commit a file was opened at: the one shown at the open (an
      // unchanged file's content is the same at both).
      fs_options.on_open = [cache_dir = config.cache_dir, label = s.label, revision = s.repo.revision,
                            mp = &m](const RemoteFile& f) {
        index_recorder(cache_dir, label, revision, mp->repo->fs->current_commit())(f);
      };
    }
    m.status_json = fs_options.status_json;
  });
  if (!st.ok()) return st;
  if (config.follow_s > 0) {
    // Started before the metrics server and the FUSE session (both read it); it tells the
    // kernel only once the session is mounted (notify_session).
    m.follower = std::make_unique<BranchFollower>(
        *m.repo->stack.hub, m.repo->repo, m.repo->fs->options().listings, *m.repo->fs, *m.repo->stack.env,
        std::chrono::seconds(config.follow_s), [mp = &m](const ViewChange& change) {
          if (fuse_session* session = mp->notify_session.load()) invalidate_kernel(session, change);
        });
  }
  const RepoSession& s = *m.repo;
  log_info("mounting " + s.label + "@" + s.repo.revision + (s.subfolder.empty() ? "" : "/" + s.subfolder) +
           " (commit " + s.info.commit + ") at " + mountpoint +
           (s.offline ? ", offline: from the cache alone, blocks not cached fail with EIO" : ""));
  return s.repo.id;
}

// `--hub`: every repo of the endpoint under MNT/{datasets,models,spaces}/ORG/NAME[@REV], each
// pinned when first touched (fs/hub_namespace.h).
Result<std::string> build_hub_namespace(const MountConfig& config, const std::string& mountpoint, bool offline,
                                        Mount& m) {
  if (config.follow_s > 0) {
    return InvalidArgument("--follow follows one repo's branch; a --hub mount pins each repo when first touched "
                           "(remount to see newer commits there)");
  }
  if (!config.repo_spec.empty() || config.subfolder || config.revision || config.repo_type) {
    return InvalidArgument("--hub mounts every repo (MNT/datasets/ORG/NAME@REV/...): it takes only a mountpoint, "
                           "no REPO, --revision, --repo-type or --subfolder");
  }
  if (offline && config.cache_size == 0) {
    return InvalidArgument("--offline mounts from the disk cache, and --cache-size 0 keeps none: drop --cache-size 0");
  }
  m.hub_stack = std::make_unique<Stack>(Env::real());
  Stack& stack = *m.hub_stack;
  if (Status s = build_stack(config, stack); !s.ok()) return s;
  if (Status s = build_reader(config, stack); !s.ok()) return s;
  log_info("mounting the whole Hub at " + url::url_for_log(config.endpoint) + " at " + mountpoint +
           " (repos are pinned when first touched)" + (offline ? ", offline: from the cache alone" : ""));
  HubNamespaceOptions options;
  options.env = stack.env;
  options.mtime = time(nullptr);
  options.pin = [hub = stack.hub.get(), config, offline](const RepoRef& repo) -> Result<PinnedRevision> {
    std::unique_ptr<ListingCache> listings;
    if (config.cache_size != 0) listings = std::make_unique<ListingCache>(config.cache_dir, config.endpoint, repo);
    auto pinned = pin_revision(*hub, repo, listings.get(), offline);
    if (pinned.ok()) {
      log_info("pinned " + std::string(api_segment(repo.type)) + "/" + repo.id + "@" + repo.revision + " to commit " +
               pinned->commit);
    }
    return pinned;
  };
  options.repo_options = [config, offline, cached = stack.cache != nullptr](const RepoRef& repo,
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
  auto base = status_provider(stack, config, mountpoint, "hub", "", "", "");
  options.status_json = [base, mp = &m] {
    nlohmann::json j = nlohmann::json::parse(base());
    nlohmann::json repos = nlohmann::json::array();
    for (const TouchedRepo& r : static_cast<HubNamespace*>(mp->hub_fs.get())->touched())
      repos.push_back({{"path", r.path}, {"revision", r.revision}, {"commit", r.commit}});
    j["repos"] = std::move(repos);
    j["revision"] = nullptr;
    j["commit"] = nullptr;
    j["metrics"] = mp->metrics_address->empty() ? nlohmann::json(nullptr) : nlohmann::json(*mp->metrics_address);
    return j.dump();
  };
  m.status_json = options.status_json;
  m.hub_fs = std::make_unique<HubNamespace>(*stack.hub, *stack.reader, std::move(options));
  return std::string("hub");
}

// Builds the whole stack and mounts it. On success the session is mounted but not yet served.
Status build_mount(const MountConfig& config, const std::string& mountpoint, Mount& m) {
  // HF_HUB_OFFLINE asks huggingface_hub for no network at all: the same as --offline here.
  const bool offline = config.offline || offline_requested();
  auto fsname = config.hub ? build_hub_namespace(config, mountpoint, offline, m)
                           : build_repo_fs(config, mountpoint, m);
  if (!fsname.ok()) return fsname.status();
  if (!config.metrics.empty()) {
    auto address = parse_metrics_address(config.metrics);
    if (!address.ok()) return address.status();
    auto server = MetricsServer::start(*address, m.status_json, m.metrics_address.get());
    if (!server.ok()) return server.status();
    m.metrics = std::move(*server);
  }

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
  FsApi* api = m.fs();  // the adapter's userdata (fuse_ops.h)
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
  m.notify_session.store(m.session);
  return Status::Ok();
}

// The kernel's read-ahead for a FUSE mount starts at 128 KiB, so a large read() reaches us as a
// trickle of 128 KiB requests. Raising the mount's read_ahead_kb (root only; as gcsfuse does) to
// 1 MiB lets the kernel send whole-block requests. Not further: the daemon's own read-ahead
// (reader/read_ahead.h) streams ahead of a sequential reader, while the kernel's read-around for
// every mmap fault is this size, so a larger one over-fetches random mmap reads without making
// streams faster (docs/constants.md, kKernelReadAheadKb). The device comes from mountinfo,
// not from a stat of the mount: that would wait on our own loop.
constexpr unsigned kKernelReadAheadKb = 1024;

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
  // 0 (the kernel ended the connection: an unmount), or, when a signal handler ended the loop
  // (SIGTERM, SIGINT, SIGHUP: a requested, clean stop), also 0; or a negative errno from reading
  // the device.
  int rc = run_session_loop(m.session, kFuseThreads);
  // ECONNABORTED is the kernel's other word for "this connection is over": it answers device
  // reads with it instead of ENODEV once the connection was aborted (an unmount racing busy
  // readers, /sys/fs/fuse/connections/N/abort, or fs.fuse.max_request_timeout on kernels that
  // have it). libfuse 3.14 reports it as an error; nothing is left to serve either way, so it
  // ends the mount as an unmount does. Seen under load in LifecycleTest (hubfs unmount, then
  // fusermount3 -uz).
  if (rc == -ECONNABORTED) {
    log_info("the kernel aborted the FUSE connection (an unmount, a write to /sys/fs/fuse/connections/N/abort, "
             "or fs.fuse.max_request_timeout)");
    rc = 0;
  }
  log_info("unmounting");
  return rc == 0 ? 0 : 1;
}

}  // namespace

int run_mount(const MountConfig& config) {
  if (config.log_json) set_log_format(LogFormat::kJson);
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
  if (Status s = check_fuse_options_allowed(config.fuse_options); !s.ok()) {
    std::cerr << "hubfs: " << s.message() << "\n";
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
