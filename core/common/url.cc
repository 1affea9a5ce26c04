#include "common/url.h"

#include "common/text.h"

#include <algorithm>
#include <cctype>
#include <charconv>


namespace hubfs {
namespace {

bool is_unreserved(unsigned char c) {
  return std::isalnum(c) || c == '-' || c == '.' || c == '_' || c == '~';
}

std::string_view trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.remove_suffix(1);
  return s;
}

int hex_value(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

// Splits "scheme://authority/rest" into its authority and the rest (path, query, fragment).
struct Split {
  std::string_view scheme, authority, rest;
};
std::optional<Split> split_url(std::string_view u) {
  size_t colon = u.find("://");
  if (colon == std::string_view::npos || colon == 0) return std::nullopt;
  Split s;
  s.scheme = u.substr(0, colon);
  std::string_view after = u.substr(colon + 3);
  size_t end = after.find_first_of("/?#");
  s.authority = after.substr(0, end);
  s.rest = end == std::string_view::npos ? std::string_view() : after.substr(end);
  return s;
}

}  // namespace

std::string encode_segment(std::string_view s) {
  static constexpr char kHex[] = "0123456789ABCDEF";
  std::string out;
  out.reserve(s.size());
  for (unsigned char c : s) {
    if (is_unreserved(c)) {
      out.push_back(static_cast<char>(c));
    } else {
      out.push_back('%');
      out.push_back(kHex[c >> 4]);
      out.push_back(kHex[c & 15]);
    }
  }
  return out;
}

std::string encode_path(std::string_view path) {
  std::string out;
  size_t start = 0;
  while (true) {
    size_t slash = path.find('/', start);
    out += encode_segment(path.substr(start, slash == std::string_view::npos ? std::string_view::npos : slash - start));
    if (slash == std::string_view::npos) break;
    out.push_back('/');
    start = slash + 1;
  }
  return out;
}

namespace url {

std::optional<Origin> origin_of(std::string_view u) {
  auto s = split_url(u);
  if (!s) return std::nullopt;
  Origin o;
  o.scheme = ascii_lower(s->scheme);
  uint16_t default_port;
  if (o.scheme == "https") {
    default_port = 443;
  } else if (o.scheme == "http") {
    default_port = 80;
  } else {
    return std::nullopt;
  }
  std::string_view auth = s->authority;
  if (size_t at = auth.rfind('@'); at != std::string_view::npos) auth.remove_prefix(at + 1);
  std::string_view host = auth, port;
  if (!auth.empty() && auth.front() == '[') {
    size_t close = auth.find(']');
    if (close == std::string_view::npos) return std::nullopt;
    host = auth.substr(0, close + 1);
    std::string_view tail = auth.substr(close + 1);
    if (!tail.empty()) {
      if (tail.front() != ':') return std::nullopt;
      port = tail.substr(1);
    }
  } else if (size_t c = auth.rfind(':'); c != std::string_view::npos) {
    host = auth.substr(0, c);
    port = auth.substr(c + 1);
  }
  if (host.empty()) return std::nullopt;
  o.host = ascii_lower(host);
  o.port = default_port;
  if (!port.empty()) {
    unsigned value = 0;
    auto [p, ec] = std::from_chars(port.data(), port.data() + port.size(), value);
    if (ec != std::errc() || p != port.data() + port.size() || value == 0 || value > 65535) return std::nullopt;
    o.port = static_cast<uint16_t>(value);
  }
  return o;
}

bool same_origin(std::string_view a, std::string_view b) {
  auto oa = origin_of(a);
  auto ob = origin_of(b);
  return oa && ob && *oa == *ob;
}

std::string host_for_messages(std::string_view u) {
  auto s = split_url(u);
  if (!s) return "(unparseable URL)";
  std::string_view auth = s->authority;
  // userinfo may hold a password: never echo it.
  if (size_t at = auth.rfind('@'); at != std::string_view::npos) auth.remove_prefix(at + 1);
  return std::string(s->scheme) + "://" + std::string(auth);
}

std::optional<std::string> resolve_reference(std::string_view base, std::string_view ref) {
  ref = trim(ref);
  if (split_url(ref)) return std::string(ref);
  auto b = split_url(base);
  if (!b) return std::nullopt;
  std::string scheme_host = std::string(b->scheme) + "://" + std::string(b->authority);
  if (ref.substr(0, 2) == "//") return std::string(b->scheme) + ":" + std::string(ref);
  if (!ref.empty() && ref.front() == '/') return scheme_host + std::string(ref);
  std::string_view path = b->rest.substr(0, b->rest.find_first_of("?#"));
  if (ref.empty()) return scheme_host + std::string(b->rest);
  if (ref.front() == '?') return scheme_host + std::string(path) + std::string(ref);
  size_t last_slash = path.rfind('/');
  std::string dir = last_slash == std::string_view::npos ? "/" : std::string(path.substr(0, last_slash + 1));
  return scheme_host + dir + std::string(ref);
}

std::string percent_decode(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i] == '%' && i + 2 < s.size()) {
      int hi = hex_value(s[i + 1]), lo = hex_value(s[i + 2]);
      if (hi >= 0 && lo >= 0) {
        out.push_back(static_cast<char>(hi * 16 + lo));
        i += 2;
        continue;
      }
    }
    out.push_back(s[i]);
  }
  return out;
}

std::optional<std::string> query_param(std::string_view u, std::string_view name) {
  size_t q = u.find('?');
  if (q == std::string_view::npos) return std::nullopt;
  std::string_view query = u.substr(q + 1);
  query = query.substr(0, query.find('#'));
  while (!query.empty()) {
    size_t amp = query.find('&');
    std::string_view pair = query.substr(0, amp);
    size_t eq = pair.find('=');
    if (pair.substr(0, eq) == name) {
      return eq == std::string_view::npos ? std::string() : percent_decode(pair.substr(eq + 1));
    }
    if (amp == std::string_view::npos) break;
    query.remove_prefix(amp + 1);
  }
  return std::nullopt;
}

namespace {

// True when a link's parameters (the text after "<target>" up to the next link) contain a rel
// whose space-separated types include "next".
bool params_say_next(std::string_view params) {
  while (!params.empty()) {
    size_t semi = params.find(';');
    std::string_view param = trim(params.substr(0, semi));
    params = semi == std::string_view::npos ? std::string_view() : params.substr(semi + 1);
    size_t eq = param.find('=');
    if (eq == std::string_view::npos || ascii_lower(trim(param.substr(0, eq))) != "rel") continue;
    std::string value = ascii_lower(trim(param.substr(eq + 1)));
    if (value.size() >= 2 && value.front() == '"' && value.back() == '"') value = value.substr(1, value.size() - 2);
    std::string_view types = value;
    while (!types.empty()) {
      size_t sp = types.find(' ');
      if (types.substr(0, sp) == "next") return true;
      if (sp == std::string_view::npos) break;
      types.remove_prefix(sp + 1);
    }
  }
  return false;
}

std::optional<std::string> next_in_header(std::string_view value) {
  while (true) {
    size_t open = value.find('<');
    if (open == std::string_view::npos) return std::nullopt;
    size_t close = value.find('>', open);
    if (close == std::string_view::npos) return std::nullopt;
    std::string_view target = value.substr(open + 1, close - open - 1);
    // The parameters run to the next link: a comma outside quotes.
    std::string_view rest = value.substr(close + 1);
    size_t end = 0;
    bool quoted = false;
    for (; end < rest.size(); ++end) {
      if (rest[end] == '"') quoted = !quoted;
      if (rest[end] == ',' && !quoted) break;
    }
    if (params_say_next(rest.substr(0, end))) return std::string(trim(target));
    value = rest.substr(end);
  }
}

}  // namespace

std::optional<std::string> next_link(const Headers& headers) {
  for (const auto& [name, value] : headers) {
    if (ascii_lower(name) != "link") continue;
    if (auto next = next_in_header(value)) return next;
  }
  return std::nullopt;
}

namespace {

// Authority without userinfo (user:password@ may hold a credential), and the path without
// query or fragment (a signed URL's signature lives there). A URL without a scheme is read as
// authority and path.
std::pair<std::string_view, std::string_view> shown_parts(std::string_view u, std::string_view* scheme) {
  std::string_view authority, rest;
  if (auto s = split_url(u)) {
    *scheme = u.substr(0, s->scheme.size() + 3);
    authority = s->authority;
    rest = s->rest;
  } else {
    size_t end = u.find_first_of("/?#");
    authority = u.substr(0, end);
    rest = end == std::string_view::npos ? std::string_view() : u.substr(end);
  }
  if (size_t at = authority.rfind('@'); at != std::string_view::npos) authority.remove_prefix(at + 1);
  return {authority, rest.substr(0, rest.find_first_of("?#"))};
}

}  // namespace

Status check_endpoint(std::string_view endpoint) {
  if (origin_of(endpoint)) return Status::Ok();
  return InvalidArgument("endpoint '" + url_for_log(endpoint) +
                         "' is not an http:// or https:// URL with a host; use e.g. https://huggingface.co "
                         "(--endpoint or HF_ENDPOINT)");
}

std::string url_host(std::string_view u) {
  std::string_view scheme;
  return std::string(shown_parts(u, &scheme).first);
}

std::string url_for_log(std::string_view u) {
  std::string_view scheme;
  auto [authority, path] = shown_parts(u, &scheme);
  return std::string(scheme) + std::string(authority) + std::string(path);
}

}  // namespace url
}  // namespace hubfs
