// The mount against a local Hub that behaves like the real one (tools/hub_server: quotas, gated
// repos, invalid tokens, two-hop redirects, S3-style signed URLs), through real FUSE mounts:
//   - request economy: `find` over a 600-file, 60-directory dataset costs at most 5 API
//     requests, a remount of the same commit at most 2, and listing resolves no file;
//   - a gated repo lists and shows its card to anyone; its other files are EACCES without
//     access (logged once, naming the repo page), exact bytes with an accepted token;
//   - an invalid token fails the mount as an invalid token, not "repository not found";
//   - reads under tight quotas wait for the windows and return exact bytes (Slow).
#include <fcntl.h>
#include <sys/stat.h>
#include <sys/xattr.h>
#include <unistd.h>

#include <atomic>
#include <filesystem>
#include <fstream>
#include <thread>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "support/local_hub.h"
#include "support/mount_harness.h"
#include "support/temp_dir.h"

namespace fs = std::filesystem;
using namespace hubfs::testing;

namespace HUBFS_UNITY_ID {

constexpr char kToken[] = "hf_realhub_granted";
constexpr char kNoAccessToken[] = "hf_realhub_not_granted";

// 60 directories of 10 files: two levels (10 groups of 6 shards each) so a walk goes below the
// first level; files are small but served through the CDN (lfs_threshold 1), as LFS shards are.
struct Dataset {
  TempDir root;
  std::map<std::string, std::string> files;  // repo path -> bytes
  Dataset() {
    auto repo = root.path() / "datasets" / "lab" / "shards";
    for (int g = 0; g < 10; ++g) {
      for (int d = 0; d < 6; ++d) {
        for (int f = 0; f < 10; ++f) {
          std::string rel = "group" + std::to_string(g) + "/part" + std::to_string(d) + "/shard" + std::to_string(f) +
                            ".bin";
          files[rel] = random_bytes(5000 + 7 * f, static_cast<unsigned>(g * 100 + d * 10 + f));
          write_file((repo / rel).string(), files[rel]);
        }
      }
    }
    auto gated = root.path() / "models" / "lab" / "gated";
    write_file((gated / "hub.json").string(),
               R"({"gated": "manual", "refs": {"main": "c1"}, "commits": {"c1": {"date": "2024-01-01T00:00:00Z"}}})");
    write_file((gated / "snapshots/c1/README.md").string(), "# gated model\n");
    write_file((gated / "snapshots/c1/weights.bin").string(), random_bytes(300000, 7));
    gated_weights = random_bytes(300000, 7);
  }
  std::string gated_weights;
};

// The whole file, or "" when a read fails (EACCES, EIO): read_all throws on a failed read.
std::string read_or_empty(const std::string& path) {
  int fd = ::open(path.c_str(), O_RDONLY);
  if (fd < 0) return "";
  std::string out;
  char buf[65536];
  ssize_t n;
  while ((n = ::read(fd, buf, sizeof buf)) > 0) out.append(buf, static_cast<size_t>(n));
  ::close(fd);
  return n < 0 ? "" : out;
}

long long count_kind(const nlohmann::json& stats, const char* kind) { return stats[kind].get<long long>(); }

std::string file_text(const std::string& path) { return read_all(path); }

TEST(RequestEconomy, FindOverSixHundredFilesCostsAFewApiRequests) {
  Dataset data;
  auto hub = LocalHub::start({.root = data.root.str(), .lfs_threshold = 1});
  TempDir cache;
  {
    auto m = HubfsMount::start(hub->url(), "datasets/lab/shards", cache.str());
    auto found = run_command("find " + shell_quote(m->path()) + " -type f | wc -l");
    ASSERT_EQ(found.exit_code, 0) << found.output;
    EXPECT_EQ(std::stoi(found.output), 600);
    auto stats = hub->stats();
    EXPECT_LE(count_kind(stats, "api_requests"), 5) << stats["by_path"].dump();
    EXPECT_EQ(count_kind(stats, "resolve_requests"), 0) << "listing resolved files";
    // Reading a file resolves it once, however many reads follow.
    EXPECT_EQ(read_all(*m / "group3/part2/shard4.bin"), data.files["group3/part2/shard4.bin"]);
    EXPECT_EQ(read_all(*m / "group3/part2/shard4.bin"), data.files["group3/part2/shard4.bin"]);
    EXPECT_EQ(count_kind(hub->stats(), "resolve_requests"), 1);
  }
  hub->reset_stats();
  auto again = HubfsMount::start(hub->url(), "datasets/lab/shards", cache.str());
  auto found = run_command("find " + shell_quote(again->path()) + " -type f | wc -l");
  EXPECT_EQ(std::stoi(found.output), 600);
  EXPECT_LE(count_kind(hub->stats(), "api_requests"), 2) << hub->stats()["by_path"].dump();
}

// A repo too big to list whole at mount: per-directory at the root, then each first-level
// directory with its whole subtree.
TEST(RequestEconomy, BigReposListSubtreesOnTheWay) {
  Dataset data;
  // 8 entries per page: the 60-entry subtree of a group takes 8 pages, over the budget of 3, so
  // a group is listed alone and each of its parts whole (one page each).
  auto hub = LocalHub::start({.root = data.root.str(), .page_size = 8, .lfs_threshold = 1});
  TempDir cache;
  auto m = HubfsMount::start(hub->url(), "datasets/lab/shards", cache.str());
  hub->reset_stats();
  auto found = run_command("find " + shell_quote(*m / "group1") + " -type f | wc -l");
  EXPECT_EQ(std::stoi(found.output), 60);
  // group1: 3 pages tried recursively, then 1 page alone; each of its 6 parts: 2 pages.
  EXPECT_LE(count_kind(hub->stats(), "api_requests"), 3 + 1 + 6 * 2) << hub->stats()["by_path"].dump();
  EXPECT_EQ(read_all(*m / "group1/part5/shard9.bin"), data.files["group1/part5/shard9.bin"]);
}

TEST(GatedRepo, ListsForAnyoneReadsNeedAccess) {
  Dataset data;
  auto hub = LocalHub::start({.root = data.root.str(),
                              .tokens = {kToken},
                              .extra_args = {"--token-no-access", kNoAccessToken}});
  TempDir cache;
  TempDir home;  // no token file from the machine
  setenv("HF_TOKEN_PATH", (home.path() / "token").c_str(), 1);
  unsetenv("HF_TOKEN");
  {
    auto m = HubfsMount::start(hub->url(), "lab/gated", cache.str(), {"--cache-size", "0"});
    EXPECT_EQ(file_text(*m / "README.md"), "# gated model\n");
    for (int i = 0; i < 3; ++i) {
      int fd = ::open((*m / "weights.bin").c_str(), O_RDONLY);
      ASSERT_GE(fd, 0);
      char buf[16];
      errno = 0;
      EXPECT_EQ(::read(fd, buf, sizeof buf), -1);
      EXPECT_EQ(errno, EACCES);
      ::close(fd);
    }
    std::string value(1 << 16, '\0');
    ssize_t n = getxattr(m->path().c_str(), "user.hubfs.status", value.data(), value.size());
    ASSERT_GT(n, 0);
    EXPECT_TRUE(nlohmann::json::parse(value.substr(0, static_cast<size_t>(n)))["gated"].get<bool>());
    const std::string log = file_text(m->log_path());
    const std::string page = hub->url() + "/lab/gated";
    size_t first = log.find("is gated: accept its conditions at " + page);
    ASSERT_NE(first, std::string::npos) << log;
    EXPECT_EQ(log.find("is gated", first + 1), std::string::npos) << "logged more than once:\n" << log;
  }
  // A token without access: still EACCES. A token file rewritten while mounted (with a granted
  // token) is in use once the watcher looks again (every 5 s).
  {
    std::ofstream(home.path() / "token") << kNoAccessToken << "\n";
    auto m = HubfsMount::start(hub->url(), "lab/gated", cache.str(), {"--cache-size", "0"});
    int fd = ::open((*m / "weights.bin").c_str(), O_RDONLY);
    ASSERT_GE(fd, 0);
    char buf[16];
    errno = 0;
    EXPECT_EQ(::read(fd, buf, sizeof buf), -1);
    EXPECT_EQ(errno, EACCES);
    ::close(fd);
    std::ofstream(home.path() / "token", std::ios::trunc) << kToken << "\n";
    std::string got;
    for (int i = 0; i < 70 && got != data.gated_weights; ++i) {  // 35 s at most
      std::this_thread::sleep_for(std::chrono::milliseconds(500));
      got = read_or_empty(*m / "weights.bin");
    }
    EXPECT_EQ(got, data.gated_weights);
  }
  unsetenv("HF_TOKEN_PATH");
}

TEST(InvalidToken, FailsTheMountAsAnInvalidToken) {
  Dataset data;
  auto hub = LocalHub::start({.root = data.root.str(), .tokens = {kToken}});
  TempDir cache;
  TempDir mnt;
  setenv("HF_TOKEN", "hf_revoked_long_ago", 1);
  auto r = run_command(bin_path("hubfs") + " mount --endpoint " + shell_quote(hub->url()) + " --cache-dir " +
                       shell_quote(cache.str()) + " datasets/lab/shards " + shell_quote(mnt.str()) + " 2>&1");
  unsetenv("HF_TOKEN");
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.output.find("is invalid"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("huggingface-cli login"), std::string::npos) << r.output;
  EXPECT_EQ(r.output.find("not found"), std::string::npos) << r.output;
  EXPECT_EQ(r.output.find("hf_revoked_long_ago"), std::string::npos) << r.output;
}

TEST(RedirectsAndSignedUrls, TwoHopsAndS3StyleUrls) {
  Dataset data;
  auto hub = LocalHub::start({.root = data.root.str(),
                              .lfs_threshold = 1,
                              .extra_args = {"--redirect-chain", "--url-style", "s3"}});
  TempDir cache;
  auto m = HubfsMount::start(hub->url(), "datasets/lab/shards", cache.str());
  EXPECT_EQ(read_all(*m / "group0/part0/shard0.bin"), data.files["group0/part0/shard0.bin"]);
  EXPECT_EQ(read_all(*m / "group9/part5/shard9.bin"), data.files["group9/part5/shard9.bin"]);
  EXPECT_EQ(count_kind(hub->stats(), "resolve_requests"), 4);  // two hops per file, once each
  EXPECT_EQ(count_kind(hub->stats(), "cdn_authorization_headers"), 0);
}

// Reading the first 4 KiB of each of the 600 files with 8 readers under quotas of 30 API calls
// and 200 resolves per 10 s window: every read waits for its window, none fails.
TEST(Quotas, SlowEightReadersUnderTightQuotasGetExactBytes) {
  Dataset data;
  auto hub = LocalHub::start({.root = data.root.str(),
                              .lfs_threshold = 1,
                              .extra_args = {"--quota", "api=30,resolvers=200", "--quota-window", "10"}});
  TempDir cache;
  auto m = HubfsMount::start(hub->url(), "datasets/lab/shards", cache.str(), {"--read-timeout", "5"});
  std::vector<std::string> paths;
  for (const auto& [rel, bytes] : data.files) paths.push_back(rel);
  std::atomic<size_t> next{0};
  std::atomic<int> errors{0}, wrong{0};
  std::vector<std::thread> readers;
  for (int t = 0; t < 8; ++t) {
    readers.emplace_back([&] {
      for (size_t i = next++; i < paths.size(); i = next++) {
        int fd = ::open((*m / paths[i]).c_str(), O_RDONLY);
        if (fd < 0) {
          ++errors;
          continue;
        }
        std::string buf(4096, '\0');
        ssize_t n = ::pread(fd, buf.data(), buf.size(), 0);
        ::close(fd);
        if (n != 4096) {
          ++errors;
        } else if (buf != data.files[paths[i]].substr(0, 4096)) {
          ++wrong;
        }
      }
    });
  }
  for (auto& r : readers) r.join();
  EXPECT_EQ(errors.load(), 0) << file_text(m->log_path());
  EXPECT_EQ(wrong.load(), 0);
  // The quota was really binding: more resolves than one window allows.
  EXPECT_GE(count_kind(hub->stats(), "resolve_requests"), 600);
}

// With a window far longer than --rate-limit-wait, a read over quota fails promptly with a
// message naming the quota, never hangs.
TEST(Quotas, ShortRateLimitWaitFailsNamingTheQuota) {
  Dataset data;
  auto hub = LocalHub::start({.root = data.root.str(),
                              .lfs_threshold = 1,
                              .extra_args = {"--quota", "resolvers=2", "--quota-window", "3600"}});
  TempDir cache;
  auto m = HubfsMount::start(hub->url(), "datasets/lab/shards", cache.str(), {"--rate-limit-wait", "1"});
  int failures = 0;
  for (int f = 0; f < 4; ++f) {
    std::string rel = "group0/part0/shard" + std::to_string(f) + ".bin";
    if (read_or_empty(*m / rel) != data.files[rel]) ++failures;
  }
  EXPECT_EQ(failures, 2);
  const std::string log = file_text(m->log_path());
  EXPECT_NE(log.find("'resolvers' quota (2 requests per 3600 s)"), std::string::npos) << log;
  EXPECT_NE(log.find("log in"), std::string::npos) << log;
}

}  // namespace
