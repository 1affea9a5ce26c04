// The shared block tier through real mounts: several memcached nodes on 127.0.0.1, two mounts
// with separate cache directories ("two machines") of one local Hub server. Mount B reads what
// mount A fetched without the Hub; a node killed mid-read costs Hub fetches, never an error; a
// corrupted value is never served; private repos stay out unless --shared-cache-private.
#include <fcntl.h>
#include <sys/stat.h>
#include <sys/xattr.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <filesystem>
#include <thread>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "cache/shared_tier.h"
#include "shared/memcached_tier.h"
#include "support/local_hub.h"
#include "support/memcached_server.h"
#include "support/mount_harness.h"
#include "support/temp_dir.h"

using namespace hubfs::testing;

namespace {

constexpr uint32_t kBlock = 1u << 20;

struct Nodes {
  std::vector<std::unique_ptr<MemcachedServer>> servers;
  explicit Nodes(int n) {
    for (int i = 0; i < n; ++i) servers.push_back(MemcachedServer::start());
  }
  std::string list(char sep = ',') const {
    std::string s;
    for (const auto& n : servers) s += (s.empty() ? "" : std::string(1, sep)) + n->address();
    return s;
  }
  std::vector<std::string> addresses() const {
    std::vector<std::string> v;
    for (const auto& n : servers) v.push_back(n->address());
    return v;
  }
};

nlohmann::json status_of(const HubfsMount& m) {
  std::string buf(1 << 16, '\0');
  ssize_t n = getxattr(m.path().c_str(), "user.hubfs.status", buf.data(), buf.size());
  if (n < 0) return nlohmann::json();
  buf.resize(static_cast<size_t>(n));
  return nlohmann::json::parse(buf, nullptr, false);
}

// The mount's stores reach the tier after its reads return: wait until it has stored what it
// offered (bounded; the caller asserts the result).
bool wait_stored(const HubfsMount& m, uint64_t at_least) {
  for (int i = 0; i < 3000; ++i) {
    auto sc = status_of(m)["shared_cache"];
    if (sc.is_object() && sc.value("queued", 1u) == 0 && sc.value("stored", 0u) >= at_least &&
        sc.value("stored", 0u) + sc.value("errors", 0u) + sc.value("dropped", 0u) + sc.value("skipped", 0u) >=
            sc.value("offered", 0u))
      return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return false;
}

std::string content_id(const std::string& path) {
  char buf[128] = {};
  ssize_t n = getxattr(path.c_str(), "user.hubfs.sha256", buf, sizeof(buf) - 1);
  return n > 0 ? "sha256:" + std::string(buf, static_cast<size_t>(n)) : "";
}

// Reads [offset, offset + n) with pread: any error fails the test.
// With direct=true, O_DIRECT: one FUSE read per MiB and no kernel read-ahead, so a single-block
// read starts no read-ahead in the mount either.
std::string read_range(const std::string& path, uint64_t offset, size_t n, bool direct = false) {
  int fd = open(path.c_str(), O_RDONLY | (direct ? O_DIRECT : 0));
  EXPECT_GE(fd, 0) << path;
  std::string out(n, '\0');
  size_t got = 0;
  while (fd >= 0 && got < n) {
    ssize_t r = pread(fd, out.data() + got, n - got, static_cast<off_t>(offset + got));
    EXPECT_GT(r, 0) << "read error at " << offset + got << ": " << strerror(errno);
    if (r <= 0) break;
    got += static_cast<size_t>(r);
  }
  if (fd >= 0) close(fd);
  out.resize(got);
  return out;
}

class SharedCache : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    root_ = new TempDir();
    auto repo = root_->path() / "datasets" / "lab" / "shared";
    write_file((repo / "data.bin").string(), small_);
    write_file((repo / "big.bin").string(), big_);
    auto secret = root_->path() / "datasets" / "lab" / "secret";
    write_file((secret / "hub.json").string(),
               R"({"refs": {"main": "c1"}, "commits": {"c1": {"date": "2024-01-01T00:00:00Z"}}, "private": true})");
    write_file((secret / "snapshots/c1/model.bin").string(), small_);
    LocalHubOptions options;
    options.root = root_->str();
    options.tokens = {"hf_sharedtoken"};
    hub_ = LocalHub::start(options).release();
  }
  static void TearDownTestSuite() {
    delete hub_;
    delete root_;
  }
  std::unique_ptr<HubfsMount> mount(const TempDir& cache, const std::string& repo, std::vector<std::string> args) {
    return HubfsMount::start(hub_->url(), repo, (cache.path() / "cache").string(), args);
  }
  static uint64_t hub_data_requests() {
    auto s = hub_->stats();
    return s["cdn_requests"].get<uint64_t>() + s["resolve_requests"].get<uint64_t>();
  }

  static inline TempDir* root_ = nullptr;
  static inline LocalHub* hub_ = nullptr;
  static inline const std::string small_ = random_bytes(6 * kBlock + 4321, 61);  // 7 blocks
  static inline const std::string big_ = random_bytes(32 * kBlock, 62);         // 32 blocks
};

TEST_F(SharedCache, MountBReadsWhatMountAFetchedWithoutAnyHubRequest) {
  Nodes nodes(3);
  TempDir cache_a, cache_b;
  auto a = mount(cache_a, "datasets/lab/shared", {"--shared-cache", nodes.list()});
  ASSERT_EQ(read_all(*a / "data.bin"), small_);
  ASSERT_TRUE(wait_stored(*a, 7)) << status_of(*a).dump();
  EXPECT_EQ(status_of(*a)["shared_cache"]["stored"], 7);

  // B lists the servers in another order, with '+' as in -o: the same tier.
  std::string reversed = nodes.servers[2]->address() + "+" + nodes.servers[1]->address() + "+" +
                         nodes.servers[0]->address();
  auto b = mount(cache_b, "datasets/lab/shared", {"-o", "shared_cache=" + reversed});
  struct stat st {};
  ASSERT_EQ(stat((*b / "data.bin").c_str(), &st), 0);  // listing and metadata before counting
  hub_->reset_stats();
  ASSERT_EQ(read_all(*b / "data.bin"), small_);
  EXPECT_EQ(hub_data_requests(), 0u) << hub_->stats().dump();
  EXPECT_EQ(hub_->stats()["bytes_sent"], 0);
  auto sc = status_of(*b)["shared_cache"];
  EXPECT_EQ(sc["hits"], 7) << sc.dump();
  EXPECT_EQ(sc["misses"], 0);
  EXPECT_EQ(sc["bytes_read"], small_.size());
  EXPECT_EQ(sc["errors"], 0);
  EXPECT_EQ(sc["nodes"], 3);
  EXPECT_EQ(status_of(*b)["files_verified"], 1) << "tier blocks are hashed like Hub blocks";

  // `hubfs status` says so in words.
  auto human = run_command(shell_quote(bin_path("hubfs")) + " status " + shell_quote(b->path()));
  EXPECT_NE(human.output.find("shared cache"), std::string::npos) << human.output;
  EXPECT_NE(human.output.find("7 hits"), std::string::npos) << human.output;
}

TEST_F(SharedCache, KillingANodeMidReadCostsOnlyHubFetches) {
  Nodes nodes(3);
  TempDir cache_a, cache_b;
  {
    auto a = mount(cache_a, "datasets/lab/shared", {"--shared-cache", nodes.list()});
    ASSERT_EQ(read_all(*a / "big.bin"), big_);
    ASSERT_TRUE(wait_stored(*a, 32)) << status_of(*a).dump();
  }
  auto b = mount(cache_b, "datasets/lab/shared", {"--shared-cache", nodes.list()});
  const std::string path = *b / "big.bin";
  struct stat st {};
  ASSERT_EQ(stat(path.c_str(), &st), 0);
  hub_->reset_stats();
  // One block first, without read-ahead (read-ahead would fetch the whole 32 MiB from the tier
  // before the kill), then the rest with a node gone.
  ASSERT_EQ(read_range(path, 0, kBlock, /*direct=*/true), big_.substr(0, kBlock));
  nodes.servers[1]->kill();
  ASSERT_EQ(read_range(path, kBlock, 31 * kBlock), big_.substr(kBlock));
  auto sc = status_of(*b)["shared_cache"];
  EXPECT_GT(sc["hits"].get<uint64_t>(), 0u) << sc.dump();
  EXPECT_GT(hub_data_requests(), 0u) << "the dead node's blocks must have come from the Hub";
  EXPECT_EQ(status_of(*b)["errors"], 0) << "no fetch error";
  // The whole file again, from the local cache now: exact.
  ASSERT_EQ(read_all(path), big_);
}

TEST_F(SharedCache, ACorruptedValueIsNeverServedAndIsRepaired) {
  Nodes nodes(2);
  TempDir cache_a, cache_b;
  std::string id;
  {
    auto a = mount(cache_a, "datasets/lab/shared", {"--shared-cache", nodes.list()});
    ASSERT_EQ(read_all(*a / "data.bin"), small_);
    ASSERT_TRUE(wait_stored(*a, 7));
    id = content_id(*a / "data.bin");
    ASSERT_FALSE(id.empty());
  }
  // Overwrite block 3 with a value whose payload has one flipped bit (as a bad DIMM would).
  hubfs::MemcachedTierOptions o;
  o.servers = nodes.addresses();
  auto tier = hubfs::MemcachedTier::create(o);
  ASSERT_TRUE(tier.ok());
  const std::string key = hubfs::SharedBlockKey{id, kBlock, 3}.str();
  std::string bad = hubfs::shared_envelope::wrap(key, std::string_view(small_).substr(3 * kBlock, kBlock));
  bad[bad.size() - 1000] ^= 0x04;
  (*tier)->put(key, bad);
  (*tier)->wait_idle();
  ASSERT_EQ((*tier)->get({{key, bad.size()}}).at(0), std::optional<std::string>(bad));

  auto b = mount(cache_b, "datasets/lab/shared", {"--shared-cache", nodes.list()});
  struct stat st {};
  ASSERT_EQ(stat((*b / "data.bin").c_str(), &st), 0);
  hub_->reset_stats();
  ASSERT_EQ(read_all(*b / "data.bin"), small_);
  auto sc = status_of(*b)["shared_cache"];
  EXPECT_EQ(sc["corrupt"], 1) << sc.dump();
  EXPECT_EQ(sc["hits"], 6);
  EXPECT_GT(hub_data_requests(), 0u);
  // B stored the good block over the bad value.
  ASSERT_TRUE(wait_stored(*b, 1));
  auto now = (*tier)->get({{key, bad.size()}}).at(0);
  ASSERT_TRUE(now);
  auto block = hubfs::shared_envelope::unwrap(key, kBlock, *now);
  ASSERT_TRUE(block);
  EXPECT_EQ(*block, std::string_view(small_).substr(3 * kBlock, kBlock));
}

TEST_F(SharedCache, PrivateRepoBlocksStayOutUnlessAskedFor) {
  Nodes nodes(2);
  TempDir cache_a, cache_b;
  setenv("HF_TOKEN", "hf_sharedtoken", 1);
  hubfs::MemcachedTierOptions o;
  o.servers = nodes.addresses();
  auto tier = hubfs::MemcachedTier::create(o);
  ASSERT_TRUE(tier.ok());
  std::string id;
  {
    auto a = mount(cache_a, "datasets/lab/secret", {"--shared-cache", nodes.list()});
    ASSERT_EQ(read_all(*a / "model.bin"), small_);
    id = content_id(*a / "model.bin");
    auto sc = status_of(*a)["shared_cache"];
    EXPECT_EQ(sc["enabled"], false) << sc.dump();
    auto human = run_command(shell_quote(bin_path("hubfs")) + " status " + shell_quote(a->path()));
    EXPECT_NE(human.output.find("not used (private"), std::string::npos) << human.output;
  }
  const std::string key = hubfs::SharedBlockKey{id, kBlock, 0}.str();
  const size_t size = hubfs::shared_envelope::size(key, kBlock);
  EXPECT_FALSE((*tier)->get({{key, size}}).at(0)) << "a private repo's block is in the shared tier";

  auto b = mount(cache_b, "datasets/lab/secret", {"--shared-cache", nodes.list(), "--shared-cache-private"});
  ASSERT_EQ(read_all(*b / "model.bin"), small_);
  ASSERT_TRUE(wait_stored(*b, 7));
  EXPECT_TRUE((*tier)->get({{key, size}}).at(0));
  unsetenv("HF_TOKEN");
}

}  // namespace
