// The C++ launcher of the local Hub server: it starts, reports both origins, relays control
// calls, explains a failed start, and leaves no process behind. (The server's own behaviour is
// covered by test_hub_server.py next to this file.)
#include <signal.h>

#include <chrono>
#include <stdexcept>
#include <thread>

#include <gtest/gtest-spi.h>
#include <gtest/gtest.h>

#include "net/curl_transport.h"
#include "support/local_hub.h"
#include "support/temp_dir.h"

namespace hubfs::testing {
namespace HUBFS_UNITY_ID {

TEST(LocalHub, StartsWithTwoOriginsAndZeroStats) {
  TempDir root;
  write_file((root / "models/org/repo/README.md").string(), "hello\n");
  auto hub = LocalHub::start({.root = root.str()});
  EXPECT_EQ(hub->url().rfind("http://127.0.0.1:", 0), 0u) << hub->url();
  EXPECT_EQ(hub->cdn_url().rfind("http://127.0.0.1:", 0), 0u) << hub->cdn_url();
  EXPECT_NE(hub->url(), hub->cdn_url());
  auto stats = hub->stats();
  EXPECT_EQ(stats["requests"], 0);
  EXPECT_EQ(stats["peak_concurrency"], 0);
  EXPECT_EQ(stats["cdn_authorization_headers"], 0);
}

TEST(LocalHub, ControlCalls) {
  TempDir root;
  auto hub = LocalHub::start({.root = root.str(), .latency_ms = 5, .page_size = 2, .tokens = {"t"}});
  hub->add_fault({{"status", 503}, {"count", 2}, {"retry_after", 1}});
  hub->add_fault({{"mode", "reset"}, {"path_contains", "/blobs/"}, {"after_bytes", 100}});
  hub->clear_faults();
  hub->expire_urls();
  hub->reset_stats();
  EXPECT_EQ(hub->stats()["requests"], 0);  // control traffic is not counted
  EXPECT_THROW(hub->add_fault({{"mode", "explode"}}), std::runtime_error);
}

TEST(LocalHub, FailedStartQuotesServerStderr) {
  try {
    LocalHub::start({.root = "/nonexistent/hubfs-root"});
    FAIL() << "started on a missing root";
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find("is not a directory"), std::string::npos) << e.what();
  }
}

TEST(LocalHub, DestructorStopsTheServer) {
  TempDir root;
  pid_t pid;
  {
    auto hub = LocalHub::start({.root = root.str()});
    pid = hub->pid();
    ASSERT_EQ(::kill(pid, 0), 0);
  }
  // Reaped by the destructor: the pid no longer names our child.
  EXPECT_NE(::kill(pid, 0), 0);
}

CurlOptions real_env_curl() {
  CurlOptions o;
  o.env = &Env::real();
  return o;
}

// A strict Xet Hub and one of its V2 xorb URLs with the bytes it lists: {url, "bytes=a-b"}.
struct StrictXorb {
  TempDir root;
  std::unique_ptr<LocalHub> hub;
  CurlTransport http{real_env_curl()};
  std::string url;
  std::string listed;

  StrictXorb() {
    std::string content(300000, '\0');
    for (size_t i = 0; i < content.size(); ++i) content[i] = static_cast<char>((i * 2654435761u) >> 13);
    write_file((root / "models/org/x/w.bin").string(), content);
    hub = LocalHub::start({.root = root.str(), .extra_args = {"--strict-xet-ranges", "on"}, .xet = true});
    auto get = [&](const std::string& u, Headers h = {}) {
      HttpRequest req;
      req.url = u;
      req.headers = std::move(h);
      auto r = http.perform(req);
      if (!r.ok() || r->status != 200) throw std::runtime_error("GET " + u + " failed");
      return nlohmann::json::parse(r->body);
    };
    auto token = get(hub->url() + "/api/models/org/x/xet-read-token/main")["accessToken"].get<std::string>();
    auto hash = get(hub->url() + "/api/models/org/x/tree/main")[0]["xetHash"].get<std::string>();
    auto plan = get(hub->cdn_url() + "/v2/reconstructions/" + hash, {{"Authorization", "Bearer " + token}});
    const auto& fetch = plan["xorbs"].begin().value()[0];
    url = fetch["url"];
    const auto& bytes = fetch["ranges"][0]["bytes"];
    listed = "bytes=" + std::to_string(bytes["start"].get<int64_t>()) + "-" + std::to_string(bytes["end"].get<int64_t>());
  }

  long status_of(const std::string& range) {
    HttpRequest req;
    req.url = url;
    req.headers = {{"Range", range}};
    auto r = http.perform(req);
    return r.ok() ? r->status : -1;
  }
};

TEST(LocalHub, ARefusedXorbRangeFailsTheTestAtShutdown) {
  auto strict = std::make_unique<StrictXorb>();
  EXPECT_EQ(strict->status_of(strict->listed), 206);
  EXPECT_EQ(strict->status_of("bytes=-100"), 403);  // a footer: not a listed range
  EXPECT_EQ(strict->hub->refused_ranges()["count"], 1);
  EXPECT_NONFATAL_FAILURE(strict.reset(), "refused 1 xorb Range(s)");
}

TEST(LocalHub, ARefusedRangeSentOnPurposePassesTheShutdownCheck) {
  StrictXorb strict;
  strict.hub->expect_refused_ranges();
  EXPECT_EQ(strict.status_of("bytes=0-1"), 403);
  EXPECT_TRUE(strict.hub->refused_ranges()["expected"].get<bool>());
}

}  // namespace
}  // namespace hubfs::testing
