// MemcachedStore: the shared tier's store on memcached (see shared/shared_store.h for the
// contract; a store of values, not a BlockTier: reader/shared_block_tier.h makes one of it).
//
// Why memcached (and not Redis Cluster): clusters run it already, it is one package and one
// process per node with nothing to configure, its LRU evicts on its own, and its binary protocol
// is a few lines to speak (our own, on plain sockets, with a bound on every wait and on every
// whole call). A server list is all a client needs: each block goes to one node chosen by
// rendezvous hashing over the list (consistent: removing a node moves only that node's blocks,
// and every mount that lists the same servers agrees). Redis Cluster would be another SharedStore
// behind the same seam.
//
// memcached stores at most 1 MiB per item by default (-I), header and key included, and a hubfs
// block is 1 MiB before its envelope: a value larger than `piece_bytes` is stored as equal
// pieces on the same node under "<key>#<i>/<n>", so stock memcached works and -I needs no
// change. A get needs every piece (any missing one is a miss, and the envelope's MAC covers the
// reassembled value).
//
// Each node has its own circuit breaker and its own pool of connections, for lookups (which
// receive each value straight into place, see Node::take_socket), stores and deletes alike; one
// that failed is closed, not reused, and so are the node's idle ones. Stores and deletes run on a
// few writer threads from one bounded queue that drops rather than blocks; a key always goes to
// the same writer, so a delete never overtakes a store of the same key. Each writer is a
// one-thread executor from the Env (a TaskQueue: FIFO), which is what keeps a key's order.
#pragma once

#include <condition_variable>
#include <deque>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <unordered_map>
#include <vector>

#include "shared/shared_store.h"
#include "common/env.h"
#include "common/status.h"

namespace hubfs {

struct MemcachedStoreOptions {
  std::vector<std::string> servers;  // "host:port" (port default 11211)
  // Connect and per-wait I/O timeout of a lookup (the wait for each next piece of an answer,
  // not the whole answer). A miss costs one round trip whatever this is; only a hung node costs
  // the timeout, at most 3 times before its breaker opens. Not shorter: on a loaded machine a
  // multi-MiB multi-get waits on a busy memcached, and a lookup that times out becomes a Hub fetch
  // (docs/constants.md, MemcachedStoreOptions::timeout).
  std::chrono::milliseconds timeout{200};
  // A lookup's whole budget (inside the caller's deadline): past it, whatever has not arrived is
  // a miss and the blocks come from the Hub. A node that sends a valid answer's header and then
  // a trickle of bytes keeps every per-wait timeout happy; this ends it. One second is far more
  // than a lookup takes on a LAN, and a small part of any read's --read-timeout.
  std::chrono::milliseconds lookup_budget{1000};
  // The same for stores and deletes, which run on the writers, never on a reader's path: longer,
  // so a loaded machine does not turn slow stores into lost blocks and a tripped breaker
  // (docs/constants.md, store_timeout).
  std::chrono::milliseconds store_timeout{500};
  // A store's or delete's whole budget (all its pieces): a node answering a trickle at a time is
  // cut off, so a writer, and the unmount that waits for it, is never held for long.
  std::chrono::milliseconds store_budget{2000};
  // Largest piece stored as one item: memcached's default item limit (1 MiB) covers the item
  // header (~50 bytes), the key and its suffix too, so 1000 KiB leaves ample room.
  size_t piece_bytes = 1000 * 1024;
  // Stores waiting for the writer, in bytes: past this they are dropped (a reader never waits
  // on the shared tier). 64 MiB is 64 blocks, about a second of Hub fetching at full speed.
  size_t queue_bytes = 64ull << 20;
  CircuitBreaker::Options breaker;
  // The breakers' clock and the writers' executors. Required (no default: the stack's, or a
  // test's); must outlive the tier.
  Env* env = nullptr;
};

// "memcached://h1:11211,h2" or "h1:11211+h2:11211" (',' or '+' between servers, '+' for -o
// where ',' separates options) -> ["h1:11211", "h2:11211"]. redis:// and anything else that is not
// host[:port] is an error naming what is supported.
Result<std::vector<std::string>> parse_shared_cache_servers(const std::string& text);

class MemcachedStore : public SharedStore {
 public:
  // Contacts no server: nodes are tried (and their breakers trip) on first use, so a mount
  // never fails because the shared tier is down.
  static Result<std::unique_ptr<MemcachedStore>> create(MemcachedStoreOptions options);
  // Finishes the queued stores for up to kDrainTime, then stops the writer.
  ~MemcachedStore() override;

  std::vector<std::optional<std::string>> get(const std::vector<SharedGet>& items,
                                              const Deadline& deadline) override;
  void put(std::string key, std::string value) override;
  void remove(std::string key, size_t value_size) override;
  SharedStoreStats stats() const override;
  std::string describe() const override;

  // Waits until the writer has nothing queued or running (tests, benchmarks).
  void wait_idle();

 private:
  struct Node;
  struct Op {
    bool is_delete = false;
    std::string key;
    std::string value;  // puts
    size_t value_size = 0;
  };
  explicit MemcachedStore(MemcachedStoreOptions options);
  Node& node_for(const std::string& key);
  void get_from(Node& node, const std::vector<size_t>& which, const std::vector<SharedGet>& items,
                std::vector<std::optional<std::string>>& out, const Deadline& deadline);
  // Where one piece of a value goes: the value (items[item]), the offset, the piece's length.
  struct Piece {
    size_t item, offset, length;
  };
  // One lookup on a pooled socket (see the definition); false: the socket must not be reused.
  bool multi_get(int fd, const std::vector<std::string>& keys,
                 std::unordered_map<std::string, std::vector<Piece>>& slot,
                 std::unordered_map<size_t, std::string>& values, std::unordered_map<size_t, size_t>& missing,
                 std::unordered_map<size_t, bool>& malformed, const Deadline& deadline);
  // Maps in the pages of a value reserved for assembly (see the definition).
  static void populate(std::string& value);
  // The item keys and lengths of a value of `size` bytes stored under `key`.
  std::vector<std::pair<std::string, size_t>> pieces(const std::string& key, size_t size) const;
  // Queues op on its key's writer, unless stopping or (a put) past queue_bytes: then dropped.
  void enqueue(Op op);
  // On a writer: runs op, unless the tier began stopping since it was queued (then dropped).
  void write(const Op& op);
  void run(const Op& op);

  const MemcachedStoreOptions options_;
  std::vector<std::unique_ptr<Node>> nodes_;

  // A leaf: never held across a network call nor while posting to a writer. (Each node's pool
  // mutex and breaker mutex are leaves too, never taken under this one.)
  mutable std::mutex mu_;  // guards everything below but writers_
  std::condition_variable idle_cv_;  // queued_ops_ and writing_ reached 0, or stop_
  size_t queued_ops_ = 0;
  size_t queued_bytes_ = 0;
  int writing_ = 0;  // ops being run by writers now
  bool stop_ = false;
  SharedStoreStats stats_;
  bool warned_too_big_ = false;
  // kWriters one-thread executors; a key always goes to the same one. Last: drained (by the
  // destructor) before anything above goes.
  std::vector<std::unique_ptr<Executor>> writers_;
  // Threads that ask the other nodes of a lookup spanning several (none with one node).
  std::unique_ptr<Executor> lookups_;
};

}  // namespace hubfs
