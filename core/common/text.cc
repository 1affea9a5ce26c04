#include "common/text.h"

#include <cctype>

namespace hubfs {

std::string ascii_lower(std::string_view s) {
  std::string out(s);
  for (char& c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

bool is_hex(std::string_view s, size_t length) {
  if (s.size() != length) return false;
  for (char c : s)
    if (!std::isxdigit(static_cast<unsigned char>(c))) return false;
  return true;
}

bool is_lower_hex(std::string_view s, size_t length) {
  return is_hex(s, length) && s == ascii_lower(s);
}

}  // namespace hubfs
