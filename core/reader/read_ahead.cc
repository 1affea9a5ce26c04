#include "reader/read_ahead.h"

#include "reader/block_ranges.h"

#include <algorithm>

namespace hubfs {

uint64_t ReadAheadOptions::whole_file_bytes() const {
  return static_cast<uint64_t>(double(parallel_requests) * connection_bytes_per_second * round_trip_seconds *
                               double(whole_file_round_trips));
}

uint32_t ReadAheadPolicy::request_blocks(uint64_t blocks, uint32_t largest, uint32_t most) const {
  const uint64_t connections =
      std::max<uint32_t>(1, most ? std::min(most, options_.parallel_requests) : options_.parallel_requests);
  const uint64_t spread = (blocks + connections - 1) / connections;
  return static_cast<uint32_t>(std::clamp<uint64_t>(spread, 1, std::max<uint32_t>(1, largest ? largest : options_.max_blocks_per_request)));
}

uint64_t ReadAheadPolicy::min_part_bytes() const {
  return std::max<uint64_t>(1, static_cast<uint64_t>(options_.connection_bytes_per_second * options_.round_trip_seconds / 10));
}

uint32_t ReadAheadPolicy::demand_parts(uint64_t bytes, uint64_t requests, uint64_t busy) const {
  const uint64_t idle = options_.parallel_requests > busy ? options_.parallel_requests - busy : 0;
  if (requests == 0 || idle <= requests) return 1;
  const uint64_t by_slots = idle / requests;  // >= 1, <= connections
  const uint64_t by_size = std::max<uint64_t>(1, bytes / min_part_bytes());
  return static_cast<uint32_t>(std::min(by_slots, by_size));
}

std::optional<ReadAheadPlan> ReadAheadPolicy::on_read(ReadAheadState& state, uint64_t offset, uint64_t end,
                                                      uint64_t file_size, const ReadFacts& facts) const {
  const uint64_t bs = options_.block_size;
  const uint64_t file_blocks = blocks_in(file_size, options_.block_size);
  // Only a miss, or a block read-ahead fetched, may fetch ahead. A stream that turns cold asks
  // again for the blocks its warm window only looked for on disk.
  const bool may_fetch = facts.missed || facts.marked;
  if (may_fetch && !state.fetching) {
    state.fetching = true;
    if (!state.whole_file) state.prefetched_to = 0;
  } else if (!may_fetch && facts.from_disk) {
    state.fetching = false;
  }
  const uint64_t slack = uint64_t(std::max(state.window_blocks, options_.min_readahead_blocks)) * bs;
  const bool sequential = state.next_offset != UINT64_MAX && offset + slack >= state.next_offset &&
                          offset <= state.next_offset + slack;
  state.next_offset = end;
  // The reader's own reads (its bursts of kernel pieces), counted within the run.
  if (!sequential || facts.paused) {
    state.last_burst_bytes = sequential ? state.burst_bytes : 0;
    state.largest_burst_bytes = sequential ? std::max(state.largest_burst_bytes, state.burst_bytes) : 0;
    state.burst_bytes = end - offset;
  } else {
    state.burst_bytes += end - offset;
  }
  if (!sequential) {
    state.window_blocks = 0;
    state.run_bytes = end - offset;  // a run starts with this read
    state.run_first_block = offset / bs;
    if (!state.whole_file) state.prefetched_to = 0;
    return on_random_read(state, file_size, file_blocks, may_fetch, facts.hinted);
  }
  state.run_bytes += end - offset;
  if (state.whole_file) return facts.hinted || !may_fetch ? std::nullopt : whole_file_rest(state, file_blocks);
  const uint64_t run_blocks = state.run_bytes / bs;
  const uint64_t last_read_block = (end - 1) / bs;
  // The blocks the run has reached (a piece the kernel sent out of order may end before its start).
  const uint64_t reached = last_read_block >= state.run_first_block ? last_read_block - state.run_first_block + 1 : 1;
  if (reached < options_.min_run_blocks) return std::nullopt;
  // A long run: the random reads before it were not a pattern.
  state.random_reads = 0;
  // Its next read's worth: this read's blocks, or its largest whole read's (a burst of pieces).
  const uint64_t read_blocks = std::max((end - 1) / bs - offset / bs + 1, blocks_in(state.largest_burst_bytes, bs));
  const uint64_t grown = next_window(state, facts);
  const double factor = state.fetching ? options_.per_run_factor : options_.local_run_factor;
  // Never under the first window: a run's first read-ahead at 0.4 of 2-9 blocks (1-3) left a
  // reader as fast as the link (h5py's first chunk through a mount) waiting a round trip for
  // every 40% it read; a run that stops there wastes at most that first window.
  const uint64_t earned =
      std::max<uint64_t>(options_.min_readahead_blocks, static_cast<uint64_t>(factor * double(run_blocks)));
  // A reader that reads N blocks at a time (in one read, or one burst) gets at least its next
  // read's worth ahead.
  state.window_blocks = static_cast<uint32_t>(std::max(
      std::min({grown, earned, uint64_t(options_.max_readahead_blocks)}),
      std::min<uint64_t>(read_blocks, options_.max_readahead_blocks)));
  // A fetching stream between its marks waits for the next one (or a miss).
  if (facts.hinted || (state.fetching && !may_fetch)) return std::nullopt;
  // A file read from its start that fetches: its first start_window_bytes ahead at once (the
  // reach, not the window: past them the run's own window decides, as it grew).
  uint64_t reach = state.window_blocks;
  const uint64_t start_blocks = blocks_in(options_.start_window_bytes, bs);
  if (state.fetching && state.run_first_block == 0 && last_read_block + 1 < start_blocks)
    reach = std::max<uint64_t>(reach, start_blocks - last_read_block - 1);
  if (state.fetching) reach = std::min(reach, options_.max_ahead_bytes / bs);
  auto plan = refill(state, last_read_block, file_blocks, reach);
  if (plan) plan->fetch = state.fetching;
  return plan;
}

uint64_t ReadAheadPolicy::next_window(const ReadAheadState& state, const ReadFacts& facts) const {
  if (state.window_blocks == 0) return options_.min_readahead_blocks;  // the run's first window
  // Over the network it doubles only when the reader caught up with it (a block of the read was
  // still on its way, or missed): a reader slower than the link (h5py decoding between its chunk
  // reads) keeps the window that kept it fed, and a stop wastes that much, not per_run_factor of
  // the run. A reader faster than the link waits at least once per request that lands, and its
  // window grows as fast as before (growing by only the read's blocks lagged a stream's window:
  // docs/benchmarks.md, issue 42). From the disk cache a wider window costs no network bytes: it
  // doubles per read.
  if (state.fetching && !facts.missed && !facts.waited) return state.window_blocks;
  return uint64_t(state.window_blocks) * 2;
}

std::optional<ReadAheadPlan> ReadAheadPolicy::on_random_read(ReadAheadState& state, uint64_t file_size,
                                                             uint64_t file_blocks, bool may_fetch, bool hinted) const {
  // Only misses count: a warm file's random reads cost no round trips to save.
  if (may_fetch && state.random_reads < UINT32_MAX) ++state.random_reads;
  if (hinted || !may_fetch) return std::nullopt;
  if (!state.whole_file && state.random_reads >= options_.random_reads_for_whole_file &&
      file_size <= std::min(options_.whole_file_bytes(), options_.max_ahead_bytes)) {
    state.whole_file = true;
    state.prefetched_to = 0;
  }
  if (!state.whole_file) return std::nullopt;
  return whole_file_rest(state, file_blocks);
}

std::optional<ReadAheadPlan> ReadAheadPolicy::whole_file_rest(const ReadAheadState& state,
                                                              uint64_t file_blocks) const {
  if (state.prefetched_to >= file_blocks) return std::nullopt;
  // One wave per read (a request on every connection): the transport serves requests in order,
  // and a random read's own block must not queue behind the whole file.
  const uint32_t per_request = std::max<uint32_t>(1, options_.max_blocks_per_request);
  const uint64_t wave = uint64_t(per_request) * std::max<uint32_t>(1, options_.parallel_requests);
  return ReadAheadPlan{BlockRange{state.prefetched_to, std::min(file_blocks, state.prefetched_to + wave) - 1}, per_request};
}

std::optional<ReadAheadPlan> ReadAheadPolicy::refill(const ReadAheadState& state, uint64_t last_read_block,
                                                     uint64_t file_blocks, uint64_t reach) const {
  if (file_blocks == 0 || reach == 0) return std::nullopt;
  const uint64_t ahead = state.prefetched_to > last_read_block + 1 ? state.prefetched_to - last_read_block - 1 : 0;
  const uint64_t room = reach > ahead ? reach - ahead : 0;
  const uint32_t per_request = request_blocks(reach);
  if (room < per_request) return std::nullopt;
  const uint64_t from = std::max(last_read_block + 1, state.prefetched_to);
  uint64_t to = std::min<uint64_t>(last_read_block + reach, file_blocks - 1);
  if (from >= file_blocks || to < from) return std::nullopt;
  // Whole requests only, but at the end of the file: the rest of the room waits for the next read.
  if (to + 1 < file_blocks && to - from + 1 > per_request) to -= (to - from + 1) % per_request;
  return ReadAheadPlan{BlockRange{from, to}, per_request};
}

}  // namespace hubfs
