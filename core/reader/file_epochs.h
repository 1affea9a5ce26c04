// A file's content epoch: how many times its content failed its whole-file hash in this process
// (0: never). Everything a reader keeps in memory is named by (content, epoch) (see
// BlockReader::memory_id): when a hash fails, the epoch moves and every block, flight and hash of
// the old epoch becomes unreachable to reads that start afterwards, at once, whatever is still
// running on its behalf. Handles opened before the failure see the epoch move and get errors
// (BlockReader::check_epoch).
//
// The tiers below memory (the disk cache, the shared tier) outlive an epoch and must be cleaned
// instead: a failure's cleanup removes the file's blocks from them. This class makes that cleanup
// exclusive, so that no bad block survives it and no read of the new epoch finds one before it
// is over:
// - every access to the lower tiers for a file (a lookup, a write-back) happens inside
//   enter()/leave() for the epoch its blocks belong to, and enter() refuses (a miss, a skipped
//   write) while the file is being cleaned or once its epoch has moved past that one;
// - begin_cleanup() moves the epoch and closes the file's lower tiers, then waits for the
//   accesses under way to leave; end_cleanup() opens them again for the new epoch.
// So every write of the old epoch either landed before the cleanup's removals or never happens,
// and every read of the new epoch comes after them.
//
// Thread-safe; one mutex, a leaf (nothing is called while it is held). begin_cleanup() waits for
// accesses, which only do disk and shared-tier I/O: never call it from inside enter()/leave().
#pragma once

#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <string>
#include <string_view>
#include <unordered_map>

namespace hubfs {

class FileEpochs {
 public:
  // The file's epoch now (moved by begin_cleanup, before its cleanup runs).
  uint64_t current(std::string_view cache_id) const;

  // The hash of `failed_epoch`'s bytes failed. When that is the current epoch: moves it, closes
  // the file's lower tiers, waits for their accesses under way, and returns true (the caller
  // removes the file's blocks from them, then calls end_cleanup). An older epoch's failure (a
  // late hash of a namespace already left behind) moves nothing: false, nothing to clean below.
  bool begin_cleanup(std::string_view cache_id, uint64_t failed_epoch);
  void end_cleanup(std::string_view cache_id);

  // Access to the file's lower tiers for blocks of `epoch`: false while the file is being cleaned
  // or once its epoch is past `epoch` (skip the access); true: call leave() after it.
  bool enter(std::string_view cache_id, uint64_t epoch);
  void leave(std::string_view cache_id);

  // enter() and leave() as a scope.
  class Access {
   public:
    Access(FileEpochs& epochs, std::string_view cache_id, uint64_t epoch)
        : epochs_(epochs), cache_id_(cache_id), granted_(epochs.enter(cache_id, epoch)) {}
    ~Access() {
      if (granted_) epochs_.leave(cache_id_);
    }
    Access(const Access&) = delete;
    Access& operator=(const Access&) = delete;
    bool granted() const { return granted_; }

   private:
    FileEpochs& epochs_;
    std::string_view cache_id_;
    bool granted_;
  };

 private:
  struct File {
    uint64_t epoch = 0;
    bool cleaning = false;
    uint64_t accesses = 0;  // enter() without leave() yet
  };
  // Drops a record that says nothing (epoch 0, idle), so the map holds only files with accesses
  // under way or a failure behind them.
  void trim_locked(std::unordered_map<std::string, File>::iterator it);

  mutable std::mutex mu_;  // a leaf
  std::condition_variable idle_;  // an access left while a cleanup waits
  std::unordered_map<std::string, File> files_;  // by cache id
};

}  // namespace hubfs
