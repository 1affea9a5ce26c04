// The shared block tier through real mounts: several memcached nodes on 127.0.0.1, two mounts
// with separate cache directories ("two machines") of one local Hub server and one key file.
// Mount B reads what mount A fetched without the Hub; a node killed mid-read costs Hub fetches,
// never an error; a forged value is never served nor cached; private repos stay out unless
// --shared-cache-private; without a key file --shared-cache is refused.
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

#include "shared/shared_store.h"
#include "shared/memcached/memcached_store.h"
#include "support/local_hub.h"
#include "support/memcached_server.h"
#include "support/mount_harness.h"
#include "support/temp_dir.h"

using namespace hubfs::testing;

namespace HUBFS_UNITY_ID {

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
    write_file((repo / "data.bin").string(), small_data());
    write_file((repo / "big.bin").string(), big_data());
    auto secret = root_->path() / "datasets" / "lab" / "secret";
    write_file((secret / "hub.json").string(),
               R"({"refs": {"main": "c1"}, "commits": {"c1": {"date": "2024-01-01T00:00:00Z"}}, "private": true})");
    write_file((secret / "snapshots/c1/model.bin").string(), small_data());
    LocalHubOptions options;
    options.root = root_->str();
    options.tokens = {"hf_sharedtoken"};
    hub_ = LocalHub::start(options).release();
    // The cluster's key, as an operator makes it (head -c 32 /dev/urandom > key; chmod 600 key).
    key_file_ = (root_->path() / "tier.key").string();
    write_file(key_file_, random_bytes(32, 63));
    chmod(key_file_.c_str(), 0600);
  }
  static void TearDownTestSuite() {
    delete hub_;
    delete root_;
  }
  // Every mount with a tier gets the key file (-o form when the servers come as -o).
  std::unique_ptr<HubfsMount> mount(const TempDir& cache, const std::string& repo, std::vector<std::string> args) {
    for (size_t i = 0; i < args.size(); ++i) {
      if (args[i] == "--shared-cache") args.insert(args.end(), {"--shared-cache-key-file", key_file_});
      if (args[i] == "-o" && i + 1 < args.size() && args[i + 1].rfind("shared_cache=", 0) == 0)
        args[i + 1] += ",shared_cache_key_file=" + key_file_;
    }
    return HubfsMount::start(hub_->url(), repo, (cache.path() / "cache").string(), args);
  }
  static const hubfs::SharedStoreKey& key() {
    static const hubfs::SharedStoreKey k = hubfs::SharedStoreKey::from_file(key_file_).value();
    return k;
  }
  static uint64_t hub_data_requests() {
    auto s = hub_->stats();
    return s["cdn_requests"].get<uint64_t>() + s["resolve_requests"].get<uint64_t>();
  }

  static inline TempDir* root_ = nullptr;
  static inline LocalHub* hub_ = nullptr;
  static inline std::string key_file_;
  // Made on first use, not at program start: every test process of test_integration would pay
  // for 38 MB of random bytes (1.5 CPU s per process under TSan).
  static const std::string& small_data() {
    static const std::string s = random_bytes(6 * kBlock + 4321, 61);  // 7 blocks
    return s;
  }
  static const std::string& big_data() {
    static const std::string s = random_bytes(32 * kBlock, 62);  // 32 blocks
    return s;
  }
  const std::string& small_ = small_data();
  const std::string& big_ = big_data();
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

// The issue's attack: whoever reaches memcached writes a value with the right layout and key echo
// and a freshly computed check (then a CRC; now a MAC, under a key the forger does not hold). A
// partial read of that block (no whole-file hash to catch it) gets the Hub's bytes, and so does a
// remount reading from its disk cache alone.
TEST_F(SharedCache, AForgedValueIsNeverServedNorCachedAndIsRepaired) {
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
  hubfs::MemcachedStoreOptions o;
  o.env = &hubfs::Env::real();
  o.servers = nodes.addresses();
  auto tier = hubfs::MemcachedStore::create(o);
  ASSERT_TRUE(tier.ok());
  const std::string key = hubfs::SharedBlockKey{SharedCache::key().id(), id, kBlock, 3}.str();
  std::string altered(small_.substr(3 * kBlock, kBlock));
  for (size_t i = 0; i < 256; ++i) altered[1000 + i] ^= 0x5a;
  const auto forger = hubfs::SharedStoreKey::from_bytes(random_bytes(32, 64)).value();
  const std::string forged = hubfs::shared_envelope::wrap(forger, key, altered);
  (*tier)->put(key, forged);
  (*tier)->wait_idle();
  ASSERT_EQ((*tier)->get({{key, forged.size()}}, hubfs::Deadline::never()).at(0), std::optional<std::string>(forged));

  {
    auto b = mount(cache_b, "datasets/lab/shared", {"--shared-cache", nodes.list()});
    const std::string path = *b / "data.bin";
    struct stat st {};
    ASSERT_EQ(stat(path.c_str(), &st), 0);
    hub_->reset_stats();
    ASSERT_EQ(read_range(path, 3 * kBlock + 1000, 256, /*direct=*/false), small_.substr(3 * kBlock + 1000, 256));
    auto sc = status_of(*b)["shared_cache"];
    EXPECT_EQ(sc["corrupt"], 1) << sc.dump();
    EXPECT_GT(hub_data_requests(), 0u);
    // B stored the good block over the forged value.
    ASSERT_TRUE(wait_stored(*b, 1));
    auto now = (*tier)->get({{key, forged.size()}}, hubfs::Deadline::never()).at(0);
    ASSERT_TRUE(now);
    auto block = hubfs::shared_envelope::unwrap(SharedCache::key(), key, kBlock, *now);
    ASSERT_TRUE(block);
    EXPECT_EQ(*block, std::string_view(small_).substr(3 * kBlock, kBlock));
  }
  // What B's disk cache holds is the Hub's block: a remount without the tier serves it exactly.
  (*tier)->put(key, forged);
  (*tier)->wait_idle();
  auto again = mount(cache_b, "datasets/lab/shared", {});
  ASSERT_EQ(read_range(*again / "data.bin", 3 * kBlock, kBlock, /*direct=*/true), small_.substr(3 * kBlock, kBlock));
}

TEST_F(SharedCache, WithoutAKeyFileTheSharedCacheIsRefusedSayingHowToMakeOne) {
  TempDir cache;
  try {
    HubfsMount::start(hub_->url(), "datasets/lab/shared", (cache.path() / "cache").string(),
                      {"--shared-cache", "127.0.0.1:1"});
    FAIL() << "mounted with --shared-cache and no key";
  } catch (const std::runtime_error& e) {
    const std::string message = e.what();
    EXPECT_NE(message.find("--shared-cache-key-file"), std::string::npos) << message;
    EXPECT_NE(message.find("head -c 32 /dev/urandom"), std::string::npos) << message;
  }
}

TEST_F(SharedCache, PrivateRepoBlocksStayOutUnlessAskedFor) {
  Nodes nodes(2);
  TempDir cache_a, cache_b;
  setenv("HF_TOKEN", "hf_sharedtoken", 1);
  hubfs::MemcachedStoreOptions o;
  o.env = &hubfs::Env::real();
  o.servers = nodes.addresses();
  auto tier = hubfs::MemcachedStore::create(o);
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
  const std::string key = hubfs::SharedBlockKey{SharedCache::key().id(), id, kBlock, 0}.str();
  const size_t size = hubfs::shared_envelope::size(key, kBlock);
  EXPECT_FALSE((*tier)->get({{key, size}}, hubfs::Deadline::never()).at(0)) << "a private repo's block is in the shared tier";

  auto b = mount(cache_b, "datasets/lab/secret", {"--shared-cache", nodes.list(), "--shared-cache-private"});
  ASSERT_EQ(read_all(*b / "model.bin"), small_);
  ASSERT_TRUE(wait_stored(*b, 7));
  EXPECT_TRUE((*tier)->get({{key, size}}, hubfs::Deadline::never()).at(0));
  unsetenv("HF_TOKEN");
}

}  // namespace
