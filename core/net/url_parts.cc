#include "net/url_parts.h"

namespace hubfs::net {
namespace {

struct Split {
  std::string_view scheme;     // "https://" including the separator, or empty
  std::string_view authority;  // host[:port], userinfo removed
  std::string_view path;       // up to, not including, '?' or '#'
};

Split split(std::string_view url) {
  Split s;
  size_t pos = 0;
  if (size_t sep = url.find("://"); sep != std::string_view::npos) {
    s.scheme = url.substr(0, sep + 3);
    pos = sep + 3;
  }
  size_t auth_end = url.find_first_of("/?#", pos);
  if (auth_end == std::string_view::npos) auth_end = url.size();
  std::string_view authority = url.substr(pos, auth_end - pos);
  // Userinfo (user:password@) may hold a credential: never let it reach a message.
  if (size_t at = authority.rfind('@'); at != std::string_view::npos) authority.remove_prefix(at + 1);
  s.authority = authority;
  size_t path_end = url.find_first_of("?#", auth_end);
  if (path_end == std::string_view::npos) path_end = url.size();
  s.path = url.substr(auth_end, path_end - auth_end);
  return s;
}

}  // namespace

std::string url_host(std::string_view url) { return std::string(split(url).authority); }

std::string url_for_log(std::string_view url) {
  Split s = split(url);
  std::string out;
  out.reserve(s.scheme.size() + s.authority.size() + s.path.size());
  out.append(s.scheme).append(s.authority).append(s.path);
  return out;
}

}  // namespace hubfs::net
