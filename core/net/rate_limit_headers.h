// The headers a server uses to say how long to wait: Retry-After (RFC 9110) and the IETF
// RateLimit / RateLimit-Policy fields as the Hub sends them on every answer:
//   RateLimit: "api";r=REMAINING;t=SECONDS_UNTIL_RESET
//   RateLimit-Policy: "fixed window";"api";q=QUOTA;w=WINDOW_SECONDS
// One parser for the retrying transport (its waits), the quota gate (its pacing) and the Hub's
// error messages. Every function is pure: a malformed value is nullopt, never an exception.
#pragma once

#include <chrono>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "common/env.h"  // WallTime

namespace hubfs {

namespace rate_limit_headers {

// `s` without leading and trailing spaces and tabs.
std::string_view trim(std::string_view s);
// A whole non-negative decimal integer (surrounding blanks allowed), else nullopt.
std::optional<int64_t> parse_int(std::string_view s);

// The members of a structured header item list: `"api";r=0;t=55` -> names {"api"},
// params {r:0, t:55}. Quoted strings are names; key=value pairs with an integer value are
// parameters (keys trimmed; a later key wins; a value that is not an integer is dropped).
struct Items {
  std::vector<std::string> names;
  std::map<std::string, int64_t> params;
};
Items split_items(std::string_view value);

}  // namespace rate_limit_headers

// Retry-After: delta-seconds, or an HTTP-date (IMF-fixdate, "Sun, 06 Nov 1994 08:49:37 GMT"),
// as the wait from `now` (the Env's system_now(); 0 for a date already past); nullopt when malformed.
std::optional<std::chrono::milliseconds> parse_retry_after(std::string_view value, WallTime now);

// `RateLimit: "api";r=0;t=55` -> {"api", 0, 55}; nullopt when malformed (no bucket name, no r or t).
struct RateLimitHeader {
  std::string bucket;
  int64_t remaining = 0;
  int64_t reset_s = 0;
};
std::optional<RateLimitHeader> parse_ratelimit(std::string_view value);
// `RateLimit-Policy: "fixed window";"api";q=500;w=300` -> {q, w}; nullopt when malformed.
std::optional<std::pair<int64_t, int64_t>> parse_ratelimit_policy(std::string_view value);
// t of a RateLimit value whose quota is spent (r=0, or r absent), else nullopt: how long a 429
// says to wait. The bucket name is not required here (any spent quota binds).
std::optional<int64_t> parse_ratelimit_reset(std::string_view value);

}  // namespace hubfs
