// Starts the bundled local Hub server (tools/hub_server.py) for one test or benchmark, and talks
// to its control endpoints (/_hubfs/stats, faults, expiring signed URLs). The server serves
// `root`, laid out as <root>/{models,datasets,spaces}/<org>/<name>/ (see the script's header).
#pragma once

#include <sys/types.h>

#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

namespace hubfs::testing {

struct LocalHubOptions {
  std::string root = {};  // "= {}": designated initializers may omit any field without -Wextra noise
  int latency_ms = 0;      // added before answering every request, on both origins
  int bandwidth_mbps = 0;  // megabits/s per connection; 0 = unlimited (sendfile)
  int url_ttl = 3600;      // seconds a signed CDN URL stays valid
  int page_size = 1000;    // most entries per tree-listing page
  std::vector<std::string> tokens = {};  // bearer tokens accepted for private/gated repos
  int lfs_threshold = 10240;        // files at least this big are served through the CDN
  // PEM certificate and key: both origins speak https (url() and cdn_url() say so). The control
  // calls below speak plain http and do not work then: read /_hubfs/stats with curl -k instead.
  std::string tls_cert = {};
  std::string tls_key = {};
  // More server flags as given, e.g. {"--quota", "api=30,resolvers=200", "--quota-window", "10"},
  // {"--token-no-access", T}, {"--url-style", "s3"}, {"--redirect-chain"} (see the script's --help).
  std::vector<std::string> extra_args = {};
  // LFS files are Xet-stored (--xet): xetHash, the read token, the CAS API and xorbs, packed by
  // build/bin/hubfs-xet-pack (a test using it must depend on the hubfs_xet_pack target).
  bool xet = false;
};

class LocalHub {
 public:
  // Spawns the server and waits (at most 10 s) for it to listen. Throws std::runtime_error with
  // the server's stderr if it exits or stays silent.
  static std::unique_ptr<LocalHub> start(const LocalHubOptions& options);
  // Stops the server: SIGTERM, then SIGKILL if it is still alive after 3 s. First, the shutdown
  // check: a xorb Range the server refused under --strict-xet-ranges (the client asked for bytes
  // its URL does not sign, which the real service refuses) fails the running test (ADD_FAILURE),
  // unless expect_refused_ranges() was called.
  ~LocalHub();
  LocalHub(const LocalHub&) = delete;
  LocalHub& operator=(const LocalHub&) = delete;

  // The Hub API origin (use as HF_ENDPOINT) and the CDN origin, e.g. "http://127.0.0.1:40211".
  std::string url() const { return url_; }
  std::string cdn_url() const { return cdn_url_; }
  pid_t pid() const { return pid_; }

  // GET /_hubfs/stats: requests, api_requests, resolve_requests, cdn_requests, bytes_sent,
  // peak_concurrency, cdn_authorization_headers, range_requests, head_requests,
  // faults_injected, in_flight, by_path, by_status.
  nlohmann::json stats();
  // GET /_hubfs/trace: the requests since the last reset, in order, each with "method", "path",
  // "begin" and, once answered, "end" (seconds since the reset) and "status".
  nlohmann::json trace();
  void reset_stats();
  // Queues a fault for the next matching requests, e.g. {"status": 503, "count": 2,
  // "retry_after": 1} or {"mode": "reset", "path_contains": "/blobs/"}. Throws on a bad spec.
  void add_fault(const nlohmann::json& fault);
  void clear_faults();
  // GET /_hubfs/faults: the faults still queued, each with its remaining count.
  nlohmann::json pending_faults();
  // Every signed CDN URL handed out so far answers 403 from now on.
  void expire_urls();
  // GET /_hubfs/refused-ranges: {"count", "expected", "strict", "samples": [{"path", "range", "why"}]}.
  nlohmann::json refused_ranges();
  // This test sends xorb Ranges its URLs do not sign on purpose: the shutdown check lets them by.
  void expect_refused_ranges();
  // What the server has written to stderr so far (its tracebacks, or every request when
  // verbose), for a failing test's message.
  std::string server_stderr() const;

 private:
  LocalHub() = default;
  void stop();  // SIGTERM, SIGKILL after 3 s, reap; idempotent
  void check_refused_ranges();  // the shutdown check (see ~LocalHub)
  // One blocking request to the control endpoints; returns the body, throws on non-2xx.
  std::string control(const std::string& method, const std::string& path, const std::string& body);

  pid_t pid_ = -1;
  int stdin_fd_ = -1;   // we hold the write end: the server exits when it closes
  int stdout_fd_ = -1;  // the "listening" line arrives here
  int stderr_fd_ = -1;  // an unlinked temp file, so a crashed test leaves nothing behind
  std::string url_;
  std::string cdn_url_;
  int api_port_ = 0;
  bool tls_ = false;  // the control calls speak plain http: no shutdown check over TLS
};

// Writes `bytes` to `path`, creating parent directories; throws std::runtime_error on failure.
void write_file(const std::string& path, std::string_view bytes);

}  // namespace hubfs::testing
