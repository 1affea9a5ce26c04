// The blocks read-ahead is fetching, or fetched, that no read has consumed yet: the kernel's
// PG_readahead marker, per block. BlockReader marks every block its read-ahead claims to fetch;
// the first read of a marked block takes the mark, which lets that read continue the stream
// (ReadFacts::marked) and counts the block's fetched bytes as used. A block read from memory or
// disk by a read, or brought by a hint, carries no mark, so a warm read never continues a fetch;
// and a mark is taken once, so a second pass over the same blocks does not either.
//
// A mark lives through three steps, any of which a read may overtake: claimed (read-ahead took
// the block's flight), then fetching (its request goes out: the bytes are known) or forgotten
// (a cache below memory had it: no fetch, no waste). A read that takes the mark of a block still
// only claimed leaves a note, and the fetch that follows counts its bytes as used at once.
//
// What is fetched and never taken is read-ahead's waste: ReaderStats::read_ahead_bytes minus
// read_ahead_used_bytes. Bounded by max_marks: past it the table is cleared (those blocks then
// count as waste, and a stream reading them continues at its next miss instead).
//
// Thread-safe; one mutex, a leaf.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <mutex>
#include <string>
#include <unordered_map>

namespace hubfs {

class ReadAheadMarks {
 public:
  explicit ReadAheadMarks(size_t max_marks) : max_marks_(max_marks) {}

  // Read-ahead claimed the block `key`.
  void claim(const std::string& key) {
    std::lock_guard<std::mutex> lock(mu_);
    if (marks_.size() >= max_marks_) marks_.clear();
    marks_[key] = Mark{};
    size_.store(marks_.size(), std::memory_order_relaxed);
  }
  // Read-ahead is fetching the claimed block's `bytes`. Returns the bytes a read already consumed
  // (it took the mark while the block was only claimed), else 0.
  uint64_t fetching(const std::string& key, uint64_t bytes) {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = marks_.find(key);
    if (it == marks_.end()) return 0;
    if (it->second.taken) {
      erase(it);
      return bytes;
    }
    it->second.bytes = bytes;
    return 0;
  }
  // A cache below memory had the block: no fetch to count.
  void forget(const std::string& key) {
    if (size_.load(std::memory_order_relaxed) == 0) return;
    std::lock_guard<std::mutex> lock(mu_);
    if (auto it = marks_.find(key); it != marks_.end()) erase(it);
  }
  // A read of the block: true if it took the block's mark; *used_bytes: the fetched bytes it
  // consumed (0 while the block is only claimed).
  bool take(const std::string& key, uint64_t* used_bytes) {
    *used_bytes = 0;
    if (size_.load(std::memory_order_relaxed) == 0) return false;  // the warm case: no lock
    std::lock_guard<std::mutex> lock(mu_);
    auto it = marks_.find(key);
    if (it == marks_.end() || it->second.taken) return false;
    if (it->second.bytes == 0) {
      it->second.taken = true;
      return true;
    }
    *used_bytes = it->second.bytes;
    erase(it);
    return true;
  }
  size_t size() const { return size_.load(std::memory_order_relaxed); }

 private:
  struct Mark {
    uint64_t bytes = 0;  // 0: claimed, not yet fetching
    bool taken = false;  // a read took the mark before the fetch began
  };
  void erase(std::unordered_map<std::string, Mark>::iterator it) {
    marks_.erase(it);
    size_.store(marks_.size(), std::memory_order_relaxed);
  }

  const size_t max_marks_;
  std::mutex mu_;
  std::unordered_map<std::string, Mark> marks_;
  std::atomic<size_t> size_{0};
};

}  // namespace hubfs
