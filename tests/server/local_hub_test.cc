// The C++ launcher of the local Hub server: it starts, reports both origins, relays control
// calls, explains a failed start, and leaves no process behind. (The server's own behaviour is
// covered by test_hub_server.py next to this file.)
#include <signal.h>

#include <chrono>
#include <stdexcept>
#include <thread>

#include <gtest/gtest.h>

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

}  // namespace
}  // namespace hubfs::testing
