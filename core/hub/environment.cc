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

}  // namespace hubfs
