// Fetches byte ranges of one remote file, many at a time, and checks every answer.
//
// Every range that comes back holds exactly the bytes asked for or is an error: a 206 must carry
// a Content-Range equal to the request and a body of exactly that length; a 200 (a server that
// ignored Range) is sliced only when it is provably the whole file, never taken as the range.
// A 403 from a signed URL asks the Locator for a fresh location, then tries again; all the ranges
// that hit the same expired URL share one refresh. A 416 for a range inside the file's known size
// (every range asked is: see fetch_async) is a CDN quirk, not a short file: it is handled like a
// 403. The first two such refusals get a fresh location at once; a fetch with a deadline keeps
// asking, with backoff, until its deadline (a CDN edge may refuse valid signatures or ranges for
// a while), one without fails on the third. Each retry is logged.
// Transient failures (5xx, resets, stalls) are retried by the transport (see RetryingTransport),
// not here; the fetch's deadline travels with each request (HttpRequest::deadline), moved later
// by exactly the time each location it uses was held for the Hub's quota (Location::quota_waited),
// so a read that waited for a quota window still has its --read-timeout for the network.
//
// Threads: fetch_async returns at once; its locate(false) and every locate(true) run on the
// fetcher's own locator threads, never on the caller's (a read must be able to give up at its
// deadline while a resolve retries) nor on a transport thread, so a Locator may block on the
// network (through the same transport). fetch() calls locate(false) on the calling thread.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "common/env.h"
#include "common/http.h"
#include "common/status.h"
#include "net/byte_range.h"

namespace hubfs {

// Where one file can be read from; refresh=true means the last location answered 403 (expired).
using Locator = std::function<Result<Location>(bool refresh)>;

struct RangeFetcherOptions {
  // Time and threads: backoffs wait on its timer, the wait for a locator thread and the
  // remembered replacement locations' expiry read its clock, and the locator and refresher
  // threads are its executors. Required (no default: the stack's, or a test's); must outlive the
  // fetcher.
  Env* env = nullptr;
  // Backoff before a fresh location once the immediate ones are spent (full jitter, doubling from
  // base to max): a CDN that refuses for a while is asked a few times a second at first, then
  // every few seconds, like the transport's own retries.
  std::chrono::milliseconds base_delay{200};
  std::chrono::milliseconds max_delay{4000};
  std::function<double()> jitter;  // uniform in [0, 1); empty: a thread-local PRNG
};

// Memory a range's body is written into as it arrives (RangeFetcher::fetch_into_async), instead
// of a string of its own that is then copied: the reader's pooled block slots, already mapped.
class RangeBuffer {
 public:
  virtual ~RangeBuffer() = default;
  // Bytes [offset, offset + n) of the range (never past its length). May run on any transport
  // thread, for different parts of one range at once; a retry writes the same bytes again.
  virtual void write(uint64_t offset, const char* data, size_t n) = 0;
  // Bytes [offset, offset + n) as last written (for a server that ignored Range, whose whole
  // file is cut to the range after it arrived).
  virtual void read(uint64_t offset, char* out, size_t n) const = 0;
};

class RangeFetcher {
 public:
  using Callback = std::function<void(Result<std::string>)>;
  using DoneCallback = std::function<void(Status)>;

  // Threads that ask Locators for locations (first resolves, and refreshes after a 403): every
  // fetch of a file not located yet takes one until its file's resolve is done, joining it (a
  // Locator blocks). With 4, a hint of several ranges per file took every thread for the first
  // file and resolved the files one after another (16 files of 4 ranges: 15 resolves 50 ms apart
  // at 50 ms a request; docs/benchmarks.md, session 36). Started on first use.
  static constexpr int kLocatorThreads = 16;

  // `transport` must outlive this fetcher and every fetch it started.
  // options.env is required.
  RangeFetcher(HttpTransport& transport, RangeFetcherOptions options);
  // Fetches still waiting for a locator refresh fail with kUnavailable; others finish normally.
  ~RangeFetcher();
  // Fetches waiting out a backoff before a fresh location fail now (kUnavailable), and later ones
  // do not wait: for unmount, so the reader's drain is prompt. Idempotent; the destructor calls it.
  void shutdown();
  RangeFetcher(const RangeFetcher&) = delete;
  RangeFetcher& operator=(const RangeFetcher&) = delete;

  // Starts fetching `range` of a file of `file_size` bytes; `done` runs once with exactly
  // range.length bytes or an error. Thread-safe; returns at once. `locate` is copied, and the copy
  // may still be called after `done` ran (a fresh location asked for after a protocol violation,
  // for a retry that then never came) until this fetcher is destroyed: whatever it refers to must
  // outlive the fetcher, as BlockReader's files' Locators do.
  // Errors: kInvalidArgument (range past EOF: a caller bug), kCorrupt (Content-Range or
  // length mismatch, server ignored Range), kPermissionDenied (403 even after a refresh),
  // kNotFound (404), kOutOfRange (416), kIo (any other status), or the transport's error;
  // kTimeout once `deadline` passed (retries of transient failures and refusals run until it;
  // `deadline` plus the quota waits of the locations it got, see above). A fetch that waited for
  // a locator thread kept busy by a locate held for the quota lost that time to the quota too:
  // it keeps up to that hold (at most its own wait) on top as well.
  //
  // `parts` > 1 sends the range as that many consecutive requests of about equal size, at once,
  // from one location (one locate), and hands `done` their bytes joined in order, or the first
  // error, once every part has answered: each connection brings its own bandwidth, so a 1 MiB
  // range in 4 parts arrives in a round trip plus a quarter of one connection's transfer time.
  // Ranges shorter than `parts` bytes go in fewer parts.
  void fetch_async(const Locator& locate, uint64_t file_size, ByteRange range, Callback done,
                   Deadline deadline = Deadline::never(), uint32_t parts = 1);

  // fetch_async whose bytes go into `into` (each request's body as it arrives, through
  // HttpRequest::body_sink; a transport that does not stream, from its HttpResponse::body) and
  // `done` gets their Status. Only an OK Status says `into` holds exactly the range: every
  // answer is held to the same checks as fetch_async's first (status, Content-Range, body
  // length), and on an error `into` holds anything (a failed attempt's partial bytes). `done`
  // runs after every request of the fetch has ended: nothing writes into `into` after it.
  void fetch_into_async(const Locator& locate, uint64_t file_size, ByteRange range, std::shared_ptr<RangeBuffer> into,
                        DoneCallback done, Deadline deadline = Deadline::never(), uint32_t parts = 1);

  // Fetches all ranges concurrently and waits. results[i] answers ranges[i].
  std::vector<Result<std::string>> fetch(const Locator& locate, uint64_t file_size,
                                         const std::vector<ByteRange>& ranges);

  // The Env it was given: its stack's, which the reader above it reads its time from too.
  Env& env() const;

 private:
  struct Shared;
  // fetch_async, into `into` when it is set.
  void locate_and_start(const Locator& locate, uint64_t file_size, ByteRange range, Callback done, Deadline deadline,
                        uint32_t parts, std::shared_ptr<RangeBuffer> into);

  std::shared_ptr<Shared> shared_;  // outlives this object while fetches are in flight
};

}  // namespace hubfs
