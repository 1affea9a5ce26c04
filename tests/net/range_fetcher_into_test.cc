// RangeFetcher::fetch_into_async: a range's body written into the caller's memory as it arrives
// (HttpRequest::body_sink), held to the same checks as a body in a string.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstring>
#include <future>

#include "net/range_fetcher.h"
#include "net/retrying_transport.h"
#include "support/fake_transport.h"
#include "support/fetcher_env.h"
#include "support/manual_env.h"

namespace hubfs {
namespace HUBFS_UNITY_ID {

using ::testing::HasSubstr;
using testing::FakeTransport;

std::string content_of(uint64_t size) {
  std::string s(size, '\0');
  for (uint64_t i = 0; i < size; ++i) s[i] = static_cast<char>((i * 131 + 7) % 251);
  return s;
}

// A range's memory: a string, filled with a byte no answer holds, so a byte never written shows.
class StringBuffer final : public RangeBuffer {
 public:
  explicit StringBuffer(size_t n) : bytes(n, '\xff') {}
  void write(uint64_t offset, const char* data, size_t n) override {
    ASSERT_LE(offset + n, bytes.size()) << "a write past the range";
    std::memcpy(bytes.data() + offset, data, n);
  }
  void read(uint64_t offset, char* out, size_t n) const override { std::memcpy(out, bytes.data() + offset, n); }
  std::string bytes;
};

std::pair<uint64_t, uint64_t> asked_range(const HttpRequest& req) {
  const std::string h = *find_header(req.headers, "range");
  const size_t dash = h.find('-');
  return {std::stoull(h.substr(6, dash - 6)), std::stoull(h.substr(dash + 1))};
}

// A 206 for the asked range of `content`, its body `extra` bytes longer (negative: shorter).
HttpResponse answer_206(const std::string& content, const HttpRequest& req, int extra = 0) {
  auto [first, last] = asked_range(req);
  HttpResponse resp;
  resp.status = 206;
  resp.headers = {{"content-range", "bytes " + std::to_string(first) + "-" + std::to_string(last) + "/" +
                                        std::to_string(content.size())}};
  resp.body = content.substr(first, last - first + 1);
  if (extra > 0) resp.body.append(static_cast<size_t>(extra), 'x');
  if (extra < 0) resp.body.resize(resp.body.size() - static_cast<size_t>(-extra));
  return resp;
}

// What a streaming transport (CurlTransport) does with a 2xx body: begin(), then the body to the
// request's sink in pieces of `piece` bytes, none of it in HttpResponse::body.
Result<HttpResponse> stream(const HttpRequest& req, Result<HttpResponse> r, size_t piece) {
  if (!r.ok() || !req.body_sink || r->status < 200 || r->status >= 300) return r;
  req.body_sink->begin();
  for (size_t at = 0; at < r->body.size(); at += piece)
    req.body_sink->feed(r->body.data() + at, std::min(piece, r->body.size() - at));
  r->streamed = r->body.size();
  r->body.clear();
  return r;
}

Locator fixed_location() {
  return [](bool) -> Result<Location> { return Location{.url = "https://cdn.example/blob"}; };
}

Status fetch_into(RangeFetcher& fetcher, uint64_t file_size, ByteRange range, StringBuffer& into,
                  uint32_t parts = 1) {
  std::promise<Status> done;
  std::shared_ptr<StringBuffer> shared(&into, [](StringBuffer*) {});  // the test's: it outlives the fetch
  fetcher.fetch_into_async(fixed_location(), file_size, range, shared, [&](Status s) { done.set_value(s); },
                           Deadline::never(), parts);
  return done.get_future().get();
}

TEST(RangeFetcherInto, AStreamedBodyInOddPiecesLandsExactly) {
  const std::string content = content_of(10000);
  for (size_t piece : {1u, 7u, 999u, 4096u, 20000u}) {
    SCOPED_TRACE(piece);
    FakeTransport fake([&](const HttpRequest& req) { return stream(req, answer_206(content, req), piece); });
    RangeFetcher fetcher(fake, testing::fetcher_on(Env::real()));
    StringBuffer into(3001);
    ASSERT_TRUE(fetch_into(fetcher, content.size(), {123, 3001}, into).ok());
    EXPECT_EQ(into.bytes, content.substr(123, 3001));
    // In three parts, each its own request writing its own stretch.
    StringBuffer parts(3001);
    ASSERT_TRUE(fetch_into(fetcher, content.size(), {123, 3001}, parts, 3).ok());
    EXPECT_EQ(parts.bytes, content.substr(123, 3001));
  }
}

TEST(RangeFetcherInto, ATransportThatDoesNotStreamFillsTheBufferFromTheBody) {
  const std::string content = content_of(5000);
  FakeTransport fake([&](const HttpRequest& req) -> Result<HttpResponse> { return answer_206(content, req); });
  RangeFetcher fetcher(fake, testing::fetcher_on(Env::real()));
  StringBuffer into(1000);
  ASSERT_TRUE(fetch_into(fetcher, content.size(), {4000, 1000}, into).ok());
  EXPECT_EQ(into.bytes, content.substr(4000, 1000));
  EXPECT_NE(fake.requests().at(0).body_sink, nullptr);  // it was offered a sink, and ignored it
}

// A transfer cut off part-way through its body: the retry's begin() starts the range afresh, so
// the second attempt's bytes land where they belong, not after the first's.
TEST(RangeFetcherInto, ARetryAfterAPartialBodyStartsTheRangeAfresh) {
  const std::string content = content_of(8000);
  std::atomic<int> attempts{0};
  FakeTransport fake([&](const HttpRequest& req) -> Result<HttpResponse> {
    if (attempts++ == 0) {
      HttpResponse resp = answer_206(content, req);
      req.body_sink->begin();
      req.body_sink->feed(std::string(resp.body.size() / 2, 'Z').data(), resp.body.size() / 2);
      return Unavailable("connection reset by peer (test)");
    }
    return stream(req, answer_206(content, req), 333);
  });
  RetryPolicy policy;
  policy.jitter = [] { return 0.0; };
  testing::ManualEnv at_once(testing::ManualEnv::Timers::kRunAtOnce);  // retries without waiting
  RetryingTransport retrying(fake, policy, at_once);
  RangeFetcher fetcher(retrying, testing::fetcher_on(Env::real()));
  StringBuffer into(5000);
  ASSERT_TRUE(fetch_into(fetcher, content.size(), {1500, 5000}, into).ok());
  EXPECT_EQ(attempts.load(), 2);
  EXPECT_EQ(into.bytes, content.substr(1500, 5000));
}

// A streamed body one byte short or long is refused as a body in a string is (and retried by a
// retrying transport: a short then an exact body ends with the exact bytes).
TEST(RangeFetcherInto, AStreamedBodyTooShortOrTooLongIsAnError) {
  const std::string content = content_of(5000);
  for (int extra : {-1, 1, -999}) {
    SCOPED_TRACE(extra);
    FakeTransport fake([&](const HttpRequest& req) { return stream(req, answer_206(content, req, extra), 64); });
    RangeFetcher fetcher(fake, testing::fetcher_on(Env::real()));
    StringBuffer into(1000);
    Status s = fetch_into(fetcher, content.size(), {100, 1000}, into);
    ASSERT_FALSE(s.ok());
    EXPECT_EQ(s.code(), Code::kCorrupt);
    EXPECT_THAT(s.message(), HasSubstr("truncated or padded body"));
  }
  std::atomic<int> attempts{0};
  FakeTransport fake([&](const HttpRequest& req) {
    return stream(req, answer_206(content, req, attempts++ == 0 ? -10 : 0), 64);
  });
  RetryPolicy policy;
  policy.jitter = [] { return 0.0; };
  testing::ManualEnv at_once(testing::ManualEnv::Timers::kRunAtOnce);
  RetryingTransport retrying(fake, policy, at_once);
  RangeFetcher fetcher(retrying, testing::fetcher_on(Env::real()));
  StringBuffer into(1000);
  ASSERT_TRUE(fetch_into(fetcher, content.size(), {100, 1000}, into).ok());
  EXPECT_EQ(attempts.load(), 2);
  EXPECT_EQ(into.bytes, content.substr(100, 1000));
}

// A server that ignored Range streams the whole (small) file: the range is cut from it.
TEST(RangeFetcherInto, AStreamedWholeFileIsCutToTheRange) {
  const std::string content = content_of(5000);
  for (bool streamed : {true, false}) {
    SCOPED_TRACE(streamed);
    FakeTransport fake([&](const HttpRequest& req) -> Result<HttpResponse> {
      HttpResponse r;
      r.status = 200;
      r.body = content;
      return streamed ? stream(req, r, 777) : r;
    });
    RangeFetcher fetcher(fake, testing::fetcher_on(Env::real()));
    for (ByteRange range : {ByteRange{1234, 100}, ByteRange{0, 5000}, ByteRange{4999, 1}, ByteRange{10, 4000}}) {
      StringBuffer into(range.length);
      ASSERT_TRUE(fetch_into(fetcher, content.size(), range, into).ok());
      EXPECT_EQ(into.bytes, content.substr(range.offset, range.length));
    }
  }
}

}  // namespace HUBFS_UNITY_ID
}  // namespace hubfs
