// `hubfs status` (live counters served by each daemon as user.hubfs.status on its mount's root;
// dead mounts shown as dead) and subfolder mounts (REPO/SUB/DIR shows only that directory),
// through real FUSE mounts of repos served by the local Hub server.
#include <signal.h>
#include <sys/xattr.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <random>
#include <set>
#include <thread>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "support/hubfs_daemon.h"
#include "support/local_hub.h"
#include "support/mount_harness.h"
#include "support/pattern.h"
#include "support/temp_dir.h"

namespace fs = std::filesystem;
using namespace hubfs::testing;

namespace HUBFS_UNITY_ID {

std::string hubfs_cmd() { return shell_quote(bin_path("hubfs")); }

struct Repo {
  TempDir root;
  std::string big = random_bytes(3'000'000, 21);  // LFS, 3 blocks
  std::string small = "a small file inside the subfolder\n";
  std::string top = "at the repo's root\n";
  Repo() {
    write_file((root.path() / "datasets/lab/stat/a/b/data.bin").string(), big);
    write_file((root.path() / "datasets/lab/stat/a/b/c/small.txt").string(), small);
    write_file((root.path() / "datasets/lab/stat/top.txt").string(), top);
  }
};

// `hubfs status --json [MOUNTPOINT]`, bounded so that a hang fails the test instead of stalling it.
nlohmann::json status_json(const std::string& mountpoint = "", int* exit_code = nullptr) {
  auto r = run_command_timeout(hubfs_cmd() + " status --json" + (mountpoint.empty() ? "" : " " + shell_quote(mountpoint)) +
                                   " 2>/dev/null",
                               std::chrono::seconds(30));
  EXPECT_FALSE(r.timed_out) << "hubfs status hung";
  if (exit_code) *exit_code = r.exit_code;
  auto j = nlohmann::json::parse(r.output, nullptr, false);
  EXPECT_TRUE(j.is_array()) << r.output;
  return j;
}

nlohmann::json entry_for(const nlohmann::json& list, const std::string& mountpoint) {
  const std::string real = fs::weakly_canonical(mountpoint).string();
  if (list.is_array())
    for (const auto& m : list)
      if (m.value("mountpoint", "") == real || m.value("mountpoint", "") == mountpoint) return m;
  return nlohmann::json();
}

TEST(Status, CountersMoveAsReadsHappenAndAnyToolCanReadThem) {
  Repo repo;
  auto hub = LocalHub::start({.root = repo.root.str()});
  TempDir cache;
  auto mnt = HubfsMount::start(hub->url(), "datasets/lab/stat", cache.str());

  nlohmann::json before = entry_for(status_json(), mnt->path());
  ASSERT_TRUE(before.is_object()) << "mount not listed by hubfs status";
  EXPECT_EQ(before["state"], "alive");
  EXPECT_EQ(before["repo"], "datasets/lab/stat");
  EXPECT_EQ(before["revision"], "main");
  EXPECT_EQ(before["commit"].get<std::string>().size(), 40u);
  EXPECT_EQ(before["cache_dir"], cache.str());
  EXPECT_EQ(before["bytes_fetched"], 0);
  EXPECT_EQ(before["in_flight"], 0);
  const uint64_t requests_before = before["requests"].get<uint64_t>();
  EXPECT_GT(requests_before, 0u);  // at least the repo info at mount time
  const uint64_t hub_requests_before = hub->stats()["requests"].get<uint64_t>();

  ASSERT_EQ(read_all(*mnt / "a/b/data.bin"), repo.big);

  int rc = -1;
  nlohmann::json after_list = status_json(mnt->path(), &rc);
  EXPECT_EQ(rc, 0);
  ASSERT_EQ(after_list.size(), 1u);
  nlohmann::json after = after_list[0];
  EXPECT_EQ(after["state"], "alive");
  EXPECT_GE(after["bytes_fetched"].get<uint64_t>(), repo.big.size());
  // Every upstream request the mount made is counted: as many as the server saw since.
  const uint64_t hub_requests_after = hub->stats()["requests"].get<uint64_t>();
  EXPECT_EQ(after["requests"].get<uint64_t>() - requests_before, hub_requests_after - hub_requests_before);
  EXPECT_GT(after["requests"].get<uint64_t>(), requests_before);
  EXPECT_EQ(after["in_flight"], 0);
  EXPECT_EQ(after["errors"], 0);
  EXPECT_GE(after["uptime_s"].get<uint64_t>(), before["uptime_s"].get<uint64_t>());
  for (const char* key : {"retries", "hedges", "memory_hits", "disk_hits", "read_ahead_bytes", "hints", "hinted_bytes"})
    EXPECT_TRUE(after[key].is_number()) << key;

  // A second read of the same bytes is a cache hit: no new upstream request.
  drop_page_cache();
  ASSERT_EQ(read_all(*mnt / "a/b/data.bin"), repo.big);
  nlohmann::json warm = status_json(mnt->path())[0];
  EXPECT_EQ(warm["requests"], after["requests"]);
  EXPECT_GT(warm["memory_hits"].get<uint64_t>() + warm["disk_hits"].get<uint64_t>(),
            after["memory_hits"].get<uint64_t>() + after["disk_hits"].get<uint64_t>());

  // The attribute itself, as getfattr reads it, and listed on the root.
  char names[4096];
  ssize_t n = listxattr(mnt->path().c_str(), names, sizeof names);
  ASSERT_GT(n, 0);
  EXPECT_NE(std::string(names, static_cast<size_t>(n)).find("user.hubfs.status"), std::string::npos);
  std::string value(1 << 16, '\0');
  n = getxattr(mnt->path().c_str(), "user.hubfs.status", value.data(), value.size());
  ASSERT_GT(n, 0);
  value.resize(static_cast<size_t>(n));
  auto parsed = nlohmann::json::parse(value, nullptr, false);
  ASSERT_TRUE(parsed.is_object()) << value;
  EXPECT_EQ(parsed["repo"], "datasets/lab/stat");

  // The table names the mount and its repo.
  auto text = run_command_timeout(hubfs_cmd() + " status " + shell_quote(mnt->path()), std::chrono::seconds(30));
  EXPECT_EQ(text.exit_code, 0) << text.output;
  EXPECT_NE(text.output.find("MOUNTPOINT"), std::string::npos) << text.output;
  EXPECT_NE(text.output.find("datasets/lab/stat"), std::string::npos) << text.output;
  EXPECT_NE(text.output.find("alive"), std::string::npos) << text.output;
}

TEST(Status, ADeadMountShowsDeadAndTheOthersStillShow) {
  Repo repo;
  auto hub = LocalHub::start({.root = repo.root.str()});
  TempDir cache, dead_cache, dead_dir;
  auto alive = HubfsMount::start(hub->url(), "datasets/lab/stat", cache.str());
  const std::string dead_point = (dead_dir.path() / "mnt").string();
  fs::create_directories(dead_point);
  auto daemon = HubfsDaemon::start(hub->url(), "datasets/lab/stat", dead_cache.str(), dead_point);
  daemon->signal(SIGKILL);
  ASSERT_TRUE(daemon->wait_exit(std::chrono::seconds(10)).has_value());
  ASSERT_TRUE(is_mounted(dead_point));

  int rc = -1;
  nlohmann::json all = status_json("", &rc);
  EXPECT_EQ(rc, 0);
  nlohmann::json dead = entry_for(all, dead_point);
  ASSERT_TRUE(dead.is_object()) << all.dump();
  EXPECT_EQ(dead["state"], "dead");
  EXPECT_EQ(dead["repo"], "lab/stat");  // only what mountinfo knows
  EXPECT_TRUE(dead["requests"].is_null());
  EXPECT_TRUE(dead.contains("bytes_fetched") && dead.contains("in_flight") && dead.contains("commit"));
  nlohmann::json live = entry_for(all, alive->path());
  ASSERT_TRUE(live.is_object()) << all.dump();
  EXPECT_EQ(live["state"], "alive");

  auto one = run_command_timeout(hubfs_cmd() + " status " + shell_quote(dead_point), std::chrono::seconds(30));
  EXPECT_FALSE(one.timed_out);
  EXPECT_EQ(one.exit_code, 1) << one.output;
  EXPECT_NE(one.output.find("dead"), std::string::npos) << one.output;
  EXPECT_NE(one.output.find("hubfs unmount"), std::string::npos) << one.output;

  auto not_mount = run_command_timeout(hubfs_cmd() + " status " + shell_quote(cache.str()), std::chrono::seconds(30));
  EXPECT_EQ(not_mount.exit_code, 1);
  EXPECT_NE(not_mount.output.find("not a hubfs mount"), std::string::npos) << not_mount.output;
}

TEST(SubfolderMount, ShowsOnlyThatDirectoryAndReadsByteForByte) {
  Repo repo;
  auto hub = LocalHub::start({.root = repo.root.str()});
  TempDir cache;
  for (const std::vector<std::string>& form :
       {std::vector<std::string>{"datasets/lab/stat/a/b"}, std::vector<std::string>{"datasets/lab/stat@main/a/b/"},
        std::vector<std::string>{"--subfolder", "a/b", "datasets/lab/stat"}}) {
    std::vector<std::string> extra(form.begin(), form.end() - 1);
    auto mnt = HubfsMount::start(hub->url(), form.back(), cache.str(), extra);
    std::set<std::string> names;
    for (const auto& e : fs::directory_iterator(mnt->path())) names.insert(e.path().filename().string());
    EXPECT_EQ(names, (std::set<std::string>{"c", "data.bin"})) << form.back();
    EXPECT_EQ(read_all(*mnt / "data.bin"), repo.big) << form.back();
    EXPECT_EQ(read_all(*mnt / "c/small.txt"), repo.small) << form.back();
    EXPECT_FALSE(fs::exists(*mnt / "top.txt"));
    nlohmann::json st = status_json(mnt->path())[0];
    EXPECT_EQ(st["subfolder"], "a/b");
  }
}

TEST(SubfolderMount, AMissingSubfolderOrAFileFailsTheMountClearly) {
  Repo repo;
  auto hub = LocalHub::start({.root = repo.root.str()});
  TempDir cache;
  try {
    HubfsMount::start(hub->url(), "datasets/lab/stat/a/nope", cache.str());
    ADD_FAILURE() << "mounting a missing subfolder succeeded";
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find("subfolder 'a/nope' does not exist in datasets/lab/stat"), std::string::npos)
        << e.what();
  }
  try {
    HubfsMount::start(hub->url(), "datasets/lab/stat/top.txt", cache.str());
    ADD_FAILURE() << "mounting a file as a subfolder succeeded";
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find("is a file, not a directory"), std::string::npos) << e.what();
  }
}

}  // namespace
