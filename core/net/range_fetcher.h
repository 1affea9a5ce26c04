// Fetches byte ranges of one remote file, many at a time, and checks every answer.
//
// Every range that comes back holds exactly the bytes asked for or is an error: a 206 must carry
// a Content-Range equal to the request and a body of exactly that length; a 200 (a server that
// ignored Range) is sliced only when it is provably the whole file, never taken as the range.
// A 403 from a signed URL asks the Locator for a fresh location once, then tries again.
// Transient failures are retried by the transport (see RetryingTransport), not here.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "common/http.h"
#include "common/status.h"

namespace hubfs {

struct ByteRange {
  uint64_t offset = 0;
  uint64_t length = 0;
  bool operator==(const ByteRange&) const = default;
};

// Where one file can be read from; refresh=true means the last location answered 403 (expired).
using Locator = std::function<Result<Location>(bool refresh)>;

class RangeFetcher {
 public:
  using Callback = std::function<void(Result<std::string>)>;

  explicit RangeFetcher(HttpTransport& transport) : transport_(transport) {}

  // Starts fetching `range` of a file of `file_size` bytes; `done` runs once with exactly
  // range.length bytes or an error. Thread-safe; returns at once.
  void fetch_async(const Locator& locate, uint64_t file_size, ByteRange range, Callback done);

  // Fetches all ranges concurrently and waits. results[i] answers ranges[i].
  std::vector<Result<std::string>> fetch(const Locator& locate, uint64_t file_size,
                                         const std::vector<ByteRange>& ranges);

 private:
  HttpTransport& transport_;
};

}  // namespace hubfs
