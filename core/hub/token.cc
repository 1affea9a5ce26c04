// Where a Hub token comes from, in the order huggingface_hub uses, so a machine already
// logged in with `huggingface-cli login` works unchanged.
#include <fstream>
#include <optional>
#include <string>

#include "hub/environment.h"

namespace hubfs {
namespace {

// A token is ~40 characters: a "token" file larger than this is something else, not read whole.
constexpr std::streamsize kMaxTokenFileBytes = 64 * 1024;

std::optional<std::string> read_small_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return std::nullopt;
  std::string data(kMaxTokenFileBytes + 1, '\0');
  in.read(data.data(), kMaxTokenFileBytes + 1);
  std::streamsize n = in.gcount();
  if (n > kMaxTokenFileBytes) return std::nullopt;
  data.resize(static_cast<size_t>(n));
  return data;
}

bool is_space(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\v' || c == '\f'; }

// Stripped, and only if it can travel in a header as is: visible ASCII, nothing else.
std::optional<std::string> clean_token(std::string_view raw) {
  while (!raw.empty() && is_space(raw.front())) raw.remove_prefix(1);
  while (!raw.empty() && is_space(raw.back())) raw.remove_suffix(1);
  if (raw.empty()) return std::nullopt;
  for (unsigned char c : raw) {
    if (c <= 0x20 || c >= 0x7f) return std::nullopt;
  }
  return std::string(raw);
}

// An unset and an empty variable mean the same: not configured.
std::optional<std::string> env(const TokenSources& s, const char* name) {
  const char* v = s.getenv ? s.getenv(name) : nullptr;
  if (v == nullptr || *v == '\0') return std::nullopt;
  return std::string(v);
}

std::optional<std::string> token_file_path(const TokenSources& s) {
  if (auto p = env(s, "HF_TOKEN_PATH")) return p;
  if (auto home = env(s, "HF_HOME")) return *home + "/token";
  if (auto xdg = env(s, "XDG_CACHE_HOME")) return *xdg + "/huggingface/token";
  if (auto home = env(s, "HOME")) return *home + "/.cache/huggingface/token";
  return std::nullopt;
}

}  // namespace

std::optional<std::string> find_token(const TokenSources& sources) {
  for (const char* name : {"HF_TOKEN", "HUGGING_FACE_HUB_TOKEN"}) {
    if (auto v = env(sources, name)) {
      if (auto t = clean_token(*v)) return t;
    }
  }
  auto path = token_file_path(sources);
  if (!path) return std::nullopt;
  auto content = sources.read_file ? sources.read_file(*path) : read_small_file(*path);
  if (!content) return std::nullopt;
  return clean_token(*content);
}

}  // namespace hubfs
