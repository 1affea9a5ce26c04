// hubfs: mount a Hugging Face Hub repo as a read-only directory, and look after its cache.
#include <malloc.h>

#include <cstdio>
#include <cstring>
#include <iostream>
#include <optional>
#include <string>
#include <vector>

#include "cache/cache_admin.h"
#include "cache_verify.h"
#include "common/log.h"
#include "copy.h"
#include "hub/environment.h"
#include "hub/hub_client.h"
#include "hubfs_args.h"
#include "mount.h"
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

  hubfs_cli::Args parsed;
  if (const int rc = hubfs_cli::parse_args(argc, argv, parsed); rc >= 0) return rc;
  using hubfs_cli::Command;
  const Command command = parsed.command;

  if (command == Command::kPrefetch) return hubfs::run_prefetch(parsed.prefetch);
  if (command == Command::kCat || command == Command::kCp) {
    hubfs::CopyCommand& copy = parsed.copy;
    if (copy.session.endpoint.empty()) copy.session.endpoint = hubfs::default_endpoint();
    while (!copy.session.endpoint.empty() && copy.session.endpoint.back() == '/') copy.session.endpoint.pop_back();
    if (copy.session.cache_dir.empty()) copy.session.cache_dir = hubfs::default_cache_dir();
    auto size = hubfs::parse_size(parsed.copy_cache_size);
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

  if (command == Command::kMount) return finish_and_mount(parsed.mount);
  if (command == Command::kUnmount) return hubfs::run_unmount(parsed.unmount_point);
  if (command == Command::kStatus)
    return hubfs::run_status(parsed.status_point, parsed.status_json, parsed.status_prometheus);

  namespace admin = hubfs::cache_admin;
  std::string& cache_dir = parsed.cache_dir;
  if (cache_dir.empty()) cache_dir = hubfs::default_cache_dir();
  while (cache_dir.size() > 1 && cache_dir.back() == '/') cache_dir.pop_back();
  auto fail = [](const hubfs::Status& s) {
    std::cerr << kProgram << ": " << s.message() << "\n";
    return 1;
  };
  if (command == Command::kCacheInfo) {
    auto usage = admin::info(cache_dir);
    if (!usage.ok()) return fail(usage.status());
    std::cout << (parsed.cache_info_json ? admin::to_json(*usage).dump(2) + "\n" : admin::to_text(*usage));
    return 0;
  }
  if (command == Command::kCachePrune) {
    auto limit = hubfs::parse_size(parsed.prune_max_size);
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
  if (command == Command::kCacheClear) {
    std::string repo;
    if (!parsed.clear_repo.empty()) {
      std::string error;
      auto canonical = canonical_repo(parsed.clear_repo, error);
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
  hubfs::CacheVerifyConfig& verify_config = parsed.verify;  // the one command left: cache verify
  verify_config.cache_dir = cache_dir;
  if (verify_config.endpoint.empty()) verify_config.endpoint = hubfs::default_endpoint();
  while (!verify_config.endpoint.empty() && verify_config.endpoint.back() == '/') verify_config.endpoint.pop_back();
  if (!parsed.verify_shared_cache.empty()) {
    auto servers = hubfs::parse_shared_cache_servers(parsed.verify_shared_cache);
    if (!servers.ok()) {
      std::cerr << "hubfs: " << servers.status().message() << "\n";
      return 2;
    }
    verify_config.shared_cache = *servers;
  }
  return hubfs::run_cache_verify(verify_config);
}
