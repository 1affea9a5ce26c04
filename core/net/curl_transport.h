// HttpTransport over one libcurl multi handle driven by one event-loop thread: connection
// reuse, HTTP/2 multiplexing where the server offers it, many transfers in flight.
#pragma once

#include <memory>
#include <string>

#include "common/http.h"

namespace hubfs {

struct CurlOptions {
  int max_in_flight = 16;             // transfers running at once; more wait in a queue
  long connect_timeout_ms = 10'000;
  long first_byte_timeout_ms = 30'000;  // the Hub's CDN stalls ~3 s on cold objects; allow that
  long stall_timeout_ms = 20'000;       // no byte for this long aborts the transfer (kTimeout)
  std::string user_agent = "hubfs/0.1";
};

// Callbacks run on the one event-loop thread: they must not block (no perform() on this
// transport, no disk-heavy work) and must not throw, or every other transfer waits (or the
// process ends). Submitting more work from a
// callback is fine. Requests beyond max_in_flight wait in a FIFO queue.
// Failures: kTimeout for connect, first-byte and stall timeouts; kUnavailable for connect
// errors, resets and bodies cut short; kCorrupt when the body passes request.max_body;
// kInvalidArgument for a malformed URL or a method other than GET, HEAD, POST.
class CurlTransport : public HttpTransport {
 public:
  explicit CurlTransport(CurlOptions options = {});
  ~CurlTransport() override;  // fails every pending request (kUnavailable) and joins the loop
  void submit(HttpRequest request, Callback done) override;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace hubfs
