// The CDN as it misbehaves (issue 19), through a real mount of the local Hub server: two spurious
// 416s for ranges inside the file, a burst of 60 503s, then 10 403s refusing signed URLs, while 8
// readers read 8 files. Each is retried (re-resolved for the 416s and 403s) until the read's
// deadline rather than a fixed number of times: every read exact, none EIO.
#include <sys/stat.h>

#include <atomic>
#include <thread>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "support/local_hub.h"
#include "support/mount_harness.h"
#include "support/temp_dir.h"

using namespace hubfs::testing;

namespace HUBFS_UNITY_ID {

TEST(CdnQuirks, SlowSpurious416sABurstOf503sAndCdn403sCostNoEIO) {
  TempDir root;
  constexpr int kFiles = 8;
  std::vector<std::string> contents;
  for (int i = 0; i < kFiles; ++i) {
    contents.push_back(random_bytes((2u << 20) + 777u * i, 90 + i));
    write_file((root.path() / "datasets/lab/quirks" / ("f" + std::to_string(i) + ".bin")).string(), contents.back());
  }
  LocalHubOptions options;
  options.root = root.str();
  auto hub = LocalHub::start(options);
  TempDir cache;
  auto m = HubfsMount::start(hub->url(), "datasets/lab/quirks", (cache.path() / "cache").string(), {});
  for (int i = 0; i < kFiles; ++i) {
    struct stat st {};
    ASSERT_EQ(stat((*m / ("f" + std::to_string(i) + ".bin")).c_str(), &st), 0);  // listed before the faults
  }
  hub->add_fault({{"status", 416}, {"count", 2}, {"origin", "cdn"}});
  hub->add_fault({{"status", 503}, {"count", 60}, {"origin", "cdn"}});
  hub->add_fault({{"status", 403}, {"count", 10}, {"origin", "cdn"}});

  std::atomic<int> exact{0};
  std::vector<std::thread> readers;
  for (int i = 0; i < kFiles; ++i)
    readers.emplace_back([&, i] {
      if (read_all(*m / ("f" + std::to_string(i) + ".bin")) == contents[i]) ++exact;
    });
  for (auto& r : readers) r.join();
  EXPECT_EQ(exact.load(), kFiles) << hub->stats().dump();
  EXPECT_TRUE(hub->pending_faults().empty()) << "not every fault was met: " << hub->pending_faults().dump();
  EXPECT_GE(hub->stats()["faults_injected"].get<int>(), 72);
}

}  // namespace
