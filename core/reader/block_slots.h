// A run of blocks fetched straight into pooled memory (reader/block_buffers.h): one slot per
// block, already mapped, that a range's body is written into as it arrives
// (RangeFetcher::fetch_into_async), instead of a fresh string per response the kernel must zero
// and fault in page by page (docs/benchmarks.md, issue 42: a quarter of a cold read's CPU).
// The blocks handed out own their slots: a slot goes back to the pool when the last holder of its
// block lets go.
//
// A block takes its slot when its first byte arrives, not when the run is asked for: a hint of
// 150 MB goes to the transport at once and waits there for its connections, and slots taken up
// front made the pool map (and the kernel zero, on the transport's thread) memory for all of it
// at once: a training loop's planner spent most of its transport thread's CPU in
// clear_page_erms (docs/benchmarks.md, issue 40). Taken on arrival, the slots held are those of
// the transfers running, and the pool's slots freed meanwhile are reused. A block whose slot the
// pool cannot map gets memory of its own (a string) instead.
#pragma once

#include <cstdint>
#include <memory>
#include <mutex>
#include <utility>
#include <vector>

#include "net/range_fetcher.h"
#include "reader/block_buffers.h"
#include "reader/block_ranges.h"

namespace hubfs {

class BlockSlots final : public RangeBuffer {
 public:
  // Slots for the blocks of `run` in a file of file_size bytes (blocks of block_size, at most the
  // pool's slot_bytes; else null: the caller fetches into a string), each taken from `pool` when
  // its first byte is written. The pool lives while these slots do.
  static std::shared_ptr<BlockSlots> take(BlockBufferPool& pool, BlockRun run, uint64_t file_size,
                                          uint64_t block_size);

  void write(uint64_t offset, const char* data, size_t n) override;
  void read(uint64_t offset, char* out, size_t n) const override;

  // The run's blocks (call only once the fetch said OK: before, a slot holds anything).
  std::vector<std::pair<uint64_t, BlockBytes>> blocks() const;
  // Blocks [from, to) of the run (counted from its first), the same way: for blocks whose bytes
  // are all in while the fetch goes on (RangeSource::fetch_into_async's progress).
  std::vector<std::pair<uint64_t, BlockBytes>> blocks(size_t from, size_t to) const;
  uint64_t length() const { return length_; }

 private:
  BlockSlots(std::shared_ptr<BlockBufferPool> pool, BlockRun run, uint64_t block_size)
      : pool_(std::move(pool)), run_(run), block_size_(block_size) {}
  // Calls f(slot, offset in it, offset in the span, bytes) for each block's piece of
  // [offset, offset + n).
  template <typename F>
  void each_piece(uint64_t offset, size_t n, F f) const;
  // Block i's memory, taken now if it has none yet.
  char* slot(size_t i) const;

  const std::shared_ptr<BlockBufferPool> pool_;
  const BlockRun run_;
  const uint64_t block_size_;
  uint64_t length_ = 0;
  std::vector<uint64_t> lengths_;  // each block's length
  mutable std::mutex mu_;  // a leaf: guards loans_ (parts of a range are written at once)
  mutable std::vector<BlockBufferPool::Loan> loans_;  // one per block of the run; data null until taken
};

}  // namespace hubfs
