// The Hub's JSON answers turned into RepoInfo and TreeEntry values. Parsing never throws: a body
// that is not what the Hub sends becomes a kCorrupt Status naming where it came from.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "common/status.h"
#include "hub/hub_client.h"

namespace hubfs::hub_json {

// The largest file size a listing may claim: 2^53 bytes (8 PiB, beyond any file the Hub holds;
// also the largest integer every JSON reader keeps exact). Sizes size the reader's work, so a
// listing claiming more (2^63-1, 2^64) is refused rather than believed.
constexpr uint64_t kMaxListedSize = 1ull << 53;

// "2023-07-18T16:37:36.000Z", "...+02:00", "...-0500", fraction optional -> unix seconds.
std::optional<int64_t> parse_iso8601(std::string_view s);

// The body of GET /api/{t}/{id}[/revision/{rev}]. Only "sha" is required.
Result<RepoInfo> parse_repo_info(std::string_view body, std::string_view source);

// The body of a tree page or of paths-info: a JSON array of entries. Entries of an unknown type
// or without a path are skipped (a newer Hub may add kinds this client does not serve). A file
// whose size (or lfs.size) is missing or not an integer from 0 to kMaxListedSize (-1, "12",
// 1.5, 2^63-1, 2^64) makes the whole body kCorrupt, naming the entry: a size is never guessed.
Result<std::vector<TreeEntry>> parse_tree_entries(std::string_view body, std::string_view source);

// The server's own explanation in an error body ({"error": "..."}), if any.
std::optional<std::string> error_field(std::string_view body);

}  // namespace hubfs::hub_json
