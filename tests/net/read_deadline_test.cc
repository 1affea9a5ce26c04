// The retry rules of a read (issue 19's CDN quirks): transient failures are retried until the
// read's deadline rather than a fixed number of times, a 416 for a range inside the file is a
// quirk to re-resolve, and a CDN refusing signed URLs is asked again with backoff. Time is a
// manual clock moved by the schedulers: no test waits for time to pass.
#include <gtest/gtest.h>

#include <atomic>
#include <cstdio>
#include <future>
#include <mutex>
#include <random>

#include "net/range_fetcher.h"
#include "net/retrying_transport.h"
#include "support/fake_transport.h"
#include "support/manual_clock.h"
#include "support/manual_env.h"
#include "support/pattern.h"

namespace hubfs {
namespace HUBFS_UNITY_ID {

using std::chrono::milliseconds;
using testing::FakeTransport;
using testing::ManualClock;

HttpRequest get_with(Deadline deadline) {
  HttpRequest r;
  r.url = "https://cdn.test/blob";
  r.deadline = deadline;
  return r;
}

HttpResponse status(long code) {
  HttpResponse r;
  r.status = code;
  return r;
}

// Runs a retry at once after moving the clock by its delay (and counts them).
struct ClockScheduler {
  ManualClock& clock;
  std::atomic<int> waits{0};
  testing::FunctionEnv env{};
  Env& fn() {
    env.steady = [this] { return clock.now(); };
    env.schedule = [this](milliseconds delay, std::function<void()> f) {
      clock.advance(delay);
      ++waits;
      f();
    };
    return env;
  }
};

RetryPolicy mount_policy() {
  RetryPolicy p;  // as the mount sets it: 200 ms doubling to 4 s
  p.base_delay = milliseconds(200);
  p.max_delay = milliseconds(4000);
  p.jitter = [] { return 0.5; };
  return p;
}

// 60 503s in a row, then the answer: five attempts used to end in EIO with most of the read's
// 120 s left; now the request is retried until it succeeds.
TEST(ReadDeadline, SixtyFiveHundredThreesWithinTheDeadlineAreRetriedToSuccess) {
  ManualClock clock;
  ClockScheduler sched{clock};
  std::atomic<int> calls{0};
  FakeTransport fake([&](const HttpRequest&) -> Result<HttpResponse> { return status(++calls <= 60 ? 503 : 200); });
  RetryingTransport retrying(fake, mount_policy(), sched.fn());
  auto r = retrying.perform(get_with(Deadline::after(std::chrono::seconds(300), clock)));
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_EQ(r->status, 200);
  EXPECT_EQ(fake.request_count(), 61u);
  EXPECT_EQ(retrying.retries(), 60u);
}

// A server that never recovers: the request ends at the read's deadline, as a timeout naming the
// last failure, without a retry scheduled past it.
TEST(ReadDeadline, RetriesStopAtTheDeadlineWithATimeoutNamingTheLastFailure) {
  ManualClock clock;
  ClockScheduler sched{clock};
  FakeTransport fake([&](const HttpRequest&) -> Result<HttpResponse> { return status(503); });
  RetryingTransport retrying(fake, mount_policy(), sched.fn());
  const auto start = clock.now();
  auto r = retrying.perform(get_with(Deadline::after(std::chrono::seconds(10), clock)));
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), Code::kTimeout);
  EXPECT_NE(r.status().message().find("HTTP 503"), std::string::npos) << r.status().message();
  EXPECT_NE(r.status().message().find("deadline"), std::string::npos) << r.status().message();
  EXPECT_LE(clock.now() - start, std::chrono::seconds(10));
  EXPECT_GT(fake.request_count(), 5u) << "more than the fixed count of old";
}

// Without a deadline (API requests), the fixed count still bounds the attempts.
TEST(ReadDeadline, RequestsWithoutADeadlineKeepTheirAttemptCount) {
  ManualClock clock;
  ClockScheduler sched{clock};
  FakeTransport fake([&](const HttpRequest&) -> Result<HttpResponse> { return status(503); });
  RetryingTransport retrying(fake, mount_policy(), sched.fn());
  auto r = retrying.perform(get_with(Deadline::never()));
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->status, 503);
  EXPECT_EQ(fake.request_count(), 5u);
}

class RangeQuirks : public ::testing::Test {
 protected:
  RangeQuirks() : content_(pattern(1 << 20)) {}
  // The support library's pattern (optimized and uninstrumented in the sanitizer builds).
  static std::string pattern(size_t n) { return testing::pattern_bytes(5, 0, n); }
  // A CDN that refuses the first `refusals` requests with `code`, then serves the range.
  FakeTransport::Handler cdn(long code, int refusals) {
    return [this, code, refusals](const HttpRequest& req) -> Result<HttpResponse> {
      if (++requests_ <= refusals) return status(code);
      auto range = find_header(req.headers, "Range");
      uint64_t a = 0, b = 0;
      if (!range || sscanf(range->c_str(), "bytes=%lu-%lu", &a, &b) != 2) return status(400);
      HttpResponse r = status(206);
      r.body = content_.substr(a, b - a + 1);
      r.headers.emplace_back("content-range", "bytes " + std::to_string(a) + "-" + std::to_string(b) + "/" +
                                                  std::to_string(content_.size()));
      return r;
    };
  }
  Locator locator() {
    return [this](bool refresh) {
      if (refresh) ++refreshes_;
      return Result<Location>(Location{"https://cdn.test/blob?sig=" + std::to_string(refreshes_.load()), {}, {}});
    };
  }
  Result<std::string> fetch(RangeFetcher& fetcher, ByteRange range, Deadline deadline) {
    std::promise<Result<std::string>> done;
    auto answer = done.get_future();
    fetcher.fetch_async(locator(), content_.size(), range,
                        [&](Result<std::string> r) { done.set_value(std::move(r)); }, deadline);
    return answer.get();
  }
  RangeFetcherOptions options() {
    RangeFetcherOptions o;
    o.env = &sched_.fn();
    o.jitter = [] { return 0.5; };
    return o;
  }

  const std::string content_;
  std::atomic<int> requests_{0};
  std::atomic<int> refreshes_{0};
  ManualClock clock_;
  ClockScheduler sched_{clock_};
};

// Two spurious 416s for a range well inside the file: re-resolved and retried, exact bytes.
TEST_F(RangeQuirks, TwoSpurious416sAreReResolvedAndRetried) {
  FakeTransport cdn_transport(cdn(416, 2));
  RangeFetcher fetcher(cdn_transport, options());
  auto r = fetch(fetcher, {1000, 5000}, Deadline::after(std::chrono::seconds(120), clock_));
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_EQ(*r, content_.substr(1000, 5000));
  EXPECT_EQ(refreshes_.load(), 2);
  EXPECT_EQ(cdn_transport.request_count(), 3u);
}

// Ten 403s from the CDN (an edge refusing valid signatures for a while): two fresh locations at
// once, then more with backoff, until it serves.
TEST_F(RangeQuirks, TenCdn403sAreAskedAgainWithBackoffUntilServed) {
  FakeTransport cdn_transport(cdn(403, 10));
  RangeFetcher fetcher(cdn_transport, options());
  auto r = fetch(fetcher, {0, 4096}, Deadline::after(std::chrono::seconds(120), clock_));
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_EQ(*r, content_.substr(0, 4096));
  EXPECT_EQ(refreshes_.load(), 10);
  EXPECT_EQ(sched_.waits.load(), 8) << "the first two fresh locations without a wait";
}

// A CDN that never stops refusing: the fetch ends at the deadline, a timeout naming the refusal;
// without a deadline, the third refusal is the answer (a truly denied object does not loop).
TEST_F(RangeQuirks, EndlessRefusalsEndAtTheDeadlineOrAfterTwoFreshLocationsWithout) {
  {
    FakeTransport cdn_transport(cdn(403, 1 << 30));
    RangeFetcher fetcher(cdn_transport, options());
    const auto start = clock_.now();
    auto r = fetch(fetcher, {0, 10}, Deadline::after(std::chrono::seconds(30), clock_));
    ASSERT_FALSE(r.ok());
    EXPECT_EQ(r.status().code(), Code::kTimeout) << r.status().message();
    EXPECT_NE(r.status().message().find("403"), std::string::npos) << r.status().message();
    EXPECT_LE(clock_.now() - start, std::chrono::seconds(30));
  }
  requests_ = 0;
  refreshes_ = 0;
  FakeTransport cdn_transport(cdn(416, 1 << 30));
  RangeFetcher fetcher(cdn_transport, options());
  auto r = fetch(fetcher, {0, 10}, Deadline::never());
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), Code::kOutOfRange);
  EXPECT_EQ(refreshes_.load(), 2);
}

// The three CDN faults of the issue in one stream of ranges through the retrying transport: two
// spurious 416s, then 60 503s in a burst, then 10 403s, spread over 48 concurrent ranges.
// Every range arrives exact (0 EIO).
TEST_F(RangeQuirks, SpuriousFourSixteensABurstOf503sAndCdn403sCostNoError) {
  std::atomic<int> n{0};
  FakeTransport inner([&](const HttpRequest& req) -> Result<HttpResponse> {
    const int i = ++n;
    if (i <= 2) return status(416);
    if (i <= 62) return status(503);
    if (i <= 72) return status(403);
    return cdn(0, 0)(req);
  });
  RetryingTransport retrying(inner, mount_policy(), sched_.fn());
  RangeFetcher fetcher(retrying, options());
  std::vector<std::future<Result<std::string>>> answers;
  std::vector<std::shared_ptr<std::promise<Result<std::string>>>> promises;
  for (int i = 0; i < 48; ++i) {
    auto p = std::make_shared<std::promise<Result<std::string>>>();
    answers.push_back(p->get_future());
    fetcher.fetch_async(locator(), content_.size(), {uint64_t(i) * 20000, 20000},
                        [p](Result<std::string> r) { p->set_value(std::move(r)); },
                        Deadline::after(std::chrono::seconds(120), clock_));
    promises.push_back(p);
  }
  int exact = 0;
  for (int i = 0; i < 48; ++i) {
    auto r = answers[i].get();
    EXPECT_TRUE(r.ok()) << i << ": " << r.status().message();
    if (r.ok() && *r == content_.substr(uint64_t(i) * 20000, 20000)) ++exact;
  }
  EXPECT_EQ(exact, 48);
  EXPECT_GE(n.load(), 72 + 48);
}

TEST(Deadline, NeverExpiresAndWithinTakesTheSooner) {
  ManualClock clock;
  EXPECT_FALSE(Deadline::never().expired());
  EXPECT_EQ(Deadline::never().remaining(), milliseconds::max());
  Deadline d = Deadline::after(milliseconds(1000), clock);
  EXPECT_EQ(d.remaining(), milliseconds(1000));
  EXPECT_EQ(d.within(milliseconds(300), clock).remaining(), milliseconds(300));
  EXPECT_EQ(d.within(milliseconds(3000), clock).remaining(), milliseconds(1000));
  clock.advance(milliseconds(999));
  EXPECT_FALSE(d.expired());
  EXPECT_EQ(d.remaining(), milliseconds(1));
  clock.advance(milliseconds(1));
  EXPECT_TRUE(d.expired());
  EXPECT_EQ(d.remaining(), milliseconds(0));
  // Never, within a budget: the budget, on the clock given (the Env's).
  const Deadline step = Deadline::never().within(milliseconds(5), clock);
  EXPECT_FALSE(step.is_never());
  EXPECT_EQ(step.remaining(), milliseconds(5));
  clock.advance(milliseconds(5));
  EXPECT_TRUE(step.expired());
}

}  // namespace
}  // namespace hubfs
