// Fetches byte ranges of one remote file, many at a time, and checks every answer.
//
// Every range that comes back holds exactly the bytes asked for or is an error: a 206 must carry
// a Content-Range equal to the request and a body of exactly that length; a 200 (a server that
// ignored Range) is sliced only when it is provably the whole file, never taken as the range.
// A 403 from a signed URL asks the Locator for a fresh location once, then tries again; all
// the ranges that hit the same expired URL share one refresh.
// Transient failures are retried by the transport (see RetryingTransport), not here.
//
// Threads: fetch_async returns at once; its locate(false) and every locate(true) run on the
// fetcher's own locator threads, never on the caller's (a read must be able to give up at its
// deadline while a resolve retries) nor on a transport thread, so a Locator may block on the
// network (through the same transport). fetch() calls locate(false) on the calling thread.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
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

  // `transport` must outlive this fetcher and every fetch it started.
  explicit RangeFetcher(HttpTransport& transport);
  // Fetches still waiting for a locator refresh fail with kUnavailable; others finish normally.
  ~RangeFetcher();
  RangeFetcher(const RangeFetcher&) = delete;
  RangeFetcher& operator=(const RangeFetcher&) = delete;

  // Starts fetching `range` of a file of `file_size` bytes; `done` runs once with exactly
  // range.length bytes or an error. Thread-safe; returns at once.
  // Errors: kInvalidArgument (range past EOF: a caller bug), kCorrupt (Content-Range or
  // length mismatch, server ignored Range), kPermissionDenied (403 even after a refresh),
  // kNotFound (404), kOutOfRange (416), kIo (any other status), or the transport's error.
  void fetch_async(const Locator& locate, uint64_t file_size, ByteRange range, Callback done);

  // Fetches all ranges concurrently and waits. results[i] answers ranges[i].
  std::vector<Result<std::string>> fetch(const Locator& locate, uint64_t file_size,
                                         const std::vector<ByteRange>& ranges);

 private:
  struct Shared;

  std::shared_ptr<Shared> shared_;  // outlives this object while fetches are in flight
};

}  // namespace hubfs
