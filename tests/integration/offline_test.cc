// Listings kept with the cache and `--offline`, through real FUSE mounts of the local Hub server:
// a remount of the same commit makes no listing request; with the server stopped, an --offline
// mount resolves main to the commit it pointed at last time, serves every cached file byte for
// byte and fails reads of uncached ones with EIO at once (the log says why); without --offline
// the mount fails, saying that --offline would work.
#include <sys/stat.h>
#include <sys/xattr.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <map>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "support/hubfs_daemon.h"
#include "support/local_hub.h"
#include "support/mount_harness.h"
#include "support/temp_dir.h"

namespace fs = std::filesystem;
using namespace hubfs::testing;

namespace HUBFS_UNITY_ID {

// A repo whose main moved: v1 -> c1, main -> c2, so "main" offline must mean c2's tree.
struct Repo {
  TempDir root;
  std::string big = random_bytes(2'500'000, 31);    // LFS, 3 blocks: read online
  std::string other = random_bytes(1'500'000, 32);  // LFS: never read online
  std::string small = "small and read\n";
  Repo() {
    auto repo = root.path() / "datasets" / "lab" / "off";
    write_file((repo / "hub.json").string(),
               R"({"refs": {"main": "c2", "v1": "c1"}, "commits": {"c1": {"date": "2024-01-01T00:00:00Z"},)"
               R"( "c2": {"date": "2024-02-01T00:00:00Z"}}})");
    write_file((repo / "snapshots/c1/old.txt").string(), "old\n");
    write_file((repo / "snapshots/c2/data/big.bin").string(), big);
    write_file((repo / "snapshots/c2/data/other.bin").string(), other);
    write_file((repo / "snapshots/c2/notes/small.txt").string(), small);
  }
};

long long listing_requests(LocalHub& hub) {
  long long n = 0;
  const nlohmann::json stats = hub.stats();  // kept: the loop below iterates inside it
  for (auto& [path, count] : stats["by_path"].items())
    if (path.find("/tree/") != std::string::npos || path.find("/paths-info/") != std::string::npos)
      n += count.get<long long>();
  return n;
}

std::string status_commit(const std::string& mountpoint) {
  std::string value(1 << 16, '\0');
  ssize_t n = getxattr(mountpoint.c_str(), "user.hubfs.status", value.data(), value.size());
  if (n <= 0) return "";
  value.resize(static_cast<size_t>(n));
  auto j = nlohmann::json::parse(value, nullptr, false);
  return j.is_object() ? j.value("commit", "") : "";
}

std::string file_text(const std::string& path) { return read_all(path); }

// The mount lists the root before it answers, so the first open (or ls) of a top-level entry
// costs no round trip on the first read's path.
TEST(Offline, TheRootIsListedBeforeTheMountAnswers) {
  Repo repo;
  auto hub = LocalHub::start({.root = repo.root.str()});
  TempDir cache;
  auto m = HubfsMount::start(hub->url(), "datasets/lab/off", cache.str());
  const long long at_mount = listing_requests(*hub);
  EXPECT_GT(at_mount, 0) << hub->stats()["by_path"].dump();
  struct stat st {};
  ASSERT_EQ(::stat((*m / "notes").c_str(), &st), 0);
  EXPECT_TRUE(S_ISDIR(st.st_mode));
  EXPECT_EQ(listing_requests(*hub), at_mount) << hub->stats()["by_path"].dump();
  // A repo this small is listed whole at mount (one recursive listing): deeper directories
  // cost no request either.
  EXPECT_EQ(read_all(*m / "notes/small.txt"), repo.small);
  EXPECT_EQ(listing_requests(*hub), at_mount) << hub->stats()["by_path"].dump();
}

TEST(Offline, ARemountOfTheSameCommitMakesNoListingRequest) {
  Repo repo;
  auto hub = LocalHub::start({.root = repo.root.str()});
  TempDir cache;
  std::string commit;
  {
    auto m = HubfsMount::start(hub->url(), "datasets/lab/off", cache.str());
    auto ls = run_command("ls -R " + shell_quote(m->path()));
    ASSERT_EQ(ls.exit_code, 0) << ls.output;
    ASSERT_EQ(read_all(*m / "notes/small.txt"), repo.small);
    commit = status_commit(m->path());
  }
  ASSERT_EQ(commit.size(), 40u);
  EXPECT_GT(listing_requests(*hub), 0) << hub->stats().dump();
  hub->reset_stats();
  auto m = HubfsMount::start(hub->url(), "datasets/lab/off", cache.str());
  auto ls = run_command("ls -R " + shell_quote(m->path()));
  ASSERT_EQ(ls.exit_code, 0) << ls.output;
  EXPECT_NE(ls.output.find("other.bin"), std::string::npos) << ls.output;
  EXPECT_EQ(read_all(*m / "notes/small.txt"), repo.small);
  EXPECT_EQ(read_all(*m / "data/big.bin"), repo.big);
  EXPECT_EQ(listing_requests(*hub), 0) << hub->stats()["by_path"].dump();
  EXPECT_EQ(status_commit(m->path()), commit);
  // A subfolder mount of the same commit needs no request to check its folder either.
  hub->reset_stats();
  auto sub = HubfsMount::start(hub->url(), "datasets/lab/off/data", cache.str());
  EXPECT_EQ(read_all(*sub / "big.bin"), repo.big);
  EXPECT_EQ(listing_requests(*hub), 0) << hub->stats()["by_path"].dump();

  // `hubfs cache info` counts the listings; prune keeps them; clear REPO drops them.
  auto info = run_command(shell_quote(bin_path("hubfs")) + " cache info --json --cache-dir " + shell_quote(cache.str()));
  ASSERT_EQ(info.exit_code, 0) << info.output;
  auto j = nlohmann::json::parse(info.output, nullptr, false);
  ASSERT_TRUE(j.is_object()) << info.output;
  EXPECT_GE(j["listing_files"].get<int>(), 4);  // the ref, the root, data/ and notes/
  auto prune = run_command(shell_quote(bin_path("hubfs")) + " cache prune --max-size 0 --cache-dir " + shell_quote(cache.str()));
  ASSERT_EQ(prune.exit_code, 0) << prune.output;
  auto after_prune = nlohmann::json::parse(
      run_command(shell_quote(bin_path("hubfs")) + " cache info --json --cache-dir " + shell_quote(cache.str())).output,
      nullptr, false);
  EXPECT_EQ(after_prune["listing_files"], j["listing_files"]);
  auto clear = run_command(shell_quote(bin_path("hubfs")) + " cache clear datasets/lab/off --cache-dir " + shell_quote(cache.str()));
  ASSERT_EQ(clear.exit_code, 0) << clear.output;
  EXPECT_NE(clear.output.find("stored listings"), std::string::npos) << clear.output;
  auto after_clear = nlohmann::json::parse(
      run_command(shell_quote(bin_path("hubfs")) + " cache info --json --cache-dir " + shell_quote(cache.str())).output,
      nullptr, false);
  EXPECT_EQ(after_clear["listing_files"], 0);
}

TEST(Offline, WithTheServerStoppedServesCachedFilesAndFailsUncachedReadsPromptly) {
  Repo repo;
  auto hub = LocalHub::start({.root = repo.root.str()});
  const std::string endpoint = hub->url();
  TempDir cache;
  std::string commit;
  {
    auto m = HubfsMount::start(endpoint, "datasets/lab/off", cache.str());
    auto ls = run_command("ls -R " + shell_quote(m->path()));
    ASSERT_EQ(ls.exit_code, 0) << ls.output;
    ASSERT_EQ(read_all(*m / "data/big.bin"), repo.big);
    ASSERT_EQ(read_all(*m / "notes/small.txt"), repo.small);
    commit = status_commit(m->path());
  }
  hub.reset();  // the Hub is gone: its port refuses connections

  // Without --offline the mount fails, and says --offline would work.
  TempDir point;
  auto online = run_command_timeout(shell_quote(bin_path("hubfs")) + " mount --endpoint " + shell_quote(endpoint) +
                                        " --cache-dir " + shell_quote(cache.str()) + " datasets/lab/off " +
                                        shell_quote(point.str()),
                                    std::chrono::seconds(120));
  EXPECT_FALSE(online.timed_out);
  EXPECT_NE(online.exit_code, 0);
  EXPECT_NE(online.output.find("--offline"), std::string::npos) << online.output;
  EXPECT_NE(online.output.find(commit), std::string::npos) << online.output;

  // A revision never mounted online cannot be mounted offline: the error says how to fix it.
  auto never = run_command_timeout(shell_quote(bin_path("hubfs")) + " mount --offline --endpoint " +
                                       shell_quote(endpoint) + " --cache-dir " + shell_quote(cache.str()) +
                                       " datasets/lab/off@v1 " + shell_quote(point.str()),
                                   std::chrono::seconds(60));
  EXPECT_NE(never.exit_code, 0);
  EXPECT_NE(never.output.find("without --offline"), std::string::npos) << never.output;

  auto m = HubfsMount::start(endpoint, "datasets/lab/off", cache.str(), {"--offline"});
  EXPECT_EQ(status_commit(m->path()), commit);  // main: the commit it pointed at last time
  EXPECT_EQ(read_all(*m / "data/big.bin"), repo.big);
  EXPECT_EQ(read_all(*m / "notes/small.txt"), repo.small);
  std::map<std::string, uintmax_t> sizes;
  for (auto& e : fs::recursive_directory_iterator(m->path()))
    if (e.is_regular_file()) sizes[fs::relative(e.path(), m->path()).string()] = e.file_size();
  EXPECT_EQ(sizes, (std::map<std::string, uintmax_t>{
                       {"data/big.bin", repo.big.size()}, {"data/other.bin", repo.other.size()},
                       {"notes/small.txt", repo.small.size()}}));
  // Never read online: EIO, at once (bounded here only so that a hang fails instead of stalling).
  auto cat = run_command_timeout("cat " + shell_quote(*m / "data/other.bin") + " > /dev/null",
                                 std::chrono::seconds(60));
  EXPECT_FALSE(cat.timed_out) << "a read of an uncached file hung offline";
  EXPECT_NE(cat.exit_code, 0);
  EXPECT_NE(cat.output.find("Input/output error"), std::string::npos) << cat.output;
  const std::string log = file_text(m->log_path());
  EXPECT_NE(log.find("data/other.bin"), std::string::npos) << log;
  EXPECT_NE(log.find("--offline"), std::string::npos) << log;
}

}  // namespace
