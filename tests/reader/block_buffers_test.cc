// The block buffer pool (memory for blocks read from the disk cache, lent and taken back) and the
// disk tier that reads whole blocks into it.
#include "reader/block_buffers.h"

#include <gtest/gtest.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "cache/block_cache.h"
#include "cache/block_file.h"
#include "cache/cache_disk.h"
#include "reader/disk_tier.h"
#include "reader/memory_tier.h"
#include "support/temp_dir.h"

namespace hubfs {
namespace HUBFS_UNITY_ID {

using testing::TempDir;

constexpr size_t kSlot = 1 << 20;

TEST(BlockBufferPool, LendsDistinctWritableSlotsAndReusesOneGivenBack) {
  auto pool = BlockBufferPool::create(kSlot);
  auto a = pool->take();
  auto b = pool->take();
  ASSERT_TRUE(a && b);
  EXPECT_NE(a->data, b->data);
  EXPECT_EQ(a->bytes.size(), kSlot);
  EXPECT_EQ(a->bytes.data(), a->data);
  std::memset(a->data, 'a', kSlot);
  std::memset(b->data, 'b', kSlot);
  EXPECT_EQ(a->bytes.data()[kSlot - 1], 'a');  // b's writes did not reach a
  // Regions are 2 MiB-aligned (the huge page): a region holds two 1 MiB slots.
  EXPECT_EQ(reinterpret_cast<uintptr_t>(a->data) % (2u << 20), 0u);
  EXPECT_EQ(pool->slots(), 2u);
  EXPECT_EQ(pool->free_slots(), 0u);
  // Copies of the bytes keep the slot; the last one to go gives it back.
  SharedBytes copy = a->bytes;
  char* const a_data = a->data;
  a.reset();
  EXPECT_EQ(pool->free_slots(), 0u);
  EXPECT_EQ(copy.data()[0], 'a');
  copy = SharedBytes();
  EXPECT_EQ(pool->free_slots(), 1u);
  auto again = pool->take();
  ASSERT_TRUE(again);
  EXPECT_EQ(again->data, a_data);  // the same memory, already mapped: no new region
  EXPECT_EQ(pool->slots(), 2u);
  auto third = pool->take();  // none free: a new region
  ASSERT_TRUE(third);
  EXPECT_EQ(pool->slots(), 4u);
}

// The disk tier's slots (a 1 MiB block's file rounded up to 4 KiB) would fill a 2 MiB region
// only half: regions of 16 MiB hold 15 of them, each 4 KiB-aligned, none overlapping another.
TEST(BlockBufferPool, SlotsNotDividingAHugePageShareLargerRegions) {
  const size_t slot = DiskTier::file_slot_bytes(kSlot);
  EXPECT_EQ(slot, kSlot + 4096);
  auto pool = BlockBufferPool::create(slot);
  std::vector<BlockBufferPool::Loan> loans;
  for (int i = 0; i < 15; ++i) {
    auto loan = pool->take();
    ASSERT_TRUE(loan);
    EXPECT_EQ(reinterpret_cast<uintptr_t>(loan->data) % CacheDisk::kDirectReadAlign, 0u);
    EXPECT_EQ(loan->bytes.size(), slot);
    loans.push_back(std::move(*loan));
  }
  EXPECT_EQ(pool->slots(), 15u);  // one region
  auto sixteenth = pool->take();
  ASSERT_TRUE(sixteenth);
  EXPECT_EQ(pool->slots(), 30u);  // a second one
  loans.push_back(std::move(*sixteenth));
  for (size_t i = 0; i < loans.size(); ++i) {
    std::memset(loans[i].data, static_cast<int>('A' + i), slot);
  }
  for (size_t i = 0; i < loans.size(); ++i) {
    EXPECT_EQ(loans[i].data[0], static_cast<char>('A' + i));
    EXPECT_EQ(loans[i].data[slot - 1], static_cast<char>('A' + i));  // no later slot overlapped it
  }
}

TEST(BlockBufferPool, ALentSlotOutlivesThePoolsOwner) {
  auto pool = BlockBufferPool::create(kSlot);
  auto loan = pool->take();
  ASSERT_TRUE(loan);
  std::memset(loan->data, 'x', kSlot);
  SharedBytes kept = loan->bytes;
  loan.reset();
  pool.reset();  // the owner lets go: the slot (and so the pool) lives on with `kept`
  EXPECT_EQ(std::string(kept.data(), 3), "xxx");
  EXPECT_EQ(kept.data()[kSlot - 1], 'x');
}

// A forked child does not share the pool's memory: the parent's later writes to its slots stay
// its own, with no copy-on-write fault (the page is simply not mapped in the child).
TEST(BlockBufferPool, AForkedChildDoesNotMapThePoolsMemory) {
  auto pool = BlockBufferPool::create(kSlot);
  auto loan = pool->take();
  ASSERT_TRUE(loan);
  std::memset(loan->data, 'p', kSlot);
  const long page = sysconf(_SC_PAGESIZE);
  void* first_page = reinterpret_cast<void*>(reinterpret_cast<uintptr_t>(loan->data) & ~uintptr_t(page - 1));
  unsigned char resident = 0;
  ASSERT_EQ(mincore(first_page, static_cast<size_t>(page), &resident), 0);  // mapped here
  const pid_t pid = fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    unsigned char in_child = 0;
    // ENOMEM: no mapping at this address in the child.
    _exit(mincore(first_page, static_cast<size_t>(page), &in_child) != 0 && errno == ENOMEM ? 0 : 1);
  }
  int status = 0;
  ASSERT_EQ(waitpid(pid, &status, 0), pid);
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 0);
  EXPECT_EQ(loan->data[kSlot - 1], 'p');  // the parent's bytes are untouched
}

TEST(BlockBufferPool, AForkedChildLettingGoOfALentSlotLeavesThePoolAlone) {
  auto pool = BlockBufferPool::create(kSlot);
  auto loan = pool->take();
  ASSERT_TRUE(loan);
  const pid_t pid = fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    // The parent's lock may have been held by another of its threads at the fork: not taken.
    loan.reset();
    _exit(pool->free_slots() == 1 ? 0 : 1);  // the region's other slot only
  }
  int status = 0;
  ASSERT_EQ(waitpid(pid, &status, 0), pid);
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 0);
  loan.reset();  // in the parent, given back
  EXPECT_EQ(pool->free_slots(), 2u);
}

std::string pattern(uint64_t index, size_t n) {
  std::string s(n, '\0');
  for (size_t i = 0; i < n; ++i) s[i] = static_cast<char>((i * 131 + index * 7) >> 3);
  return s;
}

TEST(DiskTier, WholeBlocksComeInPooledMemoryThatTheNextBlockReuses) {
  TempDir tmp;
  auto cache = BlockCache::open(CacheOptions{.dir = tmp.str(), .env = &Env::real()});
  ASSERT_TRUE(cache.ok()) << cache.status().message();
  const std::string id = "sha256:" + std::string(64, 'e');
  (*cache)->put(id, 0, pattern(0, kSlot));
  (*cache)->put(id, 1, pattern(1, kSlot));
  (*cache)->put(id, 2, pattern(2, 1000));  // a file's short last block
  DiskTier tier(**cache, kSlot);

  auto first = tier.get(BlockId{id, 0, kSlot});
  ASSERT_TRUE(first);
  EXPECT_EQ(first->view(), pattern(0, kSlot));
  // A pool slot holding the block's whole file, aligned for a direct read; the data after the
  // header.
  EXPECT_EQ(reinterpret_cast<uintptr_t>(first->buffer.data()) % CacheDisk::kDirectReadAlign, 0u);
  EXPECT_EQ(first->buffer.size(), DiskTier::file_slot_bytes(kSlot));
  EXPECT_EQ(first->offset, block_file::kHeaderSize);
  const char* const slot = first->data();
  first.reset();  // given back
  auto second = tier.get(BlockId{id, 1, kSlot});
  ASSERT_TRUE(second);
  EXPECT_EQ(second->view(), pattern(1, kSlot));
  EXPECT_EQ(second->data(), slot);  // the same memory, refilled

  // In the memory tier, a pooled block is kept and counted as any other.
  MemoryTier memory(4 * kSlot);
  memory.put(BlockId{id, 1, kSlot}, *second);
  EXPECT_EQ(memory.pinned_bytes(), DiskTier::file_slot_bytes(kSlot));
  EXPECT_EQ(memory.get(BlockId{id, 1, kSlot})->view(), pattern(1, kSlot));

  auto last = tier.get(BlockId{id, 2, 1000});
  ASSERT_TRUE(last);
  EXPECT_EQ(last->view(), pattern(2, 1000));
  EXPECT_FALSE(tier.get(BlockId{id, 3, kSlot}));           // absent
  EXPECT_FALSE(tier.get(BlockId{id, 2, kSlot}));           // another length: not this block
  EXPECT_FALSE(tier.get(BlockId{id, 0, kSlot - 1}));       // the same, through the string path
}

// A block a reader holds keeps its slot: however many blocks the tier reads and lets go of
// meanwhile, none is read into the held block's memory, and the held bytes stay the block's.
// Only when the last holder lets go does the slot go back for another block.
TEST(DiskTier, ABlockHeldByAReaderKeepsItsSlotWhileOtherBlocksComeAndGo) {
  TempDir tmp;
  auto cache = BlockCache::open(CacheOptions{.dir = tmp.str(), .env = &Env::real()});
  ASSERT_TRUE(cache.ok()) << cache.status().message();
  const std::string id = "sha256:" + std::string(64, 'f');
  constexpr size_t kBlock = 64 << 10;
  constexpr uint64_t kBlocks = 70;  // slots of more than two regions (30 to a 2 MiB region)
  for (uint64_t b = 0; b < kBlocks; ++b) (*cache)->put(id, b, pattern(b, kBlock));
  DiskTier tier(**cache, kBlock);

  auto held = tier.get(BlockId{id, 0, kBlock});
  ASSERT_TRUE(held);
  const char* const held_slot = held->buffer.data();
  auto inside_held = [&](const BlockBytes& other) {
    return other.buffer.data() < held_slot + held->buffer.size() &&
           held_slot < other.buffer.data() + other.buffer.size();
  };
  // One at a time, each let go of at once: the slots are reused, the held one never.
  for (int round = 0; round < 3; ++round) {
    for (uint64_t b = 1; b < kBlocks; ++b) {
      auto other = tier.get(BlockId{id, b, kBlock});
      ASSERT_TRUE(other);
      EXPECT_FALSE(inside_held(*other)) << "block " << b;
      EXPECT_EQ(other->view(), pattern(b, kBlock));
    }
  }
  // All held at once: every one in memory of its own.
  std::vector<BlockBytes> all;
  for (uint64_t b = 1; b < kBlocks; ++b) {
    auto other = tier.get(BlockId{id, b, kBlock});
    ASSERT_TRUE(other);
    EXPECT_FALSE(inside_held(*other));
    for (const auto& earlier : all) EXPECT_NE(earlier.buffer.data(), other->buffer.data());
    all.push_back(*other);
  }
  for (uint64_t b = 1; b < kBlocks; ++b) EXPECT_EQ(all[b - 1].view(), pattern(b, kBlock));
  EXPECT_EQ(held->view(), pattern(0, kBlock));
  // A copy of the held block keeps the slot when the first holder goes.
  BlockBytes copy = *held;
  held.reset();
  auto next = tier.get(BlockId{id, 1, kBlock});
  ASSERT_TRUE(next);
  EXPECT_NE(next->buffer.data(), held_slot);
  EXPECT_EQ(copy.view(), pattern(0, kBlock));
  // Let go of by every holder: the slot is the next one lent.
  next.reset();
  all.clear();
  copy = BlockBytes();
  bool reused = false;
  std::vector<BlockBytes> again;
  for (uint64_t b = 1; b < kBlocks && !reused; ++b) {
    auto other = tier.get(BlockId{id, b, kBlock});
    ASSERT_TRUE(other);
    reused = other->buffer.data() == held_slot;
    again.push_back(*other);
  }
  EXPECT_TRUE(reused);
}

}  // namespace HUBFS_UNITY_ID
}  // namespace hubfs
