// Pieces of a URL that are safe to put in an error message. Signed CDN URLs carry their
// signature in the query string, so messages name the host and path, never the query.
#pragma once

#include <string>
#include <string_view>

namespace hubfs::net {

// "https://cdn.example/a/b?X-Amz-Signature=..." -> "cdn.example" (port kept, userinfo dropped).
std::string url_host(std::string_view url);

// "https://cdn.example/a/b?sig=...#frag" -> "https://cdn.example/a/b" (userinfo dropped).
std::string url_for_log(std::string_view url);

}  // namespace hubfs::net
