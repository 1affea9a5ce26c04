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
