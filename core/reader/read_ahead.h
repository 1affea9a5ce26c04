// The read-ahead policy: from what one open handle has read so far and the read arriving now,
// which blocks to fetch ahead of the reader. Pure: no threads, no clock, no I/O, so every rule
// below is unit-tested by feeding it reads (tests/reader/read_ahead_test.cc). BlockReader owns
// the mechanism (claiming blocks, the memory budget, sending requests); this decides the range.
//
// The rules, each for a measured reason (docs/how-it-works.md, "Read-ahead"):
// - A read is sequential when it starts where the handle's last read ended, give or take the
//   window (the kernel sends one stream's pieces from several threads, a little out of order).
//   Anything else resets the handle: random access gets no speculative bytes.
// - The window starts at min_window_blocks, doubles per sequential read up to
//   max_window_blocks, and never exceeds per_run_factor times what the current run has read: a
//   stream that ends (the last chunk of an HDF5 read) wastes at most that multiple of what it
//   used.
// - The window is refilled only when there is room for a whole request (or half a small
//   window), and only in whole requests except at the end of the file: a 2-block request pays
//   the same round trip as an 8-block one for a quarter of the bytes.
// - A file whose reader sends range hints gets none: it said what it needs.
#pragma once

#include <cstdint>
#include <optional>

namespace hubfs {

struct ReadAheadConfig {
  uint64_t block_size = 1 << 20;
  uint32_t min_window_blocks = 4;
  uint32_t max_window_blocks = 128;
  uint32_t blocks_per_request = 8;
  // The window may reach this many times the bytes the current run has read. At 1x the window
  // (and so the requests in flight) grew only as fast as the reader consumed: a 300 MB stream at
  // 50 ms / 400 Mbit/s per connection spent its first ~120 MB below full concurrency. At 4x it
  // reaches the 128-block cap after 32 MiB, and a stream that stops wastes at most 4x what it
  // read (never more than the window).
  uint64_t per_run_factor = 4;
};

// What a handle remembers between reads. Guarded by its owner (BlockReader's ReadState::mu).
struct ReadAheadState {
  uint64_t next_offset = UINT64_MAX;  // where a sequential read would start (MAX: no read yet)
  uint32_t window_blocks = 0;         // current window (0: not sequential)
  uint64_t prefetched_to = 0;         // blocks below this were already requested ahead
  uint64_t run_bytes = 0;             // bytes read sequentially in the current run
};

// Blocks [first, last], both included.
struct BlockRange {
  uint64_t first = 0;
  uint64_t last = 0;
  uint64_t count() const { return last - first + 1; }
  bool operator==(const BlockRange&) const = default;
};

class ReadAheadPolicy {
 public:
  explicit ReadAheadPolicy(ReadAheadConfig config) : config_(config) {}

  // Records the read [offset, end) (end > offset, end <= file_size) of a file of file_size bytes
  // and returns the blocks to fetch ahead of it, or nothing. `hinted`: the file's reader sent a
  // range hint recently. The caller fetches a prefix of the range (its memory budget may stop it
  // early) and records how far it got in state.prefetched_to (the block after the last one it
  // took care of), so the next read does not ask for them again.
  std::optional<BlockRange> on_read(ReadAheadState& state, uint64_t offset, uint64_t end,
                                    uint64_t file_size, bool hinted) const;

  const ReadAheadConfig& config() const { return config_; }

 private:
  // Which blocks to request once the window is known (the refill rule).
  std::optional<BlockRange> refill(const ReadAheadState& state, uint64_t last_read_block,
                                   uint64_t file_blocks) const;

  ReadAheadConfig config_;
};

}  // namespace hubfs
