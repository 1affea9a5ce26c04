// The FUSE adapter: libfuse's low-level callbacks, each translating one kernel request into a
// FileSystem call (core/fs) and its answer into the reply. No filesystem logic lives here.
#pragma once

#define FUSE_USE_VERSION 35
#include <fuse_lowlevel.h>

#include <cstdint>

namespace hubfs {

// The operations table; the session's userdata must be an FsApi* (fs/fs_api.h).
const fuse_lowlevel_ops& fuse_operations();

// The read requests the kernel sent (answered with data) and their bytes, since the process
// started: process-wide, as a daemon serves one mount.
struct KernelReadStats {
  uint64_t reads = 0;
  uint64_t bytes = 0;
};
KernelReadStats kernel_read_stats();

}  // namespace hubfs
