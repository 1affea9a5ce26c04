// A repo's Xet read token (docs/xet.md, "The read path", step 1): fetched once, shared by every
// read, and fetched again only `margin` before its `exp`, or when the CAS refused it (a 401).
// However many reads need a new token at once, one fetch runs (SingleFlight); each waiter gives
// up at its own deadline (kTimeout) while the fetch goes on for the others.
// Thread-safe; its mutex is a leaf, taken inside the SingleFlight's (the probe).
#pragma once

#include <atomic>
#include <chrono>
#include <functional>
#include <mutex>
#include <optional>
#include <string>
#include <utility>

#include "common/deadline.h"
#include "common/env.h"
#include "common/single_flight.h"
#include "common/status.h"

namespace hubfs::xet {

// Wall time as the stack's Env tells it (Env::system_now): the only clock a token's `exp` is
// compared with, so a test's manual Env moves it.
using EnvWallTime = decltype(std::declval<const Env&>().system_now());

// A read token for one repo's files (HubClient::xet_read_token).
struct XetToken {
  std::string cas_url;  // no trailing slash
  std::string access_token;
  EnvWallTime expires;  // the token's own `exp` (a stamp the Hub wrote), compared with env.system_now()
};
// Fetches a fresh token (blocking; called on the reader's threads). Must be thread-safe.
using TokenSource = std::function<Result<XetToken>()>;

class XetTokens {
 public:
  // env: the token's `exp` is compared with env.system_now() (an absolute stamp the Hub wrote,
  // which is what system_now is for). Must outlive this.
  XetTokens(TokenSource source, Env& env, std::chrono::seconds margin);

  // The current token, fetched when there is none, it is within `margin` of its exp, or it is
  // `refused` (the access token a 401 answered: tokens refused together share one new token).
  Result<XetToken> get(const Deadline& deadline, const std::string* refused = nullptr);

  // Fetches made so far (each a Hub request).
  uint64_t requests() const { return requests_.load(); }

 private:
  std::optional<XetToken> usable(const std::string* refused) const;

  const TokenSource source_;
  Env& env_;
  const std::chrono::seconds margin_;
  SingleFlight<int, Result<XetToken>> flight_;  // one key: the repo's token
  mutable std::mutex mu_;                       // guards token_ (a leaf)
  std::optional<XetToken> token_;
  std::atomic<uint64_t> requests_{0};
};

}  // namespace hubfs::xet
