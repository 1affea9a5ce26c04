// The one seam between hubfs and the network. Everything that speaks HTTP (the Hub client,
// the range fetcher) does it through HttpTransport, so unit tests swap in a scripted fake and
// inject any fault (resets, stalls, 5xx, lying Content-Range) without a socket.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <future>  // for the files that take std::future from here (core itself uses OneShot)
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "common/deadline.h"
#include "common/single_flight.h"  // OneShot
#include "common/status.h"

namespace hubfs {

using Headers = std::vector<std::pair<std::string, std::string>>;

// Case-insensitive lookup of the first header with this name.
std::optional<std::string> find_header(const Headers& headers, std::string_view name);

struct HttpResponse;

// Takes a successful (2xx) response body in pieces as they arrive, instead of its collection in
// HttpResponse::body: a caller that decodes a body (Xet chunks) does it while the rest is on the
// wire, from bytes still in the CPU's cache, with no body-sized buffer of fresh pages
// (docs/xet.md, "Decoding while bytes arrive"). Called on a transport thread: must not block.
// Only one attempt feeds it at a time: each attempt that streams calls begin() before its first
// byte, so a retry starts it from zero (a hedged twin that loses never feeds it). A transport
// that does not stream leaves the body in HttpResponse::body, and HttpResponse::streamed at 0:
// the caller feeds it then.
class BodySink {
 public:
  virtual ~BodySink() = default;
  // The answer's status and headers, before its body's first byte: a streaming transport calls
  // it right before each begin(). One that does not leaves the sink to learn them from the whole
  // answer (then nothing it was fed may be trusted before that answer is checked).
  virtual void head(int /*status*/, const Headers& /*headers*/) {}
  // A body begins: everything fed before (a failed attempt's) is forgotten.
  virtual void begin() = 0;
  // The next n bytes of the body.
  virtual void feed(const char* data, size_t n) = 0;
};

struct HttpRequest {
  std::string method = "GET";  // GET, HEAD or POST
  std::string url;
  Headers headers;             // sent as given (Range, Authorization, Content-Type ...)
  std::string body;            // POST body
  // The transport aborts a transfer whose body grows past this, so a server that ignores a
  // Range header cannot make us buffer a whole multi-GB file in memory.
  uint64_t max_body = 256ull << 20;
  // Checks a 2xx answer that the caller cannot use all the same (a 206 with the
  // wrong Content-Range, a body of the wrong length, a 200 that ignored Range). A non-OK Status
  // makes a retrying transport treat the answer as a transient fault, like a 503, and return
  // that Status once its attempts are spent. Runs on a transport thread: must not block.
  std::function<Status(const HttpResponse&)> validate;
  // Runs before each retry (on a timer thread: must not block) with the last attempt's fault;
  // may point the request elsewhere (a fresh location for the next attempt).
  std::function<void(HttpRequest&, const Status& cause)> before_retry;
  // Bulk data (a range of a file): on a connection of its own, HTTP/1.1, never multiplexed
  // with other requests over one HTTP/2 connection. Where each TCP connection gets its own
  // bandwidth (a CDN edge gives one stream ~400 Mbit/s), N ranges in flight bring N times that
  // only over N connections; over one they would share one connection's rate.
  bool own_connection = false;
  // A further request of one read whose first request was submitted just before it (a Xet read
  // whose bytes lie in two xorbs: one range from each). The transport's cap counts reads, not
  // their pieces: a companion may run beyond it (CurlTransport: up to a quarter more), so it
  // does not wait for another read's transfer to end, which, with every slot taken by ranges
  // that share the link and end together, is the end of the whole wave.
  bool companion = false;
  // Where a successful body goes instead of HttpResponse::body (BodySink). Shared: every attempt
  // of a retried request feeds the same sink, each from begin().
  std::shared_ptr<BodySink> body_sink;
  // When the read this request serves gives up: a retrying transport retries transient failures
  // until then (rather than a fixed number of times), and the transport abandons a transfer
  // still running then. Never by default (API requests are bounded by their attempts).
  Deadline deadline;
  // No response, or no byte, for this long aborts this request with kTimeout: replaces the
  // transport's first-byte and stall timeouts for it (a metadata request's HF_HUB_ETAG_TIMEOUT).
  // Unset: the transport's own.
  std::optional<std::chrono::milliseconds> timeout;
  // Redirects are never followed by the transport: the Hub client handles them itself, because
  // the Authorization header must not travel to another host.
};

struct HttpResponse {
  long status = 0;
  Headers headers;  // header names lower-cased
  std::string body;
  // Bytes of this answer's successful body given to HttpRequest::body_sink instead of `body`.
  uint64_t streamed = 0;
  // How long the request was held for the Hub's quota windows before this answer, over all its
  // attempts (set by RetryingTransport; zero from a plain transport). Time the request's read
  // lost to quota, not to the network: whoever waits on the answer may add it to its deadline.
  std::chrono::milliseconds quota_waited{0};

  std::optional<std::string> header(std::string_view name) const { return find_header(headers, name); }
};

// Where the bytes of one file can be read from right now: a URL and the headers to send with
// it (Authorization only when the URL is on the Hub endpoint itself). Signed CDN URLs expire.
struct Location {
  std::string url;
  Headers headers;
  MonotonicClock::time_point expires = MonotonicClock::time_point::max();
  // How long the caller waited, for this answer, on the Hub's quota (resolves held by the
  // QuotaGate, HttpResponse::quota_waited): the range request it leads to keeps that much more
  // time than its read's deadline left (RangeFetcher). Zero for a location served from memory.
  std::chrono::milliseconds quota_waited{0};
};

class HttpTransport {
 public:
  using Callback = std::function<void(Result<HttpResponse>)>;
  virtual ~HttpTransport() = default;

  // Starts the request and returns at once; `done` runs exactly once, on a transport thread,
  // with the response (any HTTP status) or a transport failure (kUnavailable for connect
  // errors and resets, kTimeout for connect/first-byte/stall timeouts). Thread-safe.
  virtual void submit(HttpRequest request, Callback done) = 0;

  // Submit and wait (the request's own deadline, if any, bounds it: the transport answers).
  Result<HttpResponse> perform(HttpRequest request) {
    auto answer = std::make_shared<OneShot<Result<HttpResponse>>>();
    submit(std::move(request), [answer](Result<HttpResponse> r) { answer->set(std::move(r)); });
    return answer->get();
  }
};

}  // namespace hubfs
