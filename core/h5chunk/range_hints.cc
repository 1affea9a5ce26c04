#include "h5chunk/range_hints.h"

#include <sys/ioctl.h>

#include <memory>

#include "hubfs/range_hint.h"

namespace h5chunk {

bool send_range_hints(int fd, uint64_t file_size, const std::vector<std::pair<uint64_t, uint64_t>>& ranges) {
  auto hint = std::make_unique<hubfs_hint>();  // 16 KiB: not on the stack
  bool accepted = false;
  size_t i = 0;
  while (i < ranges.size()) {
    *hint = hubfs_hint{};
    hint->version = HUBFS_HINT_VERSION;
    for (; i < ranges.size() && hint->count < HUBFS_HINT_MAX_RANGES; ++i) {
      auto [offset, length] = ranges[i];
      // One bad range would make the whole hint invalid: leave such ranges to the reads, which
      // report them properly.
      if (length == 0 || offset >= file_size || length > file_size - offset) continue;
      hint->ranges[hint->count++] = {offset, length};
    }
    if (hint->count == 0) continue;
    if (::ioctl(fd, HUBFS_IOC_HINT, hint.get()) != 0) return accepted;  // not hubfs: stop asking
    accepted = true;
  }
  return accepted;
}

}  // namespace h5chunk
