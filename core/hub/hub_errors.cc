#include "hub/hub_errors.h"

#include "hub/hub_json.h"
#include "net/quota_gate.h"

namespace hubfs::hub_errors {
namespace {

// A server's explanation is quoted, not pasted whole: long HTML error pages would drown the
// part of the message that tells the user what to do.
constexpr size_t kMaxServerMessage = 300;

const char kTokenFix[] = "set HF_TOKEN or write a token to ~/.cache/huggingface/token";
// What the Hub answers (401, no X-Error-Code) to a token it does not accept, on any repo.
const char kInvalidCredentials[] = "Invalid credentials in Authorization header";

std::string repo_words(const Context& c) {
  return "repository '" + c.repo->id + "' (" + std::string(type_name(c.repo->type)) + ")";
}

std::string path_words(const Context& c) {
  if (!c.path) return repo_words(c);
  if (c.path->empty()) return "the root directory";
  return std::string(c.path_is_dir ? "directory '" : "file '") + *c.path + "'";
}

bool token_sent(const Context& c) { return c.token && c.token->has_value(); }

std::string repo_page(const Context& c) {
  return c.endpoint + "/" + std::string(resolve_prefix(c.repo->type)) + c.repo->id;
}

// Printable, bounded, and free of the token.
std::string server_said(const HttpResponse& r, const Context& c) {
  std::string text = r.header("x-error-message").value_or("");
  if (text.empty()) text = hub_json::error_field(r.body).value_or("");
  if (text.empty()) return "";
  if (c.token) text = scrub(std::move(text), *c.token);
  for (char& ch : text) {
    if (static_cast<unsigned char>(ch) < 0x20 || ch == 0x7f) ch = ' ';
  }
  if (text.size() > kMaxServerMessage) text = text.substr(0, kMaxServerMessage) + "...";
  return " (the Hub said: " + text + ")";
}

std::string not_found_or_private(const Context& c) {
  std::string m = repo_words(c) + " not found at " + c.endpoint + ": it does not exist, or it is private and ";
  if (token_sent(c)) {
    m += "the token sent cannot read it; check the repo id and type (datasets/ or spaces/ prefix, --repo-type) "
         "and that the token (HF_TOKEN or ~/.cache/huggingface/token) is valid and has access";
  } else {
    m += "no valid token was sent; check the repo id and type (datasets/ or spaces/ prefix, --repo-type), or ";
    m += kTokenFix;
  }
  return m;
}

Status classify(const HttpResponse& r, const Context& c) {
  const std::string code = r.header("x-error-code").value_or("");
  const long s = r.status;
  const std::string http = " (HTTP " + std::to_string(s) + ")";

  if (code == "RevisionNotFound") {
    return NotFound("revision '" + c.repo->revision + "' not found in " + repo_words(c) + " at " + c.endpoint +
                    ": check the branch, tag or commit given with @REVISION or --revision");
  }
  if (code == "EntryNotFound") {
    return NotFound(path_words(c) + " not found in " + repo_words(c) + " at revision '" + c.repo->revision +
                    "': check the path");
  }
  if (code == "GatedRepo") {
    std::string m = repo_words(c) + " at " + c.endpoint + " is gated: accept its conditions at " + repo_page(c) +
                    " and use a token";
    m += token_sent(c) ? " of the account that accepted them (the token sent has no access yet)"
                       : std::string(" (") + kTokenFix + ")";
    return PermissionDenied(m);
  }
  if (code == "DisabledRepo") {
    return PermissionDenied(repo_words(c) + " has been disabled at " + c.endpoint +
                            ": its files cannot be read; use another repository");
  }
  // The Hub's message starts with these words (a proxy or an older Hub may add more after them,
  // and may send them with RepoNotFound): a refused token, never a missing repo.
  if (s == 401 && token_sent(c) &&
      (r.header("x-error-message").value_or("").find(kInvalidCredentials) != std::string::npos ||
       hub_json::error_field(r.body).value_or("").find(kInvalidCredentials) != std::string::npos)) {
    return PermissionDenied("the token sent to " + c.endpoint + " is invalid (revoked, expired or mistyped): log "
                            "in again (huggingface-cli login) or set a valid HF_TOKEN; to read public repos "
                            "without a token, unset HF_TOKEN (and remove ~/.cache/huggingface/token) or set "
                            "HF_HUB_DISABLE_IMPLICIT_TOKEN=1");
  }
  if (code == "RepoNotFound" || s == 401) {
    // The Hub answers a private repo asked without a token exactly as one that does not exist
    // (401 RepoNotFound): both are missing to us, as to huggingface_hub, so ENOENT under --hub.
    // Any other 401 (no RepoNotFound) is a refusal; an invalid token was told apart above.
    std::string m = not_found_or_private(c);
    return s == 401 && code != "RepoNotFound" ? PermissionDenied(m) : NotFound(m);
  }
  if (s == 404) {
    if (!c.path) return NotFound(not_found_or_private(c));
    return NotFound(path_words(c) + " not found in " + repo_words(c) + " at revision '" + c.repo->revision +
                    "' (or the repository is missing or private): check the path, the repo id and the token");
  }
  if (s == 403) {
    return PermissionDenied("access to " + repo_words(c) + " at " + c.endpoint + " was refused" + http +
                            ": the token lacks permission for it; check the token's scopes, or accept the "
                            "repository's conditions at " + repo_page(c));
  }
  if (s == 429) {
    std::optional<RateLimitHeader> rl;
    if (auto v = r.header("ratelimit")) rl = parse_ratelimit(*v);
    std::optional<std::pair<int64_t, int64_t>> policy;
    if (auto v = r.header("ratelimit-policy")) policy = parse_ratelimit_policy(*v);
    if (rl && rl->remaining == 0) {
      std::string m = "the Hub's '" + rl->bucket + "' quota";
      if (policy) m += " (" + std::to_string(policy->first) + " requests per " + std::to_string(policy->second) + " s)";
      m += " at " + c.endpoint + " is spent" + http + "; it resets in " + std::to_string(rl->reset_s) +
           " s. hubfs waited as long as --rate-limit-wait allows; ";
      m += token_sent(c) ? "raise --rate-limit-wait, or use an account with a larger quota (PRO, Team)"
                         : "log in (huggingface-cli login, or HF_TOKEN) for a larger quota, or raise --rate-limit-wait";
      return Unavailable(m);
    }
    return Unavailable(c.endpoint + " is rate-limiting requests" + http +
                       ": wait a minute and retry; requests with a token (HF_TOKEN) get higher limits");
  }
  if (s == 408 || s >= 500) {
    return Unavailable(c.endpoint + " failed to answer for " + repo_words(c) + http +
                       ": the Hub is having trouble; retry later");
  }
  if (s >= 400) {
    return InvalidArgument(c.endpoint + " rejected the request for " + path_words(c) + " of " + repo_words(c) +
                           http + ": check the repo id, revision and path");
  }
  return Unavailable("unexpected answer" + http + " from " + c.endpoint + " for " + repo_words(c) +
                     ": check that --endpoint / HF_ENDPOINT points at a Hugging Face Hub");
}

}  // namespace

std::string scrub(std::string text, const std::optional<std::string>& token) {
  if (!token || token->empty()) return text;
  for (size_t pos = text.find(*token); pos != std::string::npos; pos = text.find(*token, pos)) {
    text.replace(pos, token->size(), "<token>");
  }
  return text;
}

Status from_response(const HttpResponse& response, const Context& ctx) {
  Status s = classify(response, ctx);
  std::string message = s.message() + server_said(response, ctx);
  return Status(s.code(), ctx.token ? scrub(std::move(message), *ctx.token) : message);
}

Status from_transport(const Status& failure, const std::string& where, const Context& ctx) {
  if (failure.code() == Code::kPermissionDenied) {
    // An untrusted TLS certificate: the network works, and the transport's message names the
    // host and how to trust it; "check the network" would send the user the wrong way.
    return Status(failure.code(), ctx.token ? scrub(failure.message(), *ctx.token) : failure.message());
  }
  const bool timeout = failure.code() == Code::kTimeout;
  std::string m = (timeout ? "timed out talking to " : "cannot reach ") + where + ": " + failure.message() +
                  "; check the network or --endpoint / HF_ENDPOINT";
  if (ctx.token) m = scrub(std::move(m), *ctx.token);
  return Status(timeout ? Code::kTimeout : Code::kUnavailable, std::move(m));
}

}  // namespace hubfs::hub_errors
