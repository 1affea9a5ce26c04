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

// A point a disk call passes: while closed, callers wait there until open() (at most `bound`
// once: then it opens by itself, so a broken test fails rather than hangs).
class Gate {
 public:
  explicit Gate(std::chrono::seconds bound) : bound_(bound) {}
  void close() {
    std::lock_guard<std::mutex> lock(mu_);
    closed_ = true;
  }
  void open() {
    {
      std::lock_guard<std::mutex> lock(mu_);
      closed_ = false;
    }
    cv_.notify_all();
  }
  int waiting() {
    std::lock_guard<std::mutex> lock(mu_);
    return waiting_;
  }
  void pass() {
    std::unique_lock<std::mutex> lock(mu_);
    if (!closed_) return;
    ++waiting_;
    if (!cv_.wait_for(lock, bound_, [this] { return !closed_; })) closed_ = false;
    --waiting_;
  }

 private:
  const std::chrono::seconds bound_;
  std::mutex mu_;
  std::condition_variable cv_;
  bool closed_ = false;
  int waiting_ = 0;
};

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
    read_gate_.pass();  // the read is done: a closed gate holds its caller with the bytes in hand
    return read;
  }
  // While closed, read_file_split returns only at open_read_gate() (at most 30 s once).
  void close_read_gate() { read_gate_.close(); }
  void open_read_gate() { read_gate_.open(); }
  int reads_waiting() { return read_gate_.waiting(); }
  using CacheDisk::write_new_file;
  Status write_new_file(const std::string& path, std::string_view head, std::string_view body) override {
    write_gate_.pass();
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
    remove_gate_.pass();
    return real_->remove(path);
  }
  // While closed, remove waits for open_remove_gate() (at most 30 s once).
  void close_remove_gate() { remove_gate_.close(); }
  void open_remove_gate() { remove_gate_.open(); }
  int removes_waiting() { return remove_gate_.waiting(); }
  Status touch(const std::string& path) override {
    ++touches_;
    Status s = real_->touch(path);
    if (s.ok()) stamp(path);
    return s;
  }
  // While closed, list_files waits for open_gate() (at most 10 s once).
  void close_gate() { list_gate_.close(); }
  void open_gate() { list_gate_.open(); }
  int lists_completed() const { return lists_completed_.load(); }
  // While closed, write_new_file waits for open_write_gate() (at most 10 s once).
  void close_write_gate() { write_gate_.close(); }
  void open_write_gate() { write_gate_.open(); }

  Result<std::vector<DiskEntry>> list_files(const std::string& dir) override {
    list_gate_.pass();
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
  Gate list_gate_{std::chrono::seconds(10)};
  Gate write_gate_{std::chrono::seconds(10)};
  Gate read_gate_{std::chrono::seconds(30)};
  Gate remove_gate_{std::chrono::seconds(30)};
  std::atomic<int> lists_completed_{0};
  std::atomic<bool> fake_clock_{false};
  std::atomic<int64_t> clock_{1'000'000};  // well in the past, far from any real mtime
  std::atomic<int> touches_{0};
  std::atomic<int> write_attempts_{0};
};

}  // namespace hubfs::testing
