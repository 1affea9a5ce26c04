// `hubfs prefetch`: warms the cache of a mount before a job starts, through the same range
// hints as any reader (include/hubfs/range_hint.h), so a second run makes no upstream request.
#pragma once

#include <optional>
#include <string>
#include <vector>

namespace hubfs {

struct PrefetchConfig {
  std::vector<std::string> paths;       // files or directories on a hubfs mount
  std::optional<std::string> dataset;   // HDF5 dataset: fetch just the chunks of a selection
  std::string selection;                // numpy-style, "" = the whole dataset
  bool json = false;                    // a JSON summary even on a terminal
};

// Returns the exit code: 0 done, 1 an error (named on stderr), 130 interrupted (Ctrl-C): what
// was fetched stays cached.
int run_prefetch(const PrefetchConfig& config);

}  // namespace hubfs
