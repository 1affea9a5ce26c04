// The shared tier against memcached nodes that misbehave on purpose (tests/support's fake node on
// 127.0.0.1): one that sends a valid hit header and then 64 bytes every 150 ms, one that serves
// truncated values, one whose values a forger wrote. None of them ever gets its bytes served,
// and none holds a read past its budget: the blocks come from the Hub (a fake transport here).
#include <openssl/evp.h>

#include <atomic>
#include <random>
#include <thread>

#include <gtest/gtest.h>

#include "reader/block_reader.h"
#include "reader/shared_blocks.h"
#include "shared/memcached/memcached_store.h"
#include "support/fake_memcached.h"
#include "support/fake_transport.h"
#include "support/pattern.h"
#include "support/fetcher_env.h"
#include "support/manual_env.h"

namespace hubfs {
namespace HUBFS_UNITY_ID {

using testing::FakeMemcachedNode;
using testing::FakeTransport;

constexpr uint32_t kBlock = 1u << 20;

const SharedStoreKey& cluster_key() {
  static const SharedStoreKey k = SharedStoreKey::from_bytes(std::string(32, '\x42')).value();
  return k;
}

// The support library's pattern: compiled optimized and uninstrumented even in the sanitizer
// builds (a per-byte generator at -O0 under TSan cost ~1 s per test to fill 10 MiB).
std::string pattern(size_t n, unsigned seed) { return testing::pattern_bytes(seed, 0, n); }

// On `env` other than the real one (a clock that follows the node, below), each wait for the
// socket may last a minute: only the budget or the caller's deadline ends a lookup then.
std::unique_ptr<MemcachedStore> tier_on(const FakeMemcachedNode& node, std::chrono::milliseconds budget,
                                       Env& env = Env::real()) {
  MemcachedStoreOptions o;
  o.env = &env;
  o.servers = {node.address()};
  o.lookup_budget = budget;
  if (&env != &Env::real()) o.timeout = std::chrono::seconds(60);
  auto t = MemcachedStore::create(o);
  EXPECT_TRUE(t.ok()) << t.status().message();
  return std::move(t).value();
}

// A clock that follows a trickling node, not the machine: each piece the node has trickled moves
// it 100 ms. A budget or deadline of 300 ms on it runs out after the third piece, however slowly a
// loaded machine schedules either side (on the real clock, under TSan, a budget once ran out
// before the node had begun to answer, and the test failed).
void follow_the_node(testing::FunctionEnv& env, const FakeMemcachedNode& node) {
  env.steady = [&node] { return MonotonicClock::time_point{} + node.pieces_trickled() * std::chrono::milliseconds(100); };
}

// The node of the issue: a valid header, then a trickle that keeps every per-wait timeout happy.
// The lookup ends at its budget as a miss and an error, and after three such failures the node's
// breaker stops asking it. The tier's clock follows the node (follow_the_node), and the per-wait
// timeout is far longer than any pause between pieces: only the budget can end a lookup, and had
// it no effect, the lookup would get the whole (short) value, a hit.
TEST(HostileNode, ATricklingNodeIsCutOffAtTheLookupBudgetAndThenSkipped) {
  FakeMemcachedNode node(64, std::chrono::milliseconds(10));
  const size_t size = 32 * 1024;  // 512 pieces: ~5 s for a lookup the budget does not end
  node.set("k", std::string(size, 'v'));
  testing::FunctionEnv env;
  follow_the_node(env, node);
  MemcachedStoreOptions o;
  o.env = &env;
  o.servers = {node.address()};
  o.timeout = std::chrono::seconds(60);
  o.lookup_budget = std::chrono::milliseconds(300);
  auto tier = MemcachedStore::create(o);
  ASSERT_TRUE(tier.ok()) << tier.status().message();
  for (int i = 0; i < 3; ++i) {
    const int before = node.pieces_trickled();
    auto got = (*tier)->get({SharedGet{"k", size}}, Deadline::never());
    ASSERT_EQ(got.size(), 1u);
    EXPECT_FALSE(got[0]) << "lookup " << i;
    EXPECT_GE(node.pieces_trickled() - before, 3) << "lookup " << i << " ended before its budget";
  }
  EXPECT_EQ(node.hits_served(), 3) << "the node did start answering each lookup";
  EXPECT_EQ((*tier)->stats().get_errors, 3u);
  EXPECT_EQ((*tier)->stats().nodes_down, 1u);
  EXPECT_FALSE((*tier)->get({SharedGet{"k", size}}, Deadline::never())[0]);
  EXPECT_EQ((*tier)->stats().skipped, 1u);
  EXPECT_EQ(node.hits_served(), 3) << "a node whose breaker is open is not asked";
}

// The same node answering a store a byte at a time cannot hold a writer (nor the unmount that
// joins it): the store ends at its budget as an error.
TEST(HostileNode, ATricklingNodeCannotHoldAStore) {
  FakeMemcachedNode node(64, std::chrono::milliseconds(150));
  MemcachedStoreOptions o;
  o.env = &Env::real();
  o.servers = {node.address()};
  o.store_budget = std::chrono::milliseconds(300);
  auto tier = MemcachedStore::create(o);
  ASSERT_TRUE(tier.ok());
  (*tier)->put("k", std::string(1000, 'v'));
  (*tier)->wait_idle();
  EXPECT_EQ((*tier)->stats().put_errors, 1u);
  EXPECT_EQ((*tier)->stats().puts, 0u);
}

// The caller's deadline bounds a lookup too, when it comes before the tier's own budget.
// (On the node's clock, as above: the deadline runs out after the node has begun to answer.)
TEST(HostileNode, TheCallersDeadlineEndsALookupBeforeTheBudget) {
  FakeMemcachedNode node(64, std::chrono::milliseconds(10));
  node.set("k", std::string(32 * 1024, 'v'));
  testing::FunctionEnv env;
  follow_the_node(env, node);
  auto tier = tier_on(node, std::chrono::hours(1), env);  // only the caller's deadline can end it
  auto got = tier->get({SharedGet{"k", 32 * 1024}}, Deadline::after(std::chrono::milliseconds(300), env.clock()));
  EXPECT_FALSE(got[0]);
  EXPECT_EQ(tier->stats().get_errors, 1u);
  // An expired deadline asks nothing, and is not the node's fault.
  EXPECT_FALSE(tier->get({SharedGet{"k", 32 * 1024}}, Deadline::after(std::chrono::milliseconds(0), env.clock()))[0]);
  EXPECT_EQ(node.hits_served(), 1);
  EXPECT_EQ(tier->stats().nodes_down, 0u);
}

// Truncated and forged values, over the wire: counted corrupt, never a hit; a genuine value on the
// same node is (so the fake node and the lookup speak the same protocol).
TEST(HostileNode, TruncatedAndForgedValuesAreCorruptAndGenuineOnesHit) {
  FakeMemcachedNode node;
  auto tier = tier_on(node, std::chrono::seconds(5));
  SharedBlocks shared(*tier, kBlock, cluster_key());
  const std::string id = "sha256:" + std::string(64, 'a');
  auto key = [&](uint64_t i) { return SharedBlockKey{cluster_key().id(), id, kBlock, i}.str(); };
  const size_t length = 300 * 1024;  // one memcached item each
  const std::string block = pattern(length, 1);
  node.set(key(0), shared_envelope::wrap(cluster_key(), key(0), block));
  const std::string genuine = shared_envelope::wrap(cluster_key(), key(1), block);
  node.set(key(1), genuine.substr(0, genuine.size() - 1000));  // truncated
  const auto forger = SharedStoreKey::from_bytes("the forger's own key, not ours!!").value();
  node.set(key(2), shared_envelope::wrap(forger, key(2), std::string(length, 'F')));  // right layout, wrong MAC

  auto found = shared.lookup(id, {{0, length}, {1, length}, {2, length}, {3, length}}, Deadline::never());
  ASSERT_EQ(found.size(), 4u);
  ASSERT_TRUE(found[0]);
  EXPECT_EQ(std::string_view(found[0]->value->data() + found[0]->offset, found[0]->length), block);
  EXPECT_FALSE(found[1]);
  EXPECT_FALSE(found[2]);
  EXPECT_FALSE(found[3]);
  const SharedBlocksStats s = shared.stats();
  EXPECT_EQ(s.hits, 1u);
  EXPECT_EQ(s.corrupt, 2u) << "the truncated and the forged value";
  EXPECT_EQ(s.misses, 3u);
  EXPECT_EQ(s.tier.get_errors, 0u) << "a bad value is the value's fault, not the node's";
}

// Eight readers of a file whose every block the trickling node "holds": every read returns the
// Hub's bytes (no reader waits on the node past the lookup budget), none from the tier.
TEST(HostileNode, ReadersOfATricklingTierGetTheHubsBytes) {
  const std::string content = pattern(8 * kBlock, 7);
  unsigned char digest[32];
  unsigned int n = 0;
  EVP_Digest(content.data(), content.size(), digest, &n, EVP_sha256(), nullptr);
  std::string hex;
  for (unsigned i = 0; i < n; ++i) {
    static const char kHex[] = "0123456789abcdef";
    hex += kHex[digest[i] >> 4];
    hex += kHex[digest[i] & 15];
  }
  RemoteFile file;
  file.path = "data/trickled.bin";
  file.content_id = "sha256:" + hex;
  file.size = content.size();
  file.locate = [](bool) { return Result<Location>(Location{"http://cdn.test/blob", {}, {}}); };

  FakeTransport hub([&](const HttpRequest& req) -> Result<HttpResponse> {
    HttpResponse r;
    uint64_t a = 0, b = 0;
    auto range = find_header(req.headers, "Range");
    if (!range || sscanf(range->c_str(), "bytes=%lu-%lu", &a, &b) != 2) return Unavailable("no range");
    r.status = 206;
    r.body = content.substr(a, b - a + 1);
    r.headers.emplace_back("content-range", "bytes " + std::to_string(a) + "-" + std::to_string(b) + "/" +
                                                std::to_string(content.size()));
    return r;
  });
  RangeFetcher fetcher(hub, testing::fetcher_on(Env::real()));
  FakeMemcachedNode node(64, std::chrono::milliseconds(150));
  for (uint64_t i = 0; i < 8; ++i) {
    const std::string k = SharedBlockKey{cluster_key().id(), file.content_id, kBlock, i}.str();
    // Pieces as the tier stores a 1 MiB block: the trickle starts on the first.
    const std::string value = shared_envelope::wrap(cluster_key(), k, std::string_view(content).substr(i * kBlock, kBlock));
    const size_t half = (value.size() + 1) / 2;
    node.set(k + "#0/2", value.substr(0, half));
    node.set(k + "#1/2", value.substr(half));
  }
  // On the node's clock: the budgets run out only once the node has trickled (so has answered).
  testing::FunctionEnv env;
  follow_the_node(env, node);
  auto tier = tier_on(node, std::chrono::milliseconds(300), env);
  SharedBlocks shared(*tier, kBlock, cluster_key());
  ReaderOptions options;
  options.read_timeout = std::chrono::seconds(30);
  BlockReader reader(nullptr, fetcher, options, &shared);

  std::atomic<int> exact{0};
  std::vector<std::thread> readers;
  for (int t = 0; t < 8; ++t) {
    readers.emplace_back([&, t] {
      std::string out(4096, '\0');
      const uint64_t offset = uint64_t(t) * kBlock + 12345;
      auto got = reader.read(file, offset, out.size(), out.data(), nullptr);
      if (got.ok() && *got == out.size() && out == content.substr(offset, out.size())) ++exact;
    });
  }
  for (auto& r : readers) r.join();
  EXPECT_EQ(exact.load(), 8);
  reader.shutdown();
  const SharedBlocksStats s = shared.stats();
  EXPECT_EQ(s.hits, 0u);
  EXPECT_GT(s.tier.get_errors + s.tier.skipped, 0u);
  EXPECT_GT(node.hits_served(), 0) << "the node was asked and began to answer";
  EXPECT_GE(hub.request_count(), 8u);
}

}  // namespace
}  // namespace hubfs
