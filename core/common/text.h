// Small ASCII text helpers shared by the parsers of headers, URLs and content ids.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

namespace hubfs {

// s with A-Z turned into a-z; other bytes as they are (header names, hosts, hex digests).
std::string ascii_lower(std::string_view s);

// Whether s is exactly `length` hex digits, either case.
bool is_hex(std::string_view s, size_t length);
// The same in lowercase only: the form hubfs writes a hash or commit in (a stored record with
// another form is not one of ours).
bool is_lower_hex(std::string_view s, size_t length);

}  // namespace hubfs
