// What the environment says about the Hub, read as huggingface_hub reads it: the token, the
// endpoint, offline mode. Injectable (TokenSources) so tests need no real environment.
#pragma once

#include <cstdlib>
#include <functional>
#include <optional>
#include <string>
#include <string_view>

namespace hubfs {

struct TokenSources {
  std::function<const char*(const char*)> getenv = ::getenv;
  std::function<std::optional<std::string>(const std::string&)> read_file;  // default: the file
};
// HF_TOKEN, HUGGING_FACE_HUB_TOKEN, HF_TOKEN_PATH, $HF_HOME/token, $XDG_CACHE_HOME/huggingface/token,
// ~/.cache/huggingface/token; whitespace stripped; empty means none. A token holding control
// characters or inner spaces is ignored: it could not travel in a header without corrupting it.
std::optional<std::string> find_token(const TokenSources& sources = {});
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

}  // namespace hubfs
