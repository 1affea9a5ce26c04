// A Hub repository as the user names it: type, "org/name" and revision, and the URL pieces
// derived from it (API segment, resolve prefix, resolve URL).
#pragma once

#include <optional>
#include <string>
#include <string_view>

#include "common/status.h"

namespace hubfs {

enum class RepoType { kModel, kDataset, kSpace };

struct RepoRef {
  RepoType type = RepoType::kModel;
  std::string id;                 // "org/name"
  std::string revision = "main";  // branch, tag, 40-hex sha, or refs/pr/N
};

// Parses "[models/|datasets/|spaces/]ORG/NAME[@REVISION]". An explicit type or revision (from
// --repo-type model|dataset|space / --revision) wins over the spec; a conflict between them is
// an error naming both.
Result<RepoRef> parse_repo_ref(std::string_view spec, std::optional<std::string> type_override = {},
                               std::optional<std::string> revision_override = {});

// "models", "datasets", "spaces" (API path) and "", "datasets/", "spaces/" (resolve prefix).
std::string_view api_segment(RepoType type);
std::string_view resolve_prefix(RepoType type);
// "model", "dataset", "space": the word users type and read in messages.
std::string_view type_name(RepoType type);
// {endpoint}/{prefix}{id}/resolve/{encoded revision}/{encoded path}: where a file's bytes start.
std::string resolve_url(std::string_view endpoint, const RepoRef& repo, std::string_view path);

}  // namespace hubfs
