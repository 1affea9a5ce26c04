// hubfs: mount a Hugging Face Hub repo as a read-only directory.
#include <CLI/CLI.hpp>

#include <malloc.h>

#include <iostream>

#include "mount.h"
#include "prefetch.h"

int main(int argc, char** argv) {
  // Blocks and response bodies are 1-8 MiB buffers allocated and freed all the time. glibc would
  // mmap each one and unmap it on free, so every block paid fresh page faults (~0.5 GB/s on these
  // VMs, measured: half the daemon's CPU on a cold read). Keep such buffers on the heap, and keep
  // the heap, so they are reused warm. Bounded all the same: beyond 128 MiB free at the top the
  // heap is returned to the system (the read-ahead budget is 256 MiB, the memory cache 128 MiB),
  // and at most 4 arenas (not 8 per core across 32 FUSE threads) hold freed buffers, so an idle
  // daemon's RSS falls back towards its caches.
  mallopt(M_MMAP_THRESHOLD, 64 << 20);
  mallopt(M_TRIM_THRESHOLD, 128 << 20);
  mallopt(M_ARENA_MAX, 4);
  CLI::App app{
      "hubfs: a Hugging Face Hub repo (model, dataset or space) as a read-only directory.\n"
      "Reads go through a content-keyed block cache on local disk and a concurrent range fetcher:\n"
      "only the bytes you read cross the network, and each of them only once."};
  app.require_subcommand(1);
  app.set_version_flag("--version", "hubfs 0.1.0");

  hubfs::MountConfig config;
  std::string cache_size = "10G";
  auto* mount = app.add_subcommand("mount", "Mount REPO at MOUNTPOINT (returns once it answers).");
  mount->add_option("repo", config.repo_spec,
                    "[models/|datasets/|spaces/]ORG/NAME[@REVISION] (models is the default type)")
      ->required();
  mount->add_option("mountpoint", config.mountpoint,
                    "An existing empty directory (a dead hubfs mount left by a killed daemon is cleared)")->required();
  mount->add_option("--repo-type", config.repo_type, "model|dataset|space (alternative to the prefix)")
      ->check(CLI::IsMember({"model", "dataset", "space"}));
  mount->add_option("--revision", config.revision,
                    "Branch, tag, commit sha or refs/pr/N (default main); pinned to its commit at mount");
  mount->add_option("--endpoint", config.endpoint, "Hub URL (default $HF_ENDPOINT, else https://huggingface.co)");
  mount->add_option("--cache-dir", config.cache_dir,
                    "Block cache directory (default $HUBFS_CACHE_DIR, else $XDG_CACHE_HOME/hubfs, else "
                    "~/.cache/hubfs); kept across mounts, shareable between mounts");
  mount->add_option("--cache-size", cache_size,
                    "Byte budget of the block cache, suffixes K M G T (default 10G); least recently "
                    "used blocks are evicted first; 0 means no disk cache");
  mount->add_option("--max-requests", config.max_requests, "HTTP requests in flight at once (default 16)")
      ->check(CLI::Range(1, 256));
  mount->add_option("--read-timeout", config.read_timeout_s,
                    "Seconds after which a read the Hub cannot serve fails with EIO (default 120)")
      ->check(CLI::Range(1, 3600));
  mount->add_flag("-f,--foreground", config.foreground, "Stay in the foreground, logging to stderr");
  mount->add_option("-o", config.fuse_options,
                    "FUSE mount options, passed through (allow_other, ...); nonempty allows a non-empty "
                    "mountpoint")
      ->delimiter(',')
      ->allow_extra_args(false);
  mount->add_option("--log-file", config.log_file, "In the background, append logs to this file");
  mount->add_flag("--debug", config.debug, "Log every FUSE request libfuse sees (useful with -f)");
  mount->footer(
      "Token: $HF_TOKEN, else $HUGGING_FACE_HUB_TOKEN, else the file $HF_TOKEN_PATH or "
      "$HF_HOME/token (default ~/.cache/huggingface/token). It is sent only to the endpoint, never "
      "to the CDN, and never printed.\nStop with: hubfs unmount MOUNTPOINT (or SIGINT/SIGTERM to the "
      "daemon).");

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

  CLI11_PARSE(app, argc, argv);

  if (*prefetch) return hubfs::run_prefetch(prefetch_config);

  if (*mount) {
    if (config.endpoint.empty()) config.endpoint = hubfs::default_endpoint();
    while (!config.endpoint.empty() && config.endpoint.back() == '/') config.endpoint.pop_back();
    if (config.cache_dir.empty()) config.cache_dir = hubfs::default_cache_dir();
    auto size = hubfs::parse_size(cache_size);
    if (!size.ok()) {
      std::cerr << "hubfs: --cache-size: " << size.status().message() << "\n";
      return 2;
    }
    config.cache_size = *size;
    return hubfs::run_mount(config);
  }
  return hubfs::run_unmount(unmount_point);
}
