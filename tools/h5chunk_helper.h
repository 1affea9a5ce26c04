// The h5chunk command's helper process: an H5Dread that libhdf5 might crash on (a damaged file
// whose filter decodes unchecked: Dataset::h5dread_hazard) runs in a child process, so that a
// crash there is an error naming the dataset and the signal, never a crash of the command.
//
// The child is the command itself, started with posix_spawn (fork+exec: a bare fork of a process
// with session threads can hang in the child on a lock some thread held), running the hidden
// subcommand `h5dread-helper`. It reopens the same file the same way (an hf:// URL at the commit
// the parent pinned, through the same cache directory, whose blocks it reuses), reads the
// selection with H5Dread in slabs and streams them back over a pipe, so that neither process
// holds more than the output and one slab.
#pragma once

#include <sys/types.h>

#include <atomic>
#include <functional>
#include <string>
#include <vector>

#include "common/status.h"
#include "h5chunk/h5chunk.h"

namespace h5chunk_cli {

// The helper running now (0 = none): the command's SIGINT/SIGTERM handler kills it before the
// command exits, so that Ctrl-C ends both at once.
extern std::atomic<pid_t> g_helper_pid;

// How to reopen the file in the helper: the arguments after the file's path that make the
// helper open it as the parent did (--revision COMMIT, --endpoint, --cache-dir for hf://).
struct HelperTarget {
  std::string path;  // local path or hf:// URL, as given
  std::vector<std::string> open_args;
};

// Reads `selection` of dataset `dataset` of the target with H5Dread in a helper process into
// `out` (`bytes`). `hazard` says why it runs there (for the messages). kCorrupt when the helper
// crashed (naming the signal), kInternal when it ended without a result; its own error otherwise.
hubfs::Status read_in_helper(const HelperTarget& target, const std::string& dataset, const h5chunk::Selection& selection,
                             void* out, size_t bytes, const std::string& hazard);

// The helper's side (`h5chunk h5dread-helper FILE DATASET --parent PID ...`): the selection's
// text is read from stdin, the result framed on stdout. `open` opens the file as the command
// does. Returns the process's exit status.
int helper_main(const std::string& path, const std::string& dataset, pid_t parent,
                const std::function<hubfs::Result<h5chunk::File>(const std::string&)>& open);

}  // namespace h5chunk_cli
