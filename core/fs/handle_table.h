// The open handles of a FileSystem: open files and open directories by the number the kernel
// holds for them (fuse_file_info::fh). One counter numbers both kinds, so a number names one
// handle of either kind.
//
// Guards: the counter and the two maps, under mu_.
// Threads: every method is thread-safe. Entries are shared: a release may come while a read of
// the same handle still runs on another thread (the kernel orders them, invisibly to
// ThreadSanitizer), so a lookup hands out its own reference.
// Lock order: mu_ is a leaf, held only to number, find or drop an entry; nothing else is taken
// under it and no entry's work runs under it.
#pragma once

#include <cstdint>
#include <memory>
#include <mutex>
#include <unordered_map>

namespace hubfs {

template <class File, class Dir>
class HandleTable {
 public:
  HandleTable() = default;
  // Under the lock: the threads that last touched the table were joined inside libfuse, an
  // ordering ThreadSanitizer cannot see; the lock shows it.
  ~HandleTable() { clear(); }
  HandleTable(const HandleTable&) = delete;
  HandleTable& operator=(const HandleTable&) = delete;

  // A new number (never 0) for `file` / `dir`.
  uint64_t add_file(std::shared_ptr<File> file) {
    std::lock_guard<std::mutex> lock(mu_);
    const uint64_t id = next_++;
    files_.emplace(id, std::move(file));
    return id;
  }
  uint64_t add_dir(std::shared_ptr<Dir> dir) {
    std::lock_guard<std::mutex> lock(mu_);
    const uint64_t id = next_++;
    dirs_.emplace(id, std::move(dir));
    return id;
  }

  // The entry of `handle`, or null if it is not an open file / directory.
  std::shared_ptr<File> file(uint64_t handle) const {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = files_.find(handle);
    return it == files_.end() ? nullptr : it->second;
  }
  std::shared_ptr<Dir> dir(uint64_t handle) const {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = dirs_.find(handle);
    return it == dirs_.end() ? nullptr : it->second;
  }

  // Forgets `handle` (nothing if it is not open): a reader holding the entry keeps it.
  void remove_file(uint64_t handle) {
    std::lock_guard<std::mutex> lock(mu_);
    files_.erase(handle);
  }
  void remove_dir(uint64_t handle) {
    std::lock_guard<std::mutex> lock(mu_);
    dirs_.erase(handle);
  }

  // Forgets every handle (the mount is going).
  void clear() {
    std::lock_guard<std::mutex> lock(mu_);
    files_.clear();
    dirs_.clear();
  }

 private:
  mutable std::mutex mu_;
  uint64_t next_ = 1;
  std::unordered_map<uint64_t, std::shared_ptr<File>> files_;
  std::unordered_map<uint64_t, std::shared_ptr<Dir>> dirs_;
};

}  // namespace hubfs
