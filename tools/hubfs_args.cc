// hubfs's option tables and their parse (hubfs_args.h says why this file is apart).
#include "hubfs_args.h"

#include <CLI/CLI.hpp>

#include <cstring>
#include <iostream>
#include <memory>

#include "cli_docs.h"

namespace hubfs_cli {
namespace {

constexpr const char* kProgram = "hubfs";

// CLI11 names a flag with an optional value "--follow{60}" in --help, its own syntax for the
// default; users type --follow or --follow=SECONDS, so help shows that (option_text below).
class MountHelpFormatter : public CLI::Formatter {
 public:
  std::string make_option_name(const CLI::Option* opt, bool is_positional) const override {
    std::string name = CLI::Formatter::make_option_name(opt, is_positional);
    const size_t open = name.find('{');
    if (open != std::string::npos) name.erase(open, name.find('}', open) + 1 - open);
    return name;
  }
};

// The mount options' table (mount_options.h) as `mount`'s CLI11 options (the positionals and -o
// are the caller's). After parsing, apply() runs the setter of each option given.
class MountCli {
 public:
  explicit MountCli(CLI::App* mount) {
    mount->formatter(std::make_shared<MountHelpFormatter>());
    const auto& table = hubfs::mount_options();
    given_.reserve(table.size());  // CLI11 keeps pointers to the values
    for (size_t i = 0; i < table.size(); ++i) {
      const hubfs::MountOption& o = table[i];
      given_.push_back(Given{nullptr, i, {}});
      Given& g = given_.back();
      if (*o.value) {
        g.option = mount->add_option(o.names, g.value, o.help)->type_name(o.value);
      } else if (o.has_default()) {
        g.option = mount->add_flag(o.names, g.value, o.help)  // the default, or what =VALUE gave
                       ->option_text("[=SECONDS]");
      } else {
        g.option = mount->add_flag(o.names, o.help);
      }
    }
  }

  // "" or what is wrong, naming the option as given.
  std::string apply(hubfs::MountArgs& args) const {
    const auto& table = hubfs::mount_options();
    for (const Given& g : given_) {
      if (g.option->count() == 0) continue;
      const hubfs::MountOption& o = table[g.row];
      const std::string err = o.set(args, o.takes_value() ? hubfs::MountValue(g.value) : std::nullopt);
      if (!err.empty()) return o.long_name() + (o.takes_value() ? "=" + g.value : "") + ": " + err;
    }
    return "";
  }

 private:
  struct Given {
    const CLI::Option* option = nullptr;
    size_t row = 0;
    std::string value;  // what CLI11 stored (a flag's: unused)
  };
  std::vector<Given> given_;  // one per table row, in table order; values kept stable by reserve
};

}  // namespace

int parse_args(int argc, char** argv, Args& args) {
  CLI::App app{
      "hubfs: a Hugging Face Hub repo (model, dataset or space) as a read-only directory.\n"
      "Reads go through a content-keyed block cache on local disk and a concurrent range fetcher:\n"
      "only the bytes you read cross the network, and each of them only once."};
  app.require_subcommand(1);
  app.set_version_flag("--version", std::string("hubfs ") + HUBFS_VERSION);

  hubfs::MountConfig& config = args.mount.config;
  auto* mount = app.add_subcommand("mount", "Mount REPO at MOUNTPOINT (returns once it answers).");
  mount->add_option("repo", config.repo_spec,
                    "[models/|datasets/|spaces/]ORG/NAME[@REVISION][/SUB/DIR] (models is the default "
                    "type); a path after the name (or the revision) mounts only that directory; none with --hub")
      ->required();
  mount->add_option("mountpoint", config.mountpoint,
                    "An existing empty directory (a dead hubfs mount left by a killed daemon is cleared)");
  const MountCli mount_cli(mount);  // every other option, from its one table (mount_options.h)
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
  hubfs::CopyCommand& copy = args.copy;
  std::string& copy_cache_size = args.copy_cache_size;
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

  std::string& unmount_point = args.unmount_point;
  auto* unmount = app.add_subcommand("unmount", "Unmount a hubfs mount.");
  unmount->alias("umount");
  unmount->add_option("mountpoint", unmount_point, "The mounted directory")->required();

  hubfs::PrefetchConfig& prefetch_config = args.prefetch;
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
  std::string& status_point = args.status_point;
  bool& status_json = args.status_json;
  auto* status = app.add_subcommand(
      "status", "Every hubfs mount on the machine (or the one at MOUNTPOINT): repo, revision, commit, "
                "cache, uptime and live counters, read from the daemon (user.hubfs.status on the mount's root).");
  status->add_option("mountpoint", status_point, "Only this mount (exit 1 if it is not a live hubfs mount)");
  status->add_flag("--json", status_json,
                   "A JSON list: one object per mount with mountpoint, state (alive, dead, not responding, "
                   "unknown), repo, revision, commit, subfolder, cache_dir, uptime_s, requests (upstream HTTP "
                   "requests since mount), bytes_fetched, in_flight, retries, errors, hedges, memory_hits, "
                   "disk_hits, read_ahead_bytes, read_ahead_unread_bytes, hints, hinted_bytes, ...; null where unknown");
  bool& status_prometheus = args.status_prometheus;
  status->add_flag("--prometheus", status_prometheus,
                   "The live mounts' counters in Prometheus's text format, as --metrics serves them (labelled "
                   "with their mountpoint): for a node exporter's textfile collector, or a look without the port");
  status->footer(
      "A dead mount (its daemon killed) or one that does not answer within 3 s is listed as such; it "
      "never hangs the command. Any tool can read the same JSON: getfattr -n user.hubfs.status MOUNTPOINT");

  std::string& cache_dir = args.cache_dir;
  auto* cache = app.add_subcommand(
      "cache", "Inspect and trim a block cache directory (safe while mounts use it: a removed block "
               "is fetched again when next read).");
  cache->require_subcommand(1);
  cache->fallthrough();  // --cache-dir may come after the action too
  cache->add_option("--cache-dir", cache_dir,
                    "The cache directory (default $HUBFS_CACHE_DIR, else $XDG_CACHE_HOME/hubfs, else "
                    "~/.cache/hubfs)");
  bool& json = args.cache_info_json;
  auto* info = cache->add_subcommand("info", "Total size and blocks, the budget, usage by repo and file, and the Xet chunks with what they served instead of the network.");
  info->add_flag("--json", json,
                 "One JSON object: total_bytes, blocks, budget_bytes (null if unknown), repos "
                 "[{repo, bytes, blocks, files [...]}], unindexed_bytes, unindexed_blocks");
  std::string& max_size = args.prune_max_size;
  auto* prune = cache->add_subcommand("prune", "Evict least recently used blocks until the cache fits --max-size.");
  prune->add_option("--max-size", max_size, "Size to shrink to, suffixes K M G T (e.g. 5G; 0 empties it)")
      ->required();
  std::string& clear_repo = args.clear_repo;
  auto* clear = cache->add_subcommand(
      "clear", "Remove every block, or with REPO only that repo's (blocks another repo's file also "
               "uses are kept).");
  clear->add_option("repo", clear_repo, "[models/|datasets/|spaces/]ORG/NAME (models is the default type)");
  hubfs::CacheVerifyConfig& verify_config = args.verify;
  std::string& verify_shared_cache = args.verify_shared_cache;
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
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e);
  }

  if (*mount) {
    // The command line's options, then -o's (the same setters: mount_options.h).
    std::string err = mount_cli.apply(args.mount);
    if (err.empty()) err = hubfs::apply_o_options(raw_options, args.mount);
    if (!err.empty()) {
      std::cerr << "hubfs: " << err << "\n";
      return 2;
    }
  }
  args.command = *mount      ? Command::kMount
                 : *unmount  ? Command::kUnmount
                 : *status   ? Command::kStatus
                 : *prefetch ? Command::kPrefetch
                 : *cat      ? Command::kCat
                 : *cp       ? Command::kCp
                 : *info     ? Command::kCacheInfo
                 : *prune    ? Command::kCachePrune
                 : *clear    ? Command::kCacheClear
                             : Command::kCacheVerify;
  return -1;
}

}  // namespace hubfs_cli
