// The one timer: runs functions after a delay, on one thread. Used for retry backoff.
//
// Shutdown semantics: shutdown() runs every function still waiting, at once, on the caller's
// thread (a retry waiting out its backoff then sees its owner stopping and answers with its
// last result), so nothing scheduled is ever dropped and nothing runs after shutdown returns.
// schedule() after shutdown runs nothing and returns false: the caller runs the function
// itself. shutdown() must not be called from a scheduled function (it would join itself).
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <mutex>
#include <queue>
#include <thread>
#include <vector>

namespace hubfs {

class Timer {
 public:
  using Clock = std::chrono::steady_clock;

  Timer();
  ~Timer();  // shutdown()
  Timer(const Timer&) = delete;
  Timer& operator=(const Timer&) = delete;

  bool schedule(std::chrono::milliseconds delay, std::function<void()> fn);
  void shutdown();

 private:
  struct Entry {
    Clock::time_point due;
    uint64_t seq;  // FIFO among equal deadlines
    std::function<void()> fn;
    bool operator>(const Entry& o) const { return due != o.due ? due > o.due : seq > o.seq; }
  };
  void run();

  std::mutex mu_;
  std::condition_variable cv_;
  std::priority_queue<Entry, std::vector<Entry>, std::greater<>> entries_;
  uint64_t next_seq_ = 0;
  bool stopped_ = false;
  std::thread thread_;
};

}  // namespace hubfs
