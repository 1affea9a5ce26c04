// The one URL module: small pieces the Hub client and the transport need and nothing more:
// origins (to decide where a token may go), relative references (redirects, pagination links),
// query parameters (signed URL expiry), the Link header, and what of a URL a message may show.
// Not a general URL parser.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "common/http.h"
#include "common/status.h"

namespace hubfs {

// Percent-encodes everything but unreserved characters: a revision is one path segment.
std::string encode_segment(std::string_view s);
// Percent-encodes a repo path, keeping its slashes.
std::string encode_path(std::string_view path);

namespace url {

// Scheme, host and port: two URLs may share credentials only when all three match.
struct Origin {
  std::string scheme;  // lower-case
  std::string host;    // lower-case, IPv6 literals keep their brackets
  uint16_t port = 0;   // the scheme's default when the URL names none

  bool operator==(const Origin&) const = default;
};

// nullopt for anything that is not an absolute http(s) URL with a host.
std::optional<Origin> origin_of(std::string_view url);
// False when either URL has no origin: an unparseable URL never receives a token.
bool same_origin(std::string_view a, std::string_view b);

// "scheme://host[:port]" of a URL, for error messages: never its path or query, which for a
// signed CDN URL carry the signature.
std::string host_for_messages(std::string_view url);

// The absolute URL a reference (Location, Link target) points to, seen from `base`:
// absolute stays, "//host/p" takes the base scheme, "/p" the base origin, "p" the base's
// directory. nullopt when base has no origin and the reference is not absolute.
std::optional<std::string> resolve_reference(std::string_view base, std::string_view ref);

// The percent-decoded value of the first query parameter named exactly `name`.
std::optional<std::string> query_param(std::string_view url, std::string_view name);
std::string percent_decode(std::string_view s);

// What of a URL is safe in a message. Signed CDN URLs carry their signature in the query and
// an endpoint may carry user:password@, so messages show neither.
// "https://u:p@cdn.example:8443/a/b?sig=..." -> "cdn.example:8443".
std::string url_host(std::string_view url);
// "https://u:p@cdn.example/a/b?sig=...#frag" -> "https://cdn.example/a/b".
std::string url_for_log(std::string_view url);

// OK for an absolute http:// or https:// URL with a host; otherwise why not and the fix (an
// ftp:// or file:// endpoint would otherwise be tried, and its failures retried, as if it were
// a Hub that does not answer).
Status check_endpoint(std::string_view endpoint);

// The target of the rel="next" link across every Link header (RFC 8288: several links per
// header, quoted or bare rel, several space-separated relation types, any case).
std::optional<std::string> next_link(const Headers& headers);

}  // namespace url
}  // namespace hubfs
