// What the environment says about the Hub, read as huggingface_hub reads it: the token, the
// endpoint, offline mode. Injectable (TokenSources) so tests need no real environment.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <functional>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>

#include "common/env.h"
#include "common/status.h"

namespace hubfs {

struct TokenSources {
  std::function<const char*(const char*)> getenv = ::getenv;
  std::function<std::optional<std::string>(const std::string&)> read_file;  // default: the file
};
// HF_TOKEN, HUGGING_FACE_HUB_TOKEN, HF_TOKEN_PATH, $HF_HOME/token, $XDG_CACHE_HOME/huggingface/token,
// ~/.cache/huggingface/token; whitespace stripped; empty means none. A token holding control
// characters or inner spaces is ignored: it could not travel in a header without corrupting it.
// HF_HUB_DISABLE_IMPLICIT_TOKEN (1/true/yes/on) means no token at all: huggingface_hub then sends
// one only when a caller passes it explicitly, and hubfs has no such caller.
std::optional<std::string> find_token(const TokenSources& sources = {});
// HF_HUB_DISABLE_IMPLICIT_TOKEN is set to a true value.
bool implicit_token_disabled(const TokenSources& sources = {});

// The token for the next request, as find_token finds it, following a token file that changes
// under a long-running mount (huggingface_hub refreshes OAuth tokens and rewrites the file;
// `huggingface-cli login` replaces it): the file is looked at again (a stat) when `recheck` has
// passed since the last look, and re-read when its size, mtime or inode changed. HF_TOKEN and
// HUGGING_FACE_HUB_TOKEN, read once, still win. Time (the recheck interval) is `time`'s clock.
// Thread-safe.
class TokenWatcher {
 public:
  explicit TokenWatcher(Env& time, TokenSources sources = {}, std::chrono::milliseconds recheck = kDefaultRecheck);
  std::optional<std::string> current();
  // Where the token came from ("HF_TOKEN", "the token file PATH", "" for none), for messages.
  std::string source();

  // hf-mount re-reads the token file every 30 s; a stat every 5 s costs nothing and puts a new
  // token in use well within that.
  static constexpr std::chrono::milliseconds kDefaultRecheck{5000};

 private:
  void reload_locked();
  TokenSources sources_;
  std::chrono::milliseconds recheck_;
  const MonotonicClock& clock_;
  std::mutex mu_;
  std::optional<std::string> env_token_;  // fixed for the mount's life
  std::string env_name_;
  std::optional<std::string> path_;       // the token file consulted (none when an env var wins)
  std::optional<std::string> file_token_;
  MonotonicClock::time_point checked_{};
  bool loaded_ = false;
  // What the file looked like when last read: size, mtime (ns), inode; all -1 when absent.
  int64_t size_ = -1, mtime_ns_ = -1, ino_ = -1;
};
// HF_ENDPOINT with trailing slashes dropped, else https://huggingface.co (read via sources.getenv).
std::string find_endpoint(const TokenSources& sources = {});
// `text` with the "user:password@" of every URL in it removed: "--endpoint=http://u:p@h/x" ->
// "--endpoint=http://h/x", "endpoint=http://u:p@h,cache_dir=D" -> "endpoint=http://h,cache_dir=D".
// What may stay in a process's arguments, which any user of the machine can read (ps,
// /proc/PID/cmdline). Never longer than `text`; unchanged when it holds no credentials.
std::string without_url_credentials(std::string_view text);

// HF_HUB_OFFLINE is 1/true/yes/on (any case): the user asked for no network requests at all.
// HubClient does not check it; whoever builds the client decides what offline means.
bool offline_requested(const TokenSources& sources = {});
// HF_HUB_DISABLE_XET is 1/true/yes/on (any case): Xet-stored files are read through the Hub's
// bridge (resolve + CDN), as huggingface_hub does then, never from the Xet storage service.
bool xet_disabled(const TokenSources& sources = {});

// huggingface_hub's request timeouts (constants.py), in whole seconds as it reads them:
// HF_HUB_ETAG_TIMEOUT for metadata requests (file metadata, repo info; its default 10) and
// HF_HUB_DOWNLOAD_TIMEOUT for file downloads (no byte for this long; its default 10). Each is
// nothing when unset or empty (hubfs keeps its own defaults), else 1..86400; any other value is
// an error naming the variable and what it holds (huggingface_hub fails at import on a value
// int() refuses; a silently ignored timeout would surprise more than a refused mount).
struct EnvTimeouts {
  std::optional<std::chrono::seconds> etag;      // HF_HUB_ETAG_TIMEOUT
  std::optional<std::chrono::seconds> download;  // HF_HUB_DOWNLOAD_TIMEOUT
};
Result<EnvTimeouts> env_timeouts(const TokenSources& sources = {});

}  // namespace hubfs
