// `hubfs cache verify [--complete]` over a cache a real mount of the local Hub filled: a byte the
// CDN flipped in a range a partial read fetched is cached with a good block checksum. A plain
// verify reports the file unverifiable (exit 3), never "0 bad"; --complete fetches the rest,
// finds the file bad, purges it and fetches it again exact (exit 1), after which a plain verify
// is clean (exit 0) and a remount serves the file exactly from the cache alone. An unreachable
// Hub and a wrong endpoint leave the file unverified, saying why.
#include <fcntl.h>
#include <sys/xattr.h>
#include <unistd.h>

#include <string>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "support/local_hub.h"
#include "support/mount_harness.h"
#include "support/temp_dir.h"

using namespace hubfs::testing;

namespace HUBFS_UNITY_ID {

constexpr size_t kMiB = 1u << 20;

std::string hubfs_cmd() { return shell_quote(bin_path("hubfs")); }

struct Repo {
  TempDir root;
  std::string data = random_bytes(3 * kMiB + 123'456, 41);  // LFS, 4 blocks
  Repo() { write_file((root.path() / "datasets/lab/ver/data.bin").string(), data); }
};

// Reads block 1 alone (a 1 MiB pread at a block boundary fetches just that block) while the CDN
// flips a byte in its answer; returns the bytes the mount served.
std::string partial_read_with_flip(LocalHub& hub, const std::string& endpoint, const std::string& cache) {
  auto m = HubfsMount::start(endpoint, "datasets/lab/ver", cache);
  const std::string file = *m / "data.bin";
  char sha[128] = {};
  ssize_t n = getxattr(file.c_str(), "user.hubfs.sha256", sha, sizeof sha);
  EXPECT_EQ(n, 64);
  hub.add_fault({{"mode", "flip_byte"}, {"origin", "cdn"}, {"path_contains", std::string(sha, n > 0 ? n : 0)}});
  std::string got(kMiB, '\0');
  int fd = open(file.c_str(), O_RDONLY);
  EXPECT_GE(fd, 0);
  EXPECT_EQ(pread(fd, got.data(), got.size(), kMiB), static_cast<ssize_t>(kMiB));
  close(fd);
  EXPECT_TRUE(hub.pending_faults().empty()) << "the flip was never injected: the test would test nothing";
  return got;
}

CommandResult verify(const std::string& cache, const std::string& args = "") {
  return run_command(hubfs_cmd() + " cache verify --cache-dir " + shell_quote(cache) + " " + args + " 2>&1");
}

TEST(CacheVerify, ACorruptedPartialBlockIsUnverifiableThenPurgedAndRefetchedExactByComplete) {
  Repo repo;
  auto hub = LocalHub::start({.root = repo.root.str()});
  TempDir cache;
  const std::string served = partial_read_with_flip(*hub, hub->url(), cache.str());
  // What a partial read cannot check: the flipped byte was served (and cached).
  EXPECT_NE(served, repo.data.substr(kMiB, kMiB)) << "no corrupted byte reached the cache";

  auto plain = verify(cache.str());
  EXPECT_EQ(plain.exit_code, 3) << plain.output;
  EXPECT_NE(plain.output.find("bad 0 files and 0 blocks"), std::string::npos) << plain.output;
  EXPECT_NE(plain.output.find("unverifiable 1 files (1.0 MiB)"), std::string::npos) << plain.output;
  EXPECT_NE(plain.output.find("data.bin"), std::string::npos) << plain.output;

  hub->reset_stats();
  auto complete = verify(cache.str(), "--complete --endpoint " + shell_quote(hub->url()));
  EXPECT_EQ(complete.exit_code, 1) << complete.output;
  EXPECT_NE(complete.output.find("content mismatch"), std::string::npos) << complete.output;
  EXPECT_NE(complete.output.find("fetched again from the Hub: exact"), std::string::npos) << complete.output;
  EXPECT_NE(complete.output.find("verified 1 files"), std::string::npos) << complete.output;
  EXPECT_NE(complete.output.find("bad 1 files and 0 blocks, purged; refetched 1; unverifiable 0 files"),
            std::string::npos)
      << complete.output;
  EXPECT_GT(hub->stats()["cdn_requests"].get<long long>(), 0);

  auto clean = verify(cache.str());
  EXPECT_EQ(clean.exit_code, 0) << clean.output;
  EXPECT_NE(clean.output.find("verified 1 files"), std::string::npos) << clean.output;

  // The cache now holds the file whole and exact: a remount reads it without fetching a byte.
  hub->reset_stats();
  {
    auto m = HubfsMount::start(hub->url(), "datasets/lab/ver", cache.str());
    EXPECT_TRUE(read_all(*m / "data.bin") == repo.data) << "the file read after --complete is not the Hub's";
  }
  EXPECT_EQ(hub->stats()["cdn_requests"].get<long long>(), 0);
}

TEST(CacheVerify, CompleteWithTheHubUnreachableOrAnotherEndpointSaysWhyAndKeepsTheBlocks) {
  Repo repo;
  auto hub = LocalHub::start({.root = repo.root.str()});
  const std::string endpoint = hub->url();
  TempDir cache;
  (void)partial_read_with_flip(*hub, endpoint, cache.str());

  auto elsewhere = verify(cache.str(), "--complete --endpoint http://127.0.0.1:9");
  EXPECT_EQ(elsewhere.exit_code, 3) << elsewhere.output;
  EXPECT_NE(elsewhere.output.find("read through another endpoint"), std::string::npos) << elsewhere.output;
  EXPECT_NE(elsewhere.output.find("with no Hub URL"), std::string::npos) << elsewhere.output;

  hub.reset();  // the Hub is gone
  auto down = verify(cache.str(), "--complete --read-timeout 5 --endpoint " + shell_quote(endpoint));
  EXPECT_EQ(down.exit_code, 3) << down.output;
  EXPECT_NE(down.output.find("could not fetch datasets/lab/ver/data.bin"), std::string::npos) << down.output;
  EXPECT_NE(down.output.find("unverifiable 1 files (1.0 MiB)"), std::string::npos) << down.output;
  // Nothing was judged, so nothing was deleted.
  auto plain = verify(cache.str());
  EXPECT_EQ(plain.exit_code, 3) << plain.output;
  EXPECT_NE(plain.output.find("unverifiable 1 files (1.0 MiB)"), std::string::npos) << plain.output;
}

}  // namespace
