// A scripted HttpTransport for unit tests: every request is answered by a handler the test
// writes, on a thread of its own (as the real transport answers on its own thread), and recorded.
#pragma once

#include <atomic>
#include <cstdio>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

#include "common/http.h"
#include "net/range_fetcher.h"

namespace hubfs::testing {

class FakeTransport : public HttpTransport {
 public:
  using Handler = std::function<Result<HttpResponse>(const HttpRequest&)>;
  explicit FakeTransport(Handler handler) : handler_(std::move(handler)) {}
  ~FakeTransport() override {
    std::vector<std::thread> threads;
    {
      std::lock_guard<std::mutex> lock(mu_);
      threads.swap(threads_);
    }
    for (auto& t : threads) t.join();
  }

  void submit(HttpRequest request, Callback done) override {
    std::lock_guard<std::mutex> lock(mu_);
    requests_.push_back(request);
    threads_.emplace_back([this, request = std::move(request), done = std::move(done)] {
      int now = ++in_flight_;
      int peak = peak_.load();
      while (now > peak && !peak_.compare_exchange_weak(peak, now)) {}
      auto result = handler_(request);
      --in_flight_;
      done(std::move(result));
    });
  }

  std::vector<HttpRequest> requests() const {
    std::lock_guard<std::mutex> lock(mu_);
    return requests_;
  }
  size_t request_count() const {
    std::lock_guard<std::mutex> lock(mu_);
    return requests_.size();
  }
  // The byte ranges the requests' Range headers asked for ("bytes=A-B"), in the order sent.
  std::vector<ByteRange> ranges_asked() const {
    std::lock_guard<std::mutex> lock(mu_);
    std::vector<ByteRange> out;
    for (const HttpRequest& r : requests_) {
      auto range = find_header(r.headers, "Range");
      unsigned long long a = 0, b = 0;
      if (range && std::sscanf(range->c_str(), "bytes=%llu-%llu", &a, &b) == 2 && b >= a) out.push_back({a, b - a + 1});
    }
    return out;
  }
  // Their bytes in all: what a test means by "fetched block 2 once" when the reader may send a
  // block in parts over idle connections (ReadAheadPolicy::demand_parts).
  uint64_t bytes_asked() const {
    uint64_t total = 0;
    for (const ByteRange& r : ranges_asked()) total += r.length;
    return total;
  }
  int peak_in_flight() const { return peak_.load(); }

 private:
  Handler handler_;
  mutable std::mutex mu_;
  std::vector<HttpRequest> requests_;
  std::vector<std::thread> threads_;
  std::atomic<int> in_flight_{0};
  std::atomic<int> peak_{0};
};

}  // namespace hubfs::testing
