// A tiny HTTP/1.1 server for CurlTransport tests: bound to 127.0.0.1 on a free port, one
// thread per connection, keep-alive, and a handler per test that writes whatever bytes it
// likes (a normal answer, nothing at all, half a body then a reset ...). It counts connections,
// requests and the peak number of requests being handled at once.
#pragma once

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstring>
#include <functional>
#include <mutex>
#include <set>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "common/http.h"

namespace hubfs::testing {

struct ServerRequest {
  std::string method;
  std::string target;  // path and query, as sent
  Headers headers;     // names lower-cased
  std::string body;
  std::optional<std::string> header(std::string_view name) const { return find_header(headers, name); }
};

// One accepted connection, as a handler sees it.
class ServerConnection {
 public:
  explicit ServerConnection(int fd) : fd_(fd) {}

  // Writes all of `bytes`; false if the peer is gone.
  bool send(std::string_view bytes) {
    while (!bytes.empty()) {
      ssize_t n = ::send(fd_, bytes.data(), bytes.size(), MSG_NOSIGNAL);
      if (n <= 0) return false;
      bytes.remove_prefix(static_cast<size_t>(n));
    }
    return true;
  }

  // A complete response with Content-Length.
  bool respond(int status, const std::string& body, const Headers& headers = {}) {
    std::string out = "HTTP/1.1 " + std::to_string(status) + " Status\r\n";
    for (const auto& [k, v] : headers) out += k + ": " + v + "\r\n";
    out += "Content-Length: " + std::to_string(body.size()) + "\r\n\r\n";
    out += body;
    return send(out);
  }

  // Closes with an RST instead of a FIN (SO_LINGER 0): what a crashed peer or a middlebox does.
  void reset() {
    linger l{1, 0};
    setsockopt(fd_, SOL_SOCKET, SO_LINGER, &l, sizeof l);
    closed_ = true;  // the server's close() right after the handler returns sends the RST
  }
  // Orderly close (FIN) right now, whatever the response said about its length.
  void close_now() {
    if (!closed_) ::shutdown(fd_, SHUT_RDWR);
    closed_ = true;
  }
  bool closed() const { return closed_; }
  int fd() const { return fd_; }

 private:
  int fd_;
  bool closed_ = false;
};

class ScriptedHttpServer {
 public:
  using Handler = std::function<void(const ServerRequest&, ServerConnection&)>;

  explicit ScriptedHttpServer(Handler handler) : handler_(std::move(handler)) {
    listen_fd_ = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (listen_fd_ < 0) throw std::runtime_error("socket failed");
    int one = 1;
    setsockopt(listen_fd_, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    addr.sin_port = 0;  // the kernel picks a free port
    if (::bind(listen_fd_, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0 || ::listen(listen_fd_, 128) != 0)
      throw std::runtime_error(std::string("bind/listen failed: ") + strerror(errno));
    socklen_t len = sizeof addr;
    getsockname(listen_fd_, reinterpret_cast<sockaddr*>(&addr), &len);
    port_ = ntohs(addr.sin_port);
    accept_thread_ = std::thread([this] { accept_loop(); });
  }

  ~ScriptedHttpServer() { stop(); }

  void stop() {
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (stopping_) return;
      stopping_ = true;
      for (int fd : open_fds_) ::shutdown(fd, SHUT_RDWR);  // wakes every recv()
    }
    stop_cv_.notify_all();
    ::shutdown(listen_fd_, SHUT_RDWR);  // wakes accept()
    accept_thread_.join();
    std::vector<std::thread> threads;
    {
      std::lock_guard<std::mutex> lock(mu_);
      threads.swap(conn_threads_);
    }
    for (auto& t : threads) t.join();
    ::close(listen_fd_);
  }

  int port() const { return port_; }
  std::string url(const std::string& path) const { return "http://127.0.0.1:" + std::to_string(port_) + path; }

  int connections_accepted() const { return connections_.load(); }
  int requests_handled() const { return requests_.load(); }
  int peak_concurrent() const { return peak_.load(); }
  int concurrent_now() const { return active_.load(); }
  std::vector<ServerRequest> requests() const {
    std::lock_guard<std::mutex> lock(mu_);
    return seen_;
  }

  // For handlers that play dead: blocks until the server stops or `limit` passes (a bound, so
  // a broken test cannot hang). True when the server is stopping.
  bool wait_for_stop(std::chrono::milliseconds limit = std::chrono::seconds(10)) {
    std::unique_lock<std::mutex> lock(mu_);
    return stop_cv_.wait_for(lock, limit, [this] { return stopping_; });
  }

  // Blocks until `n` requests are being handled at once, the server stops, or `limit` passes.
  void wait_for_concurrency(int n, std::chrono::milliseconds limit) {
    wait_until([&] { return active_.load() >= n; }, limit);
  }

  // Blocks until `ready()` holds (re-checked whenever a request starts), the server stops, or
  // `limit` passes.
  void wait_until(const std::function<bool()>& ready, std::chrono::milliseconds limit) {
    std::unique_lock<std::mutex> lock(mu_);
    stop_cv_.wait_for(lock, limit, [&] { return stopping_ || ready(); });
  }

 private:
  void accept_loop() {
    for (;;) {
      int fd = ::accept4(listen_fd_, nullptr, nullptr, SOCK_CLOEXEC);
      if (fd < 0) {
        std::lock_guard<std::mutex> lock(mu_);
        if (stopping_) return;
        if (errno == EINTR || errno == ECONNABORTED) continue;
        return;
      }
      std::lock_guard<std::mutex> lock(mu_);
      if (stopping_) {
        ::close(fd);
        return;
      }
      ++connections_;
      open_fds_.insert(fd);
      conn_threads_.emplace_back([this, fd] { serve(fd); });
    }
  }

  void serve(int fd) {
    ServerConnection conn(fd);
    std::string buffer;
    ServerRequest request;
    while (!conn.closed() && read_request(fd, buffer, request)) {
      {
        std::lock_guard<std::mutex> lock(mu_);
        seen_.push_back(request);
      }
      {
        ++requests_;
        // Under the lock so wait_for_concurrency cannot miss the change.
        std::lock_guard<std::mutex> lock(mu_);
        int now = ++active_;
        peak_.store(std::max(peak_.load(), now));
      }
      stop_cv_.notify_all();
      handler_(request, conn);
      --active_;
    }
    {
      std::lock_guard<std::mutex> lock(mu_);
      open_fds_.erase(fd);
    }
    ::close(fd);
  }

  // Reads one request (head and Content-Length body) from `fd`; false at EOF or error.
  static bool read_request(int fd, std::string& buffer, ServerRequest& out) {
    size_t head_end;
    while ((head_end = buffer.find("\r\n\r\n")) == std::string::npos) {
      if (!read_more(fd, buffer)) return false;
    }
    std::string head = buffer.substr(0, head_end);
    buffer.erase(0, head_end + 4);
    out = ServerRequest{};
    size_t line_end = head.find("\r\n");
    std::string first = head.substr(0, line_end);
    size_t sp1 = first.find(' '), sp2 = first.rfind(' ');
    if (sp1 == std::string::npos || sp2 == sp1) return false;
    out.method = first.substr(0, sp1);
    out.target = first.substr(sp1 + 1, sp2 - sp1 - 1);
    size_t pos = line_end == std::string::npos ? head.size() : line_end + 2;
    while (pos < head.size()) {
      size_t end = head.find("\r\n", pos);
      if (end == std::string::npos) end = head.size();
      std::string line = head.substr(pos, end - pos);
      pos = end + 2;
      size_t colon = line.find(':');
      if (colon == std::string::npos) continue;
      std::string name = line.substr(0, colon);
      std::transform(name.begin(), name.end(), name.begin(), [](unsigned char c) { return std::tolower(c); });
      size_t v = line.find_first_not_of(' ', colon + 1);
      out.headers.emplace_back(name, v == std::string::npos ? "" : line.substr(v));
    }
    size_t length = 0;
    if (auto cl = out.header("content-length")) length = std::stoul(*cl);
    while (buffer.size() < length) {
      if (!read_more(fd, buffer)) return false;
    }
    out.body = buffer.substr(0, length);
    buffer.erase(0, length);
    return true;
  }

  static bool read_more(int fd, std::string& buffer) {
    char chunk[16384];
    ssize_t n = ::recv(fd, chunk, sizeof chunk, 0);
    if (n <= 0) return false;
    buffer.append(chunk, static_cast<size_t>(n));
    return true;
  }

  Handler handler_;
  int listen_fd_ = -1;
  int port_ = 0;
  std::thread accept_thread_;
  mutable std::mutex mu_;
  std::condition_variable stop_cv_;
  bool stopping_ = false;
  std::set<int> open_fds_;
  std::vector<std::thread> conn_threads_;
  std::vector<ServerRequest> seen_;
  std::atomic<int> connections_{0};
  std::atomic<int> requests_{0};
  std::atomic<int> active_{0};
  std::atomic<int> peak_{0};
};

}  // namespace hubfs::testing
