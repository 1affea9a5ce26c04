// The worker threads of one open file, shared by its reads: started on the first read that hands
// work out, kept until the file is closed, so a read costs no thread creation (it did: threads - 1
// spawned and joined per read). Never touches HDF5: helpers only pread and decode (see
// docs/hdf5-formats.md section 6); the calling thread keeps making every HDF5 call of a read.
//
// Several reads of one file may run at once: each asks for up to n helpers, and takes those the
// pool can give. A read never waits for a helper to start: join() waits only for the ones that
// started (the read's caller does the rest of the work itself, as it always did when its queue
// was full), and those that had not started run nothing. A process forked from one with a pool
// starts a pool of its own (the threads do not survive fork).
#pragma once

#include <sys/types.h>

#include <condition_variable>
#include <functional>
#include <memory>
#include <mutex>

#include "common/task_queue.h"

namespace h5chunk {

class HelperPool {
 public:
  // One read's helpers.
  class Run {
   public:
    ~Run() { join(); }
    // Waits until every helper that started has returned; the others will not run fn.
    void join();

   private:
    friend class HelperPool;
    struct State {
      std::mutex mu;  // a leaf
      std::condition_variable idle_cv;
      int running = 0;
      bool joined = false;
    };
    std::shared_ptr<State> state_ = std::make_shared<State>();
  };

  // The pool's size once started: the most helpers any read of the file asks for. Before the
  // first start(); a start() asking for more starts at least that many.
  void set_threads(unsigned threads) { threads_ = threads; }
  // Runs fn on up to n helper threads.
  std::unique_ptr<Run> start(unsigned n, std::function<void()> fn);
  ~HelperPool();

 private:
  std::mutex mu_;  // a leaf: guards queue_ and pid_
  unsigned threads_ = 0;
  std::unique_ptr<hubfs::TaskQueue> queue_;
  pid_t pid_ = 0;  // the process queue_'s threads belong to
};

}  // namespace h5chunk
