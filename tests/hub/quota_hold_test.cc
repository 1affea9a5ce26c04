// A read whose resolve the Hub's quota held (issue 19's 60 s windows): the range request that
// follows keeps exactly the time the hold took on top of what its read's deadline had left, so
// a wait for a quota window is not a network fault; --read-timeout still bounds the network.
// The whole chain is real (HubClient over RetryingTransport with a QuotaGate, RangeFetcher) over a
// scripted Hub and CDN; time is a manual clock that the schedulers and the fake network move:
// no test waits for time to pass.
#include <gtest/gtest.h>

#include <atomic>
#include <condition_variable>
#include <future>
#include <mutex>
#include <thread>

#include "hub/hub_client.h"
#include "net/quota_gate.h"
#include "net/range_fetcher.h"
#include "net/retrying_transport.h"
#include "support/fake_transport.h"
#include "support/manual_clock.h"
#include "support/manual_env.h"

namespace hubfs {
namespace HUBFS_UNITY_ID {

using std::chrono::milliseconds;
using std::chrono::seconds;
using testing::FakeTransport;

constexpr char kEndpoint[] = "https://hub.test";
constexpr char kResolveUrl[] = "https://hub.test/org/x/resolve/main/f.bin";
constexpr char kCdnUrl[] = "https://cdn.test/blob";
const RepoRef kRepo{RepoType::kModel, "org/x", "main"};
constexpr uint64_t kFileSize = 4096;
// The --read-timeout of these reads.
constexpr seconds kReadTimeout{10};

std::string content() {
  std::string s(kFileSize, '\0');
  for (size_t i = 0; i < s.size(); ++i) s[i] = static_cast<char>((i * 131 + 7) % 251);
  return s;
}

// The Hub (resolves answer 302 to the CDN, with the resolvers bucket's RateLimit header) and
// the CDN (ranges), with the network's delays played on the manual clock.
class QuotaHold : public ::testing::Test {
 protected:
  QuotaHold()
      : gate_(gate_options()),
        inner_([this](const HttpRequest& r) { return answer(r); }),
        retrying_(inner_, policy(), net_env()),
        hub_(hub_config(), retrying_),
        fetcher_(retrying_, fetcher_options()) {}

  // The resolvers quota is spent and its window resets in `reset_s`: the next resolve is held
  // reset_s + 1 s (QuotaGate's margin).
  void spend_resolvers(int reset_s) {
    HttpResponse r;
    r.status = 200;
    r.headers = {{"ratelimit", "\"resolvers\";r=0;t=" + std::to_string(reset_s)},
                 {"ratelimit-policy", "\"fixed window\";\"resolvers\";q=200;w=60"}};
    gate_.after_answer(kResolveUrl, r, milliseconds(0));
  }

  // A read of the first 1000 bytes with its own deadline, as BlockReader starts one.
  Result<std::string> read() {
    auto done = std::make_shared<std::promise<Result<std::string>>>();
    auto answer = done->get_future();
    fetcher_.fetch_async([this](bool refresh) { return hub_.locate(kRepo, "f.bin", refresh); }, kFileSize,
                         {0, 1000}, [done](Result<std::string> r) { done->set_value(std::move(r)); },
                         Deadline::after(kReadTimeout, clock_));
    return answer.get();
  }

  std::vector<HttpRequest> requests_to(const std::string& method) const {
    std::vector<HttpRequest> out;
    for (const auto& r : inner_.requests())
      if (r.method == method) out.push_back(r);
    return out;
  }

  testing::ManualClock clock_;
  testing::FunctionEnv net_env_;  // the transport's and the fetcher's
  testing::FunctionEnv hub_env_;  // the Hub client's (its clock reads run on_hub_clock_)
  // How long a resolve takes on the network (not a quota wait).
  std::atomic<int64_t> resolve_ms_{20};
  // The CDN stalls this many attempts (each runs until it times out: 3 s, or the request's
  // deadline if that comes first, as CurlTransport abandons a transfer there), then serves.
  std::atomic<int> cdn_stalls_{0};
  // Runs when a quota hold starts, on the held caller's thread; returns how much of the hold it
  // let pass itself (the scheduler moves the clock by the rest).
  std::function<milliseconds(milliseconds)> on_hold_;
  // Runs whenever the Hub client reads its clock.
  std::function<void()> on_hub_clock_;
  std::atomic<int> holds_{0};

 private:
  Result<HttpResponse> answer(const HttpRequest& r) {
    HttpResponse resp;
    if (r.url.starts_with(kEndpoint)) {
      clock_.advance(milliseconds(resolve_ms_.load()));
      resp.status = 302;
      resp.headers = {{"location", kCdnUrl},
                      {"ratelimit", "\"resolvers\";r=150;t=50"},
                      {"ratelimit-policy", "\"fixed window\";\"resolvers\";q=200;w=60"}};
      return resp;
    }
    if (cdn_stalls_.fetch_sub(1) > 0) {
      clock_.advance(std::min<milliseconds>(seconds(3), r.deadline.remaining()));
      return Timeout("cdn.test stalled (no byte for 3 s)");
    }
    static const std::string bytes = content();
    auto range = find_header(r.headers, "Range");
    if (!range || *range != "bytes=0-999") return Internal("test: unexpected Range " + range.value_or("none"));
    resp.status = 206;
    resp.headers = {{"content-range", "bytes 0-999/" + std::to_string(kFileSize)}};
    resp.body = bytes.substr(0, 1000);
    return resp;
  }

  // Moves the clock by each delay (backoff, quota holds), then runs the work at once.
  std::function<void(milliseconds, std::function<void()>)> schedule() {
    return [this](milliseconds delay, std::function<void()> f) {
      milliseconds passed{0};
      if (delay >= seconds(5)) {  // only quota holds are this long here: backoff stays under 1 s
        ++holds_;
        if (on_hold_) passed = on_hold_(delay);
      }
      clock_.advance(delay - passed);
      f();
    };
  }
  QuotaGateOptions gate_options() {
    QuotaGateOptions o;
    o.endpoint = kEndpoint;
    o.env = &net_env();
    return o;
  }
  RetryPolicy policy() {
    RetryPolicy p;  // as the mount sets it: 200 ms doubling to 4 s
    p.base_delay = milliseconds(200);
    p.max_delay = milliseconds(4000);
    p.jitter = [] { return 0.5; };
    p.quota = &gate_;
    return p;
  }
  HubConfig hub_config() {
    HubConfig c;
    c.endpoint = kEndpoint;
    hub_env_.steady = [this] {
      const auto now = clock_.now();  // the time read, before the hook lets anything move it
      if (on_hub_clock_) on_hub_clock_();
      return now;
    };
    hub_env_.wall = [] { return std::chrono::system_clock::time_point(seconds(1700000000)); };
    c.env = &hub_env_;
    return c;
  }
  // The network's side: the manual clock, moved by each delay scheduled.
  testing::FunctionEnv& net_env() {
    net_env_.steady = [this] { return clock_.now(); };
    net_env_.schedule = schedule();
    return net_env_;
  }
  RangeFetcherOptions fetcher_options() {
    RangeFetcherOptions o;
    o.env = &net_env();
    o.jitter = [] { return 0.5; };
    return o;
  }

  QuotaGate gate_;
  FakeTransport inner_;
  RetryingTransport retrying_;

 protected:
  HubClient hub_;
  RangeFetcher fetcher_;
};

// Held 8 s of a 10 s read timeout, then a 3 s CDN stall: the range request had 18 s from the
// read's start, so its retry runs and the read gets its bytes. (Under the read's own deadline the
// stall ended past it, and the read failed: "gave up after 1 attempt".)
TEST_F(QuotaHold, AResolveHeldForTheQuotaGivesItsRangeRequestThatMuchMore) {
  spend_resolvers(7);
  cdn_stalls_ = 1;
  const auto start = clock_.now();
  auto r = read();
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_EQ(*r, content().substr(0, 1000));
  EXPECT_EQ(holds_.load(), 1);
  auto gets = requests_to("GET");
  ASSERT_EQ(gets.size(), 2u);
  for (const auto& g : gets) EXPECT_EQ(g.deadline.at(), start + kReadTimeout + seconds(8));
}

// The same hold, but the CDN never answers: the read still ends, at its timeout plus the hold
// and not a moment later, as a timeout.
TEST_F(QuotaHold, ANetworkStallStillFailsAtTheReadTimeout) {
  spend_resolvers(7);
  cdn_stalls_ = 1000;
  const auto start = clock_.now();
  auto r = read();
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), Code::kTimeout) << r.status().message();
  EXPECT_EQ(clock_.now(), start + kReadTimeout + seconds(8));
  EXPECT_GT(requests_to("GET").size(), 1u) << "retried within the moved deadline";
}

// A resolve that is slow on the network (8 s, no quota wait) is a network fault: the range
// request keeps only what the read's deadline left, and fails at it.
TEST_F(QuotaHold, ASlowResolveIsNoQuotaWait) {
  resolve_ms_ = 8000;
  cdn_stalls_ = 1000;
  const auto start = clock_.now();
  auto r = read();
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), Code::kTimeout) << r.status().message();
  EXPECT_EQ(holds_.load(), 0);
  for (const auto& g : requests_to("GET")) EXPECT_EQ(g.deadline.at(), start + kReadTimeout);
  EXPECT_EQ(clock_.now(), start + kReadTimeout);
}

// The second read of the file finds its location in memory: it waited for no quota, and its
// range request keeps exactly its own read's deadline.
TEST_F(QuotaHold, ACachedLocationAddsNothing) {
  spend_resolvers(7);
  ASSERT_TRUE(read().ok());
  ASSERT_EQ(holds_.load(), 1);
  cdn_stalls_ = 1000;
  const auto second = clock_.now();
  auto r = read();
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), Code::kTimeout) << r.status().message();
  EXPECT_EQ(requests_to("HEAD").size(), 1u) << "the second read's location came from memory";
  auto gets = requests_to("GET");
  ASSERT_GT(gets.size(), 1u);
  for (size_t i = 1; i < gets.size(); ++i) EXPECT_EQ(gets[i].deadline.at(), second + kReadTimeout);
  EXPECT_EQ(clock_.now(), second + kReadTimeout);
}

// Locations say how long their caller waited for the quota: the caller whose resolve was held,
// the whole hold; a caller that joined that resolve 5 s into the 8 s hold, the 3 s it waited;
// a later caller served from memory, nothing.
TEST_F(QuotaHold, CallersSharingOneResolveWaitedOnlyWhileTheyWereThere) {
  spend_resolvers(7);
  resolve_ms_ = 0;  // the joiner's wait is then the rest of the hold exactly
  std::mutex mu;
  std::condition_variable cv;
  bool in_hold = false;
  bool joined = false;
  std::atomic<std::thread::id> second_caller{};
  on_hold_ = [&](milliseconds hold) {
    EXPECT_EQ(hold, seconds(8));
    clock_.advance(seconds(5));  // the first 5 s of the hold pass, then the second caller comes
    std::unique_lock<std::mutex> lock(mu);
    in_hold = true;
    cv.notify_all();
    cv.wait(lock, [&] { return joined; });
    return milliseconds(seconds(5));
  };
  // The second caller has joined the resolve once it reads the client's clock: locate does so
  // on joining, and nowhere before that on a path it has never resolved.
  on_hub_clock_ = [&] {
    if (std::this_thread::get_id() != second_caller.load()) return;
    std::lock_guard<std::mutex> lock(mu);
    joined = true;
    cv.notify_all();
  };
  Result<Location> first = Internal("not run");
  Result<Location> second = Internal("not run");
  std::thread a([&] { first = hub_.locate(kRepo, "f.bin"); });
  {
    std::unique_lock<std::mutex> lock(mu);
    cv.wait(lock, [&] { return in_hold; });
  }
  std::thread b([&] {
    second_caller = std::this_thread::get_id();
    second = hub_.locate(kRepo, "f.bin");
  });
  a.join();
  b.join();
  ASSERT_TRUE(first.ok()) << first.status().message();
  ASSERT_TRUE(second.ok()) << second.status().message();
  EXPECT_EQ(first->quota_waited, seconds(8));
  EXPECT_EQ(second->quota_waited, seconds(3));
  EXPECT_EQ(requests_to("HEAD").size(), 1u) << "one resolve for both";
  auto third = hub_.locate(kRepo, "f.bin");
  ASSERT_TRUE(third.ok());
  EXPECT_EQ(third->quota_waited, milliseconds(0));
}

}  // namespace
}  // namespace hubfs
