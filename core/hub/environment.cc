// The other environment settings huggingface_hub users already have in place.
#include <algorithm>
#include <cctype>
#include <string>

#include "hub/environment.h"

namespace hubfs {

std::string find_endpoint(const TokenSources& sources) {
  const char* v = sources.getenv ? sources.getenv("HF_ENDPOINT") : nullptr;
  std::string endpoint = v && *v ? v : "https://huggingface.co";
  while (!endpoint.empty() && endpoint.back() == '/') endpoint.pop_back();
  return endpoint;
}

std::string without_url_credentials(std::string_view text) {
  std::string out;
  size_t pos = 0;
  while (true) {
    const size_t scheme_end = text.find("://", pos);
    if (scheme_end == std::string_view::npos) break;
    const size_t authority = scheme_end + 3;
    // The authority ends where the path, query or fragment starts, or at a ',' (between -o
    // options) or a space; the credentials end at its last '@' (a password may hold a raw '@').
    size_t end = text.find_first_of("/?#, \t", authority);
    if (end == std::string_view::npos) end = text.size();
    const size_t at = text.substr(authority, end - authority).rfind('@');
    out.append(text.substr(pos, authority - pos));
    pos = at == std::string_view::npos ? authority : authority + at + 1;
  }
  out.append(text.substr(pos));
  return out;
}

bool offline_requested(const TokenSources& sources) {
  const char* v = sources.getenv ? sources.getenv("HF_HUB_OFFLINE") : nullptr;
  if (v == nullptr) return false;
  std::string value(v);
  std::transform(value.begin(), value.end(), value.begin(), [](unsigned char c) { return std::tolower(c); });
  // The spellings huggingface_hub treats as true.
  return value == "1" || value == "true" || value == "yes" || value == "on";
}

bool xet_disabled(const TokenSources& sources) {
  const char* v = sources.getenv ? sources.getenv("HF_HUB_DISABLE_XET") : nullptr;
  if (v == nullptr) return false;
  std::string value(v);
  std::transform(value.begin(), value.end(), value.begin(), [](unsigned char c) { return std::tolower(c); });
  return value == "1" || value == "true" || value == "yes" || value == "on";
}

namespace {

// The longest timeout accepted: a day. A larger number is more likely a typo (milliseconds)
// than a wish, and seconds beyond it would overflow nothing but help no one.
constexpr int64_t kMaxTimeoutSeconds = 86400;

Result<std::optional<std::chrono::seconds>> timeout_from(const TokenSources& sources, const char* name) {
  const char* v = sources.getenv ? sources.getenv(name) : nullptr;
  if (v == nullptr || *v == '\0') return std::optional<std::chrono::seconds>();
  std::string text(v);
  // int() in Python takes surrounding whitespace; so do we, and nothing else (no "10s", "1.5").
  const size_t first = text.find_first_not_of(" \t");
  const size_t last = text.find_last_not_of(" \t");
  std::string digits = first == std::string::npos ? "" : text.substr(first, last - first + 1);
  int64_t seconds = 0;
  bool ok = !digits.empty() && digits.size() <= 6;
  for (char c : digits) {
    if (!ok) break;  // a 7-digit or longer value is refused before it can overflow
    if (c < '0' || c > '9') ok = false;
    else seconds = seconds * 10 + (c - '0');
  }
  if (!ok || seconds < 1 || seconds > kMaxTimeoutSeconds) {
    return InvalidArgument(std::string(name) + "='" + text + "' is not a timeout: give whole seconds from 1 to " +
                           std::to_string(kMaxTimeoutSeconds) + " (e.g. 30), or unset it for the default");
  }
  return std::optional<std::chrono::seconds>(std::chrono::seconds(seconds));
}

}  // namespace

Result<EnvTimeouts> env_timeouts(const TokenSources& sources) {
  EnvTimeouts out;
  auto etag = timeout_from(sources, "HF_HUB_ETAG_TIMEOUT");
  if (!etag.ok()) return etag.status();
  out.etag = *etag;
  auto download = timeout_from(sources, "HF_HUB_DOWNLOAD_TIMEOUT");
  if (!download.ok()) return download.status();
  out.download = *download;
  return out;
}

}  // namespace hubfs
