// `hubfs cat hf://...` and `hubfs cp hf://... DEST`: whole files without a mount, through the
// mount's reader and cache (stack/hub_file.h), verified against their content hash.
#pragma once

#include <optional>
#include <string>

#include "stack/hub_file.h"

namespace hubfs {

struct CopyCommand {
  std::string url;   // hf://[datasets/|spaces/]ORG/NAME[@REVISION]/PATH
  std::string dest;  // cp: a file, or a directory to copy into; "" = cat (stdout)
  std::optional<std::string> revision;
  SessionConfig session;  // endpoint, cache_dir, ... already defaulted
  bool quiet = false;     // no progress bar even on a terminal
  bool force = false;     // cp: replace a DEST without write permission too (as cp -f)
};

// Returns the exit code: 0, 1 (failed: the cause on stderr), 128 + the signal when interrupted
// (130 by SIGINT, 143 by SIGTERM, as a shell reports them).
// cp writes DEST.hubfs-partial-PID and renames it over DEST only once the hash matched: a failed
// or interrupted copy leaves no DEST (and no temp file). Fetched blocks stay cached, so running
// it again resumes. Temp files of copies to the same DEST whose process is gone (SIGKILL) are
// removed first. A DEST that is a symlink is not replaced: the file it points to is (the temp
// file beside it). An existing DEST without write permission is refused with EACCES, as cp(1)
// refuses it, unless `force`: as root, which may write any file, one with no write bit at all.
int run_copy(const CopyCommand& command);

}  // namespace hubfs
