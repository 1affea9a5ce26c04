// MemcachedStore against real memcached processes on 127.0.0.1: values larger than an item
// stored as pieces, spread over several nodes, a dead node costing misses (not errors, not
// stalls) and coming back after its breaker's wait.
#include "shared/memcached/memcached_store.h"

#include <arpa/inet.h>
#include <dirent.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <set>
#include <thread>

#include <gtest/gtest.h>

#include "support/manual_env.h"
#include "support/memcached_server.h"

namespace hubfs {
namespace HUBFS_UNITY_ID {

using testing::MemcachedServer;

std::string value_of(size_t n, int seed) {
  std::string s(n, '\0');
  for (size_t i = 0; i < n; ++i) s[i] = static_cast<char>((i * 131 + seed * 7) & 0xff);
  return s;
}

std::optional<std::string> get_one(MemcachedStore& t, const std::string& key, size_t size) {
  return t.get({SharedGet{key, size}}, Deadline::never()).at(0);
}

// Limits for tests that check exact answers from healthy nodes: a loaded test machine (three
// builds beside the suite) can take longer than the production limits to move a MiB over
// loopback, which would turn a timing limit into a false failure. Tests of the limits
// themselves keep the defaults.
MemcachedStoreOptions patient_options() {
  MemcachedStoreOptions o;
  o.env = &Env::real();
  o.timeout = std::chrono::seconds(20);
  o.lookup_budget = std::chrono::seconds(60);
  o.store_timeout = std::chrono::seconds(20);
  o.store_budget = std::chrono::seconds(60);
  return o;
}

TEST(SharedCacheServers, ParsesListsSchemesAndSeparatorsAndRefusesOthers) {
  auto a = parse_shared_cache_servers("memcached://10.0.0.2:11300,10.0.0.1");
  ASSERT_TRUE(a.ok()) << a.status().message();
  EXPECT_EQ(*a, (std::vector<std::string>{"10.0.0.1:11211", "10.0.0.2:11300"}));
  auto b = parse_shared_cache_servers("h1:1+h2:2");
  ASSERT_TRUE(b.ok());
  EXPECT_EQ(*b, (std::vector<std::string>{"h1:1", "h2:2"}));
  EXPECT_FALSE(parse_shared_cache_servers("redis://h:6379").ok());
  EXPECT_FALSE(parse_shared_cache_servers("h:0").ok());
  EXPECT_FALSE(parse_shared_cache_servers("h:99999").ok());
  EXPECT_FALSE(parse_shared_cache_servers("").ok());
  EXPECT_FALSE(parse_shared_cache_servers("bad/host").ok());
  EXPECT_NE(parse_shared_cache_servers("redis://h").status().message().find("memcached"), std::string::npos);
  // The tier normalises what it is given: a port-less host is port 11211.
  MemcachedStoreOptions o;
  o.env = &Env::real();
  o.servers = {"localhost"};
  auto t = MemcachedStore::create(o);
  ASSERT_TRUE(t.ok()) << t.status().message();
  EXPECT_EQ((*t)->describe(), "memcached localhost:11211");
}

TEST(MemcachedStore, StoresBlockSizedValuesAsPiecesAcrossNodesAndReadsThemBack) {
  auto n1 = MemcachedServer::start();
  auto n2 = MemcachedServer::start();
  auto n3 = MemcachedServer::start();
  MemcachedStoreOptions o = patient_options();
  o.servers = {n1->address(), n2->address(), n3->address()};
  auto tier = MemcachedStore::create(o);
  ASSERT_TRUE(tier.ok()) << tier.status().message();
  MemcachedStore& t = **tier;
  // 1 MiB + an envelope: more than memcached's default 1 MiB item, so two pieces.
  const size_t big = (1u << 20) + 100;
  for (int i = 0; i < 12; ++i) t.put("k" + std::to_string(i), value_of(big, i));
  t.put("small", "tiny");
  t.wait_idle();
  EXPECT_EQ(t.stats().puts, 13u);
  EXPECT_EQ(t.stats().put_errors, 0u);
  std::vector<SharedGet> gets;
  for (int i = 0; i < 12; ++i) gets.push_back({"k" + std::to_string(i), big});
  gets.push_back({"small", 4});
  gets.push_back({"absent", 10});
  gets.push_back({"k0", big - 1});  // wrong size: not this value
  auto got = t.get(gets, Deadline::never());
  ASSERT_EQ(got.size(), 15u);
  for (int i = 0; i < 12; ++i) {
    ASSERT_TRUE(got[i]) << i;
    EXPECT_EQ(*got[i], value_of(big, i)) << i;
  }
  EXPECT_EQ(got[12], std::optional<std::string>("tiny"));
  EXPECT_FALSE(got[13]);
  // Something else is under k0 (a value of another size): not absent, and not this value.
  ASSERT_TRUE(got[14]);
  EXPECT_NE(got[14]->size(), big - 1);
  EXPECT_EQ(t.stats().get_errors, 0u);

  // Spread: every node holds some of 60 keys (the chance that one holds none is 3 * (2/3)^60).
  for (int i = 0; i < 60; ++i) t.put("s" + std::to_string(i), "v");
  t.wait_idle();
  std::set<int> holding;
  for (auto* n : {n1.get(), n2.get(), n3.get()}) {
    MemcachedStoreOptions one;
    one.env = &Env::real();
    one.servers = {n->address()};
    auto single = MemcachedStore::create(one);
    for (int i = 0; i < 60; ++i)
      if (get_one(**single, "s" + std::to_string(i), 1)) holding.insert(n->port());
  }
  EXPECT_EQ(holding.size(), 3u);

  // A delete removes every piece.
  t.remove("k3", big);
  t.wait_idle();
  EXPECT_FALSE(get_one(t, "k3", big));
}

// Lookups one after another reuse pooled connections: hits, misses, a key asked twice in one
// lookup and a value of another size each come back right every time (a connection left with
// part of an answer unread would hand the next lookup the wrong bytes).
TEST(MemcachedStore, RepeatedLookupsOnPooledConnectionsStayExact) {
  auto n1 = MemcachedServer::start();
  auto n2 = MemcachedServer::start();
  MemcachedStoreOptions o = patient_options();
  o.servers = {n1->address(), n2->address()};
  auto tier = MemcachedStore::create(o);
  ASSERT_TRUE(tier.ok()) << tier.status().message();
  MemcachedStore& t = **tier;
  const size_t big = (1u << 20) + 300;  // two pieces each
  for (int i = 0; i < 4; ++i) t.put("r" + std::to_string(i), value_of(big, 20 + i));
  t.put("short", value_of(10, 3));
  t.wait_idle();
  for (int round = 0; round < 6; ++round) {
    const int k = round % 4;
    std::vector<SharedGet> gets = {{"r" + std::to_string(k), big},
                                   {"missing" + std::to_string(round), big},
                                   {"short", 10},
                                   {"r" + std::to_string((k + 1) % 4), big},
                                   {"r" + std::to_string(k), big},
                                   {"r" + std::to_string((k + 2) % 4), big - 7}};  // not this size
    auto got = t.get(gets, Deadline::never());
    ASSERT_EQ(got.size(), 6u);
    EXPECT_EQ(got[0], std::optional<std::string>(value_of(big, 20 + k))) << round;
    EXPECT_FALSE(got[1]) << round;
    EXPECT_EQ(got[2], std::optional<std::string>(value_of(10, 3))) << round;
    EXPECT_EQ(got[3], std::optional<std::string>(value_of(big, 20 + (k + 1) % 4))) << round;
    EXPECT_EQ(got[4], got[0]) << round;
    ASSERT_TRUE(got[5]) << round;  // another value's pieces: there, and of the wrong size
    EXPECT_NE(got[5]->size(), big - 7) << round;
  }
  EXPECT_EQ(t.stats().get_errors, 0u);
}

// Threads of this process now (one entry per thread in /proc/self/task).
size_t live_threads() {
  size_t n = 0;
  if (DIR* d = opendir("/proc/self/task")) {
    while (dirent* e = readdir(d))
      if (e->d_name[0] != '.') ++n;
    closedir(d);
  }
  return n;
}

// Lookups spanning several nodes, from many threads at once, are exact and start no thread:
// the other nodes are asked from the tier's fixed lookup threads, or by the caller itself.
TEST(MemcachedStore, ConcurrentLookupsAcrossNodesAreExactAndStartNoThreads) {
  auto n1 = MemcachedServer::start();
  auto n2 = MemcachedServer::start();
  auto n3 = MemcachedServer::start();
  MemcachedStoreOptions o = patient_options();
  o.servers = {n1->address(), n2->address(), n3->address()};
  auto tier = MemcachedStore::create(o);
  ASSERT_TRUE(tier.ok()) << tier.status().message();
  MemcachedStore& t = **tier;
  for (int i = 0; i < 12; ++i) t.put("c" + std::to_string(i), value_of(5000 + i, i));
  t.wait_idle();
  constexpr int kCallers = 6;
  std::atomic<int> started{0};
  std::atomic<bool> stop{false};
  std::atomic<size_t> most{0};
  const size_t before = live_threads();  // the tier's writers and lookup threads are running
  std::thread watcher([&] {
    while (!stop) {
      size_t now = live_threads();
      size_t seen = most.load();
      while (now > seen && !most.compare_exchange_weak(seen, now)) {
      }
      std::this_thread::yield();
    }
  });
  std::atomic<int> wrong{0};
  std::vector<std::thread> callers;
  for (int c = 0; c < kCallers; ++c) {
    callers.emplace_back([&, c] {
      ++started;
      for (int round = 0; round < 30; ++round) {
        std::vector<SharedGet> gets;
        for (int i = 0; i < 12; ++i) gets.push_back({"c" + std::to_string((i + c + round) % 12), 5000u + (i + c + round) % 12});
        auto got = t.get(gets, Deadline::never());
        for (int i = 0; i < 12; ++i) {
          const int k = (i + c + round) % 12;
          if (!got[i] || *got[i] != value_of(5000 + k, k)) ++wrong;
        }
      }
    });
  }
  for (auto& th : callers) th.join();
  stop = true;
  watcher.join();
  EXPECT_EQ(wrong.load(), 0);
  EXPECT_EQ(t.stats().get_errors, 0u);
  // The callers and the watcher are the only threads added (a thread per other node per lookup
  // would add up to 2 per caller).
  EXPECT_LE(most.load(), before + kCallers + 1);
}

// A listening TCP socket on 127.0.0.1 and a free port (its address in *addr), or -1.
int listen_on_loopback(int backlog, sockaddr_in* addr) {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) return -1;
  *addr = sockaddr_in{};
  addr->sin_family = AF_INET;
  addr->sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof(*addr);
  if (bind(fd, reinterpret_cast<sockaddr*>(addr), sizeof(*addr)) != 0 || listen(fd, backlog) != 0 ||
      getsockname(fd, reinterpret_cast<sockaddr*>(addr), &len) != 0) {
    close(fd);
    return -1;
  }
  return fd;
}

// A node that answers every lookup with endless well-formed answers and never its closing NOOP
// (a broken server, or not memcached) costs a miss and an error, not a lookup that never returns.
TEST(MemcachedStore, ANodeThatNeverEndsItsAnswerIsAFailureNotAHang) {
  sockaddr_in a{};
  const int fd = listen_on_loopback(8, &a);
  ASSERT_GE(fd, 0) << strerror(errno);
  std::atomic<bool> stop{false};
  std::thread server([&] {
    int c = accept(fd, nullptr, nullptr);
    if (c < 0) return;
    // An empty GETKQ answer (opcode 0x0d, status 0, no key, no body), over and over.
    unsigned char answer[24] = {0x81, 0x0d};
    while (!stop.load() && send(c, answer, sizeof(answer), MSG_NOSIGNAL) == static_cast<ssize_t>(sizeof(answer))) {
    }
    close(c);
  });
  MemcachedStoreOptions o;
  o.env = &Env::real();
  o.servers = {"127.0.0.1:" + std::to_string(ntohs(a.sin_port))};
  auto tier = MemcachedStore::create(o);
  ASSERT_TRUE(tier.ok());
  auto t0 = std::chrono::steady_clock::now();
  EXPECT_FALSE(get_one(**tier, "k0", 400));
  EXPECT_LT(std::chrono::steady_clock::now() - t0, std::chrono::seconds(5));  // against a hang only
  EXPECT_EQ((*tier)->stats().get_errors, 1u);
  stop = true;
  tier->reset();  // closes its connection: the server's send fails and it returns
  shutdown(fd, SHUT_RDWR);
  server.join();
  close(fd);
}

TEST(MemcachedStore, ADeadNodeCostsMissesItsBreakerOpensAndItIsUsedAgainOnceBack) {
  auto n1 = MemcachedServer::start();
  auto n2 = MemcachedServer::start();
  testing::ManualEnv env;  // the breakers' clock: the test moves it past their wait
  MemcachedStoreOptions o;
  o.servers = {n1->address(), n2->address()};
  o.breaker.failures_to_open = 2;
  o.breaker.open_for = std::chrono::milliseconds(200);
  o.env = &env;
  auto tier = MemcachedStore::create(o);
  ASSERT_TRUE(tier.ok());
  MemcachedStore& t = **tier;
  for (int i = 0; i < 20; ++i) t.put("k" + std::to_string(i), value_of(1000, i));
  t.wait_idle();
  std::vector<SharedGet> gets;
  for (int i = 0; i < 20; ++i) gets.push_back({"k" + std::to_string(i), 1000});
  auto before = t.get(gets, Deadline::never());
  for (auto& v : before) ASSERT_TRUE(v);

  n2->kill();
  // Lookups answer (no stall past the timeouts), the dead node's keys miss, the others hit.
  for (int round = 0; round < 4; ++round) {
    auto t0 = std::chrono::steady_clock::now();
    auto got = t.get(gets, Deadline::never());
    auto took = std::chrono::steady_clock::now() - t0;
    EXPECT_LT(took, std::chrono::seconds(5));  // a bound against a hang, not a timing claim
    int hits = 0;
    for (size_t i = 0; i < got.size(); ++i) {
      if (got[i]) {
        ++hits;
        EXPECT_EQ(*got[i], value_of(1000, static_cast<int>(i)));
      }
    }
    EXPECT_GT(hits, 0);
    EXPECT_LT(hits, 20);
  }
  const SharedStoreStats s = t.stats();
  EXPECT_GE(s.get_errors, 2u);
  EXPECT_GT(s.skipped, 0u) << "the breaker never opened: the dead node was asked every time";
  EXPECT_EQ(s.nodes_down, 1u);

  // Back (empty) on the same port: after the breaker's wait, its keys are stored and served again.
  n2->restart();
  // Still open: the breaker's wait has not passed, so the node is not asked.
  EXPECT_EQ(t.stats().nodes_down, 1u);
  // Past the longest wait (max_open_for): the next lookup probes the node, which answers, and
  // the breaker closes.
  env.advance(o.breaker.max_open_for);
  (void)t.get(gets, Deadline::never());
  ASSERT_EQ(t.stats().nodes_down, 0u) << "the restarted node was never used again";
  for (int i = 0; i < 20; ++i) t.put("k" + std::to_string(i), value_of(1000, i));
  t.wait_idle();
  auto after = t.get(gets, Deadline::never());
  for (size_t i = 0; i < after.size(); ++i) EXPECT_TRUE(after[i]) << i;
}

TEST(MemcachedStore, NothingListeningIsNeverAnErrorOnlyMisses) {
  auto n = MemcachedServer::start();
  const std::string address = n->address();
  n->kill();
  MemcachedStoreOptions o;
  o.env = &Env::real();
  o.servers = {address};
  auto tier = MemcachedStore::create(o);
  ASSERT_TRUE(tier.ok());
  for (int i = 0; i < 10; ++i) EXPECT_FALSE(get_one(**tier, "k", 10));
  (*tier)->put("k", "v");
  (*tier)->wait_idle();
  EXPECT_EQ((*tier)->stats().puts, 0u);
  EXPECT_EQ((*tier)->stats().nodes_down, 1u);
}

// A node that accepts connections and never answers (hung, or a black-holed route): lookups
// give up after the short timeout, and stores queue behind it until the queue is full, then drop.
TEST(MemcachedStore, ASilentNodeTimesOutAndAFullQueueDropsInsteadOfBlocking) {
  sockaddr_in a{};
  const int fd = listen_on_loopback(64, &a);
  ASSERT_GE(fd, 0) << strerror(errno);
  MemcachedStoreOptions o;
  o.env = &Env::real();
  o.servers = {"127.0.0.1:" + std::to_string(ntohs(a.sin_port))};
  o.queue_bytes = 1000;
  auto tier = MemcachedStore::create(o);
  ASSERT_TRUE(tier.ok());
  for (int i = 0; i < 50; ++i) (*tier)->put("k" + std::to_string(i), std::string(400, 'x'));
  EXPECT_GT((*tier)->stats().dropped, 0u);
  auto t0 = std::chrono::steady_clock::now();
  EXPECT_FALSE(get_one(**tier, "k0", 400));
  EXPECT_LT(std::chrono::steady_clock::now() - t0, std::chrono::seconds(5));  // against a hang only
  tier->reset();
  close(fd);
}

}  // namespace
}  // namespace hubfs
