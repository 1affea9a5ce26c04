// QuotaGate (the Hub's fixed-window quotas as the client follows them) on an injected clock, and
// RetryingTransport consulting it with a recording scheduler: no test waits.
#include "net/quota_gate.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <atomic>
#include <mutex>

#include "net/retrying_transport.h"
#include "support/fake_transport.h"
#include "support/manual_env.h"

namespace hubfs {
namespace HUBFS_UNITY_ID {

using std::chrono::milliseconds;
using std::chrono::seconds;
using ::testing::ElementsAre;
using testing::FakeTransport;

constexpr char kEndpoint[] = "https://hub.test";
constexpr char kApiUrl[] = "https://hub.test/api/models/org/x/tree/main";
constexpr char kResolveUrl[] = "https://hub.test/org/x/resolve/abc/f.bin";

HttpResponse answer(long status, const std::string& bucket, int remaining, int reset_s, int quota = 10,
                    int window = 300) {
  HttpResponse r;
  r.status = status;
  r.headers = {{"ratelimit", "\"" + bucket + "\";r=" + std::to_string(remaining) + ";t=" + std::to_string(reset_s)},
               {"ratelimit-policy", "\"fixed window\";\"" + bucket + "\";q=" + std::to_string(quota) +
                                        ";w=" + std::to_string(window)}};
  return r;
}

// The gate's time: a manual Env, moved by the test (`t` reads like the clock it replaced).
struct FakeClock {
  testing::ManualEnv env;
  MonotonicClock::time_point now() const { return env.now(); }
  void advance(std::chrono::nanoseconds d) { env.advance(d); }
};

QuotaGate make_gate(FakeClock& clock, milliseconds max_wait = seconds(330)) {
  QuotaGateOptions o;
  o.endpoint = kEndpoint;
  o.max_wait = max_wait;
  o.env = &clock.env;
  return QuotaGate(o);
}

TEST(RateLimitHeaders, ParseAsTheHubSendsThem) {
  auto rl = parse_ratelimit("\"api\";r=0;t=55");
  ASSERT_TRUE(rl);
  EXPECT_EQ(rl->bucket, "api");
  EXPECT_EQ(rl->remaining, 0);
  EXPECT_EQ(rl->reset_s, 55);
  EXPECT_EQ(parse_ratelimit(" \"resolvers\" ; r=12 ; t=3")->remaining, 12);
  EXPECT_FALSE(parse_ratelimit("r=0;t=55"));          // no bucket
  EXPECT_FALSE(parse_ratelimit("\"api\";r=0"));       // no reset
  EXPECT_FALSE(parse_ratelimit("\"api\";r=x;t=1"));
  auto policy = parse_ratelimit_policy("\"fixed window\";\"api\";q=500;w=300");
  ASSERT_TRUE(policy);
  EXPECT_EQ(*policy, std::make_pair(int64_t{500}, int64_t{300}));
  EXPECT_FALSE(parse_ratelimit_policy("\"fixed window\";\"api\";q=500"));
}

TEST(QuotaGate, BucketsByUrl) {
  FakeClock clock;
  QuotaGate gate = make_gate(clock);
  EXPECT_EQ(gate.bucket_of(kApiUrl), "api");
  EXPECT_EQ(gate.bucket_of(kResolveUrl), "resolvers");
  EXPECT_EQ(gate.bucket_of("https://hub.test/datasets/org/x/resolve/main/a?x=1"), "resolvers");
  EXPECT_EQ(gate.bucket_of("https://hub.test/api/resolve-chain/models/org/x/abc/f"), "resolvers");
  EXPECT_EQ(gate.bucket_of("https://cdn.test/api/x"), "");  // another host: the CDN is not counted
  EXPECT_EQ(gate.bucket_of("https://hub.test:444/api/x"), "");
  EXPECT_EQ(gate.bucket_of("https://hub.test/favicon.ico"), "");
}

TEST(QuotaGate, SendsFreelyUntilTheQuotaRunsLow) {
  FakeClock clock;
  QuotaGate gate = make_gate(clock);
  EXPECT_EQ(gate.before_send(kApiUrl, milliseconds(0)), milliseconds(0));  // nothing known yet
  gate.after_answer(kApiUrl, answer(200, "api", 50, 100, 100), milliseconds(0));
  EXPECT_EQ(gate.before_send(kApiUrl, milliseconds(0)), milliseconds(0));
  EXPECT_EQ(gate.before_send(kResolveUrl, milliseconds(0)), milliseconds(0));  // its own bucket
}

TEST(QuotaGate, SpreadsTheLastRequestsOverTheRestOfTheWindow) {
  FakeClock clock;
  QuotaGate gate = make_gate(clock);
  // 3 of 30 left (the slow-down point: 10%), the window resets in 40 s.
  gate.after_answer(kApiUrl, answer(200, "api", 3, 40, 30), milliseconds(0));
  EXPECT_EQ(gate.before_send(kApiUrl, milliseconds(0)), milliseconds(0));  // the first goes now
  milliseconds second = gate.before_send(kApiUrl, milliseconds(0));
  milliseconds third = gate.before_send(kApiUrl, milliseconds(0));
  EXPECT_EQ(second, milliseconds(10000));  // 40 s over 3 remaining + 1
  EXPECT_GT(third, second);
  // Spent: the next waits for the reset (+1 s).
  EXPECT_EQ(gate.before_send(kApiUrl, milliseconds(0)), milliseconds(41000));
  // Once the window has passed nothing is known: free again.
  clock.advance(seconds(41));
  EXPECT_EQ(gate.before_send(kApiUrl, milliseconds(0)), milliseconds(0));
}

TEST(QuotaGate, A429WaitsForTheResetHoweverLong) {
  FakeClock clock;
  QuotaGate gate = make_gate(clock);
  auto wait = gate.after_answer(kApiUrl, answer(429, "api", 0, 299), milliseconds(0));
  ASSERT_TRUE(wait);
  EXPECT_EQ(*wait, milliseconds(300000));  // the whole window, +1 s
  // Within the budget only: a request that already waited 300 s gets the remaining 30 s.
  EXPECT_EQ(*gate.after_answer(kApiUrl, answer(429, "api", 0, 299), seconds(300)), milliseconds(30000));
  EXPECT_FALSE(gate.after_answer(kApiUrl, answer(429, "api", 0, 299), seconds(330)));
  EXPECT_EQ(gate.snapshot().at("api").rate_limited, 3u);
}

TEST(QuotaGate, OnlyA429MakesTheHeaderBinding) {
  FakeClock clock;
  QuotaGate gate = make_gate(clock);
  // A 503 that carries the (always present) header: not a quota wait.
  EXPECT_FALSE(gate.after_answer(kApiUrl, answer(503, "api", 0, 200), milliseconds(0)));
  // A 429 whose header says quota remains: not the quota either (ordinary backoff).
  EXPECT_FALSE(gate.after_answer(kApiUrl, answer(429, "api", 5, 200), milliseconds(0)));
  // A CDN 429: not ours to count.
  HttpResponse cdn;
  cdn.status = 429;
  EXPECT_FALSE(gate.after_answer("https://cdn.test/blob", cdn, milliseconds(0)));
}

TEST(QuotaGate, ReportsWhatWaitsAndUntilWhen) {
  FakeClock clock;
  QuotaGate gate = make_gate(clock);
  gate.after_answer(kResolveUrl, answer(200, "resolvers", 7, 60, 200, 300), milliseconds(0));
  EXPECT_FALSE(gate.waiting_until());
  gate.wait_started("resolvers", clock.now() + seconds(30));
  gate.wait_started("resolvers", clock.now() + seconds(45));
  EXPECT_EQ(*gate.waiting_until(), clock.now() + seconds(45));
  auto s = gate.snapshot().at("resolvers");
  EXPECT_EQ(s.quota, 200);
  EXPECT_EQ(s.window_s, 300);
  EXPECT_EQ(s.remaining, 7);
  EXPECT_EQ(s.resets_in_s, 60);
  EXPECT_EQ(s.waiting, 2u);
  EXPECT_EQ(s.waiting_until_s, 45);
  gate.wait_ended("resolvers", clock.now() + seconds(45));
  EXPECT_EQ(*gate.waiting_until(), clock.now() + seconds(30));
  gate.wait_ended("resolvers", clock.now() + seconds(30));
  EXPECT_FALSE(gate.waiting_until());
}

// The reader's wait stretches for quota waits that ended too (a read's resolve held 5 s of its
// 10 s read timeout gives its range request 5 s more than the read had: the read waits as long).
TEST(QuotaGate, TheLastWaitEndOutlivesTheWait) {
  FakeClock clock;
  QuotaGate gate = make_gate(clock);
  EXPECT_FALSE(gate.last_wait_end());
  gate.wait_started("resolvers", clock.now() + seconds(45));
  gate.wait_started("api", clock.now() + seconds(30));  // an earlier end does not hide the later one
  EXPECT_EQ(*gate.last_wait_end(), clock.now() + seconds(45));
  gate.wait_ended("resolvers", clock.now() + seconds(45));
  gate.wait_ended("api", clock.now() + seconds(30));
  EXPECT_FALSE(gate.waiting_until());
  EXPECT_EQ(*gate.last_wait_end(), clock.now() + seconds(45));
}

// Records each delay asked for and runs at once.
struct RecordingScheduler {
  testing::ManualEnv env{testing::ManualEnv::Timers::kRunAtOnce};
  Env& fn() { return env; }
};

TEST(RetryingTransportQuota, Waits429sOutBeyondTheAttemptLimit) {
  FakeClock clock;
  QuotaGate gate = make_gate(clock, seconds(1000));
  std::atomic<int> calls{0};
  // Six 429s in a row (more than the 5 attempts the policy allows for faults), then the answer.
  FakeTransport inner([&](const HttpRequest&) -> Result<HttpResponse> {
    if (++calls <= 6) return answer(429, "api", 0, 59);
    return answer(200, "api", 9, 59);
  });
  RecordingScheduler sched;
  RetryPolicy policy;
  policy.quota = &gate;
  RetryingTransport t(inner, policy, sched.fn());
  HttpRequest req;
  req.url = kApiUrl;
  auto r = t.perform(req);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->status, 200);
  EXPECT_EQ(calls.load(), 7);
  // Each wait is the window's reset + 1 s; none counted as a retry attempt.
  EXPECT_EQ(sched.env.delays().size(), 6u);
  for (milliseconds d : sched.env.delays()) EXPECT_EQ(d, milliseconds(60000));
  EXPECT_EQ(r->quota_waited, milliseconds(6 * 60000)) << "the answer says how long the quota held it";
}

TEST(RetryingTransportQuota, GivesUpWithThe429AfterMaxWait) {
  FakeClock clock;
  QuotaGate gate = make_gate(clock, seconds(100));
  std::atomic<int> calls{0};
  FakeTransport inner([&](const HttpRequest&) -> Result<HttpResponse> {
    ++calls;
    return answer(429, "api", 0, 59);
  });
  RecordingScheduler sched;
  RetryPolicy policy;
  policy.quota = &gate;
  RetryingTransport t(inner, policy, sched.fn());
  HttpRequest req;
  req.url = kApiUrl;
  auto r = t.perform(req);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->status, 429);  // the answer, with its RateLimit header for the message
  // 60 s, then the 40 s left of the 100 s budget, then the 429 is the answer.
  EXPECT_THAT(sched.env.delays(), ElementsAre(milliseconds(60000), milliseconds(40000)));
  EXPECT_EQ(calls.load(), 3);
}

TEST(RetryingTransportQuota, HoldsRequestsWhenTheQuotaIsSpent) {
  FakeClock clock;
  QuotaGate gate = make_gate(clock);
  gate.after_answer(kApiUrl, answer(200, "api", 0, 20), milliseconds(0));
  FakeTransport inner([&](const HttpRequest&) -> Result<HttpResponse> { return answer(200, "api", 9, 300); });
  RecordingScheduler sched;
  RetryPolicy policy;
  policy.quota = &gate;
  RetryingTransport t(inner, policy, sched.fn());
  HttpRequest req;
  req.url = kApiUrl;
  auto r = t.perform(req);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->status, 200);
  EXPECT_THAT(sched.env.delays(), ElementsAre(milliseconds(21000)));  // held until the reset, then sent once
  EXPECT_EQ(inner.request_count(), 1u);
  EXPECT_EQ(r->quota_waited, milliseconds(21000));
  // A CDN request is never held.
  HttpRequest cdn;
  cdn.url = "https://cdn.test/blob";
  auto c = t.perform(cdn);
  ASSERT_TRUE(c.ok());
  EXPECT_EQ(sched.env.delays().size(), 1u);
  EXPECT_EQ(c->quota_waited, milliseconds(0));
}

// The time an answer reports is the quota's only: the backoff of a 503 after the hold is the
// network's, and is not in it.
TEST(RetryingTransportQuota, QuotaWaitedCountsHoldsNotBackoff) {
  FakeClock clock;
  QuotaGate gate = make_gate(clock);
  gate.after_answer(kResolveUrl, answer(200, "resolvers", 0, 4), milliseconds(0));
  std::atomic<int> calls{0};
  FakeTransport inner([&](const HttpRequest&) -> Result<HttpResponse> {
    return answer(++calls == 1 ? 503 : 302, "resolvers", 100, 250, 200);
  });
  RecordingScheduler sched;
  RetryPolicy policy;
  policy.quota = &gate;
  policy.jitter = [] { return 0.5; };
  RetryingTransport t(inner, policy, sched.fn());
  HttpRequest req;
  req.method = "HEAD";
  req.url = kResolveUrl;
  auto r = t.perform(req);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->status, 302);
  EXPECT_THAT(sched.env.delays(), ElementsAre(milliseconds(5000), milliseconds(500)));  // the hold, the backoff
  EXPECT_EQ(r->quota_waited, milliseconds(5000));
}

TEST(RetryingTransportQuota, A503WithTheHeaderIsOrdinaryBackoff) {
  std::atomic<int> calls{0};
  FakeTransport inner([&](const HttpRequest&) -> Result<HttpResponse> {
    if (++calls == 1) return answer(503, "api", 0, 250);
    return answer(200, "api", 5, 250);
  });
  RecordingScheduler sched;
  RetryPolicy policy;
  policy.jitter = [] { return 0.5; };
  RetryingTransport t(inner, policy, sched.fn());  // even without a gate
  HttpRequest req;
  req.url = kApiUrl;
  ASSERT_EQ(t.perform(req)->status, 200);
  EXPECT_THAT(sched.env.delays(), ElementsAre(milliseconds(500)));  // not 251 s
}

}  // namespace
}  // namespace hubfs
