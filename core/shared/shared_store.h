// The shared block tier: an optional second cache between the local disk cache and the Hub,
// held by a distributed cache engine a cluster already runs (memcached today: see
// shared/memcached/memcached_store.h), so many nodes reading one dataset fetch each block from
// the Hub once between them.
//
// One name per role: SharedStore, the interface to the engine's store of values (here);
// MemcachedStore, its memcached implementation (shared/memcached/); SharedStoreKey, the key that
// authenticates the values (here); SharedBlocks and SharedBlockTier, the reader's side, which
// makes the store a BlockTier. That side lives in core/reader: it implements the reader's
// BlockTier and BlockReader builds it, so in core/shared the two directories would include each
// other. This seam sits below core/cache (whose verify deletes bad blocks from the store).
//
// Three pieces live here, free of any engine and of FUSE:
//  - SharedStore, the seam an engine implements (raw values under string keys; gets bounded by the
//    caller's deadline, puts asynchronous and droppable). Redis Cluster would be a second
//    implementation of the same four calls.
//  - the envelope every value is wrapped in: the block's key echoed, its length, and an
//    HMAC-SHA-256 under a key the cluster's machines share (SharedStoreKey), checked on every get,
//    so a value that is torn, truncated, mis-keyed, flipped or forged (memcached has no access
//    control: anyone who reaches it can write) is counted corrupt and never served;
//  - CircuitBreaker, which stops asking a failing node for a while and probes it again later,
//    with an injectable clock so it is tested without sleeping.
//
// Failure of the tier is never an error for a reader: every problem costs a Hub fetch.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "common/deadline.h"
#include "common/env.h"
#include "common/status.h"

namespace hubfs {

// The secret that authenticates the tier's values: the bytes of a key file every machine of the
// cluster holds (`--shared-cache-key-file`; make one with `head -c 32 /dev/urandom > F`). Only
// machines holding it can write values the others accept.
class SharedStoreKey {
 public:
  // At least kMinBytes (a guessable key would authenticate nothing), at most kMaxBytes (a big
  // file is not a key). Errors name the file and say how to make a key.
  static Result<SharedStoreKey> from_file(const std::string& path);
  static Result<SharedStoreKey> from_bytes(std::string secret);  // tests
  static constexpr size_t kMinBytes = 16;
  static constexpr size_t kMaxBytes = 4096;

  const std::string& secret() const { return secret_; }
  // 8 hex digits derived from the secret (HMAC of a constant: says nothing about it), part of
  // every engine key, so clusters (or mounts) with different keys never read each other's values
  // as corrupt nor overwrite them.
  const std::string& id() const { return id_; }

 private:
  std::string secret_;
  std::string id_;
};

// What identifies a block across machines: the file's content id (already carrying a
// non-default block size, see BlockReader::cache_id), the block size in bytes and the index.
struct SharedBlockKey {
  std::string key_id;  // SharedStoreKey::id()
  std::string content_id;
  uint32_t block_size = 0;
  uint64_t index = 0;

  // The engine key: printable ASCII without spaces, well under memcached's 250-byte limit
  // ("hubfs:v2:<8 hex>:sha256:<64 hex>:1048576:123" is ~100 bytes).
  std::string str() const;
};

// One item to look up: its key and the exact size of the value stored under it (the envelope
// of a block of known length), so an engine that splits values into pieces knows how many.
struct SharedGet {
  std::string key;
  size_t value_size = 0;
};

// Counters an engine keeps (all since the tier was created).
struct SharedStoreStats {
  uint64_t get_errors = 0;     // lookups that failed (deadline, timeout, connection, protocol)
  uint64_t put_errors = 0;     // stores that failed
  uint64_t skipped = 0;        // lookups or stores not tried: the node's breaker was open
  uint64_t puts = 0;           // values stored
  uint64_t put_bytes = 0;      // their bytes
  uint64_t dropped = 0;        // stores dropped: the queue was full
  uint64_t queued = 0;         // stores and deletes waiting now
  uint64_t nodes = 0;          // nodes configured
  uint64_t nodes_down = 0;     // nodes whose breaker is open now
};

class SharedStore {
 public:
  virtual ~SharedStore() = default;
  // One answer per request, in order: the value if the engine has it whole (exactly value_size
  // bytes); a value of any other size if the engine holds something else under the key (a
  // truncated value, or pieces of another length: the caller counts it corrupt); nullopt when
  // absent, or not known by the deadline (timed out, node down). Returns by `deadline` (plus a
  // scheduling delay), however slowly a node answers; thread-safe.
  virtual std::vector<std::optional<std::string>> get(const std::vector<SharedGet>& items,
                                                      const Deadline& deadline) = 0;
  // Queues a store and returns at once; dropped (and counted) when the queue is full.
  virtual void put(std::string key, std::string value) = 0;
  // Queues a delete of the value of value_size bytes under key (after the puts queued before
  // it) and returns at once.
  virtual void remove(std::string key, size_t value_size) = 0;
  virtual SharedStoreStats stats() const = 0;
  // Human description for logs and status, e.g. "memcached 10.0.0.1:11211,10.0.0.2:11211".
  virtual std::string describe() const = 0;
};

// The envelope: a fixed header, the key echoed, the block, then a MAC of all of it.
//   "HUBFSSB" + version byte (2) | u64 block length | u16 key length | key | block |
//   HMAC-SHA-256(secret, everything before it)                          (little endian)
// The MAC catches torn, truncated and flipped values and, unlike a CRC, forged ones: a writer
// without the secret cannot make a value the readers accept. It covers the echoed key, so a valid
// value copied under another key (a replay, an engine bug) is refused too. Deterministic, so two
// machines that store the same block store the same bytes (an engine splitting values may mix
// their pieces).
namespace shared_envelope {

size_t size(const std::string& key, size_t block_length);
std::string wrap(const SharedStoreKey& secret, const std::string& key, std::string_view block);
// The block inside `value` if it is a well-formed envelope for `key` holding exactly
// `block_length` bytes whose MAC under `secret` matches; else nullopt.
std::optional<std::string_view> unwrap(const SharedStoreKey& secret, const std::string& key, size_t block_length,
                                       std::string_view value);

}  // namespace shared_envelope

// Per node: closed (ask it) until `failures_to_open` failures in a row, then open (do not ask)
// for `open_for`, then half-open: exactly one caller probes; its success closes the breaker, its
// failure opens it again for twice as long (capped at `max_open_for`), so a node that stays dead
// is asked rarely and one that comes back is used again within `open_for`.
class CircuitBreaker {
 public:
  struct Options {
    // Three in a row: one lost packet or one slow answer does not take a node out.
    int failures_to_open = 3;
    // Long enough that a dead node costs a few probes a minute, short enough that a restarted
    // one (memcached restarts in well under a second) is back in use soon.
    std::chrono::milliseconds open_for{2000};
    std::chrono::milliseconds max_open_for{30'000};
  };
  // Reads `env`'s clock (tests pass a manual Env); `env` must outlive the breaker.
  CircuitBreaker(Options options, Env& env);

  // May this caller ask the node now? In the half-open state only the first caller may (the
  // probe); it must report success() or failure().
  bool allow();
  void success();
  void failure();
  bool open() const;  // not asking now (open, or a probe under way)

 private:
  MonotonicClock::time_point now() const;
  const Options options_;
  Env& env_;
  mutable std::mutex mu_;  // a leaf: never held across a network call
  int failures_ = 0;
  bool is_open_ = false;
  bool probing_ = false;
  std::chrono::milliseconds current_open_for_;
  MonotonicClock::time_point reopen_at_{};
};

}  // namespace hubfs
