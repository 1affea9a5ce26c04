// Memory for blocks read from the disk cache, lent and taken back. A block read into fresh memory
// pays a page fault for each 4 KiB page (the kernel finds, zeroes and maps each): on a VM, most
// of a block's load from the disk cache, and most of what a fresh process spends opening HDF5
// files over hf:// (docs/benchmarks.md, "A training loop"). The pool carves blocks out of 2
// MiB-aligned regions (a run of 2 MiB pages the slots fill but for at most a sixteenth) it asks
// the kernel to back with transparent huge pages (one fault per 2 MiB where the system allows
// them: `madvise` or `always` in /sys/kernel/mm/transparent_hugepage/enabled; elsewhere plain
// pages, as before), and a block's memory comes back to the pool when its last holder lets go,
// for the next block, already mapped. Slots whose size is a multiple of 4 KiB are 4 KiB-aligned,
// as a direct read needs (the disk tier's: reader/disk_tier.h).
//
// Regions are never returned while the pool lives: what it holds is at most the most blocks
// held at once (the memory tier's budget and the reads under way). The pool lives while its
// owner (the DiskTier) or any lent block does. Thread-safe. A block let go of in a forked child
// (the parent's, made before the fork) is not given back: the child never takes the parent's
// lock, which another thread of the parent may have held at the fork.
//
// Regions stay out of forked children (MADV_DONTFORK): a child must never read the bytes of a
// block made before the fork (every object that holds one refuses to work in a child: the
// Python bindings' pid checks; the mount forks before it reads). Shared, they made the parent pay
// a copy-on-write fault for every page it wrote after the fork: a training loop forks its loader
// workers each epoch, and the planner's transport thread, filling reused slots, spent a fifth of
// its CPU copying pages and splitting huge pages (docs/benchmarks.md, session 37).
#pragma once

#include <sys/types.h>

#include <cstddef>
#include <memory>
#include <mutex>
#include <optional>
#include <vector>

#include "reader/block_tier.h"

namespace hubfs {

class BlockBufferPool : public std::enable_shared_from_this<BlockBufferPool> {
 public:
  // Each block lent is slot_bytes long.
  static std::shared_ptr<BlockBufferPool> create(size_t slot_bytes);
  ~BlockBufferPool();
  BlockBufferPool(const BlockBufferPool&) = delete;
  BlockBufferPool& operator=(const BlockBufferPool&) = delete;

  // slot_bytes of memory, writable until handed on as `bytes` (the SharedBytes owns the slot:
  // the last copy of it to go gives the slot back). Nothing when the system has no memory to map.
  struct Loan {
    char* data = nullptr;
    SharedBytes bytes;  // all slot_bytes of it
  };
  std::optional<Loan> take();

  size_t slot_bytes() const { return slot_bytes_; }
  // Slots mapped so far, and of them those not lent (tests; nothing else needs them).
  size_t slots() const;
  size_t free_slots() const;

 private:
  explicit BlockBufferPool(size_t slot_bytes);
  void give_back(char* slot);

  const size_t slot_bytes_;
  const size_t region_bytes_;  // a multiple of 2 MiB (region_bytes_for in the .cc)
  const pid_t owner_pid_;      // the process whose pool this is
  mutable std::mutex mu_;
  std::vector<char*> free_;
  std::vector<char*> regions_;
  size_t slots_ = 0;
};

}  // namespace hubfs
