#include "reader/file_epochs.h"

namespace hubfs {

uint64_t FileEpochs::current(std::string_view cache_id) const {
  std::lock_guard<std::mutex> lock(mu_);
  if (files_.empty()) return 0;
  auto it = files_.find(std::string(cache_id));
  return it == files_.end() ? 0 : it->second.epoch;
}

void FileEpochs::trim_locked(std::unordered_map<std::string, File>::iterator it) {
  if (it->second.epoch == 0 && !it->second.cleaning && it->second.accesses == 0) files_.erase(it);
}

bool FileEpochs::begin_cleanup(std::string_view cache_id, uint64_t failed_epoch) {
  std::unique_lock<std::mutex> lock(mu_);
  File& f = files_[std::string(cache_id)];
  if (f.epoch != failed_epoch || f.cleaning) {
    // Already moved on: that epoch's namespace is unreachable, its lower-tier blocks were (or
    // are being) cleaned by the failure that moved it.
    trim_locked(files_.find(std::string(cache_id)));
    return false;
  }
  ++f.epoch;
  f.cleaning = true;
  idle_.wait(lock, [&f] { return f.accesses == 0; });  // f stays: cleaning keeps it from trim
  return true;
}

void FileEpochs::end_cleanup(std::string_view cache_id) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = files_.find(std::string(cache_id));
  if (it != files_.end()) it->second.cleaning = false;
}

bool FileEpochs::enter(std::string_view cache_id, uint64_t epoch) {
  std::lock_guard<std::mutex> lock(mu_);
  auto [it, inserted] = files_.try_emplace(std::string(cache_id));
  File& f = it->second;
  if (f.cleaning || f.epoch != epoch) {
    if (inserted) files_.erase(it);
    return false;
  }
  ++f.accesses;
  return true;
}

void FileEpochs::leave(std::string_view cache_id) {
  bool wake = false;
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = files_.find(std::string(cache_id));
    if (it == files_.end()) return;
    --it->second.accesses;
    wake = it->second.cleaning && it->second.accesses == 0;
    trim_locked(it);
  }
  if (wake) idle_.notify_all();
}

}  // namespace hubfs
