#include "net/range_fetcher.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <atomic>
#include <condition_variable>
#include <future>
#include <mutex>
#include <random>
#include <thread>

#include "net/retrying_transport.h"
#include "net/scripted_http_server.h"
#include "support/fake_transport.h"
#include "support/manual_env.h"
#include "support/fetcher_env.h"

namespace hubfs {
namespace HUBFS_UNITY_ID {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::Not;
using testing::FakeTransport;

// A signed CDN URL: the query is a secret that must never reach an error message.
const std::string kSignedUrl = "https://cdn.example/blobs/abc?X-Amz-Signature=s3cr3t";

// The content of the remote file: position-dependent, so a shifted slice cannot pass.
std::string file_content(uint64_t size) {
  std::string s(size, '\0');
  for (uint64_t i = 0; i < size; ++i) s[i] = static_cast<char>((i * 131 + 7) % 251);
  return s;
}

struct ParsedRange {
  uint64_t first = 0, last = 0;
};

std::optional<ParsedRange> parse_range(const HttpRequest& req) {
  auto h = find_header(req.headers, "range");
  if (!h || !h->starts_with("bytes=")) return std::nullopt;
  size_t dash = h->find('-');
  return ParsedRange{std::stoull(h->substr(6, dash - 6)), std::stoull(h->substr(dash + 1))};
}

HttpResponse partial(const std::string& content, ParsedRange r, uint64_t total) {
  HttpResponse resp;
  resp.status = 206;
  resp.headers = {{"content-range", "bytes " + std::to_string(r.first) + "-" + std::to_string(r.last) + "/" +
                                        std::to_string(total)}};
  resp.body = content.substr(r.first, r.last - r.first + 1);
  return resp;
}

// A well-behaved CDN serving `content`.
FakeTransport::Handler honest_cdn(std::shared_ptr<const std::string> content) {
  return [content](const HttpRequest& req) -> Result<HttpResponse> {
    auto r = parse_range(req);
    if (!r) return Internal("test: no Range header");
    return partial(*content, *r, content->size());
  };
}

HttpResponse status_only(long status) {
  HttpResponse r;
  r.status = status;
  return r;
}

// Counts and records the calls a fetcher makes to its Locator. Declared before the fetcher in every
// test: the fetcher may still call it after a fetch ended, until the fetcher is destroyed (a fresh
// location asked for after a protocol violation: range_fetcher.h).
struct RecordingLocator {
  std::mutex mu;
  std::condition_variable called;  // after each call
  std::vector<bool> calls;
  std::string url = kSignedUrl;
  std::string refreshed_url = kSignedUrl;
  std::optional<Status> fail;
  std::optional<Status> fail_refresh;
  // Every refresh hands out a new URL, refreshed_url + "1", "2", ... (a CDN whose every fresh
  // signature differs).
  bool number_refreshes = false;
  int refreshes = 0;

  Locator locator() {
    return [this](bool refresh) -> Result<Location> {
      std::lock_guard<std::mutex> lock(mu);
      calls.push_back(refresh);
      called.notify_all();
      if (fail) return *fail;
      if (refresh && fail_refresh) return *fail_refresh;
      Location l;
      l.url = !refresh ? url : number_refreshes ? refreshed_url + std::to_string(++refreshes) : refreshed_url;
      l.headers = {{"X-Test", "location-header"}};
      return l;
    };
  }
  std::vector<bool> seen() {
    std::lock_guard<std::mutex> lock(mu);
    return calls;
  }
  // Waits (bounded, for a loaded machine) until some call asked for a refresh; false if none did.
  bool wait_for_refresh() {
    std::unique_lock<std::mutex> lock(mu);
    return called.wait_for(lock, std::chrono::seconds(60),
                           [&] { return std::count(calls.begin(), calls.end(), true) > 0; });
  }
};

// https://cdn.example/u0 first, then u1, u2, ... on each refresh.
void hand_out_numbered_urls(RecordingLocator& loc) {
  loc.url = "https://cdn.example/u0";
  loc.refreshed_url = "https://cdn.example/u";
  loc.number_refreshes = true;
}

Result<std::string> fetch_one(RangeFetcher& f, const Locator& loc, uint64_t size, ByteRange r) {
  auto results = f.fetch(loc, size, {r});
  return results.at(0);
}

TEST(RangeFetcher, FetchesExactRangeWithLocationHeaders) {
  auto content = std::make_shared<const std::string>(file_content(1000));
  FakeTransport fake(honest_cdn(content));
  RecordingLocator loc;
  RangeFetcher fetcher(fake, testing::fetcher_on(Env::real()));
  auto r = fetch_one(fetcher, loc.locator(), 1000, {10, 20});
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_EQ(*r, content->substr(10, 20));
  auto reqs = fake.requests();
  ASSERT_EQ(reqs.size(), 1u);
  EXPECT_EQ(reqs[0].method, "GET");
  EXPECT_EQ(reqs[0].url, kSignedUrl);
  EXPECT_EQ(find_header(reqs[0].headers, "range"), "bytes=10-29");
  EXPECT_EQ(find_header(reqs[0].headers, "x-test"), "location-header");
  EXPECT_THAT(loc.seen(), ElementsAre(false));
}

TEST(RangeFetcher, FetchAsyncDeliversOnce) {
  auto content = std::make_shared<const std::string>(file_content(100));
  FakeTransport fake(honest_cdn(content));
  RecordingLocator loc;
  RangeFetcher fetcher(fake, testing::fetcher_on(Env::real()));
  std::promise<Result<std::string>> p;
  fetcher.fetch_async(loc.locator(), 100, {99, 1}, [&](Result<std::string> r) { p.set_value(std::move(r)); });
  auto r = p.get_future().get();
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_EQ(*r, content->substr(99, 1));
}

// A range in parts: equal consecutive requests sent at once, one locate, the bytes joined in
// order; an odd length and more parts than bytes are handled; a failed part fails the whole.
TEST(RangeFetcher, ARangeInPartsIsAskedOnceAndJoinedInOrder) {
  auto content = std::make_shared<const std::string>(file_content(1000));
  std::atomic<int> fail_offset{-1};
  FakeTransport fake([&](const HttpRequest& req) -> Result<HttpResponse> {
    auto r = parse_range(req);
    if (!r) return Internal("test: no Range header");
    if (static_cast<int>(r->first) == fail_offset.load()) return status_only(404);
    return partial(*content, *r, content->size());
  });
  RecordingLocator loc;
  RangeFetcher fetcher(fake, testing::fetcher_on(Env::real()));
  auto fetch = [&](ByteRange range, uint32_t parts) {
    std::promise<Result<std::string>> p;
    fetcher.fetch_async(loc.locator(), 1000, range, [&](Result<std::string> r) { p.set_value(std::move(r)); },
                        Deadline::never(), parts);
    return p.get_future().get();
  };
  auto r = fetch({10, 103}, 4);
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_EQ(*r, content->substr(10, 103));
  std::vector<std::string> ranges;
  for (const HttpRequest& req : fake.requests()) ranges.push_back(*find_header(req.headers, "range"));
  std::sort(ranges.begin(), ranges.end());
  EXPECT_THAT(ranges, ElementsAre("bytes=10-35", "bytes=36-61", "bytes=62-87", "bytes=88-112"));
  EXPECT_THAT(loc.seen(), ElementsAre(false));  // one location for every part

  r = fetch({997, 3}, 8);  // more parts than bytes: a byte each
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_EQ(*r, content->substr(997, 3));
  EXPECT_EQ(fake.request_count(), 7u);

  fail_offset = 550;  // the second of two parts
  r = fetch({500, 100}, 2);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), Code::kNotFound);
}

TEST(RangeFetcher, ManyConcurrentFetchesAllCorrect) {
  constexpr uint64_t kSize = 1 << 20;
  constexpr int kConcurrent = 8;
  auto content = std::make_shared<const std::string>(file_content(kSize));
  // Holds the first answers until kConcurrent requests have arrived (bounded), so a fetcher
  // that sent its ranges one by one would show in the peak.
  std::mutex mu;
  std::condition_variable cv;
  int arrived = 0;
  auto cdn = honest_cdn(content);
  FakeTransport fake([&](const HttpRequest& req) {
    std::unique_lock<std::mutex> lock(mu);
    ++arrived;
    cv.notify_all();
    cv.wait_for(lock, std::chrono::seconds(1), [&] { return arrived >= kConcurrent; });
    lock.unlock();
    return cdn(req);
  });
  RecordingLocator loc;
  RangeFetcher fetcher(fake, testing::fetcher_on(Env::real()));
  std::mt19937_64 rng(42);  // fixed seed: the same ranges every run
  std::vector<ByteRange> ranges;
  for (int i = 0; i < 64; ++i) {
    uint64_t off = rng() % kSize;
    uint64_t len = 1 + rng() % (kSize - off);
    ranges.push_back({off, std::min<uint64_t>(len, 65536)});
  }
  ranges.push_back({kSize - 1, 1});  // the last byte
  ranges.push_back({0, kSize});      // the whole file
  auto results = fetcher.fetch(loc.locator(), kSize, ranges);
  ASSERT_EQ(results.size(), ranges.size());
  for (size_t i = 0; i < ranges.size(); ++i) {
    ASSERT_TRUE(results[i].ok()) << results[i].status().message();
    EXPECT_TRUE(*results[i] == content->substr(ranges[i].offset, ranges[i].length)) << "range " << i;
  }
  EXPECT_GE(fake.peak_in_flight(), kConcurrent);
  EXPECT_THAT(loc.seen(), ElementsAre(false));  // one location for the whole batch
}

// A 206 whose Content-Range or length is off in some way must never pass.
void expect_corrupt_206(std::function<HttpResponse(const std::string&, ParsedRange)> liar, const char* why) {
  SCOPED_TRACE(why);
  auto content = std::make_shared<const std::string>(file_content(1000));
  FakeTransport fake([&](const HttpRequest& req) -> Result<HttpResponse> { return liar(*content, *parse_range(req)); });
  RecordingLocator loc;
  RangeFetcher fetcher(fake, testing::fetcher_on(Env::real()));
  auto r = fetch_one(fetcher, loc.locator(), 1000, {100, 50});
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), Code::kCorrupt);
  EXPECT_THAT(r.status().message(), HasSubstr("cdn.example"));
  EXPECT_THAT(r.status().message(), Not(HasSubstr("s3cr3t")));
}

// Over a RetryingTransport, each kind of protocol violation is a transient fault: dropped, the
// location re-resolved once, retried, and the read succeeds with exact bytes.
TEST(RangeFetcher, ProtocolViolationsAreRetriedWithAFreshLocation) {
  using Lie = std::function<Result<HttpResponse>(const std::string&, ParsedRange)>;
  const std::vector<std::pair<std::string, Lie>> lies = {
      // A big file's 200 is cut off by the transport's body limit before it is all read.
      {"ignored Range", [](const std::string&, ParsedRange) -> Result<HttpResponse> {
         return Corrupt("server sent more than asked (did the server ignore the Range header?)");
       }},
      {"200 with part of the file", [](const std::string& c, ParsedRange) -> Result<HttpResponse> {
         HttpResponse r = status_only(200);
         r.body = c.substr(0, c.size() / 2);
         return r;
       }},
      {"Content-Range off by one", [](const std::string& c, ParsedRange r) -> Result<HttpResponse> {
         return partial(c, {r.first + 1, r.last + 1}, c.size());
       }},
      {"short body", [](const std::string& c, ParsedRange r) -> Result<HttpResponse> {
         auto resp = partial(c, r, c.size());
         resp.body.pop_back();
         return resp;
       }},
      {"no Content-Range", [](const std::string& c, ParsedRange r) -> Result<HttpResponse> {
         auto resp = partial(c, r, c.size());
         resp.headers.clear();
         return resp;
       }},
  };
  auto content = std::make_shared<const std::string>(file_content(100000));
  for (const auto& [name, lie] : lies) {
    SCOPED_TRACE(name);
    std::atomic<int> answers{0};
    FakeTransport fake([&, lie = lie](const HttpRequest& req) -> Result<HttpResponse> {
      auto r = parse_range(req);
      if (!r) return Internal("test: no Range header");
      // The first two answers lie (at most two consecutive faults per request).
      if (answers++ < 2) return lie(*content, *r);
      return partial(*content, *r, content->size());
    });
    RetryPolicy policy;
    policy.jitter = [] { return 0.0; };
    testing::ManualEnv at_once(testing::ManualEnv::Timers::kRunAtOnce);  // retries without waiting
    RetryingTransport retrying(fake, policy, at_once);
    RecordingLocator loc;
    RangeFetcher fetcher(retrying, testing::fetcher_on(Env::real()));
    loc.refreshed_url = "https://other-edge.example/blobs/abc";
    auto got = fetch_one(fetcher, loc.locator(), content->size(), {1000, 5000});
    ASSERT_TRUE(got.ok()) << got.status().message();
    EXPECT_EQ(*got, content->substr(1000, 5000));
    EXPECT_EQ(answers.load(), 3);
    // The re-resolve runs beside the retries (off the timer thread): wait for it, bounded.
    ASSERT_TRUE(loc.wait_for_refresh());
    auto calls = loc.seen();
    EXPECT_EQ(std::count(calls.begin(), calls.end(), true), 1) << "re-resolved once";
  }
}

TEST(RangeFetcher, ViolationsPastTheBudgetAreAnError) {
  auto content = std::make_shared<const std::string>(file_content(1000));
  FakeTransport fake([&](const HttpRequest& req) -> Result<HttpResponse> {
    auto r = parse_range(req);
    return partial(*content, {r->first + 1, r->last + 1}, content->size());
  });
  RetryPolicy policy;
  policy.max_attempts = 3;
  testing::ManualEnv at_once(testing::ManualEnv::Timers::kRunAtOnce);  // retries without waiting
  RetryingTransport retrying(fake, policy, at_once);
  RecordingLocator loc;
  RangeFetcher fetcher(retrying, testing::fetcher_on(Env::real()));
  auto got = fetch_one(fetcher, loc.locator(), content->size(), {0, 100});
  ASSERT_FALSE(got.ok());
  EXPECT_EQ(got.status().code(), Code::kCorrupt);
  EXPECT_THAT(got.status().message(), HasSubstr("Content-Range"));
  EXPECT_EQ(fake.request_count(), 3u);
}

// The CDN rotated its signing key after the shared table learnt "u0 -> u1": a range still
// handed u0 is sent to u1 from the table, gets 403 again, and then asks the Locator itself.
TEST(RangeFetcher, AStaleSharedReplacementIsForgottenAndTheLocatorAskedAgain) {
  auto content = std::make_shared<const std::string>(file_content(1000));
  std::atomic<bool> u1_valid{true};
  FakeTransport fake([&](const HttpRequest& req) -> Result<HttpResponse> {
    if (req.url == "https://cdn.example/u0") return status_only(403);
    if (req.url == "https://cdn.example/u1" && !u1_valid) return status_only(403);
    return honest_cdn(content)(req);
  });
  RecordingLocator numbered;
  RangeFetcher fetcher(fake, testing::fetcher_on(Env::real()));
  hand_out_numbered_urls(numbered);
  Locator loc = numbered.locator();
  auto first = fetch_one(fetcher, loc, content->size(), {0, 100});
  ASSERT_TRUE(first.ok()) << first.status().message();
  u1_valid = false;
  auto second = fetch_one(fetcher, loc, content->size(), {100, 100});
  ASSERT_TRUE(second.ok()) << second.status().message();
  EXPECT_EQ(*second, content->substr(100, 100));
  EXPECT_EQ(numbered.seen(), (std::vector<bool>{false, true, false, true}));
}

TEST(RangeFetcher, RejectsWrongContentRangeStart) {
  expect_corrupt_206([](const std::string& c, ParsedRange r) { return partial(c, {r.first + 1, r.last + 1}, 1000); },
                     "shifted by one byte");
}

TEST(RangeFetcher, RejectsWrongContentRangeTotal) {
  expect_corrupt_206([](const std::string& c, ParsedRange r) { return partial(c, r, 999); }, "file size differs");
}

TEST(RangeFetcher, RejectsMissingContentRange) {
  expect_corrupt_206(
      [](const std::string& c, ParsedRange r) {
        auto resp = partial(c, r, 1000);
        resp.headers.clear();
        return resp;
      },
      "no Content-Range");
}

TEST(RangeFetcher, RejectsUnknownTotalInContentRange) {
  expect_corrupt_206(
      [](const std::string& c, ParsedRange r) {
        auto resp = partial(c, r, 1000);
        resp.headers = {{"content-range", "bytes 100-149/*"}};
        return resp;
      },
      "total is *");
}

TEST(RangeFetcher, RejectsShortBody) {
  expect_corrupt_206(
      [](const std::string& c, ParsedRange r) {
        auto resp = partial(c, r, 1000);
        resp.body.pop_back();
        return resp;
      },
      "one byte short");
}

TEST(RangeFetcher, RejectsLongBody) {
  expect_corrupt_206(
      [](const std::string& c, ParsedRange r) {
        auto resp = partial(c, r, 1000);
        resp.body.push_back('x');
        return resp;
      },
      "one byte long");
}

TEST(RangeFetcher, SlicesA200CarryingTheWholeFile) {
  auto content = std::make_shared<const std::string>(file_content(5000));
  FakeTransport fake([&](const HttpRequest&) -> Result<HttpResponse> {
    HttpResponse r;
    r.status = 200;
    r.body = *content;
    return r;
  });
  RecordingLocator loc;
  RangeFetcher fetcher(fake, testing::fetcher_on(Env::real()));
  auto results = fetcher.fetch(loc.locator(), 5000, {{1234, 100}, {0, 5000}, {4999, 1}});
  ASSERT_TRUE(results[0].ok()) << results[0].status().message();
  EXPECT_EQ(*results[0], content->substr(1234, 100));
  ASSERT_TRUE(results[1].ok());
  EXPECT_EQ(*results[1], *content);
  ASSERT_TRUE(results[2].ok());
  EXPECT_EQ(*results[2], content->substr(4999, 1));
}

TEST(RangeFetcher, RejectsA200ThatIsNotTheWholeFile) {
  auto content = std::make_shared<const std::string>(file_content(5000));
  FakeTransport fake([&](const HttpRequest& req) -> Result<HttpResponse> {
    // Exactly the range's bytes, but as a 200: nothing proves what they are.
    auto pr = *parse_range(req);
    HttpResponse r;
    r.status = 200;
    r.body = content->substr(pr.first, pr.last - pr.first + 1);
    return r;
  });
  RecordingLocator loc;
  RangeFetcher fetcher(fake, testing::fetcher_on(Env::real()));
  auto r = fetch_one(fetcher, loc.locator(), 5000, {100, 100});
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), Code::kCorrupt);
  EXPECT_THAT(r.status().message(), HasSubstr("ignored Range"));
  EXPECT_THAT(r.status().message(), Not(HasSubstr("s3cr3t")));
}

TEST(RangeFetcher, MaxBodyAllowsAWholeSmallFileButOnlyTheRangeOfABigOne) {
  FakeTransport fake([](const HttpRequest&) -> Result<HttpResponse> { return status_only(500); });
  RecordingLocator loc;
  RangeFetcher fetcher(fake, testing::fetcher_on(Env::real()));
  fetch_one(fetcher, loc.locator(), 1000, {0, 10});
  fetch_one(fetcher, loc.locator(), 10ull << 30, {5, 4096});
  auto reqs = fake.requests();
  ASSERT_EQ(reqs.size(), 2u);
  EXPECT_EQ(reqs[0].max_body, 1000u);  // a 200 with the whole small file can still be sliced
  EXPECT_EQ(reqs[1].max_body, 4096u);  // a 200 for a 10 GiB file aborts after one range's worth
}

// Each range runs on its own connection: over one multiplexed connection, ranges in flight
// would share one connection's bandwidth.
TEST(RangeFetcher, RangesAskForConnectionsOfTheirOwn) {
  auto content = std::make_shared<const std::string>(file_content(1000));
  FakeTransport fake(honest_cdn(content));
  RecordingLocator loc;
  RangeFetcher fetcher(fake, testing::fetcher_on(Env::real()));
  auto r = fetch_one(fetcher, loc.locator(), content->size(), {0, 10});
  ASSERT_TRUE(r.ok()) << r.status().message();
  auto reqs = fake.requests();
  ASSERT_EQ(reqs.size(), 1u);
  EXPECT_TRUE(reqs[0].own_connection);
}

TEST(RangeFetcher, Forbidden403RefreshesTheLocationExactlyOnce) {
  auto content = std::make_shared<const std::string>(file_content(1000));
  const std::string fresh = "https://cdn.example/blobs/abc?X-Amz-Signature=fresh";
  FakeTransport fake([&](const HttpRequest& req) -> Result<HttpResponse> {
    if (req.url != fresh) return status_only(403);  // the old signature expired
    return partial(*content, *parse_range(req), 1000);
  });
  RecordingLocator loc;
  RangeFetcher fetcher(fake, testing::fetcher_on(Env::real()));
  loc.refreshed_url = fresh;
  auto r = fetch_one(fetcher, loc.locator(), 1000, {0, 10});
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_EQ(*r, content->substr(0, 10));
  EXPECT_THAT(loc.seen(), ElementsAre(false, true));
  auto reqs = fake.requests();
  ASSERT_EQ(reqs.size(), 2u);
  EXPECT_EQ(reqs[1].url, fresh);
}

TEST(RangeFetcher, OneRefreshServesEveryRangeOnTheExpiredUrl) {
  auto content = std::make_shared<const std::string>(file_content(1000));
  const std::string fresh = "https://cdn.example/blobs/abc?X-Amz-Signature=fresh";
  FakeTransport fake([&](const HttpRequest& req) -> Result<HttpResponse> {
    if (req.url != fresh) return status_only(403);
    return partial(*content, *parse_range(req), 1000);
  });
  RecordingLocator loc;
  RangeFetcher fetcher(fake, testing::fetcher_on(Env::real()));
  loc.refreshed_url = fresh;
  std::vector<ByteRange> ranges;
  for (uint64_t i = 0; i < 16; ++i) ranges.push_back({i * 60, 60});
  auto results = fetcher.fetch(loc.locator(), 1000, ranges);
  for (size_t i = 0; i < ranges.size(); ++i) {
    ASSERT_TRUE(results[i].ok()) << results[i].status().message();
    EXPECT_EQ(*results[i], content->substr(ranges[i].offset, ranges[i].length));
  }
  EXPECT_THAT(loc.seen(), ElementsAre(false, true));
  EXPECT_EQ(fake.request_count(), 32u);  // each range: one 403, one success
}

TEST(RangeFetcher, Forbidden403AfterTwoRefreshesIsPermissionDenied) {
  FakeTransport fake([](const HttpRequest&) -> Result<HttpResponse> { return status_only(403); });
  RecordingLocator loc;
  RangeFetcher fetcher(fake, testing::fetcher_on(Env::real()));
  auto r = fetch_one(fetcher, loc.locator(), 1000, {0, 10});
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), Code::kPermissionDenied);
  EXPECT_THAT(r.status().message(), HasSubstr("cdn.example"));
  EXPECT_THAT(loc.seen(), ElementsAre(false, true, true));  // bounded: a denied object does not loop
  EXPECT_EQ(fake.request_count(), 3u);
}

// The CDN rotated its signing key between signing the fresh URL and its use (or an edge refused
// it once): the fetch asks for one more location instead of failing the read.
TEST(RangeFetcher, ARefreshedUrlRefusedOnceIsRefreshedAgain) {
  auto content = std::make_shared<const std::string>(file_content(1000));
  FakeTransport fake([&](const HttpRequest& req) -> Result<HttpResponse> {
    if (req.url != "https://cdn.example/u2") return status_only(403);
    return partial(*content, *parse_range(req), 1000);
  });
  RecordingLocator numbered;
  RangeFetcher fetcher(fake, testing::fetcher_on(Env::real()));
  hand_out_numbered_urls(numbered);
  Locator loc = numbered.locator();
  auto r = fetch_one(fetcher, loc, 1000, {0, 10});
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_EQ(*r, content->substr(0, 10));
  EXPECT_EQ(numbered.seen(), (std::vector<bool>{false, true, true}));
  EXPECT_EQ(fake.request_count(), 3u);
}

TEST(RangeFetcher, FailedRefreshReportsTheLocatorsError) {
  FakeTransport fake([](const HttpRequest&) -> Result<HttpResponse> { return status_only(403); });
  RecordingLocator loc;
  RangeFetcher fetcher(fake, testing::fetcher_on(Env::real()));
  loc.fail_refresh = NotFound("repo gone");
  auto r = fetch_one(fetcher, loc.locator(), 1000, {0, 10});
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), Code::kNotFound);
  EXPECT_THAT(r.status().message(), HasSubstr("repo gone"));
  EXPECT_EQ(fake.request_count(), 1u);
}

TEST(RangeFetcher, StatusesMapToCodes) {
  const std::pair<long, Code> cases[] = {
      {404, Code::kNotFound}, {500, Code::kIo}, {302, Code::kIo}, {401, Code::kIo}};
  // (416 is re-resolved like a 403 first: tests/net/read_deadline_test.cc.)
  for (auto [status, code] : cases) {
    FakeTransport fake([status = status](const HttpRequest&) -> Result<HttpResponse> { return status_only(status); });
    RecordingLocator loc;
    RangeFetcher fetcher(fake, testing::fetcher_on(Env::real()));
    auto r = fetch_one(fetcher, loc.locator(), 1000, {0, 10});
    ASSERT_FALSE(r.ok()) << status;
    EXPECT_EQ(r.status().code(), code) << status;
    EXPECT_THAT(r.status().message(), Not(HasSubstr("s3cr3t")));
    EXPECT_EQ(fake.request_count(), 1u) << status;  // never retried here
  }
}

TEST(RangeFetcher, OtherStatusNamesTheStatus) {
  FakeTransport fake([](const HttpRequest&) -> Result<HttpResponse> { return status_only(502); });
  RecordingLocator loc;
  RangeFetcher fetcher(fake, testing::fetcher_on(Env::real()));
  auto r = fetch_one(fetcher, loc.locator(), 1000, {0, 10});
  ASSERT_FALSE(r.ok());
  EXPECT_THAT(r.status().message(), HasSubstr("502"));
}

TEST(RangeFetcher, TransportErrorKeepsItsCodeWithContext) {
  FakeTransport fake([](const HttpRequest&) -> Result<HttpResponse> { return Timeout("stalled for 20 s"); });
  RecordingLocator loc;
  RangeFetcher fetcher(fake, testing::fetcher_on(Env::real()));
  auto r = fetch_one(fetcher, loc.locator(), 1000, {0, 10});
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), Code::kTimeout);
  EXPECT_THAT(r.status().message(), HasSubstr("stalled for 20 s"));
  EXPECT_THAT(r.status().message(), HasSubstr("bytes 0-9"));
}

TEST(RangeFetcher, RangePastEndOfFileIsTheCallersBug) {
  FakeTransport fake([](const HttpRequest&) -> Result<HttpResponse> { return status_only(500); });
  RecordingLocator loc;
  RangeFetcher fetcher(fake, testing::fetcher_on(Env::real()));
  auto results = fetcher.fetch(loc.locator(), 1000,
                               {{990, 11}, {1001, 0}, {UINT64_MAX, 2}, {5, UINT64_MAX}});
  for (const auto& r : results) {
    ASSERT_FALSE(r.ok());
    EXPECT_EQ(r.status().code(), Code::kInvalidArgument) << r.status().message();
  }
  EXPECT_EQ(fake.request_count(), 0u);
  EXPECT_TRUE(loc.seen().empty());
}

TEST(RangeFetcher, ZeroLengthRangeNeedsNoRequest) {
  FakeTransport fake([](const HttpRequest&) -> Result<HttpResponse> { return status_only(500); });
  RecordingLocator loc;
  RangeFetcher fetcher(fake, testing::fetcher_on(Env::real()));
  auto results = fetcher.fetch(loc.locator(), 1000, {{0, 0}, {1000, 0}, {500, 0}});
  for (const auto& r : results) {
    ASSERT_TRUE(r.ok()) << r.status().message();
    EXPECT_EQ(*r, "");
  }
  std::promise<Result<std::string>> p;
  fetcher.fetch_async(loc.locator(), 1000, {7, 0}, [&](Result<std::string> r) { p.set_value(std::move(r)); });
  auto r = p.get_future().get();
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(*r, "");
  EXPECT_EQ(fake.request_count(), 0u);
  EXPECT_TRUE(loc.seen().empty());
}

TEST(RangeFetcher, LocatorFailureIsReturnedWithoutARequest) {
  FakeTransport fake([](const HttpRequest&) -> Result<HttpResponse> { return status_only(500); });
  RecordingLocator loc;
  RangeFetcher fetcher(fake, testing::fetcher_on(Env::real()));
  loc.fail = PermissionDenied("gated repo: accept the conditions on the Hub");
  auto results = fetcher.fetch(loc.locator(), 1000, {{0, 10}, {10, 10}});
  for (const auto& r : results) {
    ASSERT_FALSE(r.ok());
    EXPECT_EQ(r.status().code(), Code::kPermissionDenied);
  }
  EXPECT_EQ(fake.request_count(), 0u);
}

TEST(RangeFetcher, EmptyBatchReturnsAtOnce) {
  FakeTransport fake([](const HttpRequest&) -> Result<HttpResponse> { return status_only(500); });
  RecordingLocator loc;
  RangeFetcher fetcher(fake, testing::fetcher_on(Env::real()));
  EXPECT_TRUE(fetcher.fetch(loc.locator(), 1000, {}).empty());
  EXPECT_TRUE(loc.seen().empty());
}

}  // namespace
}  // namespace hubfs
