// The FUSE session's worker threads: our own loop over libfuse's receive and process calls, in
// place of fuse_session_loop_mt().
//
// Why not libfuse's loop: it ends by cancelling (pthread_cancel) every worker blocked on the
// device and joining the rest. With persistent workers that is up to kFuseThreads cancellations
// at each stop, and under ThreadSanitizer a daemon stopped mid-stream outlived a lazy unmount by
// more than 30 s (LifecycleTest.UnmountOrSignalDuringStreamingExitsPromptly, session 38). Its
// older entry point, which the 3.2 API names, kept few workers only by starting and ending a
// thread for every request (docs/benchmarks.md, session 38). This loop keeps every worker it
// starts and ends them without cancellation.
//
// Contract:
// - run_session_loop() serves `session` on the calling thread's behalf with up to max_threads
//   workers: one at first, another whenever every started worker is busy with a request.
// - It returns once the session has exited and every worker has returned: 0 when the kernel ended
//   the connection (an unmount: the device read ENODEV) or fuse_session_exit() was called (the
//   signal handlers of fuse_set_signal_handlers()), or the negative errno of a failed device read
//   (-ECONNABORTED: the connection was aborted).
// - A worker busy in a handler is waited for, not interrupted: a handler's own system calls never
//   see the wake-up signal (it is blocked outside the device read).
// - Workers block SIGTERM, SIGINT, SIGHUP and SIGQUIT (as libfuse's do), so those reach the
//   caller's thread or another that takes them; the caller's thread notices an exit within
//   kExitPoll even when another thread ran the handler.
// - Uses SIGUSR2 inside the process (a no-op handler, installed on the first call) to wake a
//   worker blocked in the device read. Not reentrant: one session per process at a time.
#pragma once

struct fuse_session;

namespace hubfs {

int run_session_loop(fuse_session* session, unsigned max_threads);

}  // namespace hubfs
