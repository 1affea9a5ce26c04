// The FUSE adapter: libfuse's low-level callbacks, each translating one kernel request into a
// FileSystem call (core/fs) and its answer into the reply. No filesystem logic lives here.
#pragma once

#define FUSE_USE_VERSION 35
#include <fuse_lowlevel.h>

namespace hubfs {

// The operations table; the session's userdata must be an FsApi* (fs/fs_api.h).
const fuse_lowlevel_ops& fuse_operations();

// Call once the session loop has returned, before destroying the FileSystem: orders every
// handler's effects before the caller (see fuse_ops.cc).
void fuse_ops_quiesce();

}  // namespace hubfs
