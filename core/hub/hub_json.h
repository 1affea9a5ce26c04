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

// "2023-07-18T16:37:36.000Z", "...+02:00", "...-0500", fraction optional -> unix seconds.
std::optional<int64_t> parse_iso8601(std::string_view s);

// The body of GET /api/{t}/{id}[/revision/{rev}]. Only "sha" is required.
Result<RepoInfo> parse_repo_info(std::string_view body, std::string_view source);

// The body of a tree page or of paths-info: a JSON array of entries. Entries of an unknown type
// or without a path are skipped (a newer Hub may add kinds this client does not serve).
Result<std::vector<TreeEntry>> parse_tree_entries(std::string_view body, std::string_view source);

// The server's own explanation in an error body ({"error": "..."}), if any.
std::optional<std::string> error_field(std::string_view body);

}  // namespace hubfs::hub_json
