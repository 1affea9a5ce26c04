#include "hub/hub_json.h"

#include <charconv>

#include <nlohmann/json.hpp>

namespace hubfs::hub_json {
namespace {

using nlohmann::json;

std::optional<json> parse(std::string_view body) {
  json j = json::parse(body.begin(), body.end(), /*cb=*/nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) return std::nullopt;
  return j;
}

Status malformed(std::string_view source, std::string_view what) {
  return Corrupt("unexpected answer from " + std::string(source) + ": " + std::string(what) +
                 "; is --endpoint / HF_ENDPOINT a Hugging Face Hub?");
}

// Digits at s[pos, pos+n) as a number, or -1.
int digits(std::string_view s, size_t pos, size_t n) {
  if (pos + n > s.size()) return -1;
  int v = 0;
  for (size_t i = pos; i < pos + n; ++i) {
    if (s[i] < '0' || s[i] > '9') return -1;
    v = v * 10 + (s[i] - '0');
  }
  return v;
}

// Days since 1970-01-01 of a proleptic Gregorian date (Howard Hinnant's days_from_civil).
int64_t days_from_civil(int64_t y, unsigned m, unsigned d) {
  y -= m <= 2;
  const int64_t era = (y >= 0 ? y : y - 399) / 400;
  const unsigned yoe = static_cast<unsigned>(y - era * 400);
  const unsigned doy = (153 * (m + (m > 2 ? -3 : 9)) + 2) / 5 + d - 1;
  const unsigned doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
  return era * 146097 + static_cast<int64_t>(doe) - 719468;
}

// A byte count: a JSON integer from 0 to kMaxListedSize. Strings ("12"), fractions (1.5),
// negatives and anything larger (2^63-1; 2^64, which the parser can only hold as a double) are not.
std::optional<uint64_t> as_size(const json& j) {
  uint64_t v = 0;
  if (j.is_number_unsigned()) {
    v = j.get<uint64_t>();
  } else if (j.is_number_integer() && j.get<int64_t>() >= 0) {
    v = static_cast<uint64_t>(j.get<int64_t>());
  } else {
    return std::nullopt;
  }
  if (v > kMaxListedSize) return std::nullopt;
  return v;
}

// The size as the listing wrote it, for a message: bounded, so a huge string stays readable.
std::string shown(const json& j) {
  std::string text = j.dump();
  return text.size() > 40 ? text.substr(0, 40) + "..." : text;
}

std::string string_or_empty(const json& obj, const char* key) {
  auto it = obj.find(key);
  return it != obj.end() && it->is_string() ? it->get<std::string>() : std::string();
}

}  // namespace

std::optional<int64_t> parse_iso8601(std::string_view s) {
  int year = digits(s, 0, 4), month = digits(s, 5, 2), day = digits(s, 8, 2);
  int hour = digits(s, 11, 2), minute = digits(s, 14, 2), second = digits(s, 17, 2);
  if (year < 0 || month < 1 || month > 12 || day < 1 || day > 31 || hour < 0 || hour > 23 || minute < 0 ||
      minute > 59 || second < 0 || second > 60) {
    return std::nullopt;
  }
  if (s[4] != '-' || s[7] != '-' || (s[10] != 'T' && s[10] != 't' && s[10] != ' ') || s[13] != ':' || s[16] != ':') {
    return std::nullopt;
  }
  size_t pos = 19;
  if (pos < s.size() && (s[pos] == '.' || s[pos] == ',')) {
    ++pos;
    size_t start = pos;
    while (pos < s.size() && s[pos] >= '0' && s[pos] <= '9') ++pos;
    if (pos == start) return std::nullopt;
  }
  int64_t offset = 0;  // seconds east of UTC
  if (pos == s.size() || ((s[pos] == 'Z' || s[pos] == 'z') && pos + 1 == s.size())) {
    // UTC (a stamp without a zone is taken as UTC: the Hub always writes Z).
  } else if (s[pos] == '+' || s[pos] == '-') {
    int sign = s[pos] == '+' ? 1 : -1;
    int oh = digits(s, pos + 1, 2);
    size_t mpos = pos + 3;
    if (mpos < s.size() && s[mpos] == ':') ++mpos;
    int om = digits(s, mpos, 2);
    if (oh < 0 || oh > 23 || om < 0 || om > 59 || mpos + 2 != s.size()) return std::nullopt;
    offset = sign * (oh * 3600 + om * 60);
  } else {
    return std::nullopt;
  }
  int64_t days = days_from_civil(year, static_cast<unsigned>(month), static_cast<unsigned>(day));
  return days * 86400 + hour * 3600 + minute * 60 + second - offset;
}

Result<RepoInfo> parse_repo_info(std::string_view body, std::string_view source) {
  auto j = parse(body);
  if (!j) return malformed(source, "the body is not JSON");
  if (!j->is_object()) return malformed(source, "the body is not a JSON object");
  RepoInfo info;
  info.sha = string_or_empty(*j, "sha");
  if (info.sha.empty()) return malformed(source, "no commit 'sha' in the repository info");
  // The mount puts the commit into every later URL as its revision.
  if (revision_problem(info.sha)) return malformed(source, "the commit 'sha' in the repository info is not a revision");
  if (auto when = parse_iso8601(string_or_empty(*j, "lastModified"))) info.last_modified = *when;
  if (auto it = j->find("private"); it != j->end() && it->is_boolean()) info.is_private = it->get<bool>();
  // "gated" is false, or the gating mode as a string ("auto", "manual").
  if (auto it = j->find("gated"); it != j->end()) {
    info.gated = (it->is_boolean() && it->get<bool>()) || (it->is_string() && !it->get<std::string>().empty());
  }
  // Every file of the commit is a sibling: their count says how big a recursive listing is.
  if (auto it = j->find("siblings"); it != j->end() && it->is_array()) info.file_count = it->size();
  return info;
}

Result<std::vector<TreeEntry>> parse_tree_entries(std::string_view body, std::string_view source) {
  auto j = parse(body);
  if (!j) return malformed(source, "the body is not JSON");
  if (!j->is_array()) return malformed(source, "the listing is not a JSON array");
  std::vector<TreeEntry> entries;
  entries.reserve(j->size());
  for (const json& item : *j) {
    if (!item.is_object()) continue;
    TreeEntry e;
    e.path = string_or_empty(item, "path");
    std::string type = string_or_empty(item, "type");
    if (e.path.empty() || (type != "file" && type != "directory")) continue;
    e.is_dir = type == "directory";
    e.oid = string_or_empty(item, "oid");
    // A size is what the reader sizes its work by: one it cannot believe fails the whole listing
    // (never shown as 0, never a file of 2^63 bytes). A file always has one; a directory's is
    // ignored.
    auto bad_size = [&](const json* value) {
      return malformed(source, "'" + e.path + "' is listed with size " + (value ? shown(*value) : "(none)") +
                                   ", not a byte count from 0 to 2^53");
    };
    if (auto it = item.find("size"); it != item.end()) {
      auto size = as_size(*it);
      if (!size && !e.is_dir) return bad_size(&*it);
      e.size = size.value_or(0);
    } else if (!e.is_dir) {
      return bad_size(nullptr);
    }
    if (auto lfs = item.find("lfs"); !e.is_dir && lfs != item.end() && lfs->is_object()) {
      // The git blob is only the pointer: the real size and content hash are the LFS ones.
      if (auto it = lfs->find("size"); it != lfs->end()) {
        auto size = as_size(*it);
        if (!size) return bad_size(&*it);
        e.size = *size;
      }
      std::string sha = string_or_empty(*lfs, "oid");
      if (!sha.empty()) e.lfs_sha256 = sha;
    }
    if (auto xet = item.find("xetHash"); !e.is_dir && xet != item.end() && xet->is_string()) {
      // Kept only in Xet's form (64 hex digits); anything else leaves the file to the bridge.
      const std::string& h = xet->get_ref<const std::string&>();
      if (h.size() == 64 && h.find_first_not_of("0123456789abcdefABCDEF") == std::string::npos) e.xet_hash = h;
    }
    if (e.is_dir) e.size = 0;
    entries.push_back(std::move(e));
  }
  return entries;
}

std::optional<std::string> error_field(std::string_view body) {
  auto j = parse(body);
  if (!j || !j->is_object()) return std::nullopt;
  std::string message = string_or_empty(*j, "error");
  if (message.empty()) return std::nullopt;
  return message;
}

}  // namespace hubfs::hub_json
