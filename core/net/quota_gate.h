// The Hub's request quotas as a client sees them (docs/hub-http-contract.md, section 11).
//
// The Hub counts requests in fixed windows (5 minutes) per bucket: "api" (/api/ calls) and
// "resolvers" (/resolve/ URLs), and announces the state on every answer:
//   RateLimit: "api";r=REMAINING;t=SECONDS_UNTIL_RESET
//   RateLimit-Policy: "fixed window";"api";q=QUOTA;w=WINDOW_SECONDS
// Over quota it answers 429 until the window resets. This gate, consulted by RetryingTransport:
//   - remembers what the headers said, per bucket;
//   - before a request, says how long it must wait: until the reset when nothing remains, and
//     spread over the rest of the window when little remains (slowing down before the quota
//     runs out instead of running into 429s);
//   - on a 429 (only a 429 makes the header binding, as in huggingface_hub), says to wait until
//     the window resets, however long that is, as long as the request has not waited
//     `max_wait` for its quota in all; past that the 429 is the answer (its message names the
//     quota, see hub_errors).
// Waits do not count as attempts: a training job would rather wait than fail.
//
// Thread-safe (one mutex, a leaf: nothing else is locked while holding it).
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "common/env.h"
#include "common/http.h"
#include "net/rate_limit_headers.h"  // parse_ratelimit, parse_ratelimit_policy (also for its users)

namespace hubfs {

struct QuotaGateOptions {
  // The endpoint whose /api/ and /resolve/ URLs are counted (other hosts, the CDN, are not).
  std::string endpoint;
  // How long one request may wait for quota windows in all (--rate-limit-wait): longer than the
  // Hub's 5-minute window, so a request that hit a spent quota always sees the next one.
  std::chrono::milliseconds max_wait{330'000};
  // Slow down once this fraction of a bucket's quota (at least kMinSlowDown requests) is all
  // that remains in the window.
  double slow_down_fraction = 0.1;
  // Time: windows, pacing and waits are on its clock. Required; must outlive the gate.
  Env* env = nullptr;
};

// A bucket as last announced, for `hubfs status`.
struct QuotaBucketState {
  std::string bucket;
  int64_t quota = -1;      // q (-1: not announced)
  int64_t window_s = -1;   // w
  int64_t remaining = -1;  // r as last seen, minus what was sent since
  int64_t resets_in_s = -1;
  uint64_t requests = 0;   // counted against it since the mount started
  uint64_t rate_limited = 0;  // 429s answered
  uint64_t waiting = 0;       // requests waiting for this bucket's quota right now
  int64_t waiting_until_s = -1;  // seconds from now the last of them will be sent (-1: none)
};

class QuotaGate {
 public:
  using Clock = MonotonicClock;
  explicit QuotaGate(QuotaGateOptions options);

  // The bucket a URL counts against: "api", "resolvers", or "" (not the endpoint: not counted).
  std::string bucket_of(std::string_view url) const;

  // Call before sending a request: how long to hold it first (zero: send now). Reserves one
  // request of the bucket's remaining quota. `waited` is what this request has waited for quota
  // so far; the answer never takes it past max_wait.
  std::chrono::milliseconds before_send(std::string_view url, std::chrono::milliseconds waited);

  // Call with every answer: remembers the RateLimit headers. For a 429 returns how long to wait
  // before sending again (until the window resets, +1 s as huggingface_hub does: a request at
  // exactly the reset may still be refused), or nullopt when the request has waited max_wait
  // already or the answer does not say when the quota resets (then ordinary backoff applies).
  std::optional<std::chrono::milliseconds> after_answer(std::string_view url, const HttpResponse& response,
                                                        std::chrono::milliseconds waited);

  // A request starts or stops waiting for its bucket's quota (status: "what is waiting and
  // until when").
  void wait_started(const std::string& bucket, Clock::time_point until);
  void wait_ended(const std::string& bucket, Clock::time_point until);

  // The latest time any request is waiting for quota until, if one is.
  std::optional<Clock::time_point> waiting_until() const;
  // The latest time any quota wait ends, whether it is still running or already over (nullopt:
  // nothing ever waited). A read that started before it may have been held by it, directly or
  // behind the locator threads it kept busy: BlockReader gives such a read until then plus its
  // own --read-timeout (up to max_wait), which is never earlier than the deadline its range
  // request got (its read's deadline moved by its resolve's hold, RangeFetcher), even when the
  // hold ended before the read's own timeout.
  std::optional<Clock::time_point> last_wait_end() const;

  std::chrono::milliseconds max_wait() const { return options_.max_wait; }
  std::map<std::string, QuotaBucketState> snapshot() const;

 private:
  struct Bucket {
    int64_t quota = -1;
    int64_t window_s = -1;
    int64_t remaining = -1;                   // -1: unknown (send freely)
    std::optional<Clock::time_point> reset_at;
    Clock::time_point next_paced{};           // the earliest the next paced request may go
    uint64_t requests = 0;
    uint64_t rate_limited = 0;
    std::map<Clock::time_point, int> waits;   // until -> how many are waiting until then
  };
  // A window that has passed leaves the bucket unknown again (full quota, as far as we know).
  void roll(Bucket& b, Clock::time_point now);

  QuotaGateOptions options_;
  std::string origin_;  // scheme://host:port of the endpoint
  mutable std::mutex mu_;
  std::map<std::string, Bucket> buckets_;
  std::optional<Clock::time_point> last_wait_end_;  // the latest `until` of any wait_started
};

}  // namespace hubfs
