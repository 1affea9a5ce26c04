#include "reader/block_buffers.h"

#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <cstdint>

namespace hubfs {
namespace {

// A transparent huge page on x86-64 and arm64 (4 KiB base pages): regions are aligned to it so
// the kernel can map each 2 MiB with one page.
constexpr size_t kHugePage = 2u << 20;

size_t round_up(size_t n, size_t to) { return (n + to - 1) / to * to; }

// The smallest run of huge pages that slots fill but for at most a sixteenth (a disk-tier slot,
// a 1 MiB block and its file's header rounded up to 4 KiB, fills 2 MiB only half, 16 MiB all
// but 6%); at most 32 huge pages, else the one of them wasting least.
size_t region_bytes_for(size_t slot_bytes) {
  const size_t first = round_up(slot_bytes, kHugePage);
  size_t best = first;
  for (size_t region = first; region <= std::max(first, 32 * kHugePage); region += kHugePage) {
    const size_t waste = region % slot_bytes;
    if (waste * 16 <= region) return region;
    if (waste * best < (best % slot_bytes) * region) best = region;  // a smaller share wasted
  }
  return best;
}

// region_bytes of fresh memory aligned to kHugePage, marked for huge pages; null when mmap fails.
char* map_region(size_t region_bytes) {
  const size_t span = region_bytes + kHugePage;
  void* raw = mmap(nullptr, span, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (raw == MAP_FAILED) return nullptr;
  const auto start = reinterpret_cast<uintptr_t>(raw);
  const uintptr_t aligned = round_up(start, kHugePage);
  // Unmap the unaligned head and the tail past the region.
  if (aligned > start) munmap(raw, aligned - start);
  const uintptr_t end = aligned + region_bytes;
  if (start + span > end) munmap(reinterpret_cast<void*>(end), start + span - end);
  // Advice only: without huge pages (THP "never", an old kernel) the region has plain pages.
  (void)madvise(reinterpret_cast<void*>(aligned), region_bytes, MADV_HUGEPAGE);
  // Not inherited by a forked child (see the header): shared after a fork, every page the parent
  // wrote next would be copied (and its huge pages split) on the thread writing it, the
  // transport's. No error if refused: the region is then shared as before.
  (void)madvise(reinterpret_cast<void*>(aligned), region_bytes, MADV_DONTFORK);
  return reinterpret_cast<char*>(aligned);
}

}  // namespace

std::shared_ptr<BlockBufferPool> BlockBufferPool::create(size_t slot_bytes) {
  return std::shared_ptr<BlockBufferPool>(new BlockBufferPool(slot_bytes));
}

BlockBufferPool::BlockBufferPool(size_t slot_bytes)
    : slot_bytes_(slot_bytes), region_bytes_(region_bytes_for(slot_bytes)), owner_pid_(::getpid()) {}

BlockBufferPool::~BlockBufferPool() {
  // Every slot is back (each lent one holds the pool alive).
  for (char* region : regions_) munmap(region, region_bytes_);
}

std::optional<BlockBufferPool::Loan> BlockBufferPool::take() {
  char* slot = nullptr;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (free_.empty()) {
      char* region = map_region(region_bytes_);
      if (!region) return std::nullopt;
      regions_.push_back(region);
      // Lent from the front of a region first, so a half-used region's second huge page stays
      // untouched.
      for (size_t off = region_bytes_ / slot_bytes_ * slot_bytes_; off >= slot_bytes_; off -= slot_bytes_) {
        free_.push_back(region + off - slot_bytes_);
        ++slots_;
      }
    }
    slot = free_.back();
    free_.pop_back();
  }
  Loan loan;
  loan.data = slot;
  std::shared_ptr<const void> owner(slot, [pool = shared_from_this()](const void* p) {
    pool->give_back(static_cast<char*>(const_cast<void*>(p)));
  });
  loan.bytes = SharedBytes(std::move(owner), slot, slot_bytes_);
  return loan;
}

void BlockBufferPool::give_back(char* slot) {
  if (::getpid() != owner_pid_) return;  // a forked child: the slot stays lent (see the header)
  std::lock_guard<std::mutex> lock(mu_);
  free_.push_back(slot);
}

size_t BlockBufferPool::slots() const {
  std::lock_guard<std::mutex> lock(mu_);
  return slots_;
}

size_t BlockBufferPool::free_slots() const {
  std::lock_guard<std::mutex> lock(mu_);
  return free_.size();
}

}  // namespace hubfs
