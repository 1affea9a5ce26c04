// hubfs's command line: the CLI11 tables and the parse, in hubfs_args.cc alone (the mount
// options' own table is mount_options.h's; this file declares them to CLI11 from it). That file
// compiles apart from the program's batch, plain at -O0, where that costs less compile CPU
// (tools/CMakeLists.txt): CLI11 is header-only, and its tables cost the most of any code here to
// compile, more so sanitized or optimized (docs/benchmarks.md, "Session 31: suite41" and
// "Session 32: suite41"). The option parsing is third-party code run once per process,
// unsanitized as libcurl and libfuse are; the values it fills are checked where the program uses
// them. The mount helper form (`hubfs SOURCE MOUNTPOINT -o ...`) is not CLI11's: hubfs_main.cc.
#pragma once

#include <string>
#include <vector>

#include "cache_verify.h"
#include "copy.h"
#include "mount_options.h"
#include "prefetch.h"

namespace hubfs_cli {

enum class Command { kMount, kUnmount, kStatus, kPrefetch, kCat, kCp, kCacheInfo, kCachePrune, kCacheClear, kCacheVerify };

// A command line as parsed: the command and its arguments (those it does not take keep their
// defaults). Nothing is defaulted from the environment here: main does that.
struct Args {
  Command command = Command::kMount;
  hubfs::MountArgs mount;  // the command line's options and then -o's applied (mount_options.h)
  hubfs::CopyCommand copy;  // cat, cp
  std::string copy_cache_size = "10G";
  std::string unmount_point;
  hubfs::PrefetchConfig prefetch;
  std::string status_point;
  bool status_json = false, status_prometheus = false;
  std::string cache_dir;  // cache's --cache-dir, "" if not given
  bool cache_info_json = false;
  std::string prune_max_size, clear_repo;
  hubfs::CacheVerifyConfig verify;  // but its cache_dir, endpoint's default and shared_cache
  std::string verify_shared_cache;  // as given (parse_shared_cache_servers'd by main)
};

// Parses argv into `args`. -1: run the command; otherwise the process's exit code, with what
// the command line asked for printed (--help, --version, --help-man, --help-completion) or what
// is wrong with it (CLI11's message, or a mount option's setter's as "hubfs: ...").
int parse_args(int argc, char** argv, Args& args);

}  // namespace hubfs_cli
