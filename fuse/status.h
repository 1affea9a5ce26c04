// `hubfs status`: what every hubfs mount on the machine (or one) is doing. Each daemon serves
// its own status as JSON in the extended attribute user.hubfs.status of its mount's root
// (built in mount.cc); this reads it from every fuse.hubfs entry of /proc/self/mountinfo.
#pragma once

#include <string>

namespace hubfs {

// Prints a table (or with json, a JSON list) of the mounts, or of the one at `mountpoint` if not
// empty. A dead mount (daemon killed) or one that does not answer within a few seconds is shown
// as such, never hangs the command. Returns the exit code: 0, or 1 when `mountpoint` is not a
// hubfs mount or is not alive (cause on stderr).
// With prometheus, the live mounts' counters in Prometheus's text format (fuse/metrics.h).
int run_status(const std::string& mountpoint, bool json, bool prometheus = false);

}  // namespace hubfs
