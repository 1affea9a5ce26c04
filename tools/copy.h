// `hubfs cat hf://...` and `hubfs cp hf://... DEST`: whole files without a mount, through the
// mount's reader and cache (fs/session.h), verified against their content hash.
#pragma once

#include <optional>
#include <string>

#include "fs/session.h"

namespace hubfs {

struct CopyCommand {
  std::string url;   // hf://[datasets/|spaces/]ORG/NAME[@REVISION]/PATH
  std::string dest;  // cp: a file, or a directory to copy into; "" = cat (stdout)
  std::optional<std::string> revision;
  SessionConfig session;  // endpoint, cache_dir, ... already defaulted
  bool quiet = false;     // no progress bar even on a terminal
};

// Returns the exit code: 0, 1 (failed: the cause on stderr), 130 (interrupted by SIGINT/SIGTERM).
// cp writes DEST.hubfs-partial-PID and renames it over DEST only once the hash matched: a failed
// or interrupted copy leaves no DEST (and no temp file). Fetched blocks stay cached, so running
// it again resumes.
int run_copy(const CopyCommand& command);

}  // namespace hubfs
