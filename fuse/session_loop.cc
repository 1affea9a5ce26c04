#include "session_loop.h"

#include <pthread.h>
#include <signal.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <condition_variable>
#include <cstdlib>
#include <list>
#include <mutex>
#include <string>
#include <system_error>
#include <thread>

#include "common/log.h"
#include "fuse_ops.h"  // FUSE_USE_VERSION, then <fuse_lowlevel.h>

namespace hubfs {
namespace {

using namespace std::chrono_literals;

// Interrupts a worker's device read (EINTR), so that it looks at the session's exit flag.
constexpr int kWakeSignal = SIGUSR2;
// How often the loop's thread looks at the exit flag while it waits (a signal handled on another
// thread sets it without waking this one), and how often it repeats the wake-up to a worker that
// has not returned (one that was between its exit check and its device read when woken).
constexpr auto kExitPoll = 100ms;
constexpr auto kWakeRepeat = 10ms;

void on_wake(int) {}

void install_wake_handler() {
  static std::once_flag once;
  std::call_once(once, [] {
    struct sigaction sa {};
    sa.sa_handler = on_wake;
    sigemptyset(&sa.sa_mask);
    sa.sa_flags = 0;  // no SA_RESTART: the device read must return EINTR, not resume
    sigaction(kWakeSignal, &sa, nullptr);
  });
}

sigset_t signal_set(std::initializer_list<int> signals) {
  sigset_t set;
  sigemptyset(&set);
  for (int s : signals) sigaddset(&set, s);
  return set;
}

class SessionLoop {
 public:
  SessionLoop(fuse_session* session, unsigned max_threads)
      : session_(session), max_threads_(max_threads ? max_threads : 1) {}

  int run() {
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (!start_worker_locked()) return -EAGAIN;
    }
    {
      std::unique_lock<std::mutex> lock(mu_);
      while (!fuse_session_exited(session_)) exited_.wait_for(lock, kExitPoll);
      stopping_ = true;  // no worker starts another from here on
    }
    // Wake every worker still blocked in the device read; again, until each has returned. A
    // worker in a handler has the signal blocked: it finishes the request, then sees the flag.
    for (;;) {
      bool all_returned = true;
      {
        std::lock_guard<std::mutex> lock(mu_);
        for (Worker& w : workers_) {
          if (w.returned.load(std::memory_order_acquire)) continue;
          all_returned = false;
          pthread_kill(w.thread.native_handle(), kWakeSignal);
        }
      }
      if (all_returned) break;
      std::this_thread::sleep_for(kWakeRepeat);
    }
    for (Worker& w : workers_) w.thread.join();
    log_debug("the FUSE loop ended; it had " + std::to_string(workers_.size()) + " workers");
    return error_.load();
  }

 private:
  struct Worker {
    std::thread thread;
    std::atomic<bool> returned{false};
  };

  // Starts one more worker (mu_ held); false if the system refused a thread.
  bool start_worker_locked() {
    // A new thread inherits this mask: the stop signals go to other threads (as libfuse's workers
    // do), and the wake-up only ever interrupts the device read (work() unblocks it there).
    const sigset_t blocked = signal_set({SIGTERM, SIGINT, SIGHUP, SIGQUIT, kWakeSignal});
    sigset_t old;
    pthread_sigmask(SIG_BLOCK, &blocked, &old);
    Worker& w = workers_.emplace_back();
    bool started = true;
    try {
      w.thread = std::thread([this, &w] { work(w); });
      ++idle_;
    } catch (const std::system_error& e) {
      workers_.pop_back();
      started = false;
      log_warning(std::string("cannot start a FUSE worker thread: ") + e.what() + "; serving with " +
                  std::to_string(workers_.size()));
    }
    pthread_sigmask(SIG_SETMASK, &old, nullptr);
    return started;
  }

  void work(Worker& w) {
    const sigset_t wake = signal_set({kWakeSignal});
    fuse_buf buf{};
    while (!fuse_session_exited(session_)) {
      pthread_sigmask(SIG_UNBLOCK, &wake, nullptr);
      const int res = fuse_session_receive_buf(session_, &buf);
      pthread_sigmask(SIG_BLOCK, &wake, nullptr);
      if (res == -EINTR || res == -EAGAIN) continue;
      if (res <= 0) {  // 0: the connection ended (libfuse has set the exit flag); < 0: an error
        if (res < 0) {
          int none = 0;
          error_.compare_exchange_strong(none, res);
        }
        fuse_session_exit(session_);
        break;
      }
      {
        std::lock_guard<std::mutex> lock(mu_);
        if (--idle_ == 0 && workers_.size() < max_threads_ && !stopping_) start_worker_locked();
      }
      fuse_session_process_buf(session_, &buf);
      std::lock_guard<std::mutex> lock(mu_);
      ++idle_;
    }
    free(buf.mem);
    std::lock_guard<std::mutex> lock(mu_);
    w.returned.store(true, std::memory_order_release);
    exited_.notify_all();
  }

  fuse_session* const session_;
  const unsigned max_threads_;
  std::atomic<int> error_{0};  // the first failed device read's -errno
  std::mutex mu_;              // guards the members below
  std::condition_variable exited_;
  std::list<Worker> workers_;  // a list: a worker's address stays put while others start
  unsigned idle_ = 0;          // workers waiting for a request
  bool stopping_ = false;
};

}  // namespace

int run_session_loop(fuse_session* session, unsigned max_threads) {
  install_wake_handler();
  return SessionLoop(session, max_threads).run();
}

}  // namespace hubfs
