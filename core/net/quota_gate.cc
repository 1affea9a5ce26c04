#include "net/quota_gate.h"

#include <algorithm>

#include "common/url.h"

namespace hubfs {
namespace {

using std::chrono::milliseconds;
using std::chrono::seconds;

// Pacing starts when at most this many requests remain, whatever the fraction says: a tiny
// quota still gets a little spreading before it is spent.
constexpr int64_t kMinSlowDown = 2;
// huggingface_hub waits t+1 s after a 429: the window resets at t, and a request sent at exactly
// t may still land in the old window.
constexpr seconds kResetMargin{1};

}  // namespace

QuotaGate::QuotaGate(QuotaGateOptions options) : options_(std::move(options)) {
  env_of(options_.env, "QuotaGate");
  if (auto o = url::origin_of(options_.endpoint)) origin_ = o->scheme + "://" + o->host + ":" + std::to_string(o->port);
}

std::string QuotaGate::bucket_of(std::string_view u) const {
  auto o = url::origin_of(u);
  if (!o || origin_.empty() || o->scheme + "://" + o->host + ":" + std::to_string(o->port) != origin_) return "";
  // The path: after the authority, before the query.
  size_t scheme_end = u.find("://");
  size_t path_start = u.find('/', scheme_end + 3);
  if (path_start == std::string_view::npos) return "";
  std::string_view path = u.substr(path_start, u.find('?', path_start) - path_start);
  if (path.find("/resolve/") != std::string_view::npos || path.starts_with("/api/resolve-")) return "resolvers";
  if (path.starts_with("/api/")) return "api";
  return "";
}

void QuotaGate::roll(Bucket& b, Clock::time_point now) {
  if (b.reset_at && now >= *b.reset_at) {
    b.remaining = -1;
    b.reset_at.reset();
  }
}

milliseconds QuotaGate::before_send(std::string_view u, milliseconds waited) {
  const std::string bucket = bucket_of(u);
  if (bucket.empty()) return milliseconds(0);
  const auto now = options_.env->now();
  std::lock_guard<std::mutex> lock(mu_);
  Bucket& b = buckets_[bucket];
  ++b.requests;
  roll(b, now);
  if (b.remaining < 0 || !b.reset_at) return milliseconds(0);
  Clock::time_point send_at = now;
  if (b.remaining == 0) {
    // Spent: nothing goes before the window resets.
    send_at = *b.reset_at + kResetMargin;
  } else {
    const int64_t slow_below = std::max<int64_t>(kMinSlowDown, static_cast<int64_t>(b.quota * options_.slow_down_fraction));
    if (b.remaining <= slow_below) {
      // Spread what remains over the rest of the window.
      auto spacing = (*b.reset_at - now) / (b.remaining + 1);
      send_at = std::max(now, b.next_paced);
      b.next_paced = send_at + spacing;
    }
    --b.remaining;
  }
  auto wait = std::chrono::duration_cast<milliseconds>(send_at - now);
  wait = std::clamp(wait, milliseconds(0), std::max(milliseconds(0), options_.max_wait - waited));
  return wait;
}

std::optional<milliseconds> QuotaGate::after_answer(std::string_view u, const HttpResponse& response,
                                                    milliseconds waited) {
  const std::string bucket = bucket_of(u);
  if (bucket.empty()) return std::nullopt;
  const auto now = options_.env->now();
  std::optional<RateLimitHeader> rl;
  if (auto v = response.header("ratelimit")) rl = parse_ratelimit(*v);
  std::optional<std::pair<int64_t, int64_t>> policy;
  if (auto v = response.header("ratelimit-policy")) policy = parse_ratelimit_policy(*v);
  std::lock_guard<std::mutex> lock(mu_);
  // The header names its bucket; trust it over our guess from the URL.
  Bucket& b = buckets_[rl ? rl->bucket : bucket];
  if (policy) {
    b.quota = policy->first;
    b.window_s = policy->second;
  }
  if (rl) {
    b.remaining = rl->remaining;
    b.reset_at = now + seconds(rl->reset_s);
  }
  if (response.status != 429) return std::nullopt;
  ++b.rate_limited;
  if (!rl || rl->remaining > 0) return std::nullopt;  // not the quota: the header does not bind
  b.remaining = 0;
  auto wait = std::chrono::duration_cast<milliseconds>(seconds(rl->reset_s) + kResetMargin);
  if (waited >= options_.max_wait) return std::nullopt;
  return std::min(wait, options_.max_wait - waited);
}

void QuotaGate::wait_started(const std::string& bucket, Clock::time_point until) {
  std::lock_guard<std::mutex> lock(mu_);
  ++buckets_[bucket].waits[until];
  last_wait_end_ = std::max(last_wait_end_.value_or(until), until);
}

void QuotaGate::wait_ended(const std::string& bucket, Clock::time_point until) {
  std::lock_guard<std::mutex> lock(mu_);
  auto& waits = buckets_[bucket].waits;
  auto it = waits.find(until);
  if (it != waits.end() && --it->second == 0) waits.erase(it);
}

std::optional<QuotaGate::Clock::time_point> QuotaGate::waiting_until() const {
  std::lock_guard<std::mutex> lock(mu_);
  std::optional<Clock::time_point> latest;
  for (const auto& [name, b] : buckets_) {
    if (!b.waits.empty()) latest = std::max(latest.value_or(Clock::time_point::min()), b.waits.rbegin()->first);
  }
  return latest;
}

std::optional<QuotaGate::Clock::time_point> QuotaGate::last_wait_end() const {
  std::lock_guard<std::mutex> lock(mu_);
  return last_wait_end_;
}

std::map<std::string, QuotaBucketState> QuotaGate::snapshot() const {
  const auto now = options_.env->now();
  std::lock_guard<std::mutex> lock(mu_);
  std::map<std::string, QuotaBucketState> out;
  for (const auto& [name, b] : buckets_) {
    QuotaBucketState s;
    s.bucket = name;
    s.quota = b.quota;
    s.window_s = b.window_s;
    const bool current = b.reset_at && now < *b.reset_at;
    s.remaining = current ? b.remaining : -1;
    s.resets_in_s = current ? std::chrono::duration_cast<seconds>(*b.reset_at - now).count() : -1;
    s.requests = b.requests;
    s.rate_limited = b.rate_limited;
    for (const auto& [until, n] : b.waits) s.waiting += static_cast<uint64_t>(n);
    if (!b.waits.empty()) {
      s.waiting_until_s = std::max<int64_t>(0, std::chrono::duration_cast<seconds>(b.waits.rbegin()->first - now).count());
    }
    out.emplace(name, s);
  }
  return out;
}

}  // namespace hubfs
