// Tells a hubfs mount which byte ranges a read is about to fetch (include/hubfs/range_hint.h),
// so all of them go out at once as parallel range requests however few workers read them. On
// any other filesystem the ioctl fails harmlessly and nothing changes.
#pragma once

#include <cstdint>
#include <utility>
#include <vector>

namespace h5chunk {

// Sends the ranges (offset, length) in as few hints as fit; ranges of length 0 or past
// file_size are left out. Returns whether the filesystem accepted them (a hubfs mount).
bool send_range_hints(int fd, uint64_t file_size, const std::vector<std::pair<uint64_t, uint64_t>>& ranges);

// The ranges of which the kernel's page cache lacks a page (all of them where the kernel cannot
// say: cachestat(2) is Linux 6.5+). On a hubfs mount a page the kernel holds is read without the
// daemon (its files are opened with keep_cache), so hinting it would only make the daemon load
// its blocks for reads that never come.
std::vector<std::pair<uint64_t, uint64_t>> ranges_not_in_page_cache(
    int fd, const std::vector<std::pair<uint64_t, uint64_t>>& ranges);

}  // namespace h5chunk
