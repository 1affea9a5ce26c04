#include "net/retrying_transport.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <map>
#include <mutex>
#include <optional>

#include <atomic>
#include <future>
#include <mutex>

#include "support/fake_transport.h"
#include "support/manual_env.h"

namespace hubfs {
namespace HUBFS_UNITY_ID {

using std::chrono::milliseconds;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using testing::FakeTransport;

HttpResponse response(long status, Headers headers = {}) {
  HttpResponse r;
  r.status = status;
  r.headers = std::move(headers);
  return r;
}

HttpRequest get(const std::string& url) {
  HttpRequest r;
  r.url = url;
  return r;
}

// Records each delay asked for and retries at once: no test ever sleeps.
class RecordingScheduler : public testing::ManualEnv {
 public:
  RecordingScheduler() : ManualEnv(Timers::kRunAtOnce) {}
  Env& scheduler() { return *this; }
};

// Answers the i-th request (0-based) with script[i], the last entry for any later one.
FakeTransport::Handler scripted(std::vector<Result<HttpResponse>> script) {
  auto calls = std::make_shared<std::atomic<size_t>>(0);
  return [script = std::move(script), calls](const HttpRequest&) {
    size_t i = (*calls)++;
    return script[std::min(i, script.size() - 1)];
  };
}

RetryPolicy pinned_jitter(double unit) {
  RetryPolicy p;
  p.jitter = [unit] { return unit; };
  return p;
}

TEST(RetryingTransport, RetriesA503ThenSucceeds) {
  FakeTransport fake(scripted({response(503), response(200)}));
  RecordingScheduler sched;
  RetryingTransport retrying(fake, pinned_jitter(0.5), sched.scheduler());
  auto r = retrying.perform(get("https://hub/x"));
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->status, 200);
  EXPECT_EQ(fake.request_count(), 2u);
  // Full jitter: half of the first cap (1 s).
  EXPECT_THAT(sched.delays(), ElementsAre(milliseconds(500)));
}

TEST(RetryingTransport, BackoffDoublesToTheCapAndAttemptsAreBounded) {
  FakeTransport fake(scripted({response(503)}));
  RecordingScheduler sched;
  RetryPolicy policy = pinned_jitter(1.0);
  policy.max_attempts = 7;
  RetryingTransport retrying(fake, policy, sched.scheduler());
  auto r = retrying.perform(get("https://hub/x"));
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->status, 503);  // the last answer, as is
  EXPECT_EQ(fake.request_count(), 7u);
  EXPECT_THAT(sched.delays(), ElementsAre(milliseconds(1000), milliseconds(2000), milliseconds(4000),
                                          milliseconds(8000), milliseconds(8000), milliseconds(8000)));
}

TEST(RetryingTransport, JitterDrawsBelowTheCap) {
  FakeTransport fake(scripted({response(500)}));
  RecordingScheduler sched;
  RetryingTransport retrying(fake, RetryPolicy{}, sched.scheduler());  // the real PRNG
  auto r = retrying.perform(get("https://hub/x"));
  ASSERT_TRUE(r.ok());
  auto delays = sched.delays();
  ASSERT_EQ(delays.size(), 4u);  // 5 attempts
  milliseconds cap(1000);
  for (auto d : delays) {
    EXPECT_GE(d, milliseconds(0));
    EXPECT_LE(d, cap);
    cap = std::min(cap * 2, milliseconds(8000));
  }
}

TEST(RetryingTransport, HonoursRetryAfterSeconds) {
  FakeTransport fake(scripted({response(503, {{"retry-after", "7"}}), response(200)}));
  RecordingScheduler sched;
  RetryingTransport retrying(fake, pinned_jitter(0.5), sched.scheduler());
  auto r = retrying.perform(get("https://hub/x"));
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->status, 200);
  EXPECT_THAT(sched.delays(), ElementsAre(milliseconds(7000)));
}

TEST(RetryingTransport, RetryAfterIsCappedWithoutADeadline) {
  FakeTransport fake(scripted({response(429, {{"retry-after", "3600"}}), response(200)}));
  RecordingScheduler sched;
  RetryingTransport retrying(fake, pinned_jitter(0.5), sched.scheduler());
  ASSERT_TRUE(retrying.perform(get("https://hub/x")).ok());
  EXPECT_THAT(sched.delays(), ElementsAre(milliseconds(60000)));
}

TEST(RetryingTransport, RetryAfterBeyondTheCapIsHonouredWithinAReadsDeadline) {
  // huggingface_hub waits whatever Retry-After says: a read with 5 minutes left waits 2 of them.
  FakeTransport fake(scripted({response(503, {{"retry-after", "120"}}), response(200)}));
  RecordingScheduler sched;
  RetryingTransport retrying(fake, pinned_jitter(0.5), sched.scheduler());
  HttpRequest req = get("https://cdn/x");
  req.deadline = Deadline::after(std::chrono::minutes(5), sched.clock());
  auto r = retrying.perform(req);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->status, 200);
  EXPECT_THAT(sched.delays(), ElementsAre(milliseconds(120000)));
}

TEST(RetryingTransport, RetryAfterPastTheReadsDeadlineFailsAtOnce) {
  FakeTransport fake(scripted({response(503, {{"retry-after", "600"}}), response(200)}));
  RecordingScheduler sched;
  RetryingTransport retrying(fake, pinned_jitter(0.5), sched.scheduler());
  HttpRequest req = get("https://cdn/x");
  req.deadline = Deadline::after(std::chrono::minutes(5), sched.clock());
  auto r = retrying.perform(req);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), Code::kTimeout);
  EXPECT_THAT(r.status().message(), HasSubstr("due in 600000 ms"));
  EXPECT_EQ(fake.request_count(), 1u);
  EXPECT_TRUE(sched.delays().empty());
}

TEST(RetryingTransport, RetryAfterDateInThePastMeansNow) {
  FakeTransport fake(scripted({response(503, {{"retry-after", "Wed, 21 Oct 2015 07:28:00 GMT"}}), response(200)}));
  RecordingScheduler sched;
  RetryingTransport retrying(fake, pinned_jitter(0.5), sched.scheduler());
  ASSERT_TRUE(retrying.perform(get("https://hub/x")).ok());
  EXPECT_THAT(sched.delays(), ElementsAre(milliseconds(0)));
}

TEST(RetryingTransport, UnparsableRetryAfterFallsBackToBackoff) {
  FakeTransport fake(scripted({response(503, {{"retry-after", "soon"}}), response(200)}));
  RecordingScheduler sched;
  RetryingTransport retrying(fake, pinned_jitter(0.25), sched.scheduler());
  ASSERT_TRUE(retrying.perform(get("https://hub/x")).ok());
  EXPECT_THAT(sched.delays(), ElementsAre(milliseconds(250)));
}

TEST(RetryingTransport, RateLimitResetWaitsOneSecondMore) {
  FakeTransport fake(scripted({response(429, {{"ratelimit", "\"api\";r=0;t=55"}}), response(200)}));
  RecordingScheduler sched;
  RetryingTransport retrying(fake, pinned_jitter(0.5), sched.scheduler());
  auto r = retrying.perform(get("https://hub/api/models/x"));
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->status, 200);
  EXPECT_THAT(sched.delays(), ElementsAre(milliseconds(56000)));
}

TEST(RetryingTransport, RateLimitWithQuotaLeftIsNotAWaitOrder) {
  FakeTransport fake(scripted({response(503, {{"ratelimit", "\"api\";r=40;t=55"}}), response(200)}));
  RecordingScheduler sched;
  RetryingTransport retrying(fake, pinned_jitter(0.5), sched.scheduler());
  ASSERT_TRUE(retrying.perform(get("https://hub/x")).ok());
  EXPECT_THAT(sched.delays(), ElementsAre(milliseconds(500)));
}

TEST(RetryingTransport, ClientErrorsAndSuccessAreNotRetried) {
  for (long status : {200L, 206L, 302L, 400L, 401L, 403L, 404L, 416L}) {
    FakeTransport fake(scripted({response(status)}));
    RecordingScheduler sched;
    RetryingTransport retrying(fake, RetryPolicy{}, sched.scheduler());
    auto r = retrying.perform(get("https://hub/x"));
    ASSERT_TRUE(r.ok());
    EXPECT_EQ(r->status, status);
    EXPECT_EQ(fake.request_count(), 1u) << status;
    EXPECT_TRUE(sched.delays().empty()) << status;
  }
}

TEST(RetryingTransport, EveryTransientStatusIsRetried) {
  for (long status : {408L, 429L, 500L, 502L, 503L, 504L}) {
    FakeTransport fake(scripted({response(status), response(200)}));
    RecordingScheduler sched;
    RetryingTransport retrying(fake, pinned_jitter(0), sched.scheduler());
    auto r = retrying.perform(get("https://hub/x"));
    ASSERT_TRUE(r.ok());
    EXPECT_EQ(r->status, 200) << status;
    EXPECT_EQ(fake.request_count(), 2u) << status;
  }
}

TEST(RetryingTransport, TransportErrorsAreRetried) {
  FakeTransport fake(scripted({Unavailable("connection reset"), Timeout("stalled"), response(200)}));
  RecordingScheduler sched;
  RetryingTransport retrying(fake, pinned_jitter(1.0), sched.scheduler());
  auto r = retrying.perform(get("https://hub/x"));
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_EQ(r->status, 200);
  EXPECT_EQ(fake.request_count(), 3u);
  EXPECT_THAT(sched.delays(), ElementsAre(milliseconds(1000), milliseconds(2000)));
}

TEST(RetryingTransport, GivesUpOnTransportErrorsAfterMaxAttempts) {
  FakeTransport fake(scripted({Unavailable("connection refused")}));
  RecordingScheduler sched;
  RetryPolicy policy;
  policy.max_attempts = 3;
  RetryingTransport retrying(fake, policy, sched.scheduler());
  auto r = retrying.perform(get("https://hub/x"));
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), Code::kUnavailable);
  EXPECT_THAT(r.status().message(), HasSubstr("gave up after 3 attempts"));
  EXPECT_THAT(r.status().message(), HasSubstr("connection refused"));
  EXPECT_EQ(fake.request_count(), 3u);
}

TEST(RetryingTransport, InvalidIsNotRetried) {
  FakeTransport fake(scripted({InvalidArgument("bad url")}));
  RecordingScheduler sched;
  RetryingTransport retrying(fake, RetryPolicy{}, sched.scheduler());
  auto r = retrying.perform(get("https://hub/x"));
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), Code::kInvalidArgument);
  EXPECT_EQ(fake.request_count(), 1u);
}

// A protocol violation (the transport's body limit: a server that ignored Range) is a transient
// fault: another attempt may reach a well-behaved edge.
TEST(RetryingTransport, CorruptFromTheTransportIsRetried) {
  FakeTransport fake(scripted({Corrupt("server sent more than asked"), response(200)}));
  RecordingScheduler sched;
  RetryingTransport retrying(fake, pinned_jitter(0), sched.scheduler());
  auto r = retrying.perform(get("https://hub/x"));
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->status, 200);
  EXPECT_EQ(fake.request_count(), 2u);
}

TEST(RetryingTransport, RefusedAnswersAreRetriedThenReportedAsTheirFault) {
  FakeTransport fake(scripted({response(206), response(206), response(206)}));
  RecordingScheduler sched;
  RetryPolicy policy = pinned_jitter(0);
  policy.max_attempts = 3;
  RetryingTransport retrying(fake, policy, sched.scheduler());
  HttpRequest req = get("https://hub/x");
  req.validate = [](const HttpResponse&) { return Corrupt("wrong Content-Range"); };
  auto r = retrying.perform(req);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), Code::kCorrupt);
  EXPECT_NE(r.status().message().find("wrong Content-Range"), std::string::npos);
  EXPECT_NE(r.status().message().find("gave up after 3 attempts"), std::string::npos);
  EXPECT_EQ(fake.request_count(), 3u);
}

TEST(RetryingTransport, BeforeRetrySeesTheFaultAndMayRedirect) {
  int answered = 0;
  FakeTransport fake([&](const HttpRequest& req) -> Result<HttpResponse> {
    HttpResponse r;
    r.status = 206;
    r.body = req.url;  // which URL answered
    ++answered;
    return r;
  });
  RecordingScheduler sched;
  RetryingTransport retrying(fake, pinned_jitter(0), sched.scheduler());
  HttpRequest req = get("https://edge-a/x");
  req.validate = [](const HttpResponse& r) {
    return r.body == "https://edge-a/x" ? Corrupt("edge a lies") : Status::Ok();
  };
  std::vector<std::string> causes;
  req.before_retry = [&](HttpRequest& next, const Status& cause) {
    causes.push_back(cause.message());
    next.url = "https://edge-b/x";
  };
  auto r = retrying.perform(req);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->body, "https://edge-b/x");
  ASSERT_EQ(causes.size(), 1u);
  EXPECT_EQ(causes[0], "edge a lies");
  EXPECT_EQ(answered, 2);
}

TEST(RetryingTransport, ErrorStatusesAreNotValidated) {
  FakeTransport fake(scripted({response(404)}));
  RecordingScheduler sched;
  RetryingTransport retrying(fake, pinned_jitter(0), sched.scheduler());
  HttpRequest req = get("https://hub/x");
  req.validate = [](const HttpResponse& r) { return r.status == 206 ? Status::Ok() : Corrupt("not a 206"); };
  auto r = retrying.perform(req);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->status, 404);
  EXPECT_EQ(fake.request_count(), 1u);
}

TEST(RetryingTransport, EachAttemptSendsTheSameRequest) {
  FakeTransport fake(scripted({response(502), response(200)}));
  RecordingScheduler sched;
  RetryingTransport retrying(fake, pinned_jitter(0), sched.scheduler());
  HttpRequest req = get("https://hub/api/x");
  req.method = "POST";
  req.body = "paths=a";
  req.headers = {{"Authorization", "Bearer t"}};
  ASSERT_TRUE(retrying.perform(req).ok());
  auto seen = fake.requests();
  ASSERT_EQ(seen.size(), 2u);
  for (const auto& s : seen) {
    EXPECT_EQ(s.method, "POST");
    EXPECT_EQ(s.body, "paths=a");
    EXPECT_EQ(find_header(s.headers, "authorization"), "Bearer t");
  }
}

// A retry waits on the Env's timer: here one that moves the clock by each delay and runs it.
TEST(RetryingTransport, RetriesWaitOnTheEnvsTimer) {
  FakeTransport fake(scripted({response(503), Unavailable("reset"), response(200)}));
  RetryPolicy policy;
  policy.base_delay = milliseconds(1);
  testing::ManualEnv env(testing::ManualEnv::Timers::kAdvanceAndRun);
  RetryingTransport retrying(fake, policy, env);
  auto r = retrying.perform(get("https://hub/x"));
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_EQ(r->status, 200);
  EXPECT_EQ(fake.request_count(), 3u);
  EXPECT_EQ(env.delays().size(), 2u);  // two retries, each waited on the Env's timer
}

TEST(RetryingTransport, DestructionAnswersRequestsWaitingToRetry) {
  FakeTransport fake([&](const HttpRequest&) -> Result<HttpResponse> { return response(503); });
  std::promise<Result<HttpResponse>> done;
  auto future = done.get_future();
  {
    RetryPolicy policy = pinned_jitter(1.0);
    policy.base_delay = std::chrono::minutes(10);  // the retry would wait far beyond the test
    policy.max_delay = std::chrono::minutes(10);
    testing::ManualEnv env;  // its timer never runs the retry: only the destructor answers
    RetryingTransport retrying(fake, policy, env);
    retrying.submit(get("https://hub/x"), [&](Result<HttpResponse> r) { done.set_value(std::move(r)); });
    // The 503 came back and the retry waits on the timer: only then is there a request waiting
    // to retry for the destructor to answer. Without this wait the scope could end first, and the
    // fake transport's thread then scheduled the retry on the destroyed Env (TSan saw it once).
    ASSERT_TRUE(env.wait_until_waiting(1));
  }
  // Bounded wait: the destructor must have answered (or the answer is on its way) at once.
  ASSERT_EQ(future.wait_for(std::chrono::seconds(10)), std::future_status::ready);
  auto r = future.get();
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->status, 503);
  EXPECT_EQ(fake.request_count(), 1u);
}

TEST(RetryingTransport, ShutdownAnswersWaitingRetriesAndStopsRetrying) {
  FakeTransport fake([](const HttpRequest&) -> Result<HttpResponse> { return response(503); });
  RetryPolicy policy = pinned_jitter(1.0);
  policy.base_delay = std::chrono::minutes(10);  // far beyond the test
  policy.max_delay = std::chrono::minutes(10);
  testing::ManualEnv env;  // its timer never runs the retry: only shutdown() answers
  RetryingTransport retrying(fake, policy, env);
  std::promise<Result<HttpResponse>> waiting;
  retrying.submit(get("https://hub/x"), [&](Result<HttpResponse> r) { waiting.set_value(std::move(r)); });
  retrying.shutdown();
  auto future = waiting.get_future();
  ASSERT_EQ(future.wait_for(std::chrono::seconds(10)), std::future_status::ready);
  EXPECT_EQ(future.get()->status, 503);
  // Still usable, one attempt per request.
  auto r = retrying.perform(get("https://hub/y"));
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->status, 503);
  EXPECT_EQ(fake.request_count(), 2u);
  retrying.shutdown();  // idempotent
}

// On a manual Env a retry waits exactly its delay on the Env's clock: not sent a moment before,
// sent when the clock gets there. No test thread sleeps.
TEST(RetryingTransport, ARetryWaitsItsDelayOnTheEnvsClock) {
  FakeTransport fake(scripted({response(503), response(200)}));
  testing::ManualEnv env;
  RetryingTransport retrying(fake, pinned_jitter(0.5), env);  // 500 ms: half the 1 s base
  std::promise<Result<HttpResponse>> answered;
  auto answer = answered.get_future();
  retrying.submit(get("https://hub/x"), [&](Result<HttpResponse> r) { answered.set_value(std::move(r)); });
  ASSERT_TRUE(env.wait_until_waiting(1)) << "the 503 never scheduled a retry";
  EXPECT_EQ(env.delays(), std::vector<milliseconds>{milliseconds(500)});
  env.advance(milliseconds(499));
  EXPECT_EQ(fake.request_count(), 1u) << "retried before its delay";
  env.advance(milliseconds(1));
  EXPECT_EQ(fake.request_count(), 2u);  // sent from advance(), on this thread
  ASSERT_EQ(answer.wait_for(std::chrono::seconds(60)), std::future_status::ready);
  auto r = answer.get();
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_EQ(r->status, 200);
}

// Shutdown answers a retry waiting on the Env's timer at once, with its last result; the timer's
// entry, when it falls due later, runs nothing.
TEST(RetryingTransport, ShutdownFlushesRetriesWaitingOnTheEnv) {
  FakeTransport fake(scripted({response(503), response(200)}));
  testing::ManualEnv env;
  RetryingTransport retrying(fake, pinned_jitter(0.5), env);
  std::atomic<int> answers{0};
  std::atomic<long> status{0};
  retrying.submit(get("https://hub/x"), [&](Result<HttpResponse> r) {
    ++answers;
    if (r.ok()) status = r->status;
  });
  ASSERT_TRUE(env.wait_until_waiting(1));
  retrying.shutdown();  // runs the waiting retry here, which answers with its last result
  EXPECT_EQ(answers.load(), 1);
  EXPECT_EQ(status.load(), 503);
  env.advance(std::chrono::hours(1));
  EXPECT_EQ(answers.load(), 1);
  EXPECT_EQ(fake.request_count(), 1u);
}

TEST(RetryingTransport, ManyConcurrentRequestsEachAnsweredOnce) {
  // Each request fails on its first attempt and succeeds on its second (counted per request:
  // a shared counter could, by interleaving, fail one request on every attempt).
  std::mutex mu;
  std::map<std::string, int> attempts;
  FakeTransport fake([&](const HttpRequest& req) -> Result<HttpResponse> {
    std::lock_guard<std::mutex> lock(mu);
    return attempts[find_header(req.headers, "X-Req").value_or("")]++ == 0 ? Result<HttpResponse>(response(503))
                                                                            : Result<HttpResponse>(response(200));
  });
  RecordingScheduler sched;
  RetryPolicy policy = pinned_jitter(0);
  policy.max_attempts = 10;
  RetryingTransport retrying(fake, policy, sched.scheduler());
  constexpr int kRequests = 32;
  std::vector<std::promise<Result<HttpResponse>>> promises(kRequests);
  std::atomic<int> answers{0};
  int id = 0;
  for (auto& p : promises) {
    HttpRequest req = get("https://hub/x");
    req.headers.emplace_back("X-Req", std::to_string(id++));
    retrying.submit(std::move(req), [&p, &answers](Result<HttpResponse> r) {
      ++answers;
      p.set_value(std::move(r));  // a second call would throw
    });
  }
  for (auto& p : promises) {
    auto r = p.get_future().get();
    ASSERT_TRUE(r.ok());
    EXPECT_EQ(r->status, 200);
  }
  EXPECT_EQ(answers.load(), kRequests);
}

}  // namespace
}  // namespace hubfs
