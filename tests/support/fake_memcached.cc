#include "support/fake_memcached.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <stdexcept>

namespace hubfs::testing {
namespace {

bool read_exact(int fd, void* out, size_t n) {
  char* p = static_cast<char*>(out);
  while (n > 0) {
    const ssize_t got = ::recv(fd, p, n, 0);
    if (got <= 0) return false;
    p += got;
    n -= static_cast<size_t>(got);
  }
  return true;
}

bool send_exact(int fd, const char* p, size_t n) {
  while (n > 0) {
    const ssize_t sent = ::send(fd, p, n, MSG_NOSIGNAL);
    if (sent <= 0) return false;
    p += sent;
    n -= static_cast<size_t>(sent);
  }
  return true;
}

uint32_t be32(const unsigned char* p) { return (uint32_t(p[0]) << 24) | (p[1] << 16) | (p[2] << 8) | p[3]; }

void put_be(std::string& out, size_t at, uint64_t v, int bytes) {
  for (int i = 0; i < bytes; ++i) out[at + i] = static_cast<char>((v >> (8 * (bytes - 1 - i))) & 0xff);
}

// A response header: magic 0x81, the opcode, key and extras lengths, status 0, body, opaque.
std::string header(uint8_t opcode, size_t key_length, size_t extras, size_t body, uint32_t opaque) {
  std::string h(24, '\0');
  h[0] = static_cast<char>(0x81);
  h[1] = static_cast<char>(opcode);
  put_be(h, 2, key_length, 2);
  h[4] = static_cast<char>(extras);
  put_be(h, 8, body, 4);
  put_be(h, 12, opaque, 4);
  return h;
}

}  // namespace

FakeMemcachedNode::FakeMemcachedNode(size_t trickle, std::chrono::milliseconds every)
    : trickle_(trickle), every_(every) {
  listen_fd_ = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof(a);
  if (listen_fd_ < 0 || ::bind(listen_fd_, reinterpret_cast<sockaddr*>(&a), sizeof(a)) != 0 ||
      ::listen(listen_fd_, 64) != 0 || ::getsockname(listen_fd_, reinterpret_cast<sockaddr*>(&a), &len) != 0) {
    throw std::runtime_error("fake memcached: cannot listen on 127.0.0.1");
  }
  port_ = ntohs(a.sin_port);
  acceptor_ = std::thread([this] { accept_loop(); });
}

FakeMemcachedNode::~FakeMemcachedNode() {
  stop_ = true;
  ::shutdown(listen_fd_, SHUT_RDWR);
  acceptor_.join();
  std::vector<std::thread> threads;
  {
    std::lock_guard<std::mutex> lock(mu_);
    for (int fd : connections_) ::shutdown(fd, SHUT_RDWR);  // wakes a serving thread's recv
    threads.swap(threads_);
  }
  for (auto& t : threads) t.join();
  for (int fd : connections_) ::close(fd);
  ::close(listen_fd_);
}

void FakeMemcachedNode::set(const std::string& key, std::string value) {
  std::lock_guard<std::mutex> lock(mu_);
  values_[key] = std::move(value);
}

void FakeMemcachedNode::accept_loop() {
  while (!stop_) {
    const int fd = ::accept(listen_fd_, nullptr, nullptr);
    if (fd < 0) return;
    std::lock_guard<std::mutex> lock(mu_);
    connections_.push_back(fd);
    threads_.emplace_back([this, fd] {
      serve(fd);
      ::shutdown(fd, SHUT_RDWR);  // closed by the destructor: no fd reuse while it may shut it
    });
  }
}

void FakeMemcachedNode::serve(int fd) {
  while (!stop_) {
    unsigned char h[24];
    if (!read_exact(fd, h, sizeof(h))) return;
    const size_t key_length = (size_t(h[2]) << 8) | h[3];
    const size_t extras = h[4];
    std::string body(be32(h + 8), '\0');
    if (!read_exact(fd, body.data(), body.size())) return;
    const uint32_t opaque = be32(h + 12);
    if (h[1] == 0x0a) {  // NOOP: every hit is in
      const std::string r = header(0x0a, 0, 0, 0, opaque);
      if (!send_exact(fd, r.data(), r.size())) return;
      continue;
    }
    if (h[1] == 0x01 && trickle_ > 0) {
      // A store, answered by the hostile node: a header announcing a 1000-byte message, then one
      // byte of it every `every`: every wait is short, the whole never ends in a test's time.
      const std::string r = header(0x01, 0, 0, 1000, opaque);
      if (!send_exact(fd, r.data(), r.size())) return;
      for (int i = 0; i < 1000 && !stop_; ++i) {
        if (!send_exact(fd, "m", 1)) return;
        std::this_thread::sleep_for(every_);
      }
      continue;
    }
    if (h[1] != 0x0d || body.size() < extras + key_length) return;
    const std::string key = body.substr(extras, key_length);
    std::string value;
    {
      std::lock_guard<std::mutex> lock(mu_);
      auto it = values_.find(key);
      if (it == values_.end()) continue;  // quiet: a miss says nothing
      value = it->second;
    }
    ++hits_;
    std::string r = header(0x0d, key.size(), 4, 4 + key.size() + value.size(), opaque) + std::string(4, '\0') + key;
    if (trickle_ == 0) {
      r += value;
      if (!send_exact(fd, r.data(), r.size())) return;
      continue;
    }
    // The hostile node: the header at once, then the value a trickle at a time, for ever (the
    // value is never finished before the client gives up: it is far longer than the trickle).
    if (!send_exact(fd, r.data(), r.size())) return;
    for (size_t sent = 0; !stop_ && sent + trickle_ <= value.size(); sent += trickle_) {
      if (!send_exact(fd, value.data() + sent, trickle_)) return;
      ++trickled_;
      std::this_thread::sleep_for(every_);
    }
  }
}

}  // namespace hubfs::testing
