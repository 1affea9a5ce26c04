#include "shared/memcached_tier.h"

#include <libmemcached/memcached.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cstring>
#include <unordered_map>

#include "common/log.h"

#ifndef MADV_POPULATE_WRITE
#define MADV_POPULATE_WRITE 23  // Linux 5.14; older C libraries lack the name
#endif

namespace hubfs {

namespace {

// How long the destructor keeps storing what is queued before it gives up: an unmount stays
// prompt, and a short-lived mount still shares most of what it fetched.
constexpr std::chrono::seconds kDrainTime{2};
constexpr int kDefaultPort = 11211;
// Writer threads. A store is a round trip per piece, and one writer fell behind a mount reading
// from the Hub at ~100 MB/s on this 2-core machine (bench/shared_tier_bench.py: 1-10% of the
// blocks dropped); four keep up.
constexpr size_t kWriters = 4;

// Rendezvous hashing: the node with the highest score for a key owns it. FNV-1a then a
// splitmix64 finaliser: stable across machines and builds (std::hash is neither).
uint64_t score(const std::string& node, const std::string& key) {
  uint64_t h = 1469598103934665603ull;
  auto mix = [&](const std::string& s) {
    for (unsigned char c : s) {
      h ^= c;
      h *= 1099511628211ull;
    }
  };
  mix(node);
  h ^= 0xff;
  h *= 1099511628211ull;
  mix(key);
  h += 0x9e3779b97f4a7c15ull;
  h = (h ^ (h >> 30)) * 0xbf58476d1ce4e5b9ull;
  h = (h ^ (h >> 27)) * 0x94d049bb133111ebull;
  return h ^ (h >> 31);
}

bool valid_host(const std::string& host) {
  if (host.empty()) return false;
  for (char c : host)
    if (!(std::isalnum(static_cast<unsigned char>(c)) || c == '.' || c == '-' || c == '_')) return false;
  return true;
}

}  // namespace

Result<std::vector<std::string>> parse_shared_cache_servers(const std::string& text) {
  std::vector<std::string> out;
  std::string item;
  auto finish = [&]() -> Status {
    std::string s = item;
    item.clear();
    if (s.empty()) return Status::Ok();
    const std::string scheme_sep = "://";
    if (auto pos = s.find(scheme_sep); pos != std::string::npos) {
      std::string scheme = s.substr(0, pos);
      if (scheme != "memcached" && scheme != "memcache") {
        return InvalidArgument("--shared-cache " + text + ": '" + scheme + "://' is not supported; hubfs "
                               "speaks memcached (memcached://HOST[:PORT] or HOST[:PORT])");
      }
      s = s.substr(pos + scheme_sep.size());
    }
    while (!s.empty() && s.back() == '/') s.pop_back();
    std::string host = s;
    int port = kDefaultPort;
    if (auto colon = s.rfind(':'); colon != std::string::npos) {
      host = s.substr(0, colon);
      std::string p = s.substr(colon + 1);
      char* end = nullptr;
      long v = p.empty() ? 0 : strtol(p.c_str(), &end, 10);
      if (p.empty() || *end || v < 1 || v > 65535) {
        return InvalidArgument("--shared-cache " + text + ": '" + p + "' is not a port (1-65535)");
      }
      port = static_cast<int>(v);
    }
    if (!valid_host(host)) {
      return InvalidArgument("--shared-cache " + text + ": '" + host + "' is not a host name or IPv4 "
                             "address (give HOST[:PORT], servers separated by ',' or '+')");
    }
    out.push_back(host + ":" + std::to_string(port));
    return Status::Ok();
  };
  for (char c : text) {
    if (c == ',' || c == '+' || c == ';' || std::isspace(static_cast<unsigned char>(c))) {
      if (Status s = finish(); !s.ok()) return s;
    } else {
      item.push_back(c);
    }
  }
  if (Status s = finish(); !s.ok()) return s;
  if (out.empty()) return InvalidArgument("--shared-cache: no server given (HOST[:PORT][,HOST[:PORT]...])");
  std::sort(out.begin(), out.end());
  out.erase(std::unique(out.begin(), out.end()), out.end());
  return out;
}

// The wait for each answer on this connection, set before every call (lookups and stores
// share a pool but not a timeout).
static void set_poll_timeout(memcached_st* m, std::chrono::milliseconds t) {
  memcached_behavior_set(m, MEMCACHED_BEHAVIOR_POLL_TIMEOUT, static_cast<uint64_t>(t.count()));
}

// One memcached server: its breaker and a pool of connections to it alone (so a dead node
// never stalls a lookup on another).
struct MemcachedTier::Node {
  std::string name;  // host:port, as hashed
  std::string host;
  int port = kDefaultPort;
  CircuitBreaker breaker;
  std::mutex mu;
  std::vector<memcached_st*> idle;

  Node(std::string n, CircuitBreaker::Options o, CircuitBreaker::Clock c) : name(std::move(n)), breaker(o, std::move(c)) {
    auto colon = name.rfind(':');
    host = name.substr(0, colon);
    port = std::stoi(name.substr(colon + 1));
  }
  ~Node() {
    for (memcached_st* m : idle) memcached_free(m);
  }

  memcached_st* take(std::chrono::milliseconds timeout) {
    {
      std::lock_guard<std::mutex> lock(mu);
      if (!idle.empty()) {
        memcached_st* m = idle.back();
        idle.pop_back();
        return m;
      }
    }
    memcached_st* m = memcached_create(nullptr);
    if (!m) return nullptr;
    const uint64_t ms = static_cast<uint64_t>(timeout.count());
    memcached_behavior_set(m, MEMCACHED_BEHAVIOR_BINARY_PROTOCOL, 1);
    memcached_behavior_set(m, MEMCACHED_BEHAVIOR_TCP_NODELAY, 1);
    memcached_behavior_set(m, MEMCACHED_BEHAVIOR_NO_BLOCK, 1);
    memcached_behavior_set(m, MEMCACHED_BEHAVIOR_CONNECT_TIMEOUT, ms);
    memcached_behavior_set(m, MEMCACHED_BEHAVIOR_POLL_TIMEOUT, ms);
    memcached_behavior_set(m, MEMCACHED_BEHAVIOR_RCV_TIMEOUT, ms * 1000);
    memcached_behavior_set(m, MEMCACHED_BEHAVIOR_SND_TIMEOUT, ms * 1000);
    // Our breaker decides when to ask again; a connection that failed is discarded, so
    // libmemcached's own retry bookkeeping never holds a node back.
    memcached_behavior_set(m, MEMCACHED_BEHAVIOR_SERVER_FAILURE_LIMIT, 1);
    if (memcached_server_add(m, host.c_str(), static_cast<in_port_t>(port)) != MEMCACHED_SUCCESS) {
      memcached_free(m);
      return nullptr;
    }
    return m;
  }
  void give_back(memcached_st* m, bool healthy) {
    if (!healthy) {
      // The node failed: its other idle connections are most likely dead too (it was killed or
      // restarted). Dropping them all lets the breaker's next probe open a fresh one, instead
      // of failing on a stale socket and doubling the wait.
      memcached_free(m);
      std::vector<memcached_st*> stale;
      {
        std::lock_guard<std::mutex> lock(mu);
        stale.swap(idle);
      }
      for (memcached_st* s : stale) memcached_free(s);
      return;
    }
    std::lock_guard<std::mutex> lock(mu);
    idle.push_back(m);
  }
};

MemcachedTier::MemcachedTier(MemcachedTierOptions options) : options_(std::move(options)) {
  for (const auto& s : options_.servers) nodes_.push_back(std::make_unique<Node>(s, options_.breaker, options_.clock));
  stats_.nodes = nodes_.size();
  for (size_t i = 0; i < kWriters; ++i) writers_.emplace_back([this, i] { writer_loop(i); });
}

Result<std::unique_ptr<MemcachedTier>> MemcachedTier::create(MemcachedTierOptions options) {
  if (options.servers.empty()) return InvalidArgument("the shared cache needs at least one memcached server");
  // Normalised (host:port, sorted): every mount must hash over the same names to agree.
  std::string all;
  for (const auto& s : options.servers) all += s + ",";
  auto parsed = parse_shared_cache_servers(all);
  if (!parsed.ok()) return parsed.status();
  options.servers = *parsed;
  if (options.piece_bytes == 0) return InvalidArgument("shared cache piece size must be positive");
  return std::unique_ptr<MemcachedTier>(new MemcachedTier(std::move(options)));
}

MemcachedTier::~MemcachedTier() {
  {
    std::unique_lock<std::mutex> lock(mu_);
    idle_cv_.wait_for(lock, kDrainTime, [&] { return queue_.empty() && writing_ == 0; });
    stop_ = true;
    stats_.dropped += queue_.size();
    queue_.clear();
    queued_bytes_ = 0;
  }
  work_cv_.notify_all();
  for (auto& w : writers_) w.join();
}

std::string MemcachedTier::describe() const {
  std::string s = "memcached ";
  for (size_t i = 0; i < nodes_.size(); ++i) s += (i ? "," : "") + nodes_[i]->name;
  return s;
}

MemcachedTier::Node& MemcachedTier::node_for(const std::string& key) {
  Node* best = nodes_.front().get();
  uint64_t best_score = 0;
  for (auto& n : nodes_) {
    uint64_t s = score(n->name, key);
    if (s >= best_score) {
      best_score = s;
      best = n.get();
    }
  }
  return *best;
}

std::vector<std::pair<std::string, size_t>> MemcachedTier::pieces(const std::string& key, size_t size) const {
  const size_t n = std::max<size_t>(1, (size + options_.piece_bytes - 1) / options_.piece_bytes);
  if (n == 1) return {{key, size}};
  // Equal pieces (the last one shorter by the remainder): no tiny tail item in its own slab.
  const size_t each = (size + n - 1) / n;
  std::vector<std::pair<std::string, size_t>> out;
  for (size_t i = 0; i < n; ++i) {
    out.emplace_back(key + "#" + std::to_string(i) + "/" + std::to_string(n), std::min(each, size - i * each));
  }
  return out;
}

std::vector<std::optional<std::string>> MemcachedTier::get(const std::vector<SharedGet>& items) {
  std::vector<std::optional<std::string>> out(items.size());
  if (items.empty()) return out;
  // Group by node: one multi-get per node for all the pieces it holds, the nodes asked in
  // parallel (a read-ahead of 8 blocks spans every node; one at a time would add their times).
  std::unordered_map<Node*, std::vector<size_t>> by_node;
  for (size_t i = 0; i < items.size(); ++i) by_node[&node_for(items[i].key)].push_back(i);
  std::vector<std::thread> helpers;
  auto it = by_node.begin();
  for (auto other = std::next(it); other != by_node.end(); ++other) {
    Node* node = other->first;
    const std::vector<size_t>* which = &other->second;
    helpers.emplace_back([this, node, which, &items, &out] { get_from(*node, *which, items, out); });
  }
  if (it != by_node.end()) get_from(*it->first, it->second, items, out);  // one node on this thread
  for (auto& t : helpers) t.join();
  return out;
}

// Maps in the pages of a reserved value with one call, before its pieces are copied in: a fresh
// 1 MiB value otherwise costs 256 page faults as the copy first touches each page (perf: a fifth
// of the daemon's CPU in a cold read from the tier; populating first took 200 such values from
// 103-108 ms to 65-69 ms here). Kernels before 5.14 refuse the advice: the copy faults as before.
void MemcachedTier::populate(std::string& value) {
  const uintptr_t page = static_cast<uintptr_t>(sysconf(_SC_PAGESIZE));
  const uintptr_t begin = (reinterpret_cast<uintptr_t>(value.data()) + page - 1) & ~(page - 1);
  const uintptr_t end = (reinterpret_cast<uintptr_t>(value.data()) + value.capacity()) & ~(page - 1);
  if (end > begin) (void)madvise(reinterpret_cast<void*>(begin), end - begin, MADV_POPULATE_WRITE);
}

// Writes one piece of a value at its offset. Pieces arrive in the order asked (one connection
// answers in order), so each is appended to a value reserved at its full size and nothing is
// zero-filled first; one that arrives early is written past a zero-filled gap, which the piece
// it skipped fills later.
void MemcachedTier::place_piece(std::string& value, size_t offset, std::string_view piece) {
  if (offset == value.size()) {
    value.append(piece);
    return;
  }
  if (value.size() < offset + piece.size()) value.resize(offset + piece.size());
  std::memcpy(value.data() + offset, piece.data(), piece.size());
}

// Fills out[i] for each i in `which` (all owned by `node`; other threads fill other slots).
void MemcachedTier::get_from(Node& node, const std::vector<size_t>& which, const std::vector<SharedGet>& items,
                             std::vector<std::optional<std::string>>& out) {
  if (!node.breaker.allow()) {
    std::lock_guard<std::mutex> lock(mu_);
    stats_.skipped += which.size();
    return;
  }
  memcached_st* m = node.take(options_.timeout);
  if (!m) {
    node.breaker.failure();
    std::lock_guard<std::mutex> lock(mu_);
    stats_.get_errors += which.size();
    return;
  }
  set_poll_timeout(m, options_.timeout);
  // Each value is assembled in place: pieces are copied once, straight to their offset (see
  // place_piece: in the usual order, appended, so no value is zero-filled first).
  struct Piece {
    size_t item, offset, length;
  };
  std::vector<std::string> keys;
  std::unordered_map<std::string, std::vector<Piece>> slot;  // a key asked twice answers both
  std::unordered_map<size_t, std::string> values;
  std::unordered_map<size_t, size_t> missing;  // pieces not yet arrived, per item
  for (size_t i : which) {
    values[i].reserve(items[i].value_size);
    populate(values[i]);
    size_t offset = 0;
    for (auto& [key, length] : pieces(items[i].key, items[i].value_size)) {
      auto& users = slot[key];
      if (users.empty()) keys.push_back(key);
      users.push_back(Piece{i, offset, length});
      offset += length;
      ++missing[i];
    }
  }
  std::vector<const char*> key_ptrs;
  std::vector<size_t> key_lens;
  for (const auto& k : keys) {
    key_ptrs.push_back(k.data());
    key_lens.push_back(k.size());
  }
  memcached_return_t rc = memcached_mget(m, key_ptrs.data(), key_lens.data(), keys.size());
  bool healthy = memcached_success(rc);
  if (healthy) {
    // Every answer lands in one result whose buffer is reused from piece to piece: a result of
    // its own per answer (fetch_result(m, nullptr)) allocated and faulted in a fresh buffer of
    // up to a piece's size for each and freed it again (perf: ~10% of the daemon's CPU in a
    // cold read from the tier). The result lives on this stack, not allocated by libmemcached,
    // so at the end of the answers fetch_result only resets it, and it is freed here once.
    memcached_result_st answer_storage;
    memcached_result_st* answer = memcached_result_create(m, &answer_storage);
    while (answer && memcached_fetch_result(m, answer, &rc)) {
      auto s = slot.find(std::string(memcached_result_key_value(answer), memcached_result_key_length(answer)));
      if (s == slot.end()) continue;
      for (const Piece& p : s->second) {
        // A piece of another length is not ours (another version's layout): a miss.
        if (memcached_result_length(answer) != p.length) continue;
        place_piece(values[p.item], p.offset, std::string_view(memcached_result_value(answer), p.length));
        --missing[p.item];
      }
      s->second.clear();  // a duplicate answer must not count twice
    }
    if (answer) memcached_result_free(answer);
    else healthy = false;
    // The loop ends with END (all answers read) or NOTFOUND; anything else is a failure of the
    // node (timeout, reset), not a miss.
    healthy = healthy && (rc == MEMCACHED_END || rc == MEMCACHED_NOTFOUND || rc == MEMCACHED_SUCCESS);
  }
  node.give_back(m, healthy);
  if (!healthy) {
    node.breaker.failure();
    std::lock_guard<std::mutex> lock(mu_);
    stats_.get_errors += which.size();
    return;
  }
  node.breaker.success();
  for (size_t i : which)
    if (missing[i] == 0 && values[i].size() == items[i].value_size) out[i] = std::move(values[i]);
}

void MemcachedTier::put(std::string key, std::string value) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (stop_ || queued_bytes_ + value.size() > options_.queue_bytes) {
      ++stats_.dropped;
      return;
    }
    queued_bytes_ += value.size();
    queue_.push_back(Op{false, std::move(key), std::move(value), 0});
    stats_.queued = queue_.size();
  }
  work_cv_.notify_all();
}

void MemcachedTier::remove(std::string key, size_t value_size) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (stop_) return;
    // Deletes are not bounded by bytes (they carry none) and never dropped: one undoes a store
    // of bytes that failed verification.
    queue_.push_back(Op{true, std::move(key), std::string(), value_size});
    stats_.queued = queue_.size();
  }
  work_cv_.notify_all();
}

void MemcachedTier::writer_loop(size_t shard) {
  auto mine = [&](const Op& op) { return score("", op.key) % kWriters == shard; };
  std::unique_lock<std::mutex> lock(mu_);
  for (;;) {
    std::deque<Op>::iterator next;
    work_cv_.wait(lock, [&] {
      if (stop_) return true;
      next = std::find_if(queue_.begin(), queue_.end(), mine);  // a few dozen stores (bounded by bytes)
      return next != queue_.end();
    });
    if (stop_) return;
    Op op = std::move(*next);
    queue_.erase(next);
    queued_bytes_ -= op.value.size();
    stats_.queued = queue_.size();
    ++writing_;
    lock.unlock();
    run(op);
    lock.lock();
    --writing_;
    if (queue_.empty() && writing_ == 0) idle_cv_.notify_all();
  }
}

void MemcachedTier::run(const Op& op) {
  Node& node = node_for(op.key);
  auto count = [&](uint64_t SharedTierStats::*field, uint64_t n = 1) {
    std::lock_guard<std::mutex> lock(mu_);
    stats_.*field += n;
  };
  if (!node.breaker.allow()) return count(&SharedTierStats::skipped);
  memcached_st* m = node.take(options_.timeout);
  if (!m) {
    node.breaker.failure();
    return count(&SharedTierStats::put_errors);
  }
  set_poll_timeout(m, options_.store_timeout);
  const size_t size = op.is_delete ? op.value_size : op.value.size();
  size_t pos = 0;
  memcached_return_t rc = MEMCACHED_SUCCESS;
  for (const auto& [piece_key, length] : pieces(op.key, size)) {
    if (op.is_delete) {
      rc = memcached_delete(m, piece_key.data(), piece_key.size(), 0);
      if (rc == MEMCACHED_NOTFOUND) rc = MEMCACHED_SUCCESS;
    } else {
      // No expiry: memcached's LRU decides what stays.
      rc = memcached_set(m, piece_key.data(), piece_key.size(), op.value.data() + pos, length, 0, 0);
    }
    pos += length;
    if (!memcached_success(rc)) break;
  }
  if (rc == MEMCACHED_E2BIG) {
    // The node's item limit (-I) is below our piece size: the node is healthy, the value just
    // does not fit. Say so once; lookups simply miss.
    node.give_back(m, true);
    bool first = false;
    {
      std::lock_guard<std::mutex> lock(mu_);
      ++stats_.put_errors;
      first = !warned_too_big_;
      warned_too_big_ = true;
    }
    if (first)
      log_warning("shared cache: " + node.name + " refuses items of " + std::to_string(options_.piece_bytes) +
                  " bytes (its item size limit, memcached -I, is smaller); start it with the default -I 1m or more");
    return;
  }
  const bool ok = memcached_success(rc);
  node.give_back(m, ok);
  if (!ok) {
    node.breaker.failure();
    return count(&SharedTierStats::put_errors);
  }
  node.breaker.success();
  if (!op.is_delete) {
    std::lock_guard<std::mutex> lock(mu_);
    ++stats_.puts;
    stats_.put_bytes += op.value.size();
  }
}

void MemcachedTier::wait_idle() {
  std::unique_lock<std::mutex> lock(mu_);
  idle_cv_.wait(lock, [&] { return (queue_.empty() && writing_ == 0) || stop_; });
}

SharedTierStats MemcachedTier::stats() const {
  SharedTierStats s;
  {
    std::lock_guard<std::mutex> lock(mu_);
    s = stats_;
  }
  s.nodes_down = 0;
  for (const auto& n : nodes_) s.nodes_down += n->breaker.open() ? 1 : 0;
  return s;
}

}  // namespace hubfs
