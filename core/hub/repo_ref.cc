// Repo specs as users type them, checked before any of it reaches a URL.
#include <algorithm>
#include <optional>
#include <string>
#include <vector>

#include "hub/repo_ref.h"

#include "common/url.h"

namespace hubfs {
namespace {

// The Hub's own limit on a repo (or org) name length.
constexpr size_t kMaxNameLength = 96;

std::optional<RepoType> type_from_word(std::string_view word) {
  if (word == "model") return RepoType::kModel;
  if (word == "dataset") return RepoType::kDataset;
  if (word == "space") return RepoType::kSpace;
  return std::nullopt;
}

std::optional<RepoType> type_from_prefix(std::string_view segment) {
  if (segment == "models") return RepoType::kModel;
  if (segment == "datasets") return RepoType::kDataset;
  if (segment == "spaces") return RepoType::kSpace;
  return std::nullopt;
}

bool is_name_char(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '.' || c == '_' ||
         c == '-';
}
bool is_word_char(char c) { return is_name_char(c) && c != '.' && c != '-'; }

// One half of "org/name", by the Hub's rules (huggingface_hub validate_repo_id): letters,
// digits, '.', '_', '-'; starts and ends with a letter, digit or '_'; no "--" or "..".
// Returns why it is invalid, or nothing.
std::optional<std::string> name_problem(std::string_view name) {
  if (name.empty()) return "an empty part";
  if (name.size() > kMaxNameLength) return "a part longer than 96 characters";
  for (char c : name) {
    if (!is_name_char(c)) return "the character '" + std::string(1, c) + "'";
  }
  if (!is_word_char(name.front()) || !is_word_char(name.back())) return "a part starting or ending with '.' or '-'";
  if (name.find("--") != std::string_view::npos || name.find("..") != std::string_view::npos) {
    return "'--' or '..'";
  }
  return std::nullopt;
}

}  // namespace

std::optional<std::string> revision_problem(std::string_view rev) {
  if (rev.empty()) return "it is empty";
  // "." and ".." survive encoding (they are unreserved) and URL normalisation, by curl or by any
  // server or proxy on the way, would climb out of the revision's segment: /tree/.. lists the
  // repo at its default branch. A part of "a/../b" is refused too: the server decodes %2F
  // before it reads the ref, and git allows no such ref name anyway.
  size_t start = 0;
  while (true) {
    const size_t slash = rev.find('/', start);
    const std::string_view part = rev.substr(start, slash == std::string_view::npos ? std::string_view::npos : slash - start);
    if (part == "." || part == "..") return "it is (or has a part that is) '.' or '..'";
    if (slash == std::string_view::npos) break;
    start = slash + 1;
  }
  for (unsigned char c : rev) {
    if (c < 0x20 || c == 0x7f) return "it contains a control character";
  }
  return std::nullopt;
}

Status check_revision(std::string_view rev) {
  if (auto problem = revision_problem(rev)) {
    return InvalidArgument("revision '" + std::string(rev) + "' cannot be used: " + *problem +
                           "; give a branch, tag, commit sha or refs/pr/N");
  }
  return Status::Ok();
}

std::string_view api_segment(RepoType type) {
  switch (type) {
    case RepoType::kModel: return "models";
    case RepoType::kDataset: return "datasets";
    case RepoType::kSpace: return "spaces";
  }
  return "models";
}

std::string_view resolve_prefix(RepoType type) {
  switch (type) {
    case RepoType::kModel: return "";
    case RepoType::kDataset: return "datasets/";
    case RepoType::kSpace: return "spaces/";
  }
  return "";
}

std::string_view type_name(RepoType type) {
  switch (type) {
    case RepoType::kModel: return "model";
    case RepoType::kDataset: return "dataset";
    case RepoType::kSpace: return "space";
  }
  return "model";
}

std::string parent_dir(std::string_view path) {
  const size_t slash = path.rfind('/');
  return slash == std::string_view::npos ? std::string() : std::string(path.substr(0, slash));
}

std::string resolve_url(std::string_view endpoint, const RepoRef& repo, std::string_view path) {
  return std::string(endpoint) + "/" + std::string(resolve_prefix(repo.type)) + repo.id + "/resolve/" +
         encode_segment(repo.revision) + "/" + encode_path(path);
}

Result<RepoRef> parse_repo_ref(std::string_view spec, std::optional<std::string> type_override,
                               std::optional<std::string> revision_override) {
  const std::string quoted = "'" + std::string(spec) + "'";
  RepoRef ref;

  // The revision is everything after the first '@' ("refs/pr/1" keeps its slashes).
  std::string_view id = spec;
  std::optional<std::string> spec_revision;
  if (size_t at = spec.find('@'); at != std::string_view::npos) {
    // A revision holding '/' may come percent-encoded, as one path segment
    // (ORG/NAME@refs%2Fconvert%2Fparquet): decoded, as hf:// URLs are and as huggingface_hub's
    // HfFileSystem decodes them (unquote). check_revision below then sees the decoded name.
    spec_revision = url::percent_decode(spec.substr(at + 1));
    id = spec.substr(0, at);
    if (spec_revision->empty()) {
      return InvalidArgument("repo " + quoted + " ends with '@' but names no revision: write ORG/NAME@REVISION, or drop the '@'");
    }
  }

  // A type prefix when three parts remain, or two whose first is models/datasets/spaces: the Hub
  // reserves those words (they are its own URL paths), so "datasets/squad" is the legacy dataset
  // "squad", as huggingface_hub's repo_type_and_id_from_hf_id reads it, not an org "datasets".
  std::optional<RepoType> spec_type;
  const auto slashes = std::count(id.begin(), id.end(), '/');
  if (slashes == 2 || (slashes == 1 && type_from_prefix(id.substr(0, id.find('/'))))) {
    size_t slash = id.find('/');
    spec_type = type_from_prefix(id.substr(0, slash));
    if (!spec_type) {
      return InvalidArgument("repo " + quoted + " has an unknown type prefix '" + std::string(id.substr(0, slash)) +
                             "': use models/, datasets/ or spaces/ (or none, for a model)");
    }
    id = id.substr(slash + 1);
  }

  // "ORG/NAME", or a legacy id without a namespace ("gpt2", "squad"): repos created before the
  // Hub had organisations keep such ids, and its URLs take them as they are (/api/models/gpt2,
  // /gpt2/resolve/..., /datasets/squad/resolve/...).
  std::vector<std::string_view> parts;
  if (size_t slash = id.find('/'); slash == std::string_view::npos) {
    if (type_from_prefix(id)) {
      return InvalidArgument("repo " + quoted + " names no repo: '" + std::string(id) +
                             "' is a type prefix; write " + std::string(id) + "/[ORG/]NAME");
    }
    parts = {id};
  } else if (id.find('/', slash + 1) == std::string_view::npos) {
    parts = {id.substr(0, slash), id.substr(slash + 1)};
  } else {
    return InvalidArgument("repo " + quoted +
                           " is not of the form [models/|datasets/|spaces/][ORG/]NAME[@REVISION], e.g. "
                           "openai-community/gpt2, gpt2 or datasets/org/name@main");
  }
  for (std::string_view part : parts) {
    if (auto problem = name_problem(part)) {
      return InvalidArgument("repo id '" + std::string(id) + "' in " + quoted + " has " + *problem +
                             ": ids are [ORG/]NAME made of letters, digits, '.', '_' and '-'");
    }
  }
  ref.id = std::string(id);

  ref.type = spec_type.value_or(RepoType::kModel);
  if (type_override) {
    auto t = type_from_word(*type_override);
    if (!t) {
      return InvalidArgument("unknown --repo-type '" + *type_override + "': use model, dataset or space");
    }
    if (spec_type && *spec_type != *t) {
      return InvalidArgument("repo " + quoted + " says " + std::string(type_name(*spec_type)) +
                             " but --repo-type says " + *type_override + ": drop the prefix or the option");
    }
    ref.type = *t;
  }

  if (spec_revision && revision_override && *spec_revision != *revision_override) {
    return InvalidArgument("repo " + quoted + " names revision '" + *spec_revision + "' but --revision says '" +
                           *revision_override + "': drop one of them");
  }
  if (revision_override) {
    ref.revision = *revision_override;
  } else if (spec_revision) {
    ref.revision = *spec_revision;
  }
  if (Status s = check_revision(ref.revision); !s.ok()) return s;
  return ref;
}

namespace {

std::vector<std::string_view> split_slashes(std::string_view s) {
  std::vector<std::string_view> parts;
  size_t start = 0;
  while (true) {
    size_t slash = s.find('/', start);
    parts.push_back(s.substr(start, slash == std::string_view::npos ? std::string_view::npos : slash - start));
    if (slash == std::string_view::npos) return parts;
    start = slash + 1;
  }
}

// "sub/dir" from "sub/dir", "/sub/dir/" or "sub//dir"; an error for "." or ".." parts or
// control characters (the path travels in URLs).
Result<std::string> normalize_subfolder(std::string_view text, const std::string& quoted) {
  std::string out;
  for (std::string_view part : split_slashes(text)) {
    if (part.empty()) continue;
    if (part == "." || part == "..") {
      return InvalidArgument("subfolder '" + std::string(text) + "' in " + quoted +
                             " has a '.' or '..' part: name the directory from the repo's root, e.g. data/train");
    }
    for (unsigned char c : part) {
      if (c < 0x20 || c == 0x7f) return InvalidArgument("subfolder in " + quoted + " contains a control character");
    }
    if (!out.empty()) out += '/';
    out += part;
  }
  return out;
}

}  // namespace

Result<RepoSpec> parse_repo_spec(std::string_view spec, std::optional<std::string> type_override,
                                 std::optional<std::string> revision_override,
                                 std::optional<std::string> subfolder_override) {
  const std::string quoted = "'" + std::string(spec) + "'";
  std::string_view before = spec;
  std::string revision_part;  // "@REV" or ""
  std::string_view rest;      // the subfolder part
  if (size_t at = spec.find('@'); at != std::string_view::npos) {
    before = spec.substr(0, at);
    std::string_view after = spec.substr(at + 1);
    // refs/pr/N and refs/convert/X span three parts; any other revision is one.
    size_t parts = after.starts_with("refs/") ? 3 : 1;
    size_t end = 0;
    for (size_t i = 0; i < parts && end != std::string_view::npos; ++i) {
      end = after.find('/', i == 0 ? 0 : end + 1);
    }
    if (end == std::string_view::npos) {
      revision_part = "@" + std::string(after);
    } else {
      revision_part = "@" + std::string(after.substr(0, end));
      rest = after.substr(end + 1);
    }
  }
  std::vector<std::string_view> parts = split_slashes(before);
  // Fewer parts than that are a legacy id ("gpt2", "datasets/squad"); "datasets/squad/train" stays
  // the dataset squad/train, so a legacy id's subfolder comes after its revision
  // ("datasets/squad@main/train") or from --subfolder.
  size_t id_parts = 2;
  if (parts.size() >= 3 && type_from_prefix(parts[0])) {
    id_parts = 3;
  } else if (parts.size() >= 3 && type_from_word(parts[0])) {
    return InvalidArgument("repo " + quoted + " starts with '" + std::string(parts[0]) + "/': the type prefix is plural (" +
                           std::string(api_segment(*type_from_word(parts[0]))) + "/)");
  }
  std::string id_spec;
  std::string path_part;
  for (size_t i = 0; i < parts.size(); ++i) {
    std::string& target = i < id_parts ? id_spec : path_part;
    if (i != 0 && i != id_parts) target += '/';
    target += parts[i];
  }
  if (!rest.empty()) {
    if (!path_part.empty()) {
      return InvalidArgument("repo " + quoted + " names a path both before and after the revision: write "
                             "ORG/NAME@REVISION/SUB/DIR");
    }
    path_part = std::string(rest);
  }
  auto ref = parse_repo_ref(id_spec + revision_part, std::move(type_override), std::move(revision_override));
  if (!ref.ok()) return ref.status();
  auto sub = normalize_subfolder(path_part, quoted);
  if (!sub.ok()) return sub.status();
  RepoSpec out{std::move(ref).value(), std::move(sub).value()};
  if (subfolder_override) {
    auto flag = normalize_subfolder(*subfolder_override, "--subfolder");
    if (!flag.ok()) return flag.status();
    if (!out.subfolder.empty() && *flag != out.subfolder) {
      return InvalidArgument("repo " + quoted + " names subfolder '" + out.subfolder + "' but --subfolder says '" +
                             *subfolder_override + "': drop one of them");
    }
    out.subfolder = *flag;
  }
  return out;
}

}  // namespace hubfs
