// Named totals in a small text file that several processes add to: the Xet chunk cache keeps
// there what it served instead of the network, summed over every mount that used the cache
// directory, for `hubfs cache info` to report.
//
// Format: one "name value" line per total. add() takes an exclusive flock(2) on the file, reads
// it, adds, and writes it back, so concurrent adders (processes, or threads each with its own
// add() call) never lose an update. A file that is missing or does not parse reads as all zeros
// and is rewritten whole by the next add(): these are statistics, not records, and a damaged
// file must never stop the cache that keeps it.
#pragma once

#include <cstdint>
#include <map>
#include <string>

#include "common/status.h"

namespace hubfs::counter_file {

using Totals = std::map<std::string, uint64_t>;

// The totals in the file; empty if it is missing or damaged.
Totals read(const std::string& path);

// Adds delta to the file's totals (creating the file; its directory must exist). An error only
// when the file cannot be opened, locked or written.
Status add(const std::string& path, const Totals& delta);

}  // namespace hubfs::counter_file
