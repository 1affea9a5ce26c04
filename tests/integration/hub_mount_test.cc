// The whole-Hub mount (`hubfs mount --hub MNT`) through FUSE and the local Hub server: repos of
// every type resolve on first access under MNT/{datasets,models}/ORG/NAME[@REV], a private repo
// with the token, a missing repo is ENOENT, directories list what was touched, the status xattr
// lists the touched repos; and the same through the mount-helper form with -o hub.
#include <sys/stat.h>
#include <sys/xattr.h>

#include <cstdlib>
#include <cstring>
#include <filesystem>
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

constexpr char kToken[] = "hf_hubmounttoken";

struct Hub {
  TempDir root;
  std::string data = random_bytes(2'200'000, 41);  // LFS, 3 blocks
  std::string old_data = random_bytes(300'000, 42);
  std::string weights = random_bytes(1'200'000, 43);
  std::unique_ptr<LocalHub> server;
  Hub() {
    auto pub = root.path() / "datasets" / "lab" / "pub";
    write_file((pub / "hub.json").string(),
               R"({"refs": {"main": "c2", "v1": "c1"}, "commits": {"c1": {"date": "2024-01-01T00:00:00Z"},)"
               R"( "c2": {"date": "2024-02-01T00:00:00Z"}}})");
    write_file((pub / "snapshots/c1/data.bin").string(), old_data);
    write_file((pub / "snapshots/c2/data.bin").string(), data);
    write_file((pub / "snapshots/c2/sub/dir/note.txt").string(), "deep note\n");
    auto secret = root.path() / "models" / "lab" / "secret";
    write_file((secret / "hub.json").string(),
               R"({"refs": {"main": "c1"}, "commits": {"c1": {"date": "2024-01-01T00:00:00Z"}}, "private": true})");
    write_file((secret / "snapshots/c1/weights.bin").string(), weights);
    LocalHubOptions options;
    options.root = root.str();
    options.tokens = {kToken};
    server = LocalHub::start(options);
  }
};

std::vector<std::string> names(const std::string& dir) {
  std::vector<std::string> out;
  std::error_code ec;
  for (auto& e : fs::directory_iterator(dir, ec)) out.push_back(e.path().filename().string());
  std::sort(out.begin(), out.end());
  return out;
}

TEST(HubMount, EveryRepoResolvesOnFirstAccessIncludingPrivateOnesAndRevisions) {
  Hub hub;
  TempDir cache;
  setenv("HF_TOKEN", kToken, 1);
  auto m = HubfsMount::start(hub.server->url(), "", cache.str(), {"--hub"});
  unsetenv("HF_TOKEN");

  EXPECT_EQ(names(m->path()), (std::vector<std::string>{"datasets", "models", "spaces"}));
  EXPECT_TRUE(names(*m / "datasets").empty());  // nothing touched yet: the Hub is not listed
  EXPECT_EQ(read_all(*m / "datasets/lab/pub/data.bin"), hub.data);
  EXPECT_EQ(read_all(*m / "datasets/lab/pub/sub/dir/note.txt"), "deep note\n");
  EXPECT_EQ(read_all(*m / "datasets/lab/pub@v1/data.bin"), hub.old_data);
  EXPECT_EQ(read_all(*m / "models/lab/secret/weights.bin"), hub.weights);  // private: the token
  EXPECT_EQ(names(*m / "datasets/lab/pub"), (std::vector<std::string>{"data.bin", "sub"}));
  EXPECT_EQ(names(*m / "datasets/lab/pub@v1"), (std::vector<std::string>{"data.bin"}));

  // Missing repos and impossible names are ENOENT; nothing else breaks.
  struct stat st {};
  EXPECT_NE(stat((*m / "datasets/lab/nope").c_str(), &st), 0);
  EXPECT_EQ(errno, ENOENT);
  EXPECT_NE(stat((*m / "datasets/lab/pub@no-such-rev").c_str(), &st), 0);
  EXPECT_EQ(errno, ENOENT);
  EXPECT_NE(stat((*m / "other").c_str(), &st), 0);
  EXPECT_NE(stat((*m / "datasets/.git").c_str(), &st), 0);
  // A model repo is not a dataset repo.
  EXPECT_NE(stat((*m / "datasets/lab/secret").c_str(), &st), 0);

  // Listings show what was touched, inode numbers keep repos apart.
  EXPECT_EQ(names(*m / "datasets"), (std::vector<std::string>{"lab"}));
  EXPECT_EQ(names(*m / "datasets/lab"), (std::vector<std::string>{"pub", "pub@v1"}));
  EXPECT_EQ(names(*m / "models/lab"), (std::vector<std::string>{"secret"}));
  struct stat a {}, b {};
  ASSERT_EQ(stat((*m / "datasets/lab/pub/data.bin").c_str(), &a), 0);
  ASSERT_EQ(stat((*m / "datasets/lab/pub@v1/data.bin").c_str(), &b), 0);
  EXPECT_NE(a.st_ino, b.st_ino);
  EXPECT_EQ(static_cast<size_t>(a.st_size), hub.data.size());
  EXPECT_EQ(static_cast<size_t>(b.st_size), hub.old_data.size());

  // The status xattr on the root names the touched repos and their commits.
  std::string value(1 << 16, '\0');
  ssize_t n = getxattr(m->path().c_str(), "user.hubfs.status", value.data(), value.size());
  ASSERT_GT(n, 0);
  value.resize(static_cast<size_t>(n));
  auto j = nlohmann::json::parse(value, nullptr, false);
  ASSERT_TRUE(j.is_object()) << value;
  EXPECT_EQ(j["repo"], "hub");
  std::map<std::string, std::string> commits;
  for (const auto& r : j["repos"]) commits[r["path"].get<std::string>()] = r["commit"].get<std::string>();
  ASSERT_EQ(commits.size(), 3u) << value;
  EXPECT_EQ(commits["datasets/lab/pub"].size(), 40u);
  EXPECT_NE(commits["datasets/lab/pub"], commits["datasets/lab/pub@v1"]);
  EXPECT_TRUE(commits.count("models/lab/secret"));
  EXPECT_GE(j["requests"].get<int>(), 3);
}

TEST(HubMount, WithoutTheTokenAPrivateRepoIsNotThere) {
  Hub hub;
  TempDir cache;
  unsetenv("HF_TOKEN");
  setenv("HF_TOKEN_PATH", "/nonexistent/token", 1);  // no token file from the machine either
  auto m = HubfsMount::start(hub.server->url(), "", cache.str(), {"--hub"});
  unsetenv("HF_TOKEN_PATH");
  struct stat st {};
  // The Hub answers 401 RepoNotFound, as for a repo that does not exist: ENOENT, as the README
  // says (docs/hub-http-contract.md, section 10).
  EXPECT_NE(stat((*m / "models/lab/secret/weights.bin").c_str(), &st), 0);
  EXPECT_EQ(errno, ENOENT) << strerror(errno);
  EXPECT_NE(stat((*m / "models/lab/secret").c_str(), &st), 0);
  EXPECT_EQ(errno, ENOENT) << strerror(errno);
  EXPECT_EQ(read_all(*m / "datasets/lab/pub/sub/dir/note.txt"), "deep note\n");
}

TEST(HubMount, TheMountHelperFormTakesOHubAndASourceLabel) {
  Hub hub;
  TempDir cache, point;
  auto r = run_command(shell_quote(bin_path("hubfs")) + " hub " + shell_quote(point.str()) + " -o hub,endpoint=" +
                       hub.server->url() + ",cache_dir=" + cache.str());
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_EQ(read_all(point.str() + "/datasets/lab/pub/sub/dir/note.txt"), "deep note\n");
  auto u = run_command(shell_quote(bin_path("hubfs")) + " unmount " + shell_quote(point.str()));
  EXPECT_EQ(u.exit_code, 0) << u.output;
  // --hub with a REPO is a mistake, said so.
  auto both = run_command(shell_quote(bin_path("hubfs")) + " mount --hub --endpoint " + hub.server->url() +
                          " datasets/lab/pub " + shell_quote(point.str()));
  EXPECT_NE(both.exit_code, 0);
  EXPECT_NE(both.output.find("--hub"), std::string::npos) << both.output;
}

}  // namespace

namespace HUBFS_UNITY_ID {

TEST(HubMount, OfflineServesReposTouchedOnlineFromTheCache) {
  auto hub = std::make_unique<Hub>();
  const std::string endpoint = hub->server->url();
  TempDir cache;
  {
    auto m = HubfsMount::start(endpoint, "", cache.str(), {"--hub"});
    ASSERT_EQ(read_all(*m / "datasets/lab/pub/data.bin"), hub->data);
    ASSERT_EQ(names(*m / "datasets/lab/pub/sub"), (std::vector<std::string>{"dir"}));
  }
  hub->server.reset();  // the Hub is gone
  auto m = HubfsMount::start(endpoint, "", cache.str(), {"--hub", "--offline"});
  EXPECT_EQ(read_all(*m / "datasets/lab/pub/data.bin"), hub->data);
  EXPECT_EQ(names(*m / "datasets/lab/pub"), (std::vector<std::string>{"data.bin", "sub"}));
  auto cat = run_command_timeout("cat " + shell_quote(*m / "datasets/lab/pub/sub/dir/note.txt"),
                                 std::chrono::seconds(60));
  EXPECT_FALSE(cat.timed_out);
  EXPECT_NE(cat.exit_code, 0);  // never read online: not cached
  struct stat st {};
  EXPECT_NE(stat((*m / "datasets/lab/pub@v1").c_str(), &st), 0);  // never mounted online
  EXPECT_EQ(errno, ENOENT);
}

}  // namespace
