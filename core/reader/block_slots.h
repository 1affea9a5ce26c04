// A run of blocks fetched straight into pooled memory (reader/block_buffers.h): one slot per
// block, already mapped, that a range's body is written into as it arrives
// (RangeFetcher::fetch_into_async), instead of a fresh string per response the kernel must zero
// and fault in page by page (docs/benchmarks.md, issue 42: a quarter of a cold read's CPU).
// The blocks handed out own their slots: a slot goes back to the pool when the last holder of its
// block lets go.
#pragma once

#include <cstdint>
#include <memory>
#include <utility>
#include <vector>

#include "net/range_fetcher.h"
#include "reader/block_buffers.h"
#include "reader/block_ranges.h"

namespace hubfs {

class BlockSlots final : public RangeBuffer {
 public:
  // Slots for the blocks of `run` in a file of file_size bytes (blocks of block_size, at most the
  // pool's slot_bytes), or null when the pool cannot map one (the caller fetches into a string).
  static std::shared_ptr<BlockSlots> take(BlockBufferPool& pool, BlockRun run, uint64_t file_size,
                                          uint64_t block_size);

  void write(uint64_t offset, const char* data, size_t n) override;
  void read(uint64_t offset, char* out, size_t n) const override;

  // The run's blocks (call only once the fetch said OK: before, a slot holds anything).
  std::vector<std::pair<uint64_t, BlockBytes>> blocks() const;
  uint64_t length() const { return length_; }

 private:
  BlockSlots(BlockRun run, uint64_t block_size) : run_(run), block_size_(block_size) {}
  // Calls f(slot, offset in it, offset in the span, bytes) for each block's piece of
  // [offset, offset + n).
  template <typename F>
  void each_piece(uint64_t offset, size_t n, F f) const;

  const BlockRun run_;
  const uint64_t block_size_;
  uint64_t length_ = 0;
  std::vector<BlockBufferPool::Loan> loans_;  // one per block of the run
  std::vector<uint64_t> lengths_;             // each block's length
};

}  // namespace hubfs
