// The mountpoint as the system sees it: what is mounted there, whether a FUSE mount there is
// dead (its daemon killed), clearing one, and the checks before mounting.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "common/status.h"

namespace hubfs {

// The absolute path of a directory that may itself be a dead mount (realpath of a dead FUSE
// mount fails with ENOTCONN): resolves its parent and appends the last component.
std::string absolute_mountpoint(const std::string& path);
// A hubfs mount listed in /proc/self/mountinfo (fstype fuse.hubfs).
struct HubfsMountEntry {
  std::string mountpoint;
  std::string source;  // the FUSE fsname, "hubfs:ORG/NAME"
};
// Every hubfs mount this process can see, in mount order.
std::vector<HubfsMountEntry> list_hubfs_mounts();
// Listed in /proc/self/mountinfo.
bool is_mount_point(const std::string& path);
// The mount's device ("0:53") as /proc/self/mountinfo lists it: read without touching the
// mount itself (a daemon stat-ing its own mount waits on itself, and if it is killed then, it
// cannot exit until the kernel aborts the connection).
std::optional<std::string> mount_device(const std::string& path);
// A FUSE mount whose daemon is gone (statfs answers ENOTCONN; a stat may still succeed from the
// kernel's attribute cache).
bool is_dead_fuse_mount(const std::string& path);
// Lazily detaches a mount (root), else asks fusermount3 to (a user's own FUSE mount).
Status detach_mount(const std::string& path);
// The checks that can fail before anything starts, each naming the cause and the fix; clears a
// dead hubfs mount left there. Returns the absolute mountpoint.
Result<std::string> check_mountpoint(const std::string& mountpoint, bool allow_nonempty);
// allow_other and allow_root as a user other than root need user_allow_other in /etc/fuse.conf
// (fusermount3 refuses them otherwise): refused here first, naming the file and the fix.
Status check_fuse_options_allowed(const std::vector<std::string>& fuse_options);
// `hubfs unmount`: unmounts (a dead mount is detached); returns the exit code, cause on stderr.
int run_unmount(const std::string& mountpoint);

}  // namespace hubfs
