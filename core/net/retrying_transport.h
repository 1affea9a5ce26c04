// Retries transient failures of an inner transport: transport errors (resets, timeouts) and
// HTTP 408, 429, 500, 502, 503, 504. Backoff is exponential with full jitter (base doubling to
// a cap), honouring Retry-After (seconds) and, on a 429 only, RateLimit ("...;r=0;t=N": wait
// N+1 s). Every request ends: one with a deadline (HttpRequest::deadline: it serves a read) is
// retried until the next attempt would start past it, then answered with kTimeout naming the
// last failure; one without makes at most RetryPolicy::max_attempts. Quota waits
// (RetryPolicy::quota) are bounded by their own max_wait (--rate-limit-wait), not by the read's
// deadline: a held request's deadline moves by the hold, and its answer says how long it was held
// (HttpResponse::quota_waited), so the requests that follow for the same read can keep that time
// too. Each retry is logged with its cause. Anything else (2xx, 3xx, 4xx) is returned as is.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>

#include "common/env.h"
#include "common/http.h"
#include "net/quota_gate.h"

namespace hubfs {

struct RetryPolicy {
  int max_attempts = 5;  // first try included; requests without a deadline only
  std::chrono::milliseconds base_delay{1000};
  std::chrono::milliseconds max_delay{8000};
  // A server asking a request without a deadline to wait longer is capped; a request serving a
  // read waits what the server asks, up to the read's deadline (past it: a timeout at once).
  std::chrono::milliseconds max_retry_after{60000};
  // Uniform in [0, 1): the full-jitter draw. Empty means a thread-local PRNG; tests pin it.
  std::function<double()> jitter;
  // The Hub's quotas (net/quota_gate.h), or null. When set, a request may be held before it is
  // sent (a spent or nearly spent quota), and a 429 that names a spent quota is waited out until
  // the window resets, up to the gate's max_wait per request; neither counts as an attempt.
  // Must outlive the transport.
  QuotaGate* quota = nullptr;
};

class RetryingTransport : public HttpTransport {
 public:
  // A retry waits on `env`'s timer (Env::schedule_after: never blocks a caller; tests pass a
  // manual Env); quota holds are measured on its clock. `env` must outlive this object.
  RetryingTransport(HttpTransport& inner, RetryPolicy policy, Env& env);
  // `inner` must outlive this object and every request submitted through it. Destruction
  // cancels waiting retries: each such request gets its last answer at once.
  ~RetryingTransport() override;
  void submit(HttpRequest request, Callback done) override;

  // Stops retrying: requests waiting for a retry get their last answer now, and from here on
  // every request makes one attempt. For unmount, before draining the layers above, so no
  // one waits out a long Retry-After. Idempotent; the destructor calls it.
  void shutdown();
  // Retries scheduled so far (attempts after the first, over all requests).
  uint64_t retries() const;

 private:
  struct Impl;
  std::shared_ptr<Impl> impl_;  // shared with in-flight callbacks
};

}  // namespace hubfs
