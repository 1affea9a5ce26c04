// Turns a failed Hub exchange into a Status whose message says what went wrong and what the
// user can do about it. The token never appears in a message: anything the server echoes back
// is scrubbed of it.
#pragma once

#include <optional>
#include <string>

#include "common/http.h"
#include "common/status.h"
#include "hub/hub_client.h"

namespace hubfs::hub_errors {

// What was being asked when the failure happened.
struct Context {
  std::string endpoint;
  const RepoRef* repo = nullptr;
  std::optional<std::string> path;  // the file or directory concerned, if any
  bool path_is_dir = false;
  const std::optional<std::string>* token = nullptr;  // whether one was sent, and what to scrub
};

// A non-success HTTP answer: X-Error-Code first, then the status.
Status from_response(const HttpResponse& response, const Context& ctx);

// A request that never got an answer (connect failure, reset, timeout). `where` is
// scheme://host of the URL that failed.
Status from_transport(const Status& failure, const std::string& where, const Context& ctx);

// `text` with every occurrence of the token replaced, so no message can leak it.
std::string scrub(std::string text, const std::optional<std::string>& token);

}  // namespace hubfs::hub_errors
