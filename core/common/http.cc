#include "common/http.h"

#include <strings.h>

namespace hubfs {

std::optional<std::string> find_header(const Headers& headers, std::string_view name) {
  for (const auto& [k, v] : headers) {
    if (k.size() == name.size() && strncasecmp(k.data(), name.data(), name.size()) == 0) return v;
  }
  return std::nullopt;
}

}  // namespace hubfs
