// Running the mount in the background, as `hubfs mount` without -f does: fork before any thread
// exists, build and serve in the child, report the child's verdict to the user from the parent.
#pragma once

#include <functional>
#include <string>

#include "common/status.h"

namespace hubfs {

// In the child: redirects the log to log_file (or nowhere), calls start(); on failure the
// parent prints its message and returns 1; on success the child detaches from the terminal,
// tells the parent, and runs serve() (its return value is the daemon's exit code; it must undo
// whatever start() set up: the child then _exits, running no destructors). The parent returns
// 0 once the mountpoint answers a stat, else 1 with the cause on stderr.
int run_daemonized(const std::string& mountpoint, const std::string& log_file, const std::function<Status()>& start,
                   const std::function<int()>& serve);

}  // namespace hubfs
