#include "reader/block_ranges.h"

#include <algorithm>
#include <cmath>
#include <string>

namespace hubfs {

Result<std::vector<uint64_t>> blocks_of_ranges(const std::vector<ByteRange>& ranges, uint64_t file_size,
                                               uint32_t block_size, std::string_view path) {
  // Validate everything first.
  for (const ByteRange& r : ranges) {
    if (r.length == 0 || r.offset >= file_size || r.length > file_size - r.offset) {
      return InvalidArgument("range hint for " + std::string(path) + ": offset " + std::to_string(r.offset) +
                             " length " + std::to_string(r.length) + " is empty or runs past the end of the " +
                             std::to_string(file_size) + "-byte file");
    }
  }
  return blocks_within(ranges, file_size, block_size);  // every range inside: nothing cut
}

std::vector<uint64_t> blocks_within(const std::vector<ByteRange>& ranges, uint64_t file_size, uint32_t block_size) {
  std::vector<uint64_t> blocks;
  for (const ByteRange& r : ranges) {
    if (r.length == 0 || r.offset >= file_size) continue;
    const uint64_t end = r.length > file_size - r.offset ? file_size : r.offset + r.length;
    for (uint64_t b = r.offset / block_size; b <= (end - 1) / block_size; ++b) blocks.push_back(b);
  }
  std::sort(blocks.begin(), blocks.end());
  blocks.erase(std::unique(blocks.begin(), blocks.end()), blocks.end());
  return blocks;
}

std::vector<BlockRun> coalesce(const std::vector<uint64_t>& ascending, size_t max_run) {
  std::vector<BlockRun> runs;
  const size_t cap = std::max<size_t>(1, max_run);
  for (size_t i = 0, j = 0; i < ascending.size(); i = j) {
    for (j = i + 1; j < ascending.size() && ascending[j] == ascending[j - 1] + 1 && j - i < cap;) ++j;
    runs.push_back(BlockRun{ascending[i], j - i});
  }
  return runs;
}

std::vector<uint64_t> graded_groups(uint64_t blocks, uint32_t requests, double ratio, uint64_t largest) {
  if (requests == 0 || blocks < requests || !(ratio >= 1.0) || largest == 0) return {};
  // Request k ends at the cumulative share (ratio^(k+1) - 1) / (ratio^n - 1) of the blocks, or
  // (k + 1) / n when ratio is 1.
  const double n = requests;
  const double total = ratio == 1.0 ? n : std::pow(ratio, n) - 1.0;
  std::vector<uint64_t> sizes;
  uint64_t done = 0;
  for (uint32_t k = 0; k < requests; ++k) {
    const double share = ratio == 1.0 ? (k + 1) / n : (std::pow(ratio, k + 1) - 1.0) / total;
    uint64_t end = k + 1 == requests ? blocks : static_cast<uint64_t>(std::llround(share * static_cast<double>(blocks)));
    end = std::clamp<uint64_t>(end, done + 1, blocks - (requests - k - 1));  // room for the rest
    if (end - done > largest) return {};
    sizes.push_back(end - done);
    done = end;
  }
  return sizes;
}

std::vector<std::pair<uint64_t, BlockBytes>> split_response(std::shared_ptr<const std::string> body, BlockRun run,
                                                           uint64_t file_size, uint32_t block_size) {
  std::vector<std::pair<uint64_t, BlockBytes>> blocks;
  uint64_t pos = 0;
  for (uint64_t b = run.first; b < run.first + run.count; ++b) {
    const uint64_t start = b * block_size;
    const uint64_t want = start >= file_size ? 0 : std::min<uint64_t>(block_size, file_size - start);
    const uint64_t len = std::min<uint64_t>(want, body->size() - std::min<uint64_t>(pos, body->size()));
    blocks.emplace_back(b, BlockBytes{body, static_cast<size_t>(std::min<uint64_t>(pos, body->size())), static_cast<size_t>(len)});
    pos += want;
  }
  return blocks;
}

}  // namespace hubfs
