// RangeFetcher and the Hub's quota: a range request keeps, on top of its read's deadline, the time
// its location was held for the quota (Location::quota_waited), and the time it queued for a
// locator thread kept busy by a held locate (at most that hold). Time is a manual clock; the
// Locators are fakes the test releases.
#include <gtest/gtest.h>

#include <condition_variable>
#include <future>
#include <mutex>

#include "net/range_fetcher.h"
#include "support/fake_transport.h"
#include "support/manual_clock.h"
#include "support/manual_env.h"

namespace hubfs {
namespace HUBFS_UNITY_ID {

using std::chrono::milliseconds;
using std::chrono::seconds;
using testing::FakeTransport;
using testing::ManualClock;

constexpr uint64_t kSize = 100;
constexpr seconds kReadTimeout{10};
// RangeFetcher's locator threads: a first resolve beyond them queues.
constexpr int kLocatorThreads = RangeFetcher::kLocatorThreads;

// Serves every range of a kSize-byte file of 'x'.
Result<HttpResponse> serve(const HttpRequest& req) {
  HttpResponse r;
  r.status = 206;
  r.headers = {{"content-range", "bytes 0-9/" + std::to_string(kSize)}};
  r.body = std::string(10, 'x');
  return r;
}

struct Fixture {
  ManualClock clock;
  testing::FunctionEnv env;
  FakeTransport cdn{serve};
  RangeFetcher fetcher{cdn, options()};

  RangeFetcherOptions options() {
    env.steady = [this] { return clock.now(); };
    RangeFetcherOptions o;
    o.env = &env;
    return o;
  }
  // Starts a fetch of bytes 0-9 from `url`, located by `locate`.
  std::future<Result<std::string>> fetch(Locator locate, Deadline deadline) {
    auto done = std::make_shared<std::promise<Result<std::string>>>();
    auto answer = done->get_future();
    fetcher.fetch_async(std::move(locate), kSize, {0, 10},
                        [done](Result<std::string> r) { done->set_value(std::move(r)); }, deadline);
    return answer;
  }
  // The deadline the range request sent to `url` carried.
  Deadline deadline_sent_to(const std::string& url) {
    for (const auto& r : cdn.requests())
      if (r.url == url) return r.deadline;
    ADD_FAILURE() << "no request to " << url;
    return Deadline::never();
  }
};

Locator located_at(std::string url, milliseconds quota_waited) {
  return [url, quota_waited](bool) { return Result<Location>(Location{url, {}, {}, quota_waited}); };
}

TEST(RangeFetcherQuota, ALocationHeldForTheQuotaMovesTheRangesDeadlineByThatMuch) {
  Fixture f;
  const auto start = f.clock.now();
  ASSERT_TRUE(f.fetch(located_at("https://cdn.test/held", seconds(8)), Deadline::after(kReadTimeout, f.clock)).get().ok());
  ASSERT_TRUE(f.fetch(located_at("https://cdn.test/free", seconds(0)), Deadline::after(kReadTimeout, f.clock)).get().ok());
  EXPECT_EQ(f.deadline_sent_to("https://cdn.test/held").at(), start + kReadTimeout + seconds(8));
  EXPECT_EQ(f.deadline_sent_to("https://cdn.test/free").at(), start + kReadTimeout);
  // A fetch without a deadline (fetch(), tools) stays without one.
  ASSERT_TRUE(f.fetch(located_at("https://cdn.test/never", seconds(8)), Deadline::never()).get().ok());
  EXPECT_TRUE(f.deadline_sent_to("https://cdn.test/never").is_never());
}

// Every locator thread is busy with a locate that takes 8 s; one more fetch waits for one. When
// those locates were held for the quota, that fetch's wait was the quota's: its range keeps it.
// When they were slow on the network, it was not: it keeps only its read's deadline.
TEST(RangeFetcherQuota, AFetchQueuedBehindHeldLocatesKeepsItsWait) {
  for (bool held : {true, false}) {
    SCOPED_TRACE(held ? "locates held for the quota" : "locates slow on the network");
    Fixture f;
    std::mutex mu;
    std::condition_variable cv;
    int running = 0;
    bool released = false;
    auto busy = [&](int i) -> Locator {
      return [&, i](bool) {
        std::unique_lock<std::mutex> lock(mu);
        ++running;
        cv.notify_all();
        cv.wait(lock, [&] { return released; });
        return Result<Location>(
            Location{"https://cdn.test/busy" + std::to_string(i), {}, {}, held ? seconds(8) : seconds(0)});
      };
    };
    std::vector<std::future<Result<std::string>>> busy_fetches;
    for (int i = 0; i < kLocatorThreads; ++i) busy_fetches.push_back(f.fetch(busy(i), Deadline::never()));
    {
      std::unique_lock<std::mutex> lock(mu);
      cv.wait(lock, [&] { return running == kLocatorThreads; });
    }
    const auto start = f.clock.now();
    auto queued = f.fetch(located_at("https://cdn.test/queued", seconds(0)), Deadline::after(kReadTimeout, f.clock));
    f.clock.advance(seconds(8));  // the busy locates take 8 s
    {
      std::lock_guard<std::mutex> lock(mu);
      released = true;
    }
    cv.notify_all();
    for (auto& b : busy_fetches) ASSERT_TRUE(b.get().ok());
    ASSERT_TRUE(queued.get().ok());
    EXPECT_EQ(f.deadline_sent_to("https://cdn.test/queued").at(),
              start + kReadTimeout + (held ? seconds(8) : seconds(0)));
  }
}

}  // namespace
}  // namespace hubfs
