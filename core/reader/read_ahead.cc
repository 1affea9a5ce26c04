#include "reader/read_ahead.h"

#include <algorithm>

namespace hubfs {

std::optional<BlockRange> ReadAheadPolicy::on_read(ReadAheadState& state, uint64_t offset, uint64_t end,
                                                   uint64_t file_size, bool hinted) const {
  const uint64_t bs = config_.block_size;
  const uint64_t slack = uint64_t(std::max(state.window_blocks, config_.min_window_blocks)) * bs;
  const bool sequential = state.next_offset != UINT64_MAX && offset + slack >= state.next_offset &&
                          offset <= state.next_offset + slack;
  state.next_offset = end;
  if (!sequential) {
    state.window_blocks = 0;
    state.prefetched_to = 0;
    state.run_bytes = 0;
    return std::nullopt;
  }
  state.run_bytes += end - offset;
  const uint64_t run_blocks = state.run_bytes / bs;
  const uint32_t doubled = state.window_blocks == 0 ? config_.min_window_blocks
                                                    : std::min(state.window_blocks * 2, config_.max_window_blocks);
  state.window_blocks = static_cast<uint32_t>(std::max<uint64_t>(
      config_.min_window_blocks, std::min<uint64_t>(doubled, config_.per_run_factor * run_blocks)));
  if (hinted) return std::nullopt;
  const uint64_t file_blocks = (file_size + bs - 1) / bs;
  return refill(state, (end - 1) / bs, file_blocks);
}

std::optional<BlockRange> ReadAheadPolicy::refill(const ReadAheadState& state, uint64_t last_read_block,
                                                  uint64_t file_blocks) const {
  if (file_blocks == 0) return std::nullopt;
  const uint64_t ahead = state.prefetched_to > last_read_block + 1 ? state.prefetched_to - last_read_block - 1 : 0;
  const uint64_t room = state.window_blocks > ahead ? state.window_blocks - ahead : 0;
  if (room < std::min<uint64_t>(state.window_blocks / 2, config_.blocks_per_request)) return std::nullopt;
  const uint64_t from = std::max(last_read_block + 1, state.prefetched_to);
  uint64_t to = std::min<uint64_t>(last_read_block + state.window_blocks, file_blocks - 1);
  if (from >= file_blocks || to < from) return std::nullopt;
  // Whole requests only, but at the end of the file: the rest of the room waits for the next read.
  const uint64_t per_request = std::max<uint64_t>(1, config_.blocks_per_request);
  if (to + 1 < file_blocks && to - from + 1 > per_request) to -= (to - from + 1) % per_request;
  return BlockRange{from, to};
}

}  // namespace hubfs
