// The fast path for contiguous datasets: the selection's byte runs in the one stored range,
// grouped into pieces of a few MiB and read with parallel preads straight into the output
// (on a hubfs mount, parallel range requests), each piece converted (byte order, strings) as
// soon as it lands. No HDF5 call: the dataset's address comes from H5Dget_offset at open.
#pragma once

#include <atomic>
#include <cstdint>
#include <string>

#include "common/status.h"
#include "h5chunk/h5chunk.h"
#include "h5chunk/reader.h"
#include "h5chunk/selection.h"

namespace h5chunk {

// A piece is at most this long: a 200 MB dataset makes ~50 pieces, enough to keep 16 workers
// (or a mount's parallel requests) busy, while each pread stays long enough that its syscall
// (or request) overhead is negligible.
inline constexpr uint64_t kContiguousPieceBytes = 4ull << 20;
// Runs separated by fewer bytes than this are read in one pread, gap included, then copied out
// (HDF5's own sieve buffer for contiguous data is 64 KiB: the same trade).
inline constexpr uint64_t kContiguousMaxGapBytes = 64ull << 10;
// Selections of more runs than this (a column of a tall array) are declined to H5Dread: the run
// list alone would take tens of MB, and H5Dread's sieve serves such reads well.
inline constexpr uint64_t kContiguousMaxRuns = 1ull << 20;

struct ContiguousRead {
  const ChunkedLayout* layout = nullptr;  // shape, elem_size, conversion (chunk unused)
  uint64_t data_offset = 0;               // file offset of element 0 (userblock included)
  WorkerStatePool* workers = nullptr;
  HelperPool* helpers = nullptr;  // the file's helper threads
  const NormalizedSelection* selection = nullptr;  // no blocker: unit steps, one sorted list
  uint8_t* out = nullptr;
  unsigned threads = 1;
  ProgressFn progress;
  const std::atomic<bool>* cancel = nullptr;
  std::string source;
};

// Reads the selection. kUnsupported (nothing read) when it has more than kContiguousMaxRuns
// runs; the caller then uses H5Dread.
Result<ReadStats> read_contiguous(const ContiguousRead& request);

}  // namespace h5chunk
