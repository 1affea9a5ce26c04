// `hubfs mount`: its configuration (defaults and size parsing in core's stack/config.cc) and the
// mount itself (mount.cc: wiring the stack, serving it, tearing it down in order; the
// background process in daemon.cc; mountpoint checks and `hubfs unmount` in mountpoint.cc).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "common/status.h"
#include "stack/session.h"

namespace hubfs {

// A mount's options: what every door shares (stack/session.h: endpoint, cache, timeouts, shared
// tier, offline, token) plus the mount's own.
struct MountConfig : SessionConfig {
  std::string repo_spec;  // [models/|datasets/|spaces/]ORG/NAME[@REVISION][/SUB/DIR]
  std::optional<std::string> repo_type;
  std::optional<std::string> subfolder;  // --subfolder: the repo directory the mount shows
  std::optional<std::string> revision;
  std::string mountpoint;
  bool foreground = false;
  std::vector<std::string> fuse_options;  // from -o, passed through
  std::string log_file;                   // background mode: where logs go ("" = nowhere)
  bool debug = false;
  // --hub: the whole Hub at the mountpoint (MNT/datasets/ORG/NAME[@REV]/...); repo_spec is empty.
  bool hub = false;
  // --metrics [ADDR:]PORT: Prometheus text at http://ADDR:PORT/metrics (fuse/metrics.h); "" = off.
  std::string metrics;
  // --log-format json: the log as one JSON object per line (common/log.h).
  bool log_json = false;
  // --follow[=SECONDS]: poll the revision every this many seconds and show each new commit
  // (fs/follow.h); 0 = off: the mount stays at the commit it pinned.
  int follow_s = 0;
};

// Runs the mount; returns the process exit code. Without foreground it returns once the mount
// answers (0) or has failed (non-zero, cause on stderr), leaving a daemon serving it.
int run_mount(const MountConfig& config);


// parse_size, apply_environment_timeouts, default_endpoint, default_cache_dir and
// choose_ca_bundle: stack/session.h.


}  // namespace hubfs
