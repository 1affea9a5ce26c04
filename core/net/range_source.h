// A source of byte ranges of ONE file, other than the Hub's resolve + RangeFetcher: the reader
// sends a file's range requests here when its RemoteFile carries one (a Xet-stored file read
// natively from the storage service, core/xet/xet_source.h; chosen in core/fs).
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include "common/deadline.h"
#include "common/status.h"
#include "net/range_fetcher.h"

namespace hubfs {

class RangeSource {
 public:
  using Callback = RangeFetcher::Callback;
  virtual ~RangeSource() = default;

  // The contract of RangeFetcher::fetch_async for this source's file: returns at once; `done`
  // runs exactly once, on any thread but the caller's, with exactly range.length bytes, each
  // the file's own (never unchecked wrong bytes), or an error (kInvalidArgument for a range past
  // file_size; kTimeout once `deadline` passed). Thread-safe.
  virtual void fetch_async(uint64_t file_size, ByteRange range, Callback done, Deadline deadline) = 0;
};

// A file's range from its own source when it has one, else through the fetcher from `locate`,
// in `parts` requests (RangeFetcher::fetch_async). A source plans its own requests: `parts` is
// the fetcher's only (a Xet read already fetches a term's xorb ranges side by side).
inline void fetch_file_range(RangeFetcher& fetcher, const std::shared_ptr<RangeSource>& source, const Locator& locate,
                             uint64_t file_size, ByteRange range, RangeFetcher::Callback done, Deadline deadline,
                             uint32_t parts = 1) {
  if (source) {
    source->fetch_async(file_size, range, std::move(done), deadline);
  } else {
    fetcher.fetch_async(locate, file_size, range, std::move(done), deadline, parts);
  }
}

}  // namespace hubfs
