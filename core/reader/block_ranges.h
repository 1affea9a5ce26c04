// Block arithmetic of the read path, pure (no state, no I/O), so its rules are unit-tested alone
// (tests/reader/block_ranges_test.cc): which blocks a range hint names, how missing blocks are
// grouped into range requests, and how a response is cut back into blocks.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <string_view>
#include <vector>

#include "common/status.h"
#include "net/range_fetcher.h"
#include "reader/block_tier.h"

namespace hubfs {

// The blocks the byte ranges touch, ascending, each once. kInvalidArgument (naming `path`) when a
// range is empty or runs past the end of the file: a malformed hint changes nothing.
Result<std::vector<uint64_t>> blocks_of_ranges(const std::vector<ByteRange>& ranges, uint64_t file_size,
                                               uint32_t block_size, std::string_view path);
// The same without refusing any range: each is cut at the end of the file, and empty ones, or
// ones starting at or past it, name no block (a caller asking what a cache holds: the Python
// binding's uncached_blocks and wait_written).
std::vector<uint64_t> blocks_within(const std::vector<ByteRange>& ranges, uint64_t file_size, uint32_t block_size);

// How many blocks a file of `file_size` bytes has (the last one short).
inline uint64_t blocks_in(uint64_t file_size, uint64_t block_size) { return (file_size + block_size - 1) / block_size; }

// Consecutive blocks [first, first + count).
struct BlockRun {
  uint64_t first = 0;
  uint64_t count = 0;
  std::vector<uint64_t> indices() const {
    std::vector<uint64_t> out(count);
    for (uint64_t i = 0; i < count; ++i) out[i] = first + i;
    return out;
  }
  bool operator==(const BlockRun&) const = default;
};
// Ascending indices cut into runs of neighbours, each at most max_run (at least 1) long: one
// range request per run.
std::vector<BlockRun> coalesce(const std::vector<uint64_t>& ascending, size_t max_run);

// Sizes (in blocks) of the `requests` requests that carry `blocks` blocks, each about `ratio`
// times the one before it (the cumulative share rounded, so they add up exactly), or empty when
// that cannot be done with every size at least 1 and at most `largest` (the caller then splits
// evenly). Why: a file's hash runs over its blocks in order, and ranges that share the link
// evenly all end together, leaving the whole hash for after the last byte; graded ranges end in
// file order, so the hash (and the decoding of what they hold) runs while later ones arrive
// (docs/benchmarks.md).
std::vector<uint64_t> graded_groups(uint64_t blocks, uint32_t requests, double ratio, uint64_t largest);

// A response to the range of `run` cut into its blocks: slices of `body`, no copy. The last block
// of the file is short (file_size says where it ends); a body too short for a block leaves that
// block (and the ones after it) short or empty, which the reader refuses as a short block.
std::vector<std::pair<uint64_t, BlockBytes>> split_response(std::shared_ptr<const std::string> body, BlockRun run,
                                                           uint64_t file_size, uint32_t block_size);

}  // namespace hubfs
