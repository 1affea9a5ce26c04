// hubfs: mount a Hugging Face Hub repo as a read-only directory, and look after its cache.
#include <CLI/CLI.hpp>

#include <malloc.h>

#include <cstdio>
#include <cstring>
#include <iostream>
#include <optional>
#include <string>
#include <vector>

#include "cache/cache_admin.h"
#include "cache_verify.h"
#include "cli_docs.h"
#include "common/log.h"
#include "copy.h"
#include "hub/environment.h"
#include "hub/hub_client.h"
#include "mount.h"
#include "mountpoint.h"
#include "prefetch.h"
#include "shared/memcached_tier.h"
#include "status.h"

namespace {

constexpr const char* kProgram = "hubfs";

// Subcommands (and their aliases): a first argument that is none of these and not an option is
// the mount helper form, `hubfs SOURCE MOUNTPOINT -o OPTIONS`.
bool is_subcommand(const std::string& word) {
  return word == "mount" || word == "unmount" || word == "umount" || word == "cache" || word == "status" ||
         word == "prefetch" || word == "cat" || word == "cp";
}

bool parse_int_in(const std::string& text, int lo, int hi, int& out) {
  try {
    size_t used = 0;
    long v = std::stol(text, &used);
    if (used != text.size() || v < lo || v > hi) return false;
    out = static_cast<int>(v);
    return true;
  } catch (...) {
    return false;
  }
}

// Options mount(8) and systemd act on themselves; when they reach us (mount.fuse3 already drops
// _netdev, nofail, user, users, auto, noauto) they mean nothing to FUSE, which would refuse them.
bool consumed_by_mount(const std::string& opt) {
  static const char* const kNames[] = {"_netdev", "noauto", "auto",  "nofail", "user",
                                       "users",   "nouser", "owner", "group",  "defaults"};
  for (const char* n : kNames)
    if (opt == n) return true;
  // x-systemd.automount, x-systemd.requires=..., x-gvfs-show, and other x-* comments.
  return opt.rfind("x-", 0) == 0 || opt.rfind("comment=", 0) == 0;
}

// Applies one -o option: a hubfs setting (every command-line option has a key, with '_' or '-'),
// dropped (see consumed_by_mount; "rw", since hubfs is read-only whatever is asked), or passed
// to FUSE. Returns an error message, or "".
std::string apply_option(const std::string& opt, hubfs::MountConfig& config, std::string& cache_size) {
  const size_t eq = opt.find('=');
  std::string key = opt.substr(0, eq);
  for (char& c : key)
    if (c == '-') c = '_';
  const bool has_value = eq != std::string::npos;
  const std::string value = has_value ? opt.substr(eq + 1) : "";
  auto needs_value = [&]() -> std::string {
    return "-o " + key + " needs a value (" + key + "=...)";
  };
  if (key == "endpoint") {
    if (!has_value) return needs_value();
    config.endpoint = value;
  } else if (key == "cache_dir") {
    if (!has_value) return needs_value();
    config.cache_dir = value;
  } else if (key == "cache_size") {
    if (!has_value) return needs_value();
    cache_size = value;
  } else if (key == "revision") {
    if (!has_value) return needs_value();
    config.revision = value;
  } else if (key == "subfolder") {
    if (!has_value) return needs_value();
    config.subfolder = value;
  } else if (key == "repo_type") {
    if (value != "model" && value != "dataset" && value != "space")
      return "-o repo_type=" + value + ": use model, dataset or space";
    config.repo_type = value;
  } else if (key == "max_requests") {
    if (!parse_int_in(value, 1, 256, config.max_requests))
      return "-o max_requests=" + value + ": give a number from 1 to 256";
  } else if (key == "read_timeout") {
    if (!parse_int_in(value, 1, 3600, config.read_timeout_s))
      return "-o read_timeout=" + value + ": give seconds from 1 to 3600";
  } else if (key == "rate_limit_wait") {
    if (!parse_int_in(value, 0, 86400, config.rate_limit_wait_s))
      return "-o rate_limit_wait=" + value + ": give seconds from 0 to 86400";
  } else if (key == "log_file") {
    if (!has_value) return needs_value();
    config.log_file = value;
  } else if (key == "ca_bundle") {
    if (!has_value) return needs_value();
    config.ca_bundle = value;
  } else if (key == "shared_cache") {
    // Servers separated by '+' here (',' separates -o options): shared_cache=h1:11211+h2:11211.
    if (!has_value) return needs_value();
    auto servers = hubfs::parse_shared_cache_servers(value);
    if (!servers.ok()) return "-o shared_cache=" + value + ": " + servers.status().message();
    config.shared_cache = *servers;
  } else if (key == "log_format") {
    if (value != "text" && value != "json") return "-o log_format=" + value + ": use text or json";
    config.log_json = value == "json";
  } else if (key == "metrics") {
    if (!has_value) return needs_value();
    config.metrics = value;
  } else if (key == "shared_cache_key_file") {
    if (!has_value) return needs_value();
    config.shared_cache_key_file = value;
  } else if (key == "shared_cache_private" && !has_value) {
    config.shared_cache_private = true;
  } else if (key == "foreground" && !has_value) {
    config.foreground = true;
  } else if (key == "debug" && !has_value) {
    config.debug = true;
  } else if (key == "offline" && !has_value) {
    config.offline = true;
  } else if (key == "hub" && !has_value) {
    config.hub = true;
  } else if (consumed_by_mount(opt) || opt == "rw") {
    // nothing to do
  } else if (!opt.empty()) {
    config.fuse_options.push_back(opt);  // allow_other, nonempty, noexec, ...
  }
  return "";
}

// Splits every -o value at commas and applies each option (fuse_options collects the rest).
std::string apply_options(const std::vector<std::string>& raw, hubfs::MountConfig& config,
                          std::string& cache_size) {
  std::vector<std::string> all;
  for (const std::string& group : raw) {
    size_t start = 0;
    while (start <= group.size()) {
      size_t comma = group.find(',', start);
      if (comma == std::string::npos) comma = group.size();
      all.push_back(group.substr(start, comma - start));
      start = comma + 1;
    }
  }
  config.fuse_options.clear();
  for (const std::string& opt : all)
    if (std::string err = apply_option(opt, config, cache_size); !err.empty()) return err;
  return "";
}

int finish_and_mount(hubfs::MountConfig& config, const std::string& cache_size) {
  // `hubfs mount --hub MNT`: the one positional is the mountpoint.
  if (config.hub && config.mountpoint.empty()) std::swap(config.mountpoint, config.repo_spec);
  if (config.mountpoint.empty()) {
    std::cerr << "hubfs: expected REPO MOUNTPOINT (or --hub MOUNTPOINT for the whole Hub); see hubfs mount --help\n";
    return 2;
  }
  if (config.endpoint.empty()) config.endpoint = hubfs::default_endpoint();
  while (!config.endpoint.empty() && config.endpoint.back() == '/') config.endpoint.pop_back();
  if (config.cache_dir.empty()) config.cache_dir = hubfs::default_cache_dir();
  auto size = hubfs::parse_size(cache_size);
  if (!size.ok()) {
    std::cerr << "hubfs: cache size: " << size.status().message() << "\n";
    return 2;
  }
  config.cache_size = *size;
  if (auto env = hubfs::apply_environment_timeouts(config); !env.ok()) {
    std::cerr << "hubfs: " << env.message() << "\n";
    return 2;
  }
  return hubfs::run_mount(config);
}

// `hubfs SOURCE MOUNTPOINT [-o OPTIONS]...`: how mount.fuse3 runs us for `mount -t fuse.hubfs`
// and for fstab lines of type fuse.hubfs (see the README).
int helper_mount(int argc, char** argv) {
  hubfs::MountConfig config;
  std::string cache_size = "10G";
  std::vector<std::string> positional, raw_options;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if (a == "-o") {
      if (i + 1 == argc) {
        std::cerr << "hubfs: -o needs a value\n";
        return 2;
      }
      raw_options.push_back(argv[++i]);
    } else if (a.rfind("-o", 0) == 0) {
      raw_options.push_back(a.substr(2));
    } else if (a == "-f") {
      config.foreground = true;
    } else if (!a.empty() && a[0] == '-') {
      std::cerr << "hubfs: unknown option " << a << " in the mount helper form "
                << "(hubfs REPO MOUNTPOINT -o KEY=VALUE,...); see hubfs --help\n";
      return 2;
    } else {
      positional.push_back(a);
    }
  }
  if (positional.size() != 2) {
    std::cerr << "hubfs: expected REPO MOUNTPOINT, got " << positional.size()
              << " arguments; usage: hubfs mount REPO MOUNTPOINT, or hubfs REPO MOUNTPOINT -o OPTIONS\n";
    return 2;
  }
  config.repo_spec = positional[0];
  config.mountpoint = positional[1];
  if (std::string err = apply_options(raw_options, config, cache_size); !err.empty()) {
    std::cerr << "hubfs: " << err << "\n";
    return 2;
  }
  if (config.hub) config.repo_spec.clear();  // -o hub: SOURCE is only a label (fstab needs one)
  return finish_and_mount(config, cache_size);
}

// "datasets/org/name" for any spelling parse_repo_ref accepts ("org/name" is a model).
std::optional<std::string> canonical_repo(const std::string& spec, std::string& error) {
  auto ref = hubfs::parse_repo_ref(spec);
  if (!ref.ok()) {
    error = ref.status().message();
    return std::nullopt;
  }
  return std::string(hubfs::api_segment(ref->type)) + "/" + ref->id;
}

// Our arguments with credentials in them, for the parsers; the process's own arguments, which any
// user of the machine can read for the daemon's whole life (ps, /proc/PID/cmdline), lose the
// endpoint's "user:password@" in place at once (the rest moves up, the tail is zeroed).
struct ScrubbedArgs {
  std::vector<std::string> kept;
  std::vector<char*> argv;
  ScrubbedArgs(int argc, char** real) : kept(real, real + argc) {
    for (std::string& a : kept) argv.push_back(a.data());
    argv.push_back(nullptr);
    for (int i = 0; i < argc; ++i) {
      const std::string clean = hubfs::without_url_credentials(real[i]);
      const size_t old_size = std::strlen(real[i]);
      if (clean.size() == old_size) continue;
      std::memcpy(real[i], clean.data(), clean.size());
      std::memset(real[i] + clean.size(), 0, old_size - clean.size());
    }
  }
};

}  // namespace

int main(int real_argc, char** real_argv) {
  ScrubbedArgs args(real_argc, real_argv);
  int argc = real_argc;
  char** argv = args.argv.data();
  // Blocks and response bodies are 1-8 MiB buffers allocated and freed all the time. glibc would
  // mmap each one and unmap it on free, so every block paid fresh page faults (~0.5 GB/s on these
  // VMs, measured: half the daemon's CPU on a cold read). Keep such buffers on the heap, and keep
  // the heap, so they are reused warm. Bounded all the same: beyond 128 MiB free at the top the
  // heap is returned to the system (the read-ahead budget is 256 MiB, the memory cache 256 MiB),
  // and at most 4 arenas (not 8 per core across 32 FUSE threads) hold freed buffers, so an idle
  // daemon's RSS falls back towards its caches.
  mallopt(M_MMAP_THRESHOLD, 64 << 20);
  mallopt(M_TRIM_THRESHOLD, 128 << 20);
  mallopt(M_ARENA_MAX, 4);
  if (!hubfs::set_log_level_from_env()) {
    std::fprintf(stderr, "hubfs: HUBFS_LOG_LEVEL must be debug, info, warning or error\n");
    return 2;
  }

  if (argc >= 3 && argv[1][0] != '-' && !is_subcommand(argv[1])) return helper_mount(argc, argv);

  CLI::App app{
      "hubfs: a Hugging Face Hub repo (model, dataset or space) as a read-only directory.\n"
      "Reads go through a content-keyed block cache on local disk and a concurrent range fetcher:\n"
      "only the bytes you read cross the network, and each of them only once."};
  app.require_subcommand(1);
  app.set_version_flag("--version", std::string("hubfs ") + HUBFS_VERSION);

  hubfs::MountConfig config;
  std::string cache_size = "10G";
  auto* mount = app.add_subcommand("mount", "Mount REPO at MOUNTPOINT (returns once it answers).");
  mount->add_option("repo", config.repo_spec,
                    "[models/|datasets/|spaces/]ORG/NAME[@REVISION][/SUB/DIR] (models is the default "
                    "type); a path after the name (or the revision) mounts only that directory; none with --hub")
      ->required();
  mount->add_option("mountpoint", config.mountpoint,
                    "An existing empty directory (a dead hubfs mount left by a killed daemon is cleared)");
  mount->add_flag("--hub", config.hub,
                  "Mount the whole Hub at MOUNTPOINT (hubfs mount --hub MNT): MNT/datasets/ORG/NAME/..., "
                  "MNT/models/ORG/NAME/... and .../NAME@REV/... are pinned when first touched; a directory "
                  "lists only the repos touched so far");
  mount->add_option("--repo-type", config.repo_type, "model|dataset|space (alternative to the prefix)")
      ->check(CLI::IsMember({"model", "dataset", "space"}));
  mount->add_option("--revision", config.revision,
                    "Branch, tag, commit sha or refs/pr/N (default main); pinned to its commit at mount");
  mount->add_option("--subfolder", config.subfolder,
                    "Show only this directory of the repo (as REPO/SUB/DIR); the mount fails if it is "
                    "not a directory at the pinned commit");
  mount->add_option("--endpoint", config.endpoint, "Hub URL (default $HF_ENDPOINT, else https://huggingface.co)");
  mount->add_option("--cache-dir", config.cache_dir,
                    "Block cache directory (default $HUBFS_CACHE_DIR, else $XDG_CACHE_HOME/hubfs, else "
                    "~/.cache/hubfs); kept across mounts, shareable between mounts");
  mount->add_option("--cache-size", cache_size,
                    "Byte budget of the block cache, suffixes K M G T (default 10G); least recently "
                    "used blocks are evicted first; the Xet chunk index beside it takes a few percent more (at most a quarter); 0 means no disk cache");
  mount->add_option("--max-requests", config.max_requests, "HTTP requests in flight at once (default 16; a Xet read spanning two xorbs sends its second range beside them: up to N/4 more)")
      ->check(CLI::Range(1, 256));
  mount->add_option("--read-timeout", config.read_timeout_s,
                    "Seconds after which a read the Hub cannot serve fails with EIO (default 120)")
      ->check(CLI::Range(1, 3600));
  mount->add_option("--rate-limit-wait", config.rate_limit_wait_s,
                    "Seconds a request may wait in all for the Hub's quota windows when it answers 429 "
                    "(default 330, longer than the Hub's 5-minute window; --read-timeout does not cut "
                    "these waits short); past it the read fails naming the quota")
      ->check(CLI::Range(0, 86400));
  mount->add_option("--ca-bundle", config.ca_bundle,
                    "PEM file of CA certificates to trust for https (default $REQUESTS_CA_BUNDLE, "
                    "else $CURL_CA_BUNDLE, else $SSL_CERT_FILE, else the system's); for a "
                    "TLS-intercepting proxy, its CA certificate");
  std::string shared_cache;
  mount->add_option("--shared-cache", shared_cache,
                    "memcached servers of a shared block tier, HOST[:PORT][,HOST[:PORT]...] (or "
                    "memcached://...; '+' also separates): on a local miss blocks come from there before "
                    "the Hub, and blocks fetched from the Hub are stored there for other machines");
  mount->add_option("--shared-cache-key-file", config.shared_cache_key_file,
                    "Key file the machines sharing --shared-cache hold (required with it): authenticates "
                    "every block in the tier; make one with `head -c 32 /dev/urandom > F; chmod 600 F`");
  mount->add_flag("--shared-cache-private", config.shared_cache_private,
                  "Also share blocks of private and gated repos (anyone who can reach the servers can "
                  "read what they hold; off by default)");
  mount->add_flag("-f,--foreground", config.foreground, "Stay in the foreground, logging to stderr");
  std::vector<std::string> raw_options;
  mount->add_option("-o", raw_options,
                    "Mount options, comma-separated: any option above as KEY=VALUE (cache_dir=...), "
                    "else passed to FUSE (allow_other, ...); nonempty allows a non-empty mountpoint")
      ->allow_extra_args(false);
  mount->add_option("--log-file", config.log_file, "In the background, append logs to this file");
  std::string log_format = "text";
  mount->add_option("--log-format", log_format,
                    "text (default) or json: one JSON object per line with the fields time, level, program, "
                    "pid and message")
      ->check(CLI::IsMember({"text", "json"}));
  mount->add_option("--metrics", config.metrics,
                    "Serve the mount's counters as Prometheus text at http://ADDR:PORT/metrics: PORT (on "
                    "127.0.0.1), ADDR:PORT or [ADDR]:PORT; port 0 picks a free one (hubfs status --json shows it)");
  mount->add_flag("--debug", config.debug, "Log every FUSE request libfuse sees (useful with -f)");
  mount->add_flag("--offline", config.offline,
                  "Mount from the cache alone, asking the Hub nothing (also when HF_HUB_OFFLINE is set): the "
                  "revision resolves to the commit it pointed at when last mounted online, directories listed "
                  "then are shown, cached blocks are served and reads of uncached ones fail with EIO at once");
  mount->footer(
      "Proxies: https_proxy/HTTPS_PROXY, http_proxy (lowercase) and NO_PROXY are honoured as curl "
      "honours them.\nToken: $HF_TOKEN, else $HUGGING_FACE_HUB_TOKEN, else the file $HF_TOKEN_PATH or "
      "$HF_HOME/token (default ~/.cache/huggingface/token). It is sent only to the endpoint, never "
      "to the CDN, and never printed.\nStop with: hubfs unmount MOUNTPOINT (or SIGINT/SIGTERM to the "
      "daemon).");

  // hubfs cat|cp: whole files without a mount (tools/copy.h), with the mount's cache options.
  hubfs::CopyCommand copy;
  std::string copy_cache_size = "10G";
  auto add_copy_options = [&](CLI::App* cmd) {
    cmd->add_option("--revision", copy.revision, "Branch, tag, commit sha or refs/pr/N (or @REVISION in the URL)");
    cmd->add_option("--endpoint", copy.session.endpoint, "Hub URL (default $HF_ENDPOINT, else https://huggingface.co)");
    cmd->add_option("--cache-dir", copy.session.cache_dir,
                    "Block cache directory, the mounts' (default $HUBFS_CACHE_DIR, else $XDG_CACHE_HOME/hubfs, "
                    "else ~/.cache/hubfs)");
    cmd->add_option("--cache-size", copy_cache_size, "Byte budget of the block cache (default 10G; 0: none)");
    cmd->add_option("--max-requests", copy.session.max_requests, "HTTP requests in flight at once (default 16; a Xet read spanning two xorbs sends its second range beside them: up to N/4 more)")
        ->check(CLI::Range(1, 256));
    cmd->add_option("--read-timeout", copy.session.read_timeout_s, "Seconds before a stuck read fails (default 120)")
        ->check(CLI::Range(1, 86400));
    cmd->add_flag("--offline", copy.session.offline, "From the cache alone (as HF_HUB_OFFLINE)");
    cmd->add_option("--ca-bundle", copy.session.ca_bundle, "PEM file of trusted CA certificates");
    cmd->add_flag("--quiet,-q", copy.quiet, "No progress bar");
  };
  auto* cat = app.add_subcommand("cat", "Print a repo file to stdout, without a mount (hf://...).");
  cat->add_option("url", copy.url, "hf://[datasets/|spaces/]ORG/NAME[@REVISION]/PATH")->required();
  add_copy_options(cat);
  auto* cp = app.add_subcommand(
      "cp", "Download a repo file without a mount: verified against its content hash, written to a temp file "
            "renamed into place (never a partial DEST), resumed from the cache when run again.");
  cp->add_option("url", copy.url, "hf://[datasets/|spaces/]ORG/NAME[@REVISION]/PATH")->required();
  cp->add_option("dest", copy.dest,
                 "A file, or an existing directory to copy into; a symlink's target is replaced, not the link")
      ->required();
  cp->add_flag("-f,--force", copy.force, "Replace a DEST without write permission too (refused otherwise, as by cp)");
  add_copy_options(cp);

  std::string unmount_point;
  auto* unmount = app.add_subcommand("unmount", "Unmount a hubfs mount.");
  unmount->alias("umount");
  unmount->add_option("mountpoint", unmount_point, "The mounted directory")->required();

  hubfs::PrefetchConfig prefetch_config;
  auto* prefetch = app.add_subcommand(
      "prefetch", "Warm the cache of a mount: fetch whole files (or one HDF5 selection) before a job reads them.");
  prefetch->add_option("paths", prefetch_config.paths, "Files or directories on a hubfs mount")->required();
  prefetch->add_option("--dataset", prefetch_config.dataset,
                       "With one HDF5 file: fetch just this dataset's chunks (and the metadata to open it)");
  prefetch->add_option("--selection", prefetch_config.selection,
                       "With --dataset: a numpy-style selection such as 0:5 (default: all of it); the decoded "
                       "selection is held in memory while it is read");
  prefetch->add_flag("--json", prefetch_config.json, "Print the JSON summary even on a terminal (no progress bar)");
  prefetch->footer(
      "On a terminal it shows bytes, rate and ETA; otherwise it prints one JSON line "
      "({\"files\",\"bytes\",\"seconds\",\"interrupted\",\"ok\"}). Ctrl-C stops it cleanly (exit 130); what "
      "was fetched stays cached, and a second run makes no upstream request.");
  std::string status_point;
  bool status_json = false;
  auto* status = app.add_subcommand(
      "status", "Every hubfs mount on the machine (or the one at MOUNTPOINT): repo, revision, commit, "
                "cache, uptime and live counters, read from the daemon (user.hubfs.status on the mount's root).");
  status->add_option("mountpoint", status_point, "Only this mount (exit 1 if it is not a live hubfs mount)");
  status->add_flag("--json", status_json,
                   "A JSON list: one object per mount with mountpoint, state (alive, dead, not responding, "
                   "unknown), repo, revision, commit, subfolder, cache_dir, uptime_s, requests (upstream HTTP "
                   "requests since mount), bytes_fetched, in_flight, retries, errors, hedges, memory_hits, "
                   "disk_hits, read_ahead_bytes, read_ahead_unread_bytes, hints, hinted_bytes, ...; null where unknown");
  bool status_prometheus = false;
  status->add_flag("--prometheus", status_prometheus,
                   "The live mounts' counters in Prometheus's text format, as --metrics serves them (labelled "
                   "with their mountpoint): for a node exporter's textfile collector, or a look without the port");
  status->footer(
      "A dead mount (its daemon killed) or one that does not answer within 3 s is listed as such; it "
      "never hangs the command. Any tool can read the same JSON: getfattr -n user.hubfs.status MOUNTPOINT");

  std::string cache_dir;
  auto* cache = app.add_subcommand(
      "cache", "Inspect and trim a block cache directory (safe while mounts use it: a removed block "
               "is fetched again when next read).");
  cache->require_subcommand(1);
  cache->fallthrough();  // --cache-dir may come after the action too
  cache->add_option("--cache-dir", cache_dir,
                    "The cache directory (default $HUBFS_CACHE_DIR, else $XDG_CACHE_HOME/hubfs, else "
                    "~/.cache/hubfs)");
  bool json = false;
  auto* info = cache->add_subcommand("info", "Total size and blocks, the budget, usage by repo and file, and the Xet chunks with what they served instead of the network.");
  info->add_flag("--json", json,
                 "One JSON object: total_bytes, blocks, budget_bytes (null if unknown), repos "
                 "[{repo, bytes, blocks, files [...]}], unindexed_bytes, unindexed_blocks");
  std::string max_size;
  auto* prune = cache->add_subcommand("prune", "Evict least recently used blocks until the cache fits --max-size.");
  prune->add_option("--max-size", max_size, "Size to shrink to, suffixes K M G T (e.g. 5G; 0 empties it)")
      ->required();
  std::string clear_repo;
  auto* clear = cache->add_subcommand(
      "clear", "Remove every block, or with REPO only that repo's (blocks another repo's file also "
               "uses are kept).");
  clear->add_option("repo", clear_repo, "[models/|datasets/|spaces/]ORG/NAME (models is the default type)");
  hubfs::CacheVerifyConfig verify_config;
  std::string verify_shared_cache;
  auto* verify = cache->add_subcommand(
      "verify",
      "Re-check every block's checksum, then re-hash every completely cached file against its content id "
      "(sha256 / git blob id) and delete what is bad; partly cached files are reported unverifiable unless "
      "--complete. Exit 0: all verified; 1: bad blocks or files found and deleted; 2: could not run; 3: "
      "nothing bad, but partly cached files remain unverified.");
  verify->add_flag("--complete", verify_config.complete,
                   "Fetch from the Hub what partly cached files lack and verify them whole (a progress bar on "
                   "a terminal); a bad file is deleted and fetched again");
  verify->add_option("--endpoint", verify_config.endpoint,
                     "With --complete: the Hub the files were read from (default $HF_ENDPOINT, else "
                     "https://huggingface.co); the token is found as a mount finds it");
  verify->add_option("--ca-bundle", verify_config.ca_bundle, "With --complete: as for hubfs mount");
  verify->add_option("--read-timeout", verify_config.read_timeout_s,
                     "With --complete: seconds each range may take, retries included (default 120)")
      ->check(CLI::Range(1, 3600));
  verify->add_option("--shared-cache", verify_shared_cache,
                     "memcached servers of a shared block tier the mounts use: bad files' blocks are deleted "
                     "there too (needs --shared-cache-key-file)");
  verify->add_option("--shared-cache-key-file", verify_config.shared_cache_key_file,
                     "The key file the mounts sharing --shared-cache use");

  // Set last: subcommands copy their parent's footer when they are added.
  app.footer(
      "As a mount helper (what `mount -t fuse.hubfs REPO MOUNTPOINT -o ...` and fstab lines of type "
      "fuse.hubfs run):\n  hubfs REPO MOUNTPOINT -o KEY=VALUE,...\nwhere the keys are the mount "
      "options without dashes (endpoint, cache_dir, cache_size, revision, repo_type, subfolder, max_requests, "
      "read_timeout, rate_limit_wait, log_file, log_format, metrics, ca_bundle, shared_cache with '+' between servers, shared_cache_key_file; foreground, debug, "
      "offline, hub and shared_cache_private take no value; with hub, REPO is only a label); options for mount(8) "
      "and systemd (_netdev, nofail, noauto, auto, user, users, nouser, owner, group, defaults, "
      "comment=, x-*) and rw are dropped (the mount is always read-only); anything else goes to "
      "FUSE (allow_other, nonempty, ...).");

  // Hidden: the man page and the bash completion, generated from the tables above (scripts/package.sh).
  if (argc == 2 && std::strcmp(argv[1], "--help-man") == 0) {
    std::cout << hubfs::cli_docs::man_page(app, kProgram, HUBFS_VERSION,
                                           "mount a Hugging Face Hub repo as a read-only directory",
                                           "h5chunk(1), mount.fuse3(8), fusermount3(1), fstab(5), systemd.mount(5)");
    return 0;
  }
  if (argc == 2 && std::strcmp(argv[1], "--help-completion") == 0) {
    std::cout << hubfs::cli_docs::bash_completion(app, kProgram);
    return 0;
  }
  CLI11_PARSE(app, argc, argv);

  if (*prefetch) return hubfs::run_prefetch(prefetch_config);
  if (*cat || *cp) {
    if (copy.session.endpoint.empty()) copy.session.endpoint = hubfs::default_endpoint();
    while (!copy.session.endpoint.empty() && copy.session.endpoint.back() == '/') copy.session.endpoint.pop_back();
    if (copy.session.cache_dir.empty()) copy.session.cache_dir = hubfs::default_cache_dir();
    auto size = hubfs::parse_size(copy_cache_size);
    if (!size.ok()) {
      std::cerr << "hubfs: cache size: " << size.status().message() << "\n";
      return 2;
    }
    copy.session.cache_size = *size;
    if (auto env = hubfs::apply_environment_timeouts(copy.session); !env.ok()) {
      std::cerr << "hubfs: " << env.message() << "\n";
      return 2;
    }
    return hubfs::run_copy(copy);
  }

  if (*mount) {
    if (!shared_cache.empty()) {
      auto servers = hubfs::parse_shared_cache_servers(shared_cache);
      if (!servers.ok()) {
        std::cerr << "hubfs: " << servers.status().message() << "\n";
        return 2;
      }
      config.shared_cache = *servers;
    }
    config.log_json = log_format == "json";
    if (std::string err = apply_options(raw_options, config, cache_size); !err.empty()) {
      std::cerr << "hubfs: " << err << "\n";
      return 2;
    }
    return finish_and_mount(config, cache_size);
  }
  if (*unmount) return hubfs::run_unmount(unmount_point);
  if (*status) return hubfs::run_status(status_point, status_json, status_prometheus);

  namespace admin = hubfs::cache_admin;
  if (cache_dir.empty()) cache_dir = hubfs::default_cache_dir();
  while (cache_dir.size() > 1 && cache_dir.back() == '/') cache_dir.pop_back();
  auto fail = [](const hubfs::Status& s) {
    std::cerr << kProgram << ": " << s.message() << "\n";
    return 1;
  };
  if (*info) {
    auto usage = admin::info(cache_dir);
    if (!usage.ok()) return fail(usage.status());
    std::cout << (json ? admin::to_json(*usage).dump(2) + "\n" : admin::to_text(*usage));
    return 0;
  }
  if (*prune) {
    auto limit = hubfs::parse_size(max_size);
    if (!limit.ok()) {
      std::cerr << "hubfs: --max-size: " << limit.status().message() << "\n";
      return 2;
    }
    auto removed = admin::prune(hubfs::Env::real(), cache_dir, *limit);
    if (!removed.ok()) return fail(removed.status());
    std::cout << "removed " << removed->blocks << " blocks (" << admin::human_bytes(removed->bytes)
              << "), least recently used first, and " << removed->index_entries
              << " index entries of files with nothing left cached; " << cache_dir << " holds "
              << admin::human_bytes(removed->total_bytes_after) << " (limit " << admin::human_bytes(*limit)
              << ")\n";
    return 0;
  }
  if (*clear) {
    std::string repo;
    if (!clear_repo.empty()) {
      std::string error;
      auto canonical = canonical_repo(clear_repo, error);
      if (!canonical) {
        std::cerr << "hubfs: " << error << "\n";
        return 2;
      }
      repo = *canonical;
    }
    auto removed = admin::clear(hubfs::Env::real(), cache_dir, repo);
    if (!removed.ok()) return fail(removed.status());
    std::cout << "removed " << removed->blocks << " blocks (" << admin::human_bytes(removed->bytes) << ")"
              << (repo.empty() ? "" : " of " + repo);
    if (removed->kept_shared_blocks > 0)
      std::cout << "; kept " << removed->kept_shared_blocks << " blocks another repo's files also use";
    if (removed->listing_files > 0) std::cout << "; removed " << removed->listing_files << " stored listings";
    std::cout << "\n";
    return 0;
  }
  if (!*verify) return 2;  // unreachable: the cache command requires one of its actions
  verify_config.cache_dir = cache_dir;
  if (verify_config.endpoint.empty()) verify_config.endpoint = hubfs::default_endpoint();
  while (!verify_config.endpoint.empty() && verify_config.endpoint.back() == '/') verify_config.endpoint.pop_back();
  if (!verify_shared_cache.empty()) {
    auto servers = hubfs::parse_shared_cache_servers(verify_shared_cache);
    if (!servers.ok()) {
      std::cerr << "hubfs: " << servers.status().message() << "\n";
      return 2;
    }
    verify_config.shared_cache = *servers;
  }
  return hubfs::run_cache_verify(verify_config);
}
