// Which blocks' mtimes were touched lately: the block cache's hit-throttle table.
//
// A cache hit refreshes the block file's mtime (the LRU clock), but at most once per interval
// per block, since a metadata write on every read would cost more than the read. This table
// remembers when each block (by Location::touch_key) was last touched or written. Its size is
// bounded: past the bound, entries older than the interval are dropped, and if that is not
// enough the table is cleared, which costs extra touches, never correctness. Entries are never
// removed on eviction: a stale one only skips a touch of a block re-written (so fresh) meanwhile.
//
// Thread-safe; one mutex, a leaf (DiskBlockCache's lock order: after its eviction-pass lock,
// never held across disk I/O or while taking another lock). Time is the caller's (the cache's
// Env), so the table itself reads no clock.
#pragma once

#include <cstddef>
#include <cstdint>
#include <mutex>
#include <unordered_map>

#include "common/deadline.h"

namespace hubfs {

class TouchThrottle {
 public:
  using time_point = MonotonicClock::time_point;
  using duration = MonotonicClock::duration;

  TouchThrottle(duration interval, size_t max_tracked) : interval_(interval), max_tracked_(max_tracked) {}

  // Whether `key`'s file should be touched at `now` (not touched or written within the
  // interval); if so, records `now` as its last touch, so concurrent hits touch it once.
  bool should_touch(uint64_t key, time_point now);
  // `key`'s file was just written: its mtime is `now`, so no touch is needed for a while.
  void note_written(uint64_t key, time_point now);
  size_t tracked() const;

 private:
  void remember_locked(uint64_t key, time_point now);

  const duration interval_;
  const size_t max_tracked_;
  mutable std::mutex mu_;  // guards last_touch_
  std::unordered_map<uint64_t, time_point> last_touch_;
};

}  // namespace hubfs
