#include "xet/xet_tokens.h"

namespace hubfs::xet {

XetTokens::XetTokens(TokenSource source, Env& env, std::chrono::seconds margin)
    : source_(std::move(source)), env_(env), margin_(margin) {}

std::optional<XetToken> XetTokens::usable(const std::string* refused) const {
  std::lock_guard<std::mutex> lock(mu_);
  if (!token_) return std::nullopt;
  if (refused && token_->access_token == *refused) return std::nullopt;
  if (env_.system_now() + margin_ >= token_->expires) return std::nullopt;
  return token_;
}

Result<XetToken> XetTokens::get(const Deadline& deadline, const std::string* refused) {
  auto ticket = flight_.join(0, [&]() -> std::optional<Result<XetToken>> {
    if (auto t = usable(refused)) return Result<XetToken>(*t);
    return std::nullopt;
  });
  if (!ticket.leader) {
    auto got = flight_.wait(ticket.flight, deadline);
    if (!got) return Timeout("waiting for the Xet read token: no answer before the read's deadline");
    return *got;
  }
  ++requests_;
  Result<XetToken> t = source_();
  if (t.ok()) {
    std::lock_guard<std::mutex> lock(mu_);
    token_ = *t;
  } else {
    t = t.status().with_context("getting a Xet read token");
  }
  flight_.complete(0, t);
  return t;
}

}  // namespace hubfs::xet
