// A hostile memcached node on 127.0.0.1 for the shared-tier tests: it speaks just enough of the
// binary protocol (GETKQ and NOOP, as MemcachedStore's lookups send them) to answer from a table
// the test fills, so a test can serve forged, truncated or endlessly slow values, which a real
// memcached never would. Every connection gets a thread; all stop on destruction.
#pragma once

#include <atomic>
#include <chrono>
#include <map>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

namespace hubfs::testing {

class FakeMemcachedNode {
 public:
  // trickle > 0: a hit is answered with a valid header announcing the whole value, then
  // `trickle` bytes every `every`, for ever (the node of the issue: 64 bytes every 150 ms); a
  // store with a header and then a byte every `every`. Stores are refused (the connection closed)
  // otherwise.
  explicit FakeMemcachedNode(size_t trickle = 0, std::chrono::milliseconds every = std::chrono::milliseconds(150));
  ~FakeMemcachedNode();
  FakeMemcachedNode(const FakeMemcachedNode&) = delete;
  FakeMemcachedNode& operator=(const FakeMemcachedNode&) = delete;

  // What a GETKQ for `key` gets (absent keys get no answer, as memcached's quiet get).
  void set(const std::string& key, std::string value);
  std::string address() const { return "127.0.0.1:" + std::to_string(port_); }
  // GETKQ requests for keys it holds, answered or being answered.
  int hits_served() const { return hits_.load(); }
  // Pieces of `trickle` bytes of hits sent so far (over all connections): a test's clock can
  // follow the node's progress instead of the machine's speed.
  int pieces_trickled() const { return trickled_.load(); }

 private:
  void accept_loop();
  void serve(int fd);

  const size_t trickle_;
  const std::chrono::milliseconds every_;
  int listen_fd_ = -1;
  int port_ = 0;
  std::atomic<bool> stop_{false};
  std::atomic<int> hits_{0};
  std::atomic<int> trickled_{0};
  std::mutex mu_;  // guards values_, connections_ and threads_
  std::map<std::string, std::string> values_;
  std::vector<int> connections_;
  std::vector<std::thread> threads_;
  std::thread acceptor_;  // last: starts once everything above exists
};

}  // namespace hubfs::testing
