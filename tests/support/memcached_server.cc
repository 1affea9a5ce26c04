#include "support/memcached_server.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

namespace hubfs::testing {

namespace {

// A port the kernel just handed out (free now; memcached binds it a moment later).
int free_port() {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  a.sin_port = 0;
  socklen_t len = sizeof(a);
  if (fd < 0 || bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a)) != 0 ||
      getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len) != 0) {
    if (fd >= 0) close(fd);
    throw std::runtime_error("cannot find a free port");
  }
  int port = ntohs(a.sin_port);
  close(fd);
  return port;
}

bool accepts(int port) {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) return false;
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  a.sin_port = htons(static_cast<uint16_t>(port));
  bool ok = connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a)) == 0;
  close(fd);
  return ok;
}

}  // namespace

std::unique_ptr<MemcachedServer> MemcachedServer::start(int memory_mb) {
  std::unique_ptr<MemcachedServer> s(new MemcachedServer());
  s->memory_mb_ = memory_mb;
  // A port can be taken between free_port() and memcached's bind: try a few.
  for (int attempt = 0; attempt < 5; ++attempt) {
    s->port_ = free_port();
    try {
      s->spawn();
      return s;
    } catch (const std::runtime_error&) {
      if (attempt == 4) throw;
    }
  }
  return s;
}

void MemcachedServer::spawn() {
  const std::string port = std::to_string(port_);
  const std::string memory = std::to_string(memory_mb_);
  pid_t pid = fork();
  if (pid < 0) throw std::runtime_error("fork failed");
  if (pid == 0) {
    // Dies with the test, even one that aborts before its destructors run.
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    // Loopback only, no UDP, 2 threads (the machine is small); -u root because memcached
    // refuses to run as root without it (ignored otherwise).
    std::vector<const char*> argv = {"memcached", "-l", "127.0.0.1", "-p", port.c_str(), "-U", "0",
                                     "-t", "2", "-m", memory.c_str(), "-u", "root", nullptr};
    execvp("memcached", const_cast<char* const*>(argv.data()));
    _exit(127);
  }
  pid_ = pid;
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (std::chrono::steady_clock::now() < deadline) {
    int status = 0;
    if (waitpid(pid_, &status, WNOHANG) == pid_) {
      pid_ = -1;
      throw std::runtime_error("memcached exited at start (status " + std::to_string(status) +
                               "); is it installed (apt-get install memcached)?");
    }
    if (accepts(port_)) return;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  kill();
  throw std::runtime_error("memcached did not listen on 127.0.0.1:" + port + " within 10 s");
}

void MemcachedServer::kill() {
  if (pid_ <= 0) return;
  ::kill(pid_, SIGKILL);
  waitpid(pid_, nullptr, 0);
  pid_ = -1;
}

void MemcachedServer::restart() {
  kill();
  spawn();
}

MemcachedServer::~MemcachedServer() { kill(); }

}  // namespace hubfs::testing
