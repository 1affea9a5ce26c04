// The reader with a shared block tier (a fake one here; tests/shared and tests/integration use
// real memcached): asked after the disk cache and before the Hub, fed with what the Hub sent,
// never trusted without its envelope, never an error when it fails.
#include <map>
#include <mutex>
#include <random>
#include <thread>

#include <gtest/gtest.h>

#include "cache/fault_disk.h"
#include "reader/block_reader.h"
#include "reader/shared_blocks.h"
#include "support/digest.h"
#include "support/fake_transport.h"
#include "support/pattern.h"
#include "support/temp_dir.h"
#include "support/fetcher_env.h"

namespace hubfs {
namespace HUBFS_UNITY_ID {

using testing::FakeTransport;
using testing::TempDir;

// 64 KiB blocks, not the reader's default 1 MiB: the tier's logic counts blocks and envelopes,
// and under the sanitizers the bytes were the cost (as in block_reader_test.cc, whose comment
// says why).
constexpr uint32_t kBlock = 64 * 1024;

// The reader's defaults but for the block size (kBlock), which the tier's keys carry.
ReaderOptions block_options() {
  ReaderOptions o;
  o.block_size = kBlock;
  return o;
}

// An in-memory engine: puts land at once; `fail` makes every get an error (nothing returned).
// Like memcached, it returns whatever it holds under a key, of whatever size.
class FakeTier : public SharedStore {
 public:
  std::vector<std::optional<std::string>> get(const std::vector<SharedGet>& items, const Deadline&) override {
    std::lock_guard<std::mutex> lock(mu);
    ++gets;
    std::vector<std::optional<std::string>> out(items.size());
    if (fail) return out;
    for (size_t i = 0; i < items.size(); ++i) {
      auto it = values.find(items[i].key);
      if (it != values.end()) out[i] = it->second;
    }
    return out;
  }
  void put(std::string key, std::string value) override {
    std::lock_guard<std::mutex> lock(mu);
    values[std::move(key)] = std::move(value);
    ++puts;
    put_cv.notify_all();
  }
  void remove(std::string key, size_t) override {
    std::lock_guard<std::mutex> lock(mu);
    values.erase(key);
    ++removes;
  }
  SharedStoreStats stats() const override {
    std::lock_guard<std::mutex> lock(mu);
    SharedStoreStats s;
    s.puts = puts;
    return s;
  }
  std::string describe() const override { return "fake"; }
  // Offers run after the read that fetched a block returns (off the reader's path): wait for them.
  // Bounded for a loaded machine: false if they did not come.
  bool wait_puts(int n) {
    std::unique_lock<std::mutex> lock(mu);
    return put_cv.wait_for(lock, std::chrono::seconds(10), [&] { return puts >= n; });
  }

  mutable std::mutex mu;
  std::condition_variable put_cv;
  std::map<std::string, std::string> values;
  bool fail = false;
  int gets = 0, puts = 0, removes = 0;
};

// The support library's pattern: compiled optimized and uninstrumented even in the sanitizer
// builds (a per-byte generator at -O0 under TSan cost ~1 s per test to fill 10 MiB).
std::string pattern(size_t n, unsigned seed) { return testing::pattern_bytes(seed, 0, n); }

using testing::sha256_hex;

const SharedStoreKey& cluster_key() {
  static const SharedStoreKey k = SharedStoreKey::from_bytes(std::string(32, '\x17')).value();
  return k;
}

class SharedBlocksTest : public ::testing::Test {
 protected:
  SharedBlocksTest() {
    // Made and hashed once per process (a copy is cheap), as in block_reader_test: the tests stay
    // short.
    static const std::string content = pattern(5 * kBlock + 777, 3);  // 6 blocks, the last one short
    static const std::string content_id = "sha256:" + sha256_hex(content);
    content_ = content;
    file_.path = "data/shared.bin";
    file_.content_id = content_id;
    file_.size = content_.size();
    file_.locate = [](bool) { return Result<Location>(Location{"http://cdn.test/blob", {}, {}}); };
  }

  // A "machine": its own disk cache directory and reader over the one fake Hub and tier.
  struct Machine {
    TempDir dir;
    std::unique_ptr<BlockCache> cache;
    std::unique_ptr<SharedBlocks> shared;
    std::unique_ptr<BlockReader> reader;
  };
  std::unique_ptr<Machine> machine(bool with_tier = true, ReaderOptions options = block_options()) {
    auto m = std::make_unique<Machine>();
    CacheOptions o;
    o.env = &Env::real();
    o.dir = (m->dir.path() / "cache").string();
    auto c = BlockCache::open(o);
    EXPECT_TRUE(c.ok());
    m->cache = std::move(c).value();
    if (with_tier) m->shared = std::make_unique<SharedBlocks>(tier_, kBlock, cluster_key());
    m->reader = std::make_unique<BlockReader>(m->cache.get(), fetcher_, options, m->shared.get());
    return m;
  }
  Result<std::string> read_all(BlockReader& reader) {
    std::string out(file_.size, '\0');
    auto n = reader.read(file_, 0, file_.size, out.data(), nullptr);
    if (!n.ok()) return n.status();
    out.resize(*n);
    return out;
  }
  // The file's id in both caches carries a block size other than the default (BlockReader::disk_key).
  std::string key(uint64_t index) {
    return SharedBlockKey{cluster_key().id(), BlockReader::disk_key(file_.content_id, kBlock), kBlock, index}.str();
  }
  std::string wrap(uint64_t index, std::string_view block) { return shared_envelope::wrap(cluster_key(), key(index), block); }

  Result<HttpResponse> answer(const HttpRequest& req) {
    HttpResponse r;
    auto range = find_header(req.headers, "Range");
    uint64_t a = 0, b = 0;
    if (!range || sscanf(range->c_str(), "bytes=%lu-%lu", &a, &b) != 2) {
      r.status = 200;
      r.body = content_;
      return r;
    }
    r.status = 206;
    r.body = content_.substr(a, b - a + 1);
    r.headers.emplace_back("content-range", "bytes " + std::to_string(a) + "-" + std::to_string(b) + "/" +
                                                std::to_string(content_.size()));
    return r;
  }

  std::string content_;
  RemoteFile file_;
  FakeTier tier_;
  FakeTransport transport_{[this](const HttpRequest& r) { return answer(r); }};
  RangeFetcher fetcher_{transport_, testing::fetcher_on(Env::real())};
};

TEST_F(SharedBlocksTest, BlocksOneMachineFetchedAreReadByAnotherWithoutTheHub) {
  auto a = machine();
  ASSERT_EQ(read_all(*a->reader).value(), content_);
  const size_t hub_after_a = transport_.request_count();
  EXPECT_GT(hub_after_a, 0u);
  ASSERT_TRUE(tier_.wait_puts(6));
  EXPECT_EQ(tier_.values.size(), 6u);  // every block offered once fetched
  EXPECT_EQ(a->shared->stats().offered, 6u);

  auto b = machine();
  ASSERT_EQ(read_all(*b->reader).value(), content_);
  EXPECT_EQ(transport_.request_count(), hub_after_a) << "machine B went to the Hub";
  const SharedBlocksStats s = b->shared->stats();
  EXPECT_EQ(s.hits, 6u);
  EXPECT_EQ(s.misses, 0u);
  EXPECT_EQ(s.bytes_read, content_.size());
  EXPECT_EQ(s.offered, 0u) << "blocks from the tier are not stored back into it";
  EXPECT_EQ(b->reader->stats().files_verified, 1u) << "tier blocks go through the whole-file hash too";

  // B wrote them to its own disk cache: a remount of B needs neither tier nor Hub.
  b->reader.reset();
  BlockReader again(b->cache.get(), fetcher_, block_options());
  ASSERT_EQ(read_all(again).value(), content_);
  EXPECT_EQ(again.stats().disk_hits, 6u);
  EXPECT_EQ(transport_.request_count(), hub_after_a);
}

TEST_F(SharedBlocksTest, ADiskHitNeverAsksTheTier) {
  auto a = machine();
  ASSERT_TRUE(read_all(*a->reader).ok());
  ASSERT_TRUE(tier_.wait_puts(6));
  a->reader = std::make_unique<BlockReader>(a->cache.get(), fetcher_, block_options(), a->shared.get());
  const int gets = tier_.gets;
  ASSERT_EQ(read_all(*a->reader).value(), content_);
  EXPECT_EQ(tier_.gets, gets);
}

TEST_F(SharedBlocksTest, ACorruptValueIsNeverServedAndIsOverwrittenFromTheHub) {
  auto a = machine();
  ASSERT_TRUE(read_all(*a->reader).ok());
  ASSERT_TRUE(tier_.wait_puts(6));
  const uint64_t hub_after_a = transport_.bytes_asked();
  // One flipped bit in block 2's payload, one truncated value for block 4.
  tier_.values[key(2)][tier_.values[key(2)].size() - 100] ^= 0x10;
  tier_.values[key(4)].resize(tier_.values[key(4)].size() / 2);

  auto b = machine();
  ASSERT_EQ(read_all(*b->reader).value(), content_);
  const SharedBlocksStats s = b->shared->stats();
  EXPECT_EQ(s.hits, 4u);
  EXPECT_EQ(s.corrupt, 2u);  // the truncated one too: something is there, and it is wrong
  EXPECT_EQ(s.misses, 2u);
  EXPECT_EQ(transport_.bytes_asked(), hub_after_a + 2u * kBlock) << "blocks 2 and 4 came from the Hub";
  ASSERT_TRUE(tier_.wait_puts(8));
  EXPECT_EQ(b->shared->stats().offered, 2u);
  // ...and were stored back, good now.
  for (uint64_t i : {2, 4}) {
    auto v = shared_envelope::unwrap(cluster_key(), key(i), kBlock, tier_.values[key(i)]);
    ASSERT_TRUE(v) << "block " << i;
    EXPECT_EQ(*v, std::string_view(content_).substr(i * kBlock, kBlock));
  }
}

TEST_F(SharedBlocksTest, AFailingTierCostsOnlyHubFetches) {
  tier_.fail = true;
  auto b = machine();
  ASSERT_EQ(read_all(*b->reader).value(), content_);
  EXPECT_EQ(b->shared->stats().hits, 0u);
  EXPECT_EQ(b->shared->stats().misses, 6u);
  EXPECT_GT(transport_.request_count(), 0u);
}

TEST_F(SharedBlocksTest, AWellWrappedWrongBlockFailsTheFileHashAndLeavesTheTier) {
  // Someone stored wrong bytes with a valid envelope (the Hub sent them corrupted to another
  // machine): the whole-file hash catches them, and the reader removes the file from the tier.
  std::string wrong = content_.substr(kBlock, kBlock);
  wrong[5] ^= 0x01;
  tier_.put(key(1), wrap(1, wrong));
  auto b = machine();
  auto r = read_all(*b->reader);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), Code::kCorrupt);
  EXPECT_EQ(tier_.values.count(key(1)), 0u) << "the bad block is still shared";
  // The next read fetches fresh bytes from the Hub and succeeds.
  ASSERT_EQ(read_all(*b->reader).value(), content_);
}

// Blocks fetched from the Hub are offered to the tier before they are written to the local disk:
// with the disk's writes stuck, the tier has them all (other machines find them sooner, and a read
// that has ended has its blocks offered).
TEST_F(SharedBlocksTest, HubBlocksAreOfferedBeforeTheirDiskWrites) {
  TempDir dir;
  auto disk = std::make_shared<testing::FaultDisk>();
  CacheOptions o;
  o.env = &Env::real();
  o.dir = (dir.path() / "cache").string();
  auto cache = BlockCache::open(o, disk);
  ASSERT_TRUE(cache.ok());
  SharedBlocks shared(tier_, kBlock, cluster_key());
  disk->close_write_gate();
  const int attempts = disk->write_attempts();  // the cache's own files, written at open
  {
    ReaderOptions one_response = block_options();  // every block in one response (one connection)
    one_response.parallel_requests = 1;
    BlockReader reader(cache->get(), fetcher_, one_response, &shared);
    ASSERT_EQ(read_all(reader).value(), content_);
    EXPECT_TRUE(tier_.wait_puts(6));
    EXPECT_EQ(disk->write_attempts(), attempts) << "a block file was written before the tier had every block";
    disk->open_write_gate();
  }
  EXPECT_EQ(disk->write_attempts(), attempts + 6);
}

// Blocks served by the tier reach the local disk on the deferred writer (by the time the reader
// shuts down), or on the disk threads at once when deferring is off or its budget is spent: a
// remount needs neither tier nor Hub either way.
TEST_F(SharedBlocksTest, TierBlocksReachTheLocalDiskDeferredOrAtOnce) {
  auto a = machine();
  ASSERT_TRUE(read_all(*a->reader).ok());
  ASSERT_TRUE(tier_.wait_puts(6));
  const size_t hub_requests = transport_.request_count();
  ReaderOptions at_once = block_options();
  at_once.max_deferred_write_bytes = 0;
  ReaderOptions two_deferred = block_options();  // two values' worth: the rest go to the disk threads
  two_deferred.max_deferred_write_bytes = 2 * shared_envelope::size(key(0), kBlock);
  struct Case {
    ReaderOptions options;
    uint64_t min_deferred, max_deferred;
  };
  for (const Case& c : {Case{block_options(), 6, 6}, Case{at_once, 0, 0}, Case{two_deferred, 0, 6}}) {
    auto b = machine(true, c.options);
    ASSERT_EQ(read_all(*b->reader).value(), content_);
    b->reader->shutdown();  // runs the writes still waiting
    const uint64_t deferred = b->reader->stats().deferred_writes;
    EXPECT_GE(deferred, c.min_deferred);
    EXPECT_LE(deferred, c.max_deferred);
    BlockReader again(b->cache.get(), fetcher_, block_options());
    ASSERT_EQ(read_all(again).value(), content_);
    EXPECT_EQ(again.stats().disk_hits, 6u) << "deferred " << deferred;
  }
  EXPECT_EQ(transport_.request_count(), hub_requests);
}

// A wrong block from the tier never sticks in the local disk cache, whether its deferred write
// ran before the file failed its hash (the failure removes it) or after (the write is skipped).
TEST_F(SharedBlocksTest, AWrongTierBlockNeverReachesTheLocalDisk) {
  std::string wrong = content_.substr(kBlock, kBlock);
  wrong[9] ^= 0x02;
  tier_.put(key(1), wrap(1, wrong));
  auto b = machine();
  ASSERT_EQ(read_all(*b->reader).status().code(), Code::kCorrupt);
  b->reader->shutdown();
  tier_.fail = true;  // from now on only the disk and the Hub
  BlockReader again(b->cache.get(), fetcher_, block_options());
  ASSERT_EQ(read_all(again).value(), content_);
  EXPECT_EQ(again.stats().verify_failures, 0u);
}

// A forger who can write to memcached but holds no key: a value with the right layout, the key
// echoed and a MAC computed under its own key (the CRC of the old envelope was as easy to
// recompute). A partial read, which has no whole-file hash to catch wrong bytes, still gets the
// Hub's bytes; only those reach the local disk, and the forged value is overwritten.
TEST_F(SharedBlocksTest, AForgedValueIsNeverServedNorWrittenToDisk) {
  const SharedStoreKey forger = SharedStoreKey::from_bytes("someone else's key, not the one!").value();
  tier_.put(key(2), shared_envelope::wrap(forger, key(2), std::string(kBlock, 'F')));
  auto b = machine();
  std::string out(4096, '\0');
  auto n = b->reader->read(file_, 2 * kBlock + 100, out.size(), out.data(), nullptr);
  ASSERT_TRUE(n.ok()) << n.status().message();
  EXPECT_EQ(out, content_.substr(2 * kBlock + 100, out.size()));
  EXPECT_EQ(b->shared->stats().corrupt, 1u);
  EXPECT_EQ(b->shared->stats().hits, 0u);
  b->reader->shutdown();  // the write-back has landed
  auto on_disk = b->cache->get(BlockReader::disk_key(file_.content_id, kBlock), 2);
  ASSERT_TRUE(on_disk);
  EXPECT_EQ(*on_disk, content_.substr(2 * kBlock, kBlock));
  ASSERT_TRUE(tier_.wait_puts(2));  // the forger's and the Hub block offered back
  auto v = shared_envelope::unwrap(cluster_key(), key(2), kBlock, tier_.values[key(2)]);
  ASSERT_TRUE(v);
  EXPECT_EQ(*v, std::string_view(content_).substr(2 * kBlock, kBlock));
}

// The tier is asked within the read's deadline (--read-timeout), never with an open-ended one.
TEST_F(SharedBlocksTest, TheTierLookupCarriesTheReadsDeadline) {
  struct DeadlineTier : FakeTier {
    std::vector<std::optional<std::string>> get(const std::vector<SharedGet>& items, const Deadline& d) override {
      {
        std::lock_guard<std::mutex> lock(mu);
        seen.push_back(d.remaining());
      }
      return FakeTier::get(items, d);
    }
    std::vector<std::chrono::milliseconds> seen;
  } tier;
  ReaderOptions options = block_options();
  options.read_timeout = std::chrono::seconds(7);
  SharedBlocks shared(tier, kBlock, cluster_key());
  BlockReader reader(nullptr, fetcher_, options, &shared);
  std::string first(kBlock, '\0');  // one block's lookup shows it; the whole file only costs time
  auto n = reader.read(file_, 0, first.size(), first.data(), nullptr);
  ASSERT_TRUE(n.ok()) << n.status().message();
  EXPECT_EQ(first, content_.substr(0, kBlock));
  reader.shutdown();
  ASSERT_FALSE(tier.seen.empty());
  for (auto left : tier.seen) {
    EXPECT_GT(left.count(), 0);
    EXPECT_LE(left, std::chrono::milliseconds(7000));
  }
}

}  // namespace
}  // namespace hubfs
