#include "support/local_hub.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <stdexcept>
#include <thread>

#include <gtest/gtest.h>

extern char** environ;

namespace hubfs::testing {
namespace {

constexpr const char* kPython = "/usr/bin/python3";  // Debian's: the script needs stdlib only
constexpr const char* kServerScript = HUBFS_SOURCE_DIR "/tools/hub_server.py";
// Python starts in well under a second on an idle machine, but the wait ends at the "listening"
// line or the server's exit, so the bound only has to catch a server that is really stuck: 60 s,
// since 10 s tripped under TSan at a load average of 16 on 2 cores (SystemTool, the env-merge
// TSan pass), with an empty stderr (still starting).
constexpr auto kHubStartTimeout = std::chrono::seconds(60);
// The server shuts down at once on SIGTERM; this bounds a wedged one.
constexpr auto kStopGrace = std::chrono::seconds(3);
// Control requests are tiny and local: anything slower than this is a hung server.
constexpr int kControlTimeoutMs = 10000;
// The most of the server's stderr quoted in an exception.
constexpr size_t kMaxQuotedStderr = 8192;

using Clock = std::chrono::steady_clock;

std::string errno_text(const char* what) { return std::string(what) + ": " + std::strerror(errno); }

// The whole of a file we hold open, however far its writer has got; the tail if it is long.
std::string read_fd_text(int fd) {
  std::string s;
  char buf[8192];
  for (off_t off = 0;;) {
    ssize_t n = ::pread(fd, buf, sizeof buf, off);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    s.append(buf, static_cast<size_t>(n));
    off += n;
  }
  if (s.size() > kMaxQuotedStderr) s = "..." + s.substr(s.size() - kMaxQuotedStderr);
  return s;
}

int remaining_ms(Clock::time_point deadline) {
  auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count();
  return left > 0 ? static_cast<int>(left) : 0;
}

enum class LineResult { kLine, kEof, kTimeout };

// Reads from fd up to the first '\n' (not included).
LineResult read_line(int fd, Clock::time_point deadline, std::string* line) {
  line->clear();
  while (true) {
    pollfd p{fd, POLLIN, 0};
    int r = ::poll(&p, 1, remaining_ms(deadline));
    if (r < 0 && errno == EINTR) continue;
    if (r == 0) return LineResult::kTimeout;
    if (r < 0) return LineResult::kEof;
    char c;
    ssize_t n = ::read(fd, &c, 1);  // byte by byte: it is one short line, once
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return LineResult::kEof;
    if (c == '\n') return LineResult::kLine;
    *line += c;
  }
}

int port_of(const std::string& url) {
  auto colon = url.rfind(':');
  if (colon == std::string::npos) throw std::runtime_error("no port in " + url);
  return std::stoi(url.substr(colon + 1));
}

// Minimal blocking HTTP/1.1 exchange with Connection: close. Returns the status and fills body.
int http_exchange(int port, const std::string& method, const std::string& path, const std::string& body,
                  std::string* response_body) {
  int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) throw std::runtime_error(errno_text("socket"));
  struct FdCloser {
    int fd;
    ~FdCloser() { ::close(fd); }
  } closer{fd};
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>(port));
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0)
    throw std::runtime_error(errno_text("connect to local hub"));
  timeval tv{kControlTimeoutMs / 1000, 0};
  ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  ::setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);

  std::string request = method + " " + path + " HTTP/1.1\r\nHost: 127.0.0.1:" + std::to_string(port) +
                        "\r\nConnection: close\r\nContent-Type: application/json\r\nContent-Length: " +
                        std::to_string(body.size()) + "\r\n\r\n" + body;
  for (size_t off = 0; off < request.size();) {
    ssize_t n = ::send(fd, request.data() + off, request.size() - off, MSG_NOSIGNAL);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) throw std::runtime_error(errno_text("send to local hub"));
    off += static_cast<size_t>(n);
  }
  std::string response;
  char buf[16384];
  while (true) {
    ssize_t n = ::recv(fd, buf, sizeof buf, 0);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) throw std::runtime_error(errno_text("recv from local hub"));
    if (n == 0) break;
    response.append(buf, static_cast<size_t>(n));
  }
  // "HTTP/1.1 200 OK\r\n...\r\n\r\nbody": the server closes after the body (Connection: close).
  auto header_end = response.find("\r\n\r\n");
  if (response.compare(0, 9, "HTTP/1.1 ") != 0 || header_end == std::string::npos)
    throw std::runtime_error("malformed response from local hub: " + response.substr(0, 200));
  *response_body = response.substr(header_end + 4);
  return std::stoi(response.substr(9, 3));
}

}  // namespace

std::unique_ptr<LocalHub> LocalHub::start(const LocalHubOptions& options) {
  if (options.root.empty()) throw std::runtime_error("LocalHubOptions.root is empty");
  std::unique_ptr<LocalHub> hub(new LocalHub());

  std::string stderr_path = (std::filesystem::temp_directory_path() / "hubfs-hub-stderr-XXXXXX").string();
  int stderr_fd = ::mkostemp(stderr_path.data(), O_CLOEXEC);
  if (stderr_fd < 0) throw std::runtime_error(errno_text("mkostemp"));
  ::unlink(stderr_path.c_str());  // we read it through the fd; the child writes through its copy
  hub->stderr_fd_ = stderr_fd;
  int out_pipe[2], in_pipe[2];
  if (::pipe2(out_pipe, O_CLOEXEC) != 0) throw std::runtime_error(errno_text("pipe2"));
  hub->stdout_fd_ = out_pipe[0];
  if (::pipe2(in_pipe, O_CLOEXEC) != 0) {
    ::close(out_pipe[1]);
    throw std::runtime_error(errno_text("pipe2"));
  }
  hub->stdin_fd_ = in_pipe[1];

  std::vector<std::string> args = {kPython,
                                   kServerScript,
                                   "--root",
                                   options.root,
                                   "--latency-ms",
                                   std::to_string(options.latency_ms),
                                   "--bandwidth-mbps",
                                   std::to_string(options.bandwidth_mbps),
                                   "--url-ttl",
                                   std::to_string(options.url_ttl),
                                   "--page-size",
                                   std::to_string(options.page_size),
                                   "--lfs-threshold",
                                   std::to_string(options.lfs_threshold),
                                   "--exit-on-stdin-eof"};
  for (const auto& t : options.tokens) {
    args.push_back("--token");
    args.push_back(t);
  }
  args.insert(args.end(), options.extra_args.begin(), options.extra_args.end());
  if (options.xet) args.insert(args.end(), {"--xet", "--xet-pack", HUBFS_BIN_DIR "/hubfs-xet-pack"});
  if (!options.tls_cert.empty()) {
    args.insert(args.end(), {"--tls-cert", options.tls_cert, "--tls-key", options.tls_key});
  }
  std::vector<char*> argv;
  for (auto& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);

  // posix_spawn, not fork: the test process may have threads, and dup2 clears CLOEXEC on the
  // three fds the child gets, so it inherits nothing else of ours.
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_adddup2(&actions, in_pipe[0], STDIN_FILENO);
  posix_spawn_file_actions_adddup2(&actions, out_pipe[1], STDOUT_FILENO);
  posix_spawn_file_actions_adddup2(&actions, stderr_fd, STDERR_FILENO);
  int rc = ::posix_spawn(&hub->pid_, kPython, &actions, nullptr, argv.data(), environ);
  posix_spawn_file_actions_destroy(&actions);
  ::close(in_pipe[0]);
  ::close(out_pipe[1]);
  if (rc != 0) {
    hub->pid_ = -1;
    throw std::runtime_error(std::string("posix_spawn ") + kPython + ": " + std::strerror(rc));
  }

  std::string line;
  LineResult got = read_line(hub->stdout_fd_, Clock::now() + kHubStartTimeout, &line);
  std::istringstream words(line);
  std::string listening, url, cdn, cdn_url;
  words >> listening >> url >> cdn >> cdn_url;
  if (got != LineResult::kLine || listening != "listening" || cdn != "cdn" || cdn_url.empty()) {
    std::string why = got == LineResult::kLine  ? "unexpected first line \"" + line + "\""
                      : got == LineResult::kEof ? "it exited before listening"
                                                : "no \"listening\" line within " + std::to_string(kHubStartTimeout.count()) + " s";
    hub->stop();  // and wait for it, so its stderr is complete
    std::string err = hub->server_stderr();
    throw std::runtime_error("local hub server failed to start (" + why + "); stderr:\n" + err);
  }
  hub->url_ = url;
  hub->cdn_url_ = cdn_url;
  hub->api_port_ = port_of(url);
  hub->tls_ = !options.tls_cert.empty();
  return hub;
}

LocalHub::~LocalHub() {
  check_refused_ranges();
  stop();
  if (stdin_fd_ >= 0) ::close(stdin_fd_);
  if (stdout_fd_ >= 0) ::close(stdout_fd_);
  if (stderr_fd_ >= 0) ::close(stderr_fd_);
}

void LocalHub::stop() {
  if (pid_ > 0) {
    ::kill(pid_, SIGTERM);
    auto deadline = Clock::now() + kStopGrace;
    bool reaped = false;
    while (Clock::now() < deadline) {
      if (::waitpid(pid_, nullptr, WNOHANG) == pid_) {
        reaped = true;
        break;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    if (!reaped) {
      ::kill(pid_, SIGKILL);
      ::waitpid(pid_, nullptr, 0);
    }
    pid_ = -1;
  }
}

std::string LocalHub::server_stderr() const { return stderr_fd_ >= 0 ? read_fd_text(stderr_fd_) : ""; }

std::string LocalHub::control(const std::string& method, const std::string& path, const std::string& body) {
  std::string response;
  int status = http_exchange(api_port_, method, path, body, &response);
  if (status < 200 || status >= 300)
    throw std::runtime_error("local hub " + method + " " + path + " -> " + std::to_string(status) + ": " +
                             response);
  return response;
}

nlohmann::json LocalHub::stats() { return nlohmann::json::parse(control("GET", "/_hubfs/stats", "")); }

nlohmann::json LocalHub::trace() { return nlohmann::json::parse(control("GET", "/_hubfs/trace", "")); }

void LocalHub::reset_stats() { control("POST", "/_hubfs/reset", ""); }

void LocalHub::add_fault(const nlohmann::json& fault) { control("POST", "/_hubfs/faults", fault.dump()); }

void LocalHub::clear_faults() { control("DELETE", "/_hubfs/faults", ""); }

nlohmann::json LocalHub::pending_faults() { return nlohmann::json::parse(control("GET", "/_hubfs/faults", "")); }

void LocalHub::expire_urls() { control("POST", "/_hubfs/expire", ""); }

nlohmann::json LocalHub::refused_ranges() {
  return nlohmann::json::parse(control("GET", "/_hubfs/refused-ranges", ""));
}

void LocalHub::expect_refused_ranges() { control("POST", "/_hubfs/refused-ranges/expect", ""); }

void LocalHub::check_refused_ranges() {
  if (pid_ <= 0 || tls_) return;
  nlohmann::json seen;
  try {
    seen = refused_ranges();
  } catch (const std::exception&) {
    return;  // a server that died or hangs: the test that did it fails on its own
  }
  if (seen.value("count", 0) == 0 || seen.value("expected", false)) return;
  ADD_FAILURE() << "the local Hub refused " << seen["count"] << " xorb Range(s) that their signed URLs do not "
                << "list (the real service refuses them too; a client must send exactly a listed range or "
                << "the listed set). First ones: " << seen["samples"].dump()
                << ". A test that sends them on purpose calls LocalHub::expect_refused_ranges().";
}

void write_file(const std::string& path, std::string_view bytes) {
  std::filesystem::path p(path);
  if (p.has_parent_path()) std::filesystem::create_directories(p.parent_path());
  std::ofstream out(p, std::ios::binary | std::ios::trunc);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  out.close();
  if (!out) throw std::runtime_error("cannot write " + path);
}

}  // namespace hubfs::testing
