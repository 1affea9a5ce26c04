// `hubfs mount --follow=2` through FUSE against the local Hub server: a push (the branch moved
// to a new commit in hub.json) becomes what new opens and listings see within two polls, while a
// reader holding the old file open reads its old bytes exactly to the end, a deleted file's open
// handle reads it whole, listings change whole (never a mix of the two commits), no read fails,
// and a mount without --follow keeps its commit. No timed assertion: the new commit is awaited
// with a generous deadline, and "within two polls" is counted in the daemon's own polls.
#include <fcntl.h>
#include <sys/stat.h>
#include <sys/xattr.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <set>
#include <thread>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "support/local_hub.h"
#include "support/mount_harness.h"
#include "support/temp_dir.h"

namespace fs = std::filesystem;
using namespace hubfs::testing;

namespace HUBFS_UNITY_ID {

std::set<std::string> listed(const std::string& dir) {
  std::set<std::string> out;
  std::error_code ec;
  for (auto& e : fs::directory_iterator(dir, ec)) out.insert(e.path().filename().string());
  return out;
}

nlohmann::json status_of(const HubfsMount& m) {
  std::string value(1 << 16, '\0');
  const ssize_t n = getxattr(m.path().c_str(), "user.hubfs.status", value.data(), value.size());
  if (n <= 0) return nlohmann::json();
  value.resize(static_cast<size_t>(n));
  return nlohmann::json::parse(value, nullptr, false);
}

// Reads what is left of fd, from `offset` to its end, appending to out; false on a read error.
bool read_rest(int fd, uint64_t offset, std::string& out) {
  std::string buf(1 << 20, '\0');
  for (;;) {
    const ssize_t n = pread(fd, buf.data(), buf.size(), static_cast<off_t>(offset));
    if (n < 0) return false;
    if (n == 0) return true;
    out.append(buf.data(), static_cast<size_t>(n));
    offset += static_cast<uint64_t>(n);
  }
}

TEST(Follow, APushIsSeenByNewOpensWhileOpenFilesReadTheirCommitToTheEnd) {
  TempDir root;
  const fs::path repo = root.path() / "datasets" / "lab" / "moving";
  const std::string big_v1 = random_bytes(2'600'000, 71), big_v2 = random_bytes(1'700'000, 72);
  const std::string gone = random_bytes(1'100'000, 73), added = random_bytes(40'000, 74);
  auto write_refs = [&](const char* main) {
    // Written whole and renamed into place: the server reads hub.json on every request.
    write_file((repo / "hub.json.tmp").string(),
               std::string(R"({"refs": {"main": ")") + main +
                   R"("}, "commits": {"c1": {"date": "2024-01-01T00:00:00Z"}, "c2": {"date": "2024-02-01T00:00:00Z"}}})");
    fs::rename(repo / "hub.json.tmp", repo / "hub.json");
  };
  write_refs("c1");
  write_file((repo / "snapshots/c1/big.bin").string(), big_v1);
  write_file((repo / "snapshots/c1/gone.bin").string(), gone);
  write_file((repo / "snapshots/c1/keep.txt").string(), "kept\n");
  write_file((repo / "snapshots/c1/sub/a.txt").string(), "a\n");
  write_file((repo / "snapshots/c2/big.bin").string(), big_v2);
  write_file((repo / "snapshots/c2/keep.txt").string(), "kept\n");
  write_file((repo / "snapshots/c2/sub/a.txt").string(), "a\n");
  write_file((repo / "snapshots/c2/sub/b.txt").string(), "b\n");
  write_file((repo / "snapshots/c2/added.bin").string(), added);
  LocalHubOptions options;
  options.root = root.str();
  auto hub = LocalHub::start(options);

  TempDir cache, still_cache;
  // The least interval is 5 s; the override lets this test poll every 2 s (docs/usage.md).
  setenv("HUBFS_FOLLOW_MIN_INTERVAL_S", "2", 1);
  auto m = HubfsMount::start(hub->url(), "datasets/lab/moving", cache.str(), {"--follow=2"});
  unsetenv("HUBFS_FOLLOW_MIN_INTERVAL_S");
  auto still = HubfsMount::start(hub->url(), "datasets/lab/moving", still_cache.str());

  const std::set<std::string> old_root = {"big.bin", "gone.bin", "keep.txt", "sub"};
  const std::set<std::string> new_root = {"added.bin", "big.bin", "keep.txt", "sub"};
  EXPECT_EQ(listed(m->path()), old_root);
  EXPECT_EQ(listed(*m / "sub"), (std::set<std::string>{"a.txt"}));
  EXPECT_EQ(read_all(*m / "keep.txt"), "kept\n");
  EXPECT_TRUE(read_all(*m / "big.bin") == big_v1);  // cached by the kernel from here on
  EXPECT_NE(access((*m / "added.bin").c_str(), F_OK), 0);  // a negative entry the kernel keeps
  struct stat keep_before {};
  ASSERT_EQ(stat((*m / "keep.txt").c_str(), &keep_before), 0);
  nlohmann::json before = status_of(*m);
  ASSERT_TRUE(before.is_object());
  ASSERT_TRUE(before["follow"].is_object()) << before.dump();
  EXPECT_EQ(before["follow"]["interval_s"], 2);
  const std::string old_commit = before["commit"];

  // Readers holding files open through the push: one part-way through big.bin, one on gone.bin.
  const int big_fd = open((*m / "big.bin").c_str(), O_RDONLY);
  const int gone_fd = open((*m / "gone.bin").c_str(), O_RDONLY);
  ASSERT_GE(big_fd, 0);
  ASSERT_GE(gone_fd, 0);
  std::string big_read;
  big_read.resize(1 << 20);
  ASSERT_EQ(pread(big_fd, big_read.data(), big_read.size(), 0), 1 << 20);

  // A lister during the push: every listing is one commit's, whole.
  std::atomic<bool> stop{false};
  std::atomic<int> listings{0}, mixed{0};
  std::thread lister([&] {
    while (!stop.load()) {
      const std::set<std::string> names = listed(m->path());
      if (names != old_root && names != new_root) ++mixed;
      ++listings;
    }
  });

  const uint64_t polls_at_push = status_of(*m)["follow"]["polls"].get<uint64_t>();
  write_refs("c2");
  // Until a new open sees the new commit (deadline far past any machine's slowness).
  const auto give_up = std::chrono::steady_clock::now() + std::chrono::seconds(120);
  while (read_all(*m / "big.bin") != big_v2 && std::chrono::steady_clock::now() < give_up)
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  const nlohmann::json after = status_of(*m);
  stop = true;
  lister.join();
  // (Compared with ==: a mismatch of megabytes would print them all.)
  ASSERT_TRUE(read_all(*m / "big.bin") == big_v2) << after.dump();
  // Within two polls of the push (one may have been under way, reading the old ref).
  EXPECT_LE(after["follow"]["polls"].get<uint64_t>() - polls_at_push, 2u) << after.dump();
  EXPECT_NE(after["commit"], old_commit);
  EXPECT_TRUE(after["follow"]["checked_at"].is_number());
  EXPECT_EQ(after["follow"]["changes"], 1);

  // The open readers read the old commit's bytes exactly, to the old end, without an error.
  big_read.resize(1 << 20);
  ASSERT_TRUE(read_rest(big_fd, big_read.size(), big_read));
  EXPECT_EQ(big_read.size(), big_v1.size());
  EXPECT_TRUE(big_read == big_v1);
  std::string gone_read;
  ASSERT_TRUE(read_rest(gone_fd, 0, gone_read));
  EXPECT_TRUE(gone_read == gone);
  close(big_fd);
  close(gone_fd);

  // New opens and listings: the new commit, whole.
  EXPECT_EQ(listed(m->path()), new_root);
  EXPECT_EQ(listed(*m / "sub"), (std::set<std::string>{"a.txt", "b.txt"}));
  EXPECT_TRUE(read_all(*m / "added.bin") == added);  // the kernel's negative entry was dropped
  EXPECT_EQ(read_all(*m / "sub/b.txt"), "b\n");
  errno = 0;
  EXPECT_EQ(open((*m / "gone.bin").c_str(), O_RDONLY), -1);
  EXPECT_EQ(errno, ENOENT);
  struct stat keep_after {};
  ASSERT_EQ(stat((*m / "keep.txt").c_str(), &keep_after), 0);
  EXPECT_EQ(keep_after.st_ino, keep_before.st_ino);  // unchanged: the same inode
  EXPECT_GT(listings.load(), 0);
  EXPECT_EQ(mixed.load(), 0);
  EXPECT_EQ(status_of(*m)["errors"], 0);

  // `hubfs cache info` names the commit each content was opened at: big.bin's two versions, each
  // with its own.
  const CommandResult info = run_command(shell_quote(bin_path("hubfs")) + " cache --cache-dir " + shell_quote(cache.str()) +
                                         " info --json 2>/dev/null");
  ASSERT_EQ(info.exit_code, 0) << info.output;
  std::set<std::pair<uint64_t, std::string>> big_versions;  // (size, commit)
  const nlohmann::json usage = nlohmann::json::parse(info.output);
  for (const auto& r : usage["repos"])
    for (const auto& f : r["files"])
      if (f["path"] == "big.bin") big_versions.emplace(f["size"].get<uint64_t>(), f["commit"].get<std::string>());
  EXPECT_EQ(big_versions, (std::set<std::pair<uint64_t, std::string>>{{big_v1.size(), old_commit},
                                                                       {big_v2.size(), after["commit"].get<std::string>()}}))
      << info.output;

  // Without --follow nothing moves: the same commit, listing and bytes as before the push.
  const nlohmann::json pinned = status_of(*still);
  EXPECT_EQ(pinned["commit"], old_commit);
  EXPECT_TRUE(pinned["follow"].is_null());
  EXPECT_EQ(listed(still->path()), old_root);
  EXPECT_TRUE(read_all(*still / "big.bin") == big_v1);
  EXPECT_EQ(pinned["errors"], 0);
}

TEST(Follow, AnIntervalUnderTheFloorIsRefusedNamingIt) {
  TempDir cache;
  const CommandResult r = run_command(shell_quote(bin_path("hubfs")) + " mount --follow=2 --endpoint http://127.0.0.1:9 "
                                      "--cache-dir " + shell_quote(cache.str()) + " lab/x /nonexistent 2>&1");
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_NE(r.output.find("from 5 to 86400"), std::string::npos) << r.output;
}

}  // namespace HUBFS_UNITY_ID
