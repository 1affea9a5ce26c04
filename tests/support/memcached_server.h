// Starts real memcached processes on 127.0.0.1 for the shared-tier tests and benchmark: each on a
// free port of its own, stopped (SIGKILL) on destruction. kill() and restart() simulate a node
// dying and coming back on the same address.
#pragma once

#include <sys/types.h>

#include <memory>
#include <string>

namespace hubfs::testing {

class MemcachedServer {
 public:
  // Throws std::runtime_error if memcached is missing or does not listen within 10 s.
  // `memory_mb` is memcached's -m (its LRU evicts past it).
  static std::unique_ptr<MemcachedServer> start(int memory_mb = 64);
  ~MemcachedServer();
  MemcachedServer(const MemcachedServer&) = delete;
  MemcachedServer& operator=(const MemcachedServer&) = delete;

  int port() const { return port_; }
  std::string address() const { return "127.0.0.1:" + std::to_string(port_); }
  bool running() const { return pid_ > 0; }
  // SIGKILL and reap: its items are gone, its port refuses connections.
  void kill();
  // Starts it again, empty, on the same port.
  void restart();

 private:
  MemcachedServer() = default;
  void spawn();
  int port_ = 0;
  int memory_mb_ = 64;
  pid_t pid_ = -1;
};

}  // namespace hubfs::testing
