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
#include "fs/follow.h"
#include "hub/environment.h"
#include "hub/hub_client.h"
#include "mount.h"
#include "mount_options.h"
#include "mountpoint.h"
#include "prefetch.h"
#include "shared/memcached/memcached_store.h"
#include "status.h"

namespace {

constexpr const char* kProgram = "hubfs";

// Subcommands (and their aliases): a first argument that is none of these and not an option is
// the mount helper form, `hubfs SOURCE MOUNTPOINT -o OPTIONS`.
bool is_subcommand(const std::string& word) {
  return word == "mount" || word == "unmount" || word == "umount" || word == "cache" || word == "status" ||
         word == "prefetch" || word == "cat" || word == "cp";
}

int finish_and_mount(hubfs::MountArgs& args) {
  hubfs::MountConfig& config = args.config;
  // `hubfs mount --hub MNT`: the one positional is the mountpoint.
  if (config.hub && config.mountpoint.empty()) std::swap(config.mountpoint, config.repo_spec);
  if (config.mountpoint.empty()) {
    std::cerr << "hubfs: expected REPO MOUNTPOINT (or --hub MOUNTPOINT for the whole Hub); see hubfs mount --help\n";
    return 2;
  }
  if (config.endpoint.empty()) config.endpoint = hubfs::default_endpoint();
  while (!config.endpoint.empty() && config.endpoint.back() == '/') config.endpoint.pop_back();
  if (config.cache_dir.empty()) config.cache_dir = hubfs::default_cache_dir();
  auto size = hubfs::parse_size(args.cache_size);
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
  hubfs::MountArgs args;
  hubfs::MountConfig& config = args.config;
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
  if (std::string err = hubfs::apply_o_options(raw_options, args); !err.empty()) {
    std::cerr << "hubfs: " << err << "\n";
    return 2;
  }
  if (config.hub) config.repo_spec.clear();  // -o hub: SOURCE is only a label (fstab needs one)
  return finish_and_mount(args);
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

  hubfs::MountArgs mount_args;
  hubfs::MountConfig& config = mount_args.config;
  auto* mount = app.add_subcommand("mount", "Mount REPO at MOUNTPOINT (returns once it answers).");
  mount->add_option("repo", config.repo_spec,
                    "[models/|datasets/|spaces/]ORG/NAME[@REVISION][/SUB/DIR] (models is the default "
                    "type); a path after the name (or the revision) mounts only that directory; none with --hub")
      ->required();
  mount->add_option("mountpoint", config.mountpoint,
                    "An existing empty directory (a dead hubfs mount left by a killed daemon is cleared)");
  const hubfs::MountCli mount_cli(mount);  // every other option, from its one table (mount_options.h)
  std::vector<std::string> raw_options;
  mount->add_option("-o", raw_options,
                    "Mount options, comma-separated: any option above as KEY=VALUE (cache_dir=...), "
                    "else passed to FUSE (allow_other, ...); nonempty allows a non-empty mountpoint")
      ->allow_extra_args(false);
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
      "options without dashes (" + hubfs::o_keys_text() + "; with hub, REPO is only a label); options for mount(8) "
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
    // The command line's options, then -o's (the same setters: mount_options.h).
    std::string err = mount_cli.apply(mount_args);
    if (err.empty()) err = hubfs::apply_o_options(raw_options, mount_args);
    if (!err.empty()) {
      std::cerr << "hubfs: " << err << "\n";
      return 2;
    }
    return finish_and_mount(mount_args);
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
