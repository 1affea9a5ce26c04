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

bool offline_requested(const TokenSources& sources) {
  const char* v = sources.getenv ? sources.getenv("HF_HUB_OFFLINE") : nullptr;
  if (v == nullptr) return false;
  std::string value(v);
  std::transform(value.begin(), value.end(), value.begin(), [](unsigned char c) { return std::tolower(c); });
  // The spellings huggingface_hub treats as true.
  return value == "1" || value == "true" || value == "yes" || value == "on";
}

}  // namespace hubfs
