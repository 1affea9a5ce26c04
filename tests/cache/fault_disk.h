// A CacheDisk for tests: forwards to the real disk, but can refuse or tear writes, refuse
// directories, and replace the wall clock on the files it renames or touches with a counter,
// so LRU order is decided by the test, not by timestamp resolution.
#pragma once

#include <fcntl.h>
#include <sys/stat.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <mutex>
#include <optional>

#include "cache/cache_disk.h"

namespace hubfs::testing {

class FaultDisk : public CacheDisk {
 public:
  enum class WriteFault { kNone, kRefuse, kTornHalfway, kRenameFails };

  FaultDisk() : real_(posix_disk()) {}

  void set_write_fault(WriteFault fault, Status status = IoError("No space left on device")) {
    std::lock_guard<std::mutex> lock(mu_);
    write_fault_ = fault;
    write_status_ = std::move(status);
  }
  void set_make_dirs_fault(std::optional<Status> status) {
    std::lock_guard<std::mutex> lock(mu_);
    make_dirs_status_ = std::move(status);
  }
  // From now on every renamed-into-place or touched file gets mtime = ++counter seconds.
  void use_fake_clock() { fake_clock_ = true; }
  int touches() const { return touches_.load(); }
  int write_attempts() const { return write_attempts_.load(); }

  Status make_dirs(const std::string& path, unsigned mode) override {
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (make_dirs_status_) return *make_dirs_status_;
    }
    return real_->make_dirs(path, mode);
  }
  Result<std::string> read_file(const std::string& path, uint64_t max_bytes) override {
    return real_->read_file(path, max_bytes);
  }
  Result<SplitFile> read_file_split(const std::string& path, uint64_t head_bytes,
                                    uint64_t max_bytes) override {
    auto read = real_->read_file_split(path, head_bytes, max_bytes);
    // The read is done: while the read gate is closed its caller is held with the bytes in hand.
    std::unique_lock<std::mutex> lock(mu_);
    if (read_gate_closed_) {
      ++reads_waiting_;
      if (!read_gate_cv_.wait_for(lock, std::chrono::seconds(30), [this] { return !read_gate_closed_; }))
        read_gate_closed_ = false;  // a broken test: let everything through after one wait
      --reads_waiting_;
    }
    return read;
  }
  // While closed, read_file_split returns only at open_read_gate() (at most 30 s once).
  void close_read_gate() {
    std::lock_guard<std::mutex> lock(mu_);
    read_gate_closed_ = true;
  }
  void open_read_gate() {
    {
      std::lock_guard<std::mutex> lock(mu_);
      read_gate_closed_ = false;
    }
    read_gate_cv_.notify_all();
  }
  int reads_waiting() {
    std::lock_guard<std::mutex> lock(mu_);
    return reads_waiting_;
  }
  using CacheDisk::write_new_file;
  Status write_new_file(const std::string& path, std::string_view head, std::string_view body) override {
    {
      std::unique_lock<std::mutex> lock(mu_);
      if (!write_gate_cv_.wait_for(lock, std::chrono::seconds(10), [this] { return !write_gate_closed_; }))
        write_gate_closed_ = false;  // a broken test: let everything through after one wait
    }
    ++write_attempts_;
    WriteFault fault;
    Status status;
    {
      std::lock_guard<std::mutex> lock(mu_);
      fault = write_fault_;
      status = write_status_;
    }
    if (fault == WriteFault::kRefuse) return status;
    if (fault == WriteFault::kTornHalfway) {
      // The first half reaches the disk, then the device fails: the cache must clean up.
      const std::string data = std::string(head) + std::string(body);
      Status s = real_->write_new_file(path, data.substr(0, data.size() / 2));
      return s.ok() ? status : s;
    }
    return real_->write_new_file(path, head, body);
  }
  Status rename(const std::string& from, const std::string& to) override {
    bool fail;
    {
      std::lock_guard<std::mutex> lock(mu_);
      fail = write_fault_ == WriteFault::kRenameFails;
    }
    if (fail) return IoError("rename refused by the test");
    Status s = real_->rename(from, to);
    if (s.ok()) stamp(to);
    return s;
  }
  Status remove(const std::string& path) override {
    {
      std::unique_lock<std::mutex> lock(mu_);
      if (remove_gate_closed_) {
        ++removes_waiting_;
        if (!remove_gate_cv_.wait_for(lock, std::chrono::seconds(30), [this] { return !remove_gate_closed_; }))
          remove_gate_closed_ = false;  // a broken test: let everything through after one wait
        --removes_waiting_;
      }
    }
    return real_->remove(path);
  }
  // While closed, remove waits for open_remove_gate() (at most 30 s once, as below).
  void close_remove_gate() {
    std::lock_guard<std::mutex> lock(mu_);
    remove_gate_closed_ = true;
  }
  void open_remove_gate() {
    {
      std::lock_guard<std::mutex> lock(mu_);
      remove_gate_closed_ = false;
    }
    remove_gate_cv_.notify_all();
  }
  int removes_waiting() {
    std::lock_guard<std::mutex> lock(mu_);
    return removes_waiting_;
  }
  Status touch(const std::string& path) override {
    ++touches_;
    Status s = real_->touch(path);
    if (s.ok()) stamp(path);
    return s;
  }
  // While closed, list_files waits for open_gate() (at most 10 s once, then the gate opens by
  // itself, so a broken test fails rather than hangs).
  void close_gate() {
    std::lock_guard<std::mutex> lock(mu_);
    gate_closed_ = true;
  }
  void open_gate() {
    {
      std::lock_guard<std::mutex> lock(mu_);
      gate_closed_ = false;
    }
    gate_cv_.notify_all();
  }
  int lists_completed() const { return lists_completed_.load(); }
  // While closed, write_new_file waits for open_write_gate() (at most 10 s once, as above).
  void close_write_gate() {
    std::lock_guard<std::mutex> lock(mu_);
    write_gate_closed_ = true;
  }
  void open_write_gate() {
    {
      std::lock_guard<std::mutex> lock(mu_);
      write_gate_closed_ = false;
    }
    write_gate_cv_.notify_all();
  }

  Result<std::vector<DiskEntry>> list_files(const std::string& dir) override {
    {
      std::unique_lock<std::mutex> lock(mu_);
      if (!gate_cv_.wait_for(lock, std::chrono::seconds(10), [this] { return !gate_closed_; }))
        gate_closed_ = false;  // a broken test: let everything through after one wait
    }
    auto listed = real_->list_files(dir);
    ++lists_completed_;
    return listed;
  }

  // Sets a file's mtime to `seconds` after the epoch.
  static void set_mtime(const std::string& path, int64_t seconds) {
    struct timespec times[2] = {{0, UTIME_OMIT}, {static_cast<time_t>(seconds), 0}};
    ::utimensat(AT_FDCWD, path.c_str(), times, 0);
  }

 private:
  void stamp(const std::string& path) {
    if (fake_clock_) set_mtime(path, ++clock_);
  }

  std::shared_ptr<CacheDisk> real_;
  std::mutex mu_;
  WriteFault write_fault_ = WriteFault::kNone;
  Status write_status_;
  std::optional<Status> make_dirs_status_;
  bool gate_closed_ = false;
  std::condition_variable gate_cv_;
  bool write_gate_closed_ = false;
  std::condition_variable write_gate_cv_;
  bool read_gate_closed_ = false;
  int reads_waiting_ = 0;
  std::condition_variable read_gate_cv_;
  bool remove_gate_closed_ = false;
  int removes_waiting_ = 0;
  std::condition_variable remove_gate_cv_;
  std::atomic<int> lists_completed_{0};
  std::atomic<bool> fake_clock_{false};
  std::atomic<int64_t> clock_{1'000'000};  // well in the past, far from any real mtime
  std::atomic<int> touches_{0};
  std::atomic<int> write_attempts_{0};
};

}  // namespace hubfs::testing
