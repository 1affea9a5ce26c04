#include "net/rate_limit_headers.h"

#include <time.h>

#include <algorithm>
#include <charconv>

namespace hubfs {
namespace rate_limit_headers {

std::string_view trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.remove_suffix(1);
  return s;
}

std::optional<int64_t> parse_int(std::string_view s) {
  s = trim(s);
  int64_t v = 0;
  auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (ec != std::errc() || end != s.data() + s.size() || v < 0) return std::nullopt;
  return v;
}

Items split_items(std::string_view value) {
  Items out;
  while (!value.empty()) {
    size_t semi = value.find(';');
    std::string_view part = trim(value.substr(0, semi));
    if (part.size() >= 2 && part.front() == '"' && part.back() == '"') {
      out.names.emplace_back(part.substr(1, part.size() - 2));
    } else if (size_t eq = part.find('='); eq != std::string_view::npos) {
      if (auto v = parse_int(part.substr(eq + 1))) out.params[std::string(trim(part.substr(0, eq)))] = *v;
    }
    if (semi == std::string_view::npos) break;
    value.remove_prefix(semi + 1);
  }
  return out;
}

}  // namespace rate_limit_headers

using rate_limit_headers::Items;
using rate_limit_headers::split_items;

std::optional<std::chrono::milliseconds> parse_retry_after(std::string_view value, WallTime now) {
  using std::chrono::milliseconds;
  if (auto seconds = rate_limit_headers::parse_int(value)) return milliseconds(*seconds * 1000);
  std::string text(rate_limit_headers::trim(value));
  struct tm tm = {};
  const char* end = strptime(text.c_str(), "%a, %d %b %Y %H:%M:%S GMT", &tm);
  if (!end || *end != '\0') return std::nullopt;
  const WallTime when{std::chrono::seconds(timegm(&tm))};
  auto wait = std::chrono::duration_cast<milliseconds>(when - now);
  return std::max(wait, milliseconds(0));
}

std::optional<RateLimitHeader> parse_ratelimit(std::string_view value) {
  Items items = split_items(value);
  auto r = items.params.find("r");
  auto t = items.params.find("t");
  if (items.names.empty() || r == items.params.end() || t == items.params.end()) return std::nullopt;
  return RateLimitHeader{items.names.back(), r->second, t->second};
}

std::optional<std::pair<int64_t, int64_t>> parse_ratelimit_policy(std::string_view value) {
  Items items = split_items(value);
  auto q = items.params.find("q");
  auto w = items.params.find("w");
  if (q == items.params.end() || w == items.params.end() || w->second <= 0) return std::nullopt;
  return std::make_pair(q->second, w->second);
}

std::optional<int64_t> parse_ratelimit_reset(std::string_view value) {
  Items items = split_items(value);
  auto r = items.params.find("r");
  auto t = items.params.find("t");
  if (t == items.params.end() || (r != items.params.end() && r->second > 0)) return std::nullopt;
  return t->second;
}

}  // namespace hubfs
