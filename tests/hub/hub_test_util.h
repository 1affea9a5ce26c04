// Small builders shared by the Hub client tests: canned answers, a clock the test moves.
#pragma once

#include <atomic>
#include <chrono>
#include <memory>
#include <string>

#include "common/http.h"
#include "hub/hub_client.h"
#include "support/manual_env.h"

namespace hubfs::testing {

inline constexpr char kEndpoint[] = "https://hub.test";
inline constexpr char kToken[] = "hf_SECRETtoken123";

inline HttpResponse respond(long status, std::string body = "", Headers headers = {}) {
  HttpResponse r;
  r.status = status;
  r.body = std::move(body);
  r.headers = std::move(headers);
  return r;
}

inline std::string header_or_empty(const HttpRequest& req, std::string_view name) {
  return find_header(req.headers, name).value_or("");
}
inline bool has_header(const HttpRequest& req, std::string_view name) {
  return find_header(req.headers, name).has_value();
}

// Time stands still until the test moves it.
struct ManualHubClock {  // its own name: support/manual_clock.h's ManualClock is another class
  std::atomic<int64_t> steady_s{1000};
  std::atomic<int64_t> wall_s{1700000000};

  // The Env a HubClient reads these through (HubConfig::env).
  Env* env() {
    if (!env_) {
      env_ = std::make_unique<FunctionEnv>();
      env_->steady = [this] { return std::chrono::steady_clock::time_point(std::chrono::seconds(steady_s.load())); };
      env_->wall = [this] { return std::chrono::system_clock::time_point(std::chrono::seconds(wall_s.load())); };
    }
    return env_.get();
  }
  std::chrono::steady_clock::time_point steady_at(int64_t s) const {
    return std::chrono::steady_clock::time_point(std::chrono::seconds(s));
  }

 private:
  std::unique_ptr<FunctionEnv> env_;
};

inline HubConfig test_config(bool with_token = true) {
  HubConfig c;
  c.env = &Env::real();
  c.endpoint = kEndpoint;
  if (with_token) c.token = kToken;
  return c;
}

}  // namespace hubfs::testing
