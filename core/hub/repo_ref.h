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
  std::string id;                 // "org/name", or "name" for a legacy id without a namespace
  std::string revision = "main";  // branch, tag, 40-hex sha, or refs/pr/N
};

// Parses "[models/|datasets/|spaces/][ORG/]NAME[@REVISION]". Without ORG it is a legacy id
// ("gpt2", "datasets/squad", "squad@v1" with --repo-type dataset): two parts whose first is
// models/datasets/spaces are a type and a legacy name, never an org (the Hub reserves those
// words). An explicit type or revision (from
// --repo-type model|dataset|space / --revision) wins over the spec; a conflict between them is
// an error naming both.
Result<RepoRef> parse_repo_ref(std::string_view spec, std::optional<std::string> type_override = {},
                               std::optional<std::string> revision_override = {});

// A mount's source: a repo and, optionally, the directory of it to show (a subfolder mount).
struct RepoSpec {
  RepoRef repo;
  std::string subfolder;  // "" (the whole repo) or "sub/dir": no leading/trailing '/', no "." or ".."
};

// Parses "[models/|datasets/|spaces/][ORG/]NAME[@REVISION][/SUB/DIR]": what follows ORG/NAME (or
// the revision) is the subfolder; a legacy id without ORG takes a subfolder only after its
// revision ("gpt2@main/sub") or from --subfolder, since "gpt2/sub" is the repo ORG gpt2, NAME sub. The revision ends at the next '/', except refs/pr/N and
// refs/convert/X, which keep theirs (a branch whose name has a '/' needs --revision). With a
// type prefix (plural), three or more parts; without one, ORG/NAME/SUB... is a model's subfolder.
// subfolder_override (--subfolder) conflicting with the spec's subfolder is an error; overrides
// as in parse_repo_ref.
Result<RepoSpec> parse_repo_spec(std::string_view spec, std::optional<std::string> type_override = {},
                                 std::optional<std::string> revision_override = {},
                                 std::optional<std::string> subfolder_override = {});

// Why a revision cannot be put into a URL, or nothing: empty, "." or ".." (or a '/'-separated
// part that is: a/../b), or a control character. Checked by parse_repo_ref and again by every
// HubClient call that puts a revision into a URL, so no path (--hub's NAME@REV, a stored
// record) gets one through.
std::optional<std::string> revision_problem(std::string_view revision);
// The same as a kInvalidArgument Status naming the revision and what to give instead.
Status check_revision(std::string_view revision);

// "models", "datasets", "spaces" (API path) and "", "datasets/", "spaces/" (resolve prefix).
std::string_view api_segment(RepoType type);
std::string_view resolve_prefix(RepoType type);
// "model", "dataset", "space": the word users type and read in messages.
std::string_view type_name(RepoType type);
// The directory holding repo-relative path `path`: "" for one at the repo's root ("a.h5"),
// "x/y" for "x/y/a.h5". What a listing of that directory holds the path's entry under.
std::string parent_dir(std::string_view path);
// {endpoint}/{prefix}{id}/resolve/{encoded revision}/{encoded path}: where a file's bytes start.
std::string resolve_url(std::string_view endpoint, const RepoRef& repo, std::string_view path);

}  // namespace hubfs
