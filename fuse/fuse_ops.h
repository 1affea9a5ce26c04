// The FUSE adapter: libfuse's low-level callbacks, each translating one kernel request into a
// FileSystem call (core/fs) and its answer into the reply. No filesystem logic lives here.
#pragma once

// 3.12: the API whose fuse_session_loop_mt() takes the fuse_loop_config that
// fuse_loop_cfg_create() makes. Below it the macro names fuse_session_loop_mt_32(), which reads
// that struct as the older two-field one: clone_fd from its version tag (on), max_idle_threads
// from its clone_fd (0: a thread started and ended for every request), and the default of 10
// threads (mount.cc, kFuseThreads; docs/benchmarks.md, session 38).
#define FUSE_USE_VERSION 312
#include <fuse_lowlevel.h>

#include <cstdint>

namespace hubfs {

// The operations table; the session's userdata must be an FsApi* (fs/fs_api.h).
const fuse_lowlevel_ops& fuse_operations();

// Call once the session loop has returned, before destroying the FileSystem: orders every
// handler's effects before the caller (see fuse_ops.cc).
void fuse_ops_quiesce();

// The read requests the kernel sent (answered with data) and their bytes, since the process
// started: process-wide, as a daemon serves one mount.
struct KernelReadStats {
  uint64_t reads = 0;
  uint64_t bytes = 0;
};
KernelReadStats kernel_read_stats();

}  // namespace hubfs
