#include "net/retrying_transport.h"

#include <time.h>

#include <algorithm>
#include <atomic>
#include <mutex>
#include <optional>
#include <random>
#include <vector>

#include "common/log.h"
#include "common/url.h"
#include "net/rate_limit_headers.h"

namespace hubfs {
namespace {

using std::chrono::milliseconds;

bool retryable_status(long status) {
  switch (status) {
    case 408: case 429: case 500: case 502: case 503: case 504: return true;
    default: return false;
  }
}

// Why this answer is worth another attempt, or OK when it is the answer. Transport failures,
// retryable statuses and answers the request's validate() refuses (protocol violations: kCorrupt
// from the transport's body limit, or from validate) are all transient.
Status transient_fault(const HttpRequest& request, const Result<HttpResponse>& r) {
  if (!r.ok()) {
    Code c = r.status().code();
    return (c == Code::kUnavailable || c == Code::kTimeout || c == Code::kCorrupt) ? r.status() : Status::Ok();
  }
  if (retryable_status(r->status)) return IoError("HTTP " + std::to_string(r->status));
  if (request.validate && r->status >= 200 && r->status < 300) return request.validate(*r);
  return Status::Ok();
}

double default_jitter() {
  thread_local std::mt19937_64 rng{std::random_device{}()};
  return std::uniform_real_distribution<double>(0.0, 1.0)(rng);
}

// One logical request across its attempts.
struct Call {
  HttpRequest request;
  HttpTransport::Callback done;
  int attempt = 1;
  milliseconds quota_waited{0};  // held for the Hub's quota so far (RetryPolicy::quota)

  // Delivers the answer, telling its caller how long the quota held it (HttpResponse::quota_waited).
  void answer(Result<HttpResponse> r) {
    if (r.ok()) r->quota_waited = quota_waited;
    done(std::move(r));
  }
};

}  // namespace

// Shared with every in-flight callback, so an answer arriving after the RetryingTransport is
// gone still finds its state (it is then delivered as is, without a retry).
struct RetryingTransport::Impl : std::enable_shared_from_this<Impl> {
  HttpTransport& inner;
  RetryPolicy policy;
  Env& env;
  // Retries and quota holds waiting out their delay; shutdown() runs them at once (each then
  // sees `stopping` and answers with its last result).
  ScheduledGroup waits;
  std::atomic<uint64_t> retries{0};  // attempts after a first one, for `hubfs status`

  std::mutex mu;  // a leaf: guards `stopping`
  bool stopping = false;

  Impl(HttpTransport& in, RetryPolicy p, Env& e) : inner(in), policy(std::move(p)), env(e), waits(e) {
    policy.max_attempts = std::max(1, policy.max_attempts);
  }

  // Runs fn after delay exactly once (that is what guarantees every request an answer): on the
  // Env's timer, or at once when the transport is already shutting down.
  void after(milliseconds delay, std::function<void()> fn) {
    if (!waits.schedule_after(delay, fn)) fn();
  }

  bool is_stopping() {
    std::lock_guard<std::mutex> lock(mu);
    return stopping;
  }

  // Sends the call, after holding it as long as its quota asks (RetryPolicy::quota).
  void attempt(std::shared_ptr<Call> call) {
    if (policy.quota) {
      milliseconds wait = policy.quota->before_send(call->request.url, call->quota_waited);
      if (wait.count() > 0 && !is_stopping()) {
        log_debug("holding " + call->request.method + " " + url::url_for_log(call->request.url) + " " +
                  std::to_string(wait.count()) + " ms: the Hub's quota is nearly spent");
        hold_for_quota(std::move(call), wait);
        return;
      }
    }
    send(std::move(call));
  }

  // Waits `wait` for the quota window, then sends (no attempt counted). At shutdown the wait
  // ends at once and the call fails.
  void hold_for_quota(std::shared_ptr<Call> call, milliseconds wait) {
    const std::string bucket = policy.quota->bucket_of(call->request.url);
    const auto until = env.now() + wait;
    policy.quota->wait_started(bucket, until);
    call->quota_waited += wait;
    // The wait is the quota's, not the network's: the read keeps the time it had left.
    call->request.deadline = call->request.deadline.later_by(wait);
    after(wait, [self = shared_from_this(), call, bucket, until] {
      self->policy.quota->wait_ended(bucket, until);
      if (self->is_stopping()) {
        call->answer(Unavailable(call->request.method + " " + url::url_for_log(call->request.url) +
                               ": shut down while waiting for the Hub's quota window"));
        return;
      }
      self->send(call);
    });
  }

  void send(std::shared_ptr<Call> call) {
    HttpRequest copy = call->request;  // the original stays for the next attempt
    inner.submit(std::move(copy), [self = shared_from_this(), call](Result<HttpResponse> r) {
      self->on_result(call, std::move(r));
    });
  }

  // The wait before the next attempt: what the server asked for if it said, else backoff. A
  // request serving a read waits as long as the server asks (huggingface_hub caps no Retry-After):
  // its deadline, checked by the caller, bounds it. One without a deadline is capped.
  milliseconds delay_before_retry(const Result<HttpResponse>& r, int failed_attempts, const Deadline& deadline) const {
    if (r.ok()) {
      std::optional<milliseconds> asked;
      if (auto v = r->header("retry-after")) asked = parse_retry_after(*v, env.system_now());
      // The Hub sends RateLimit on every answer: it says why only when the answer is a 429.
      if (auto v = r->header("ratelimit"); v && r->status == 429) {
        if (auto reset = parse_ratelimit_reset(*v)) {
          // +1 s: the window resets at t, so a request at exactly t may still be refused.
          milliseconds wait((*reset + 1) * 1000);
          asked = asked ? std::max(*asked, wait) : wait;
        }
      }
      if (asked) return deadline.is_never() ? std::min(*asked, policy.max_retry_after) : *asked;
    }
    // Full jitter: uniform in [0, base * 2^(n-1)], capped; spreads out a thundering herd.
    milliseconds cap = policy.base_delay;
    for (int i = 1; i < failed_attempts && cap < policy.max_delay; ++i) cap *= 2;
    cap = std::min(cap, policy.max_delay);
    double unit = policy.jitter ? std::clamp(policy.jitter(), 0.0, 1.0) : default_jitter();
    return milliseconds(static_cast<int64_t>(unit * static_cast<double>(cap.count())));
  }

  // What the caller gets when no retry follows: a refused answer becomes its fault (the bytes
  // must not be used); a status or a transport failure is returned as it came.
  static Result<HttpResponse> final_answer(Result<HttpResponse> r, const Status& fault, int attempts) {
    std::string context = "gave up after " + std::to_string(attempts) + " attempt" + (attempts == 1 ? "" : "s");
    if (!r.ok()) return r.status().with_context(context);
    if (!fault.ok() && !retryable_status(r->status)) return fault.with_context(context);
    return r;
  }

  // A request serving a read that must end by now + `delay`: its last answer, as a timeout.
  static Status past_deadline(const Status& fault, int attempts, milliseconds delay) {
    return Timeout("gave up after " + std::to_string(attempts) + " attempt" + (attempts == 1 ? "" : "s") +
                   ": the read's deadline (--read-timeout) comes before the next one (due in " +
                   std::to_string(delay.count()) + " ms); last failure: " + fault.message());
  }

  void on_result(const std::shared_ptr<Call>& call, Result<HttpResponse> r) {
    if (policy.quota && r.ok()) {
      auto wait = policy.quota->after_answer(call->request.url, *r, call->quota_waited);
      if (r->status == 429 && wait && !is_stopping()) {
        log_warning(call->request.method + " " + url::url_for_log(call->request.url) +
                    ": the Hub's quota is spent (HTTP 429); waiting " + std::to_string(wait->count() / 1000) +
                    " s for its window to reset (at most --rate-limit-wait in all)");
        hold_for_quota(call, *wait);
        return;
      }
      if (r->status == 429 && call->quota_waited > milliseconds(0) &&
          call->quota_waited >= policy.quota->max_wait()) {
        call->answer(std::move(r));  // waited as long as allowed: this 429 is the answer
        return;
      }
    }
    Status fault = transient_fault(call->request, r);
    if (fault.ok()) {
      call->answer(std::move(r));
      return;
    }
    if (is_stopping()) {
      call->answer(final_answer(std::move(r), fault, call->attempt));
      return;
    }
    const Deadline& deadline = call->request.deadline;
    milliseconds delay = delay_before_retry(r, call->attempt, deadline);
    std::string which;
    if (deadline.is_never()) {
      if (call->attempt >= policy.max_attempts) {
        call->answer(final_answer(std::move(r), fault, call->attempt));
        return;
      }
      which = "attempt " + std::to_string(call->attempt + 1) + " of " + std::to_string(policy.max_attempts);
    } else {
      // A request serving a read is retried for as long as the read may wait, not a fixed number
      // of times: a burst of 503s longer than five backoffs must not fail a read with time left.
      const milliseconds left = deadline.remaining();
      if (left <= delay) {
        call->answer(past_deadline(fault, call->attempt, delay));
        return;
      }
      which = "attempt " + std::to_string(call->attempt + 1) + ", " + std::to_string(left.count()) +
              " ms left before the read's deadline";
    }
    log_warning("retrying " + call->request.method + " " + url::url_for_log(call->request.url) + " (" + which +
                ", in " + std::to_string(delay.count()) + " ms): " + fault.message());
    ++call->attempt;
    retries.fetch_add(1, std::memory_order_relaxed);
    auto last = std::make_shared<Result<HttpResponse>>(std::move(r));
    after(delay, [self = shared_from_this(), call, last, fault] {
      if (self->is_stopping()) {
        // Shutting down: the last answer is the answer.
        call->answer(final_answer(std::move(*last), fault, call->attempt - 1));
        return;
      }
      if (call->request.before_retry) call->request.before_retry(call->request, fault);
      self->attempt(call);
    });
  }
};

uint64_t RetryingTransport::retries() const { return impl_->retries.load(std::memory_order_relaxed); }

RetryingTransport::RetryingTransport(HttpTransport& inner, RetryPolicy policy, Env& env)
    : impl_(std::make_shared<Impl>(inner, std::move(policy), env)) {}

RetryingTransport::~RetryingTransport() { shutdown(); }

void RetryingTransport::shutdown() {
  {
    std::lock_guard<std::mutex> lock(impl_->mu);
    impl_->stopping = true;
  }
  impl_->waits.shutdown();
}

void RetryingTransport::submit(HttpRequest request, Callback done) {
  auto call = std::make_shared<Call>();
  call->request = std::move(request);
  call->done = std::move(done);
  impl_->attempt(std::move(call));
}

}  // namespace hubfs
