#include "shared/memcached/memcached_store.h"

#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>

#include <algorithm>
#include <atomic>
#include <cctype>
#include <condition_variable>
#include <deque>
#include <memory>
#include <mutex>
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
// Writer threads. A store is a round trip per piece, so one writer falls behind a mount reading
// from the Hub at full speed and its queue drops blocks; four keep up (docs/constants.md, kWriters).
constexpr size_t kWriters = 4;
// Lookup threads: a lookup spanning several nodes asks all but one of them from these (the
// calling thread asks the last). Fixed, so a burst of lookups never starts a thread per node per
// lookup; a part no pool thread has started when the caller is free again is run by the caller.
constexpr size_t kMaxLookupThreads = 4;

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

// memcached's binary protocol, as much of it as a lookup needs.
constexpr unsigned char kRequestMagic = 0x80, kResponseMagic = 0x81;
constexpr uint8_t kOpGetKQ = 0x0d, kOpNoop = 0x0a, kOpSet = 0x01, kOpDelete = 0x04;
constexpr uint16_t kStatusNotFound = 0x0001, kStatusTooLarge = 0x0003;
constexpr size_t kHeaderBytes = 24;
constexpr uint32_t kNoopOpaque = 0xffffffffu;
constexpr size_t kMaxKeyAndExtras = 1024;  // keys are at most 250 bytes; anything more is nonsense

uint64_t be(const unsigned char* p, size_t n) {
  uint64_t v = 0;
  for (size_t i = 0; i < n; ++i) v = (v << 8) | p[i];
  return v;
}

// A request header, its extras and key (a SET's value follows it on the wire).
std::string binary_request(uint8_t opcode, const std::string& key, uint32_t opaque, size_t extras = 0,
                           size_t value_length = 0) {
  std::string r(kHeaderBytes, '\0');
  r[0] = static_cast<char>(kRequestMagic);
  r[1] = static_cast<char>(opcode);
  r[2] = static_cast<char>(key.size() >> 8);
  r[3] = static_cast<char>(key.size() & 0xff);
  r[4] = static_cast<char>(extras);
  const size_t body = extras + key.size() + value_length;
  for (int i = 0; i < 4; ++i) {
    r[8 + i] = static_cast<char>((body >> (8 * (3 - i))) & 0xff);
    r[12 + i] = static_cast<char>((opaque >> (8 * (3 - i))) & 0xff);
  }
  return r + std::string(extras, '\0') + key;  // SET's extras: flags 0, no expiry
}

// Waits until fd is ready for `events`, at most `timeout`; false on a timeout or an error.
bool wait_for(int fd, short events, std::chrono::milliseconds timeout) {
  pollfd p{fd, events, 0};
  for (;;) {
    const int n = ::poll(&p, 1, static_cast<int>(timeout.count()));
    if (n > 0) return (p.revents & (POLLERR | POLLNVAL)) == 0 || (p.revents & events);
    if (n == 0 || errno != EINTR) return false;
  }
}

// How long a lookup may wait: each wait for the socket at most `each` (a node that stops answering
// is given up soon), and all of them together until `by` (a node that keeps sending, however
// slowly, is cut off too, or a trickle would hold reads for as long as it lasts).
struct Budget {
  std::chrono::milliseconds each;
  Deadline by;
  // The next wait's bound; 0 once the deadline passed.
  std::chrono::milliseconds next() const { return std::min(each, by.remaining()); }
};

bool send_all(int fd, const char* data, size_t n, const Budget& budget) {
  while (n > 0) {
    const ssize_t sent = ::send(fd, data, n, MSG_NOSIGNAL);
    if (sent > 0) {
      data += sent;
      n -= static_cast<size_t>(sent);
    } else if (sent < 0 && errno == EINTR) {
      continue;
    } else if (sent < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
      if (budget.by.expired() || !wait_for(fd, POLLOUT, budget.next())) return false;
    } else {
      return false;
    }
  }
  return true;
}

bool recv_all(int fd, void* out, size_t n, const Budget& budget) {
  char* p = static_cast<char*>(out);
  while (n > 0) {
    if (budget.by.expired()) return false;  // even while bytes keep arriving
    const ssize_t got = ::recv(fd, p, n, 0);
    if (got > 0) {
      p += got;
      n -= static_cast<size_t>(got);
    } else if (got < 0 && errno == EINTR) {
      continue;
    } else if (got < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
      if (!wait_for(fd, POLLIN, budget.next())) return false;
    } else {
      return false;  // closed by the node, or reset
    }
  }
  return true;
}

// A non-blocking TCP connection to host:port within `timeout`, or -1.
int connect_socket(const std::string& host, int port, std::chrono::milliseconds timeout) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* found = nullptr;
  if (::getaddrinfo(host.c_str(), std::to_string(port).c_str(), &hints, &found) != 0) return -1;
  int fd = -1;
  for (addrinfo* a = found; a; a = a->ai_next) {
    fd = ::socket(a->ai_family, a->ai_socktype | SOCK_NONBLOCK | SOCK_CLOEXEC, a->ai_protocol);
    if (fd < 0) continue;
    int one = 1;
    (void)::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
    if (::connect(fd, a->ai_addr, a->ai_addrlen) == 0) break;
    if (errno == EINPROGRESS && wait_for(fd, POLLOUT, timeout)) {
      int error = 0;
      socklen_t len = sizeof(error);
      if (::getsockopt(fd, SOL_SOCKET, SO_ERROR, &error, &len) == 0 && error == 0) break;
    }
    ::close(fd);
    fd = -1;
  }
  ::freeaddrinfo(found);
  return fd;
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

// One memcached server: its breaker and a pool of connections to it alone (so a dead node
// never stalls a lookup on another).
struct MemcachedStore::Node {
  std::string name;  // host:port, as hashed
  std::string host;
  int port = kDefaultPort;
  CircuitBreaker breaker;
  std::mutex mu;  // a leaf: guards idle_sockets only, never held across a network call
  std::vector<int> idle_sockets;  // connections with no answer pending (see take_socket)

  Node(std::string n, CircuitBreaker::Options o, Env& env) : name(std::move(n)), breaker(o, env) {
    auto colon = name.rfind(':');
    host = name.substr(0, colon);
    port = std::stoi(name.substr(colon + 1));
  }
  ~Node() {
    for (int fd : idle_sockets) ::close(fd);
  }

  // Lookups, stores and deletes speak the binary protocol on plain sockets (multi_get, store),
  // not through libmemcached: it read every answer through an 8 KiB buffer, so a 1 MiB block cost
  // 128 recv calls and two copies (a large share of the daemon's CPU: docs/constants.md, "plain
  // sockets"), and it bounds each wait but not a whole call, so a node trickling its answer to a
  // store held a writer, and the unmount that joins it, for ever. A pooled socket has no answer
  // pending: one that failed is closed.
  int take_socket(std::chrono::milliseconds timeout) {
    {
      std::lock_guard<std::mutex> lock(mu);
      if (!idle_sockets.empty()) {
        const int fd = idle_sockets.back();
        idle_sockets.pop_back();
        return fd;
      }
    }
    return connect_socket(host, port, timeout);
  }
  void give_back_socket(int fd, bool healthy) {
    if (!healthy) {
      ::close(fd);
      drop_idle();
      return;
    }
    std::lock_guard<std::mutex> lock(mu);
    idle_sockets.push_back(fd);
  }

  // The node failed: its other idle connections, of both kinds, are most likely dead too (it was
  // killed or restarted). Dropping them all lets the breaker's next probe open a fresh one, and
  // the first store after a restart does not fail on a stale one.
  void drop_idle() {
    std::vector<int> stale_sockets;
    {
      std::lock_guard<std::mutex> lock(mu);
      stale_sockets.swap(idle_sockets);
    }
    for (int fd : stale_sockets) ::close(fd);
  }
};

MemcachedStore::MemcachedStore(MemcachedStoreOptions options) : options_(std::move(options)) {
  env_of(options_.env, "MemcachedStore");
  for (const auto& s : options_.servers) nodes_.push_back(std::make_unique<Node>(s, options_.breaker, *options_.env));
  stats_.nodes = nodes_.size();
  for (size_t i = 0; i < kWriters; ++i) writers_.push_back(options_.env->new_executor(1));
  if (nodes_.size() > 1) {
    lookups_ = options_.env->new_executor(static_cast<int>(std::min(nodes_.size() - 1, kMaxLookupThreads)));
  }
}

Result<std::unique_ptr<MemcachedStore>> MemcachedStore::create(MemcachedStoreOptions options) {
  if (options.servers.empty()) return InvalidArgument("the shared cache needs at least one memcached server");
  // Normalised (host:port, sorted): every mount must hash over the same names to agree.
  std::string all;
  for (const auto& s : options.servers) all += s + ",";
  auto parsed = parse_shared_cache_servers(all);
  if (!parsed.ok()) return parsed.status();
  options.servers = *parsed;
  if (options.piece_bytes == 0) return InvalidArgument("shared cache piece size must be positive");
  return std::unique_ptr<MemcachedStore>(new MemcachedStore(std::move(options)));
}

MemcachedStore::~MemcachedStore() {
  {
    std::unique_lock<std::mutex> lock(mu_);
    (void)Deadline::after(kDrainTime, options_.env->clock()).wait(idle_cv_, lock, [&] { return queued_ops_ == 0 && writing_ == 0; });
    stop_ = true;  // what is still queued is dropped as its writer reaches it (write())
    idle_cv_.notify_all();
  }
  // Ops being run finish (each bounded by store_budget); the rest drop at once.
  for (auto& w : writers_) w->drain();
  // Every lookup waited for its parts before returning: what is left are parts a caller ran
  // itself, which return at once.
  if (lookups_) lookups_->drain();
}

std::string MemcachedStore::describe() const {
  std::string s = "memcached ";
  for (size_t i = 0; i < nodes_.size(); ++i) s += (i ? "," : "") + nodes_[i]->name;
  return s;
}

MemcachedStore::Node& MemcachedStore::node_for(const std::string& key) {
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

std::vector<std::pair<std::string, size_t>> MemcachedStore::pieces(const std::string& key, size_t size) const {
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

std::vector<std::optional<std::string>> MemcachedStore::get(const std::vector<SharedGet>& items,
                                                          const Deadline& caller_deadline) {
  std::vector<std::optional<std::string>> out(items.size());
  if (items.empty()) return out;
  // The lookup's own budget inside the read's: past it the blocks come from the Hub.
  const Deadline deadline = caller_deadline.within(options_.lookup_budget, options_.env->clock());
  // Group by node: one multi-get per node for all the pieces it holds, the nodes asked in
  // parallel (a read-ahead of 8 blocks spans every node; one at a time would add their times).
  std::unordered_map<Node*, std::vector<size_t>> by_node;
  for (size_t i = 0; i < items.size(); ++i) by_node[&node_for(items[i].key)].push_back(i);
  // Each node's part once: by a lookup thread or, if none has started it when this thread is
  // done with its own node, by this thread. The parts outlive this call only as claimed flags
  // (a pool task that finds its part claimed returns without touching anything else).
  struct Part {
    Node* node;
    const std::vector<size_t>* which;
    std::atomic<bool> claimed{false};
    bool done = false;  // under Parts::mu
  };
  struct Parts {
    std::deque<Part> parts;
    std::mutex mu;  // a leaf
    std::condition_variable done_cv;
  };
  auto shared = std::make_shared<Parts>();
  auto it = by_node.begin();
  for (auto other = std::next(it); other != by_node.end(); ++other) {
    Part& part = shared->parts.emplace_back();
    part.node = other->first;
    part.which = &other->second;
  }
  auto run_part = [this, &items, &out, &deadline](Parts& all, Part& part) {
    get_from(*part.node, *part.which, items, out, deadline);
    std::lock_guard<std::mutex> lock(all.mu);
    part.done = true;
    all.done_cv.notify_all();
  };
  for (Part& part : shared->parts) {
    (void)lookups_->post([shared, &part, run_part] {
      if (!part.claimed.exchange(true)) run_part(*shared, part);
    });
  }
  if (it != by_node.end()) get_from(*it->first, it->second, items, out, deadline);  // one node on this thread
  for (Part& part : shared->parts) {
    if (!part.claimed.exchange(true)) run_part(*shared, part);
  }
  // Parts a lookup thread started: each is bounded by the same deadline.
  std::unique_lock<std::mutex> lock(shared->mu);
  shared->done_cv.wait(lock, [&] {
    return std::all_of(shared->parts.begin(), shared->parts.end(), [](const Part& p) { return p.done; });
  });
  return out;
}

// Maps in the pages of a reserved value with one call, before its pieces are received into it: a
// fresh 1 MiB value otherwise costs 256 page faults as the first write touches each page, a large
// share of a cold read from the tier (docs/constants.md, "plain sockets"). Kernels before 5.14
// refuse the advice: the copy faults as before.
void MemcachedStore::populate(std::string& value) {
  const uintptr_t page = static_cast<uintptr_t>(sysconf(_SC_PAGESIZE));
  const uintptr_t begin = (reinterpret_cast<uintptr_t>(value.data()) + page - 1) & ~(page - 1);
  const uintptr_t end = (reinterpret_cast<uintptr_t>(value.data()) + value.capacity()) & ~(page - 1);
  if (end > begin) (void)madvise(reinterpret_cast<void*>(begin), end - begin, MADV_POPULATE_WRITE);
}

// Fills out[i] for each i in `which` (all owned by `node`; other threads fill other slots).
void MemcachedStore::get_from(Node& node, const std::vector<size_t>& which, const std::vector<SharedGet>& items,
                             std::vector<std::optional<std::string>>& out, const Deadline& deadline) {
  // Not asked once the deadline passed (the caller's, not the node's fault: its breaker is not
  // told), nor while its breaker is open.
  if (deadline.expired() || !node.breaker.allow()) {
    std::lock_guard<std::mutex> lock(mu_);
    stats_.skipped += which.size();
    return;
  }
  const Budget budget{options_.timeout, deadline};
  const int fd = node.take_socket(budget.next());
  if (fd < 0) {
    node.breaker.failure();
    std::lock_guard<std::mutex> lock(mu_);
    stats_.get_errors += which.size();
    return;
  }
  // Each value is received in place: every piece straight from the socket to its offset.
  std::vector<std::string> keys;
  std::unordered_map<std::string, std::vector<Piece>> slot;  // a key asked twice answers both
  std::unordered_map<size_t, std::string> values;
  std::unordered_map<size_t, size_t> missing;  // pieces not yet arrived, per item
  std::unordered_map<size_t, bool> malformed;  // a piece came with the wrong length, per item
  for (size_t i : which) {
    values[i].reserve(items[i].value_size);
    populate(values[i]);
    values[i].resize(items[i].value_size);
    size_t offset = 0;
    for (auto& [key, length] : pieces(items[i].key, items[i].value_size)) {
      auto& users = slot[key];
      if (users.empty()) keys.push_back(key);
      users.push_back(Piece{i, offset, length});
      offset += length;
      ++missing[i];
    }
  }
  const bool healthy = multi_get(fd, keys, slot, values, missing, malformed, deadline);
  node.give_back_socket(fd, healthy);
  if (!healthy) {
    node.breaker.failure();
    std::lock_guard<std::mutex> lock(mu_);
    stats_.get_errors += which.size();
    return;
  }
  node.breaker.success();
  for (size_t i : which) {
    if (malformed[i]) {
      out[i] = std::string();  // something else under its key: the caller counts it corrupt
    } else if (missing[i] == 0) {
      out[i] = std::move(values[i]);
    }
  }
}

// One lookup on a lookup connection, in memcached's binary protocol: a quiet get (GETKQ: hits
// answer, misses do not) per key, then a NOOP, whose answer says every hit has been sent. A value
// goes from the socket straight to its place in `values`, in reads as large as it is (see
// Node::take_socket for why not libmemcached). False: the connection failed or spoke nonsense
// (it must not be reused); a miss is not a failure.
bool MemcachedStore::multi_get(int fd, const std::vector<std::string>& keys,
                              std::unordered_map<std::string, std::vector<Piece>>& slot,
                              std::unordered_map<size_t, std::string>& values,
                              std::unordered_map<size_t, size_t>& missing,
                              std::unordered_map<size_t, bool>& malformed, const Deadline& deadline) {
  const Budget timeout{options_.timeout, deadline};
  std::string request;
  for (size_t k = 0; k < keys.size(); ++k) request += binary_request(kOpGetKQ, keys[k], static_cast<uint32_t>(k));
  request += binary_request(kOpNoop, "", kNoopOpaque);
  if (!send_all(fd, request.data(), request.size(), timeout)) return false;
  std::vector<char> discard;
  // At most one answer per request: a node that keeps answering without its NOOP is broken (or
  // not memcached), and must not hold a reader for ever.
  for (size_t answers = 0; answers <= keys.size(); ++answers) {
    unsigned char h[kHeaderBytes];
    if (!recv_all(fd, h, sizeof(h), timeout) || h[0] != kResponseMagic) return false;
    const uint8_t opcode = h[1];
    const size_t key_length = be(h + 2, 2), extras_length = h[4];
    const uint16_t status = static_cast<uint16_t>(be(h + 6, 2));
    const size_t body = be(h + 8, 4);
    const uint32_t opaque = static_cast<uint32_t>(be(h + 12, 4));
    if (body < key_length + extras_length || key_length + extras_length > kMaxKeyAndExtras) return false;
    std::string head(key_length + extras_length, '\0');
    if (!recv_all(fd, head.data(), head.size(), timeout)) return false;
    size_t value_length = body - head.size();
    if (opcode == kOpNoop && opaque == kNoopOpaque) return value_length == 0;  // every hit is in
    // A hit for a key we asked (echoed key and opaque) whose length is a piece's: straight to the
    // first user's place, copied to any other. A hit of another length (truncated, or another
    // layout) makes its item malformed; anything else (an error for one key) is read past: that
    // piece is a miss.
    std::vector<Piece>* users = nullptr;
    const Piece* first = nullptr;
    if (opcode == kOpGetKQ && status == 0 && opaque < keys.size() &&
        std::string_view(head).substr(extras_length) == keys[opaque]) {
      auto it = slot.find(keys[opaque]);
      if (it != slot.end()) {
        users = &it->second;
        for (const Piece& p : *users) {
          if (p.length == value_length && !first) first = &p;
          if (p.length != value_length) malformed[p.item] = true;
        }
      }
    }
    if (!first) {
      if (value_length > 2 * options_.piece_bytes) return false;  // no piece is this large: nonsense
      discard.resize(std::min<size_t>(std::max<size_t>(value_length, 1), 64 * 1024));
      while (value_length > 0) {
        const size_t n = std::min(value_length, discard.size());
        if (!recv_all(fd, discard.data(), n, timeout)) return false;
        value_length -= n;
      }
      continue;
    }
    const char* received = values[first->item].data() + first->offset;
    if (!recv_all(fd, values[first->item].data() + first->offset, value_length, timeout)) return false;
    for (const Piece& p : *users) {
      if (p.length != value_length) continue;  // asked with another size: not its piece
      if (&p != first) std::memcpy(values[p.item].data() + p.offset, received, p.length);
      --missing[p.item];
    }
    users->clear();  // a duplicate answer must not count twice
  }
  return false;
}

void MemcachedStore::put(std::string key, std::string value) {
  enqueue(Op{false, std::move(key), std::move(value), 0});
}

void MemcachedStore::remove(std::string key, size_t value_size) {
  // Deletes are not bounded by bytes (they carry none) and never dropped while running: one
  // undoes a store of bytes that failed verification.
  enqueue(Op{true, std::move(key), std::string(), value_size});
}

void MemcachedStore::enqueue(Op op) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (stop_ || (!op.is_delete && queued_bytes_ + op.value.size() > options_.queue_bytes)) {
      if (!op.is_delete) ++stats_.dropped;
      return;
    }
    queued_bytes_ += op.value.size();
    stats_.queued = ++queued_ops_;
  }
  Executor& writer = *writers_[score("", op.key) % kWriters];
  auto shared = std::make_shared<Op>(std::move(op));
  if (!writer.post([this, shared] { write(*shared); })) {
    // Only a drained writer refuses, and only the destructor drains (after stop_): undo the count.
    std::lock_guard<std::mutex> lock(mu_);
    queued_bytes_ -= shared->value.size();
    stats_.queued = --queued_ops_;
    if (!shared->is_delete) ++stats_.dropped;
    if (queued_ops_ == 0 && writing_ == 0) idle_cv_.notify_all();
  }
}

void MemcachedStore::write(const Op& op) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    queued_bytes_ -= op.value.size();
    stats_.queued = --queued_ops_;
    if (stop_) {
      ++stats_.dropped;  // as a store or delete still queued at unmount always was
      if (queued_ops_ == 0 && writing_ == 0) idle_cv_.notify_all();
      return;
    }
    ++writing_;
  }
  run(op);
  std::lock_guard<std::mutex> lock(mu_);
  --writing_;
  if (queued_ops_ == 0 && writing_ == 0) idle_cv_.notify_all();
}

// One store or delete request on a connection, answered: the node's status, or nullopt when the
// connection failed or spoke nonsense (it must not be reused).
static std::optional<uint16_t> one_request(int fd, const std::string& head, std::string_view value,
                                           const Budget& budget) {
  if (!send_all(fd, head.data(), head.size(), budget) || !send_all(fd, value.data(), value.size(), budget))
    return std::nullopt;
  unsigned char h[kHeaderBytes];
  if (!recv_all(fd, h, sizeof(h), budget) || h[0] != kResponseMagic || h[1] != static_cast<unsigned char>(head[1]))
    return std::nullopt;
  const size_t body = be(h + 8, 4);
  if (body > kMaxKeyAndExtras) return std::nullopt;  // an error message at most
  std::string discard(body, '\0');
  if (!recv_all(fd, discard.data(), body, budget)) return std::nullopt;
  return static_cast<uint16_t>(be(h + 6, 2));
}

void MemcachedStore::run(const Op& op) {
  Node& node = node_for(op.key);
  auto count = [&](uint64_t SharedStoreStats::*field, uint64_t n = 1) {
    std::lock_guard<std::mutex> lock(mu_);
    stats_.*field += n;
  };
  if (!node.breaker.allow()) return count(&SharedStoreStats::skipped);
  // Each wait bounded by store_timeout, the whole op by store_budget: a node that answers a
  // trickle at a time cannot hold a writer (nor the unmount that joins it).
  const Budget budget{options_.store_timeout, Deadline::after(options_.store_budget, options_.env->clock())};
  const int fd = node.take_socket(budget.next());
  if (fd < 0) {
    node.breaker.failure();
    return count(&SharedStoreStats::put_errors);
  }
  const size_t size = op.is_delete ? op.value_size : op.value.size();
  size_t pos = 0;
  std::optional<uint16_t> status = 0;
  for (const auto& [piece_key, length] : pieces(op.key, size)) {
    if (op.is_delete) {
      status = one_request(fd, binary_request(kOpDelete, piece_key, 0), {}, budget);
      if (status == kStatusNotFound) status = 0;
    } else {
      // No expiry: memcached's LRU decides what stays.
      status = one_request(fd, binary_request(kOpSet, piece_key, 0, 8, length),
                           std::string_view(op.value).substr(pos, length), budget);
    }
    pos += length;
    if (status != 0) break;
  }
  node.give_back_socket(fd, status.has_value());
  if (status == kStatusTooLarge) {
    // The node's item limit (-I) is below our piece size: the node is healthy, the value just
    // does not fit. Say so once; lookups simply miss.
    node.breaker.success();
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
  if (status != 0) {
    node.breaker.failure();
    return count(&SharedStoreStats::put_errors);
  }
  node.breaker.success();
  if (!op.is_delete) {
    std::lock_guard<std::mutex> lock(mu_);
    ++stats_.puts;
    stats_.put_bytes += op.value.size();
  }
}

void MemcachedStore::wait_idle() {
  std::unique_lock<std::mutex> lock(mu_);
  idle_cv_.wait(lock, [&] { return (queued_ops_ == 0 && writing_ == 0) || stop_; });
}

SharedStoreStats MemcachedStore::stats() const {
  SharedStoreStats s;
  {
    std::lock_guard<std::mutex> lock(mu_);
    s = stats_;
  }
  s.nodes_down = 0;
  for (const auto& n : nodes_) s.nodes_down += n->breaker.open() ? 1 : 0;
  return s;
}

}  // namespace hubfs
