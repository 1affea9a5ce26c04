#include "reader/block_slots.h"

#include <algorithm>
#include <cstring>
#include <string>

namespace hubfs {

std::shared_ptr<BlockSlots> BlockSlots::take(BlockBufferPool& pool, BlockRun run, uint64_t file_size,
                                             uint64_t block_size) {
  if (block_size == 0 || block_size > pool.slot_bytes()) return nullptr;
  std::shared_ptr<BlockSlots> slots(new BlockSlots(pool.shared_from_this(), run, block_size));
  for (uint64_t b = run.first; b < run.first + run.count; ++b) {
    const uint64_t start = b * block_size;
    const uint64_t length = start >= file_size ? 0 : std::min(block_size, file_size - start);
    slots->lengths_.push_back(length);
    slots->length_ += length;
  }
  slots->loans_.resize(run.count);
  return slots;
}

char* BlockSlots::slot(size_t i) const {
  std::lock_guard<std::mutex> lock(mu_);
  BlockBufferPool::Loan& loan = loans_[i];
  if (loan.data) return loan.data;
  if (std::optional<BlockBufferPool::Loan> taken = pool_->take()) {
    loan = std::move(*taken);
  } else {  // the system would not map a region: this block's own memory
    auto own = std::make_shared<std::string>(static_cast<size_t>(block_size_), '\0');
    loan.data = own->data();
    loan.bytes = SharedBytes(std::shared_ptr<const std::string>(std::move(own)));
  }
  return loan.data;
}

template <typename F>
void BlockSlots::each_piece(uint64_t offset, size_t n, F f) const {
  size_t done = 0;
  while (done < n) {
    const uint64_t at = offset + done;
    const size_t i = static_cast<size_t>(at / block_size_);
    if (i >= loans_.size()) return;  // past the run: RangeBuffer's callers never write there
    const uint64_t in_block = at % block_size_;
    if (in_block >= lengths_[i]) return;
    const size_t k = static_cast<size_t>(std::min<uint64_t>(n - done, lengths_[i] - in_block));
    f(slot(i) + in_block, done, k);
    done += k;
  }
}

void BlockSlots::write(uint64_t offset, const char* data, size_t n) {
  each_piece(offset, n, [&](char* slot, size_t from, size_t k) { std::memcpy(slot, data + from, k); });
}

void BlockSlots::read(uint64_t offset, char* out, size_t n) const {
  each_piece(offset, n, [&](const char* slot, size_t from, size_t k) { std::memcpy(out + from, slot, k); });
}

std::vector<std::pair<uint64_t, BlockBytes>> BlockSlots::blocks() const { return blocks(0, loans_.size()); }

std::vector<std::pair<uint64_t, BlockBytes>> BlockSlots::blocks(size_t from, size_t to) const {
  std::vector<std::pair<uint64_t, BlockBytes>> out;
  to = std::min(to, loans_.size());
  out.reserve(to > from ? to - from : 0);
  for (size_t i = from; i < to; ++i) {
    (void)slot(i);  // a block of no bytes was never written
    BlockBytes bytes;
    std::lock_guard<std::mutex> lock(mu_);
    bytes.buffer = loans_[i].bytes;
    bytes.length = static_cast<size_t>(lengths_[i]);
    out.emplace_back(run_.first + i, std::move(bytes));
  }
  return out;
}

}  // namespace hubfs
