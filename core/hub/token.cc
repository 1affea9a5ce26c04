// Where a Hub token comes from, in the order huggingface_hub uses, so a machine already
// logged in with `huggingface-cli login` works unchanged.
#include <sys/stat.h>

#include <algorithm>
#include <cctype>
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

// The file's identity as stat sees it, or all -1 when it cannot be stat'ed.
struct FileStamp {
  int64_t size = -1, mtime_ns = -1, ino = -1;
};
FileStamp stamp_of(const std::string& path) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) return {};
  return {static_cast<int64_t>(st.st_size),
          static_cast<int64_t>(st.st_mtim.tv_sec) * 1000000000 + st.st_mtim.tv_nsec, static_cast<int64_t>(st.st_ino)};
}

}  // namespace

bool implicit_token_disabled(const TokenSources& sources) {
  const char* v = sources.getenv ? sources.getenv("HF_HUB_DISABLE_IMPLICIT_TOKEN") : nullptr;
  if (v == nullptr) return false;
  std::string value(v);
  std::transform(value.begin(), value.end(), value.begin(), [](unsigned char c) { return std::tolower(c); });
  return value == "1" || value == "true" || value == "yes" || value == "on";
}

std::optional<std::string> find_token(const TokenSources& sources) {
  if (implicit_token_disabled(sources)) return std::nullopt;
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

TokenWatcher::TokenWatcher(Env& time, TokenSources sources, std::chrono::milliseconds recheck)
    : sources_(std::move(sources)), recheck_(recheck), clock_(time.clock()) {
  if (implicit_token_disabled(sources_)) return;
  for (const char* name : {"HF_TOKEN", "HUGGING_FACE_HUB_TOKEN"}) {
    if (auto v = env(sources_, name)) {
      if (auto t = clean_token(*v)) {
        env_token_ = t;
        env_name_ = name;
        return;
      }
    }
  }
  path_ = token_file_path(sources_);
}

void TokenWatcher::reload_locked() {
  const FileStamp st = stamp_of(*path_);
  if (loaded_ && st.size == size_ && st.mtime_ns == mtime_ns_ && st.ino == ino_) return;
  loaded_ = true;
  size_ = st.size;
  mtime_ns_ = st.mtime_ns;
  ino_ = st.ino;
  auto content = st.size < 0 ? std::nullopt
                             : (sources_.read_file ? sources_.read_file(*path_) : read_small_file(*path_));
  file_token_ = content ? clean_token(*content) : std::nullopt;
}

std::optional<std::string> TokenWatcher::current() {
  std::lock_guard<std::mutex> lock(mu_);
  if (env_token_) return env_token_;
  if (!path_) return std::nullopt;
  const auto now = clock_.now();
  if (!loaded_ || now - checked_ >= recheck_) {
    checked_ = now;
    reload_locked();
  }
  return file_token_;
}

std::string TokenWatcher::source() {
  std::lock_guard<std::mutex> lock(mu_);
  if (env_token_) return env_name_;
  if (path_ && file_token_) return "the token file " + *path_;
  return "";
}

}  // namespace hubfs
