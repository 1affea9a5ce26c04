// An HttpTransport that streams, for tests: the inner (scripted) transport's successful bodies go
// to the request's BodySink in pieces of `piece` bytes, as CurlTransport hands them over
// (HttpRequest::body_sink), so a chunk spans pieces and the decoder meets every boundary.
#pragma once

#include <algorithm>
#include <memory>
#include <utility>

#include "common/http.h"

namespace hubfs::testing {

class StreamingTransport : public HttpTransport {
 public:
  StreamingTransport(HttpTransport& inner, size_t piece) : inner_(inner), piece_(piece) {}
  void submit(HttpRequest request, Callback done) override {
    std::shared_ptr<BodySink> sink = std::move(request.body_sink);
    request.body_sink = nullptr;
    inner_.submit(std::move(request), [this, sink, done = std::move(done)](Result<HttpResponse> r) {
      if (sink && r.ok() && r->status >= 200 && r->status < 300 && !r->body.empty()) {
        sink->head(r->status, r->headers);
        sink->begin();
        for (size_t at = 0; at < r->body.size(); at += piece_)
          sink->feed(r->body.data() + at, std::min(piece_, r->body.size() - at));
        r->streamed = r->body.size();
        r->body.clear();
      }
      done(std::move(r));
    });
  }

 private:
  HttpTransport& inner_;
  const size_t piece_;
};

}  // namespace hubfs::testing
