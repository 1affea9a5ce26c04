#include "metrics.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <map>
#include <sstream>

#include "common/log.h"

namespace hubfs {
namespace {

// One metric family: where its value is in the status JSON, and what Prometheus calls it.
struct MetricFamily {
  std::vector<std::string> path;  // e.g. {"disk_cache", "evictions"}
  const char* name;
  const char* type;  // counter or gauge
  const char* help;
  const char* label = nullptr;  // an extra label naming which one of the family this is
  const char* label_value = nullptr;
};

// Requests, bytes and errors by kind; hits by tier; evictions; quotas (per bucket, below);
// retries; verification. The JSON fields are those `hubfs status --json` documents.
const std::vector<MetricFamily>& metric_families() {
  static const std::vector<MetricFamily> kFamilies = {
      {{"requests"}, "hubfs_upstream_requests_total", "counter", "Upstream HTTP requests since mount (every kind)"},
      {{"api_calls"}, "hubfs_hub_requests_total", "counter", "Requests to the Hub by kind", "kind", "api"},
      {{"resolves"}, "hubfs_hub_requests_total", "counter", "Requests to the Hub by kind", "kind", "resolve"},
      {{"range_requests"}, "hubfs_hub_requests_total", "counter", "Requests to the Hub by kind", "kind", "range"},
      {{"bytes_fetched"}, "hubfs_fetched_bytes_total", "counter", "Bytes of file content fetched upstream"},
      {{"blocks_fetched"}, "hubfs_fetched_blocks_total", "counter", "Blocks fetched upstream"},
      {{"errors"}, "hubfs_fetch_errors_total", "counter", "Fetches that failed after their retries"},
      {{"retries"}, "hubfs_retries_total", "counter", "Upstream requests retried"},
      {{"hedges"}, "hubfs_hedges_total", "counter", "Hedged (duplicate) requests sent for slow ones"},
      {{"hedge_wins"}, "hubfs_hedge_wins_total", "counter", "Hedged requests that answered first"},
      {{"in_flight"}, "hubfs_requests_in_flight", "gauge", "Upstream requests in flight now"},
      {{"queued"}, "hubfs_requests_queued", "gauge", "Upstream requests waiting for a slot now"},
      {{"memory_hits"}, "hubfs_hits_total", "counter", "Block reads served by a cache tier", "tier", "memory"},
      {{"disk_hits"}, "hubfs_hits_total", "counter", "Block reads served by a cache tier", "tier", "disk"},
      {{"shared_cache", "hits"}, "hubfs_hits_total", "counter", "Block reads served by a cache tier", "tier", "shared"},
      {{"shared_cache", "misses"}, "hubfs_shared_cache_misses_total", "counter", "Shared-tier lookups that missed"},
      {{"shared_cache", "bytes_read"}, "hubfs_shared_cache_read_bytes_total", "counter", "Bytes read from the shared tier"},
      {{"shared_cache", "stored"}, "hubfs_shared_cache_stored_total", "counter", "Blocks stored in the shared tier"},
      {{"shared_cache", "bytes_written"}, "hubfs_shared_cache_written_bytes_total", "counter",
       "Bytes written to the shared tier"},
      {{"shared_cache", "dropped"}, "hubfs_shared_cache_dropped_total", "counter", "Stores dropped (queue full)"},
      {{"shared_cache", "errors"}, "hubfs_shared_cache_errors_total", "counter", "Shared-tier requests that failed"},
      {{"shared_cache", "nodes_down"}, "hubfs_shared_cache_nodes_down", "gauge", "Shared-tier nodes down now"},
      {{"disk_cache", "evictions"}, "hubfs_evictions_total", "counter", "Blocks evicted from a cache tier", "tier", "disk"},
      {{"disk_cache", "bytes_used"}, "hubfs_cache_bytes", "gauge", "Bytes held by a cache tier", "tier", "disk"},
      {{"memory_bytes"}, "hubfs_cache_bytes", "gauge", "Bytes held by a cache tier", "tier", "memory"},
      {{"disk_cache", "corrupt"}, "hubfs_corrupt_blocks_total", "counter", "Damaged blocks found (never served)",
       "tier", "disk"},
      {{"shared_cache", "corrupt"}, "hubfs_corrupt_blocks_total", "counter", "Damaged blocks found (never served)",
       "tier", "shared"},
      {{"disk_cache", "write_failures"}, "hubfs_disk_cache_write_failures_total", "counter",
       "Blocks the disk cache could not write"},
      {{"read_ahead_bytes"}, "hubfs_read_ahead_bytes_total", "counter", "Bytes fetched ahead of reads"},
      {{"hints"}, "hubfs_hints_total", "counter", "Range hints received"},
      {{"kernel_reads"}, "hubfs_kernel_reads_total", "counter", "Read requests the kernel sent the mount"},
      {{"kernel_read_bytes"}, "hubfs_kernel_read_bytes_total", "counter", "Bytes replied to the kernel's reads"},
      {{"hinted_bytes"}, "hubfs_hinted_bytes_total", "counter", "Bytes named by range hints"},
      {{"files_verified"}, "hubfs_files_verified_total", "counter", "Files whose whole-file hash was checked"},
      {{"verify_failures"}, "hubfs_verification_failures_total", "counter",
       "Files that failed their content hash (their blocks dropped, never served)"},
      {{"uptime_s"}, "hubfs_uptime_seconds", "gauge", "Seconds since the mount started"},
  };
  return kFamilies;
}

// Per quota bucket (status "quotas": {"api": {...}, "resolvers": {...}}).
struct MetricQuotaFamily {
  const char* field;
  const char* name;
  const char* type;
  const char* help;
};
const MetricQuotaFamily kQuotaFamilies[] = {
    {"remaining", "hubfs_quota_remaining", "gauge", "Requests left in the Hub's quota window, as it last said"},
    {"quota", "hubfs_quota_limit", "gauge", "The Hub's quota per window, as it last said"},
    {"requests", "hubfs_quota_requests_total", "counter", "Requests counted against the bucket"},
    {"rate_limited", "hubfs_rate_limited_total", "counter", "Requests the Hub answered 429"},
    {"waiting", "hubfs_quota_waiting", "gauge", "Requests waiting for the quota window now"},
};

std::string escape_metric_label(const std::string& v) {
  std::string out;
  for (char c : v) {
    if (c == '\\') out += "\\\\";
    else if (c == '"') out += "\\\"";
    else if (c == '\n') out += "\\n";
    else out += c;
  }
  return out;
}

std::string metric_number(const nlohmann::json& v) {
  if (v.is_boolean()) return v.get<bool>() ? "1" : "0";
  if (v.is_number_integer() || v.is_number_unsigned()) return v.dump();
  char buf[40];
  std::snprintf(buf, sizeof buf, "%.17g", v.get<double>());
  return buf;
}

const nlohmann::json* metric_field(const nlohmann::json& j, const std::vector<std::string>& path) {
  const nlohmann::json* v = &j;
  for (const std::string& key : path) {
    if (!v->is_object() || !v->contains(key)) return nullptr;
    v = &(*v)[key];
  }
  return v->is_number() || v->is_boolean() ? v : nullptr;
}

std::string metric_text_of(const nlohmann::json& j, const char* key) {
  return j.contains(key) && j[key].is_string() ? j[key].get<std::string>() : "";
}

// Collects samples by family so each family's HELP and TYPE come once, before its samples.
struct MetricExposition {
  std::vector<std::string> order;
  std::map<std::string, std::pair<std::string, std::string>> header;  // name -> (type, help)
  std::map<std::string, std::string> samples;                          // name -> lines
  void add(const std::string& name, const char* type, const char* help, const std::string& labels,
           const std::string& value) {
    if (!header.count(name)) {
      order.push_back(name);
      header[name] = {type, help};
    }
    samples[name] += name + "{" + labels + "} " + value + "\n";
  }
  // A sample of family `family` under another name (a histogram's _bucket, _sum, _count).
  void add_sample(const std::string& family, const char* type, const char* help, const std::string& sample,
                  const std::string& labels, const std::string& value) {
    if (!header.count(family)) {
      order.push_back(family);
      header[family] = {type, help};
    }
    samples[family] += sample + "{" + labels + "} " + value + "\n";
  }
  std::string str() const {
    std::string out;
    for (const std::string& name : order) {
      out += "# HELP " + name + " " + header.at(name).second + "\n";
      out += "# TYPE " + name + " " + header.at(name).first + "\n";
      out += samples.at(name);
    }
    return out;
  }
};

// The status's "latency" histograms (bounds, counts per bucket, count, sum) as one Prometheus
// histogram family with a `source` label: cumulative buckets ending in +Inf, then _sum and _count.
void add_latency_histograms(MetricExposition& e, const std::string& mount, const nlohmann::json& status) {
  static const char* kName = "hubfs_read_latency_seconds";
  static const char* kHelp =
      "Read latency by source: hub (API calls and resolves), cdn (range requests for file content), disk (disk "
      "cache hits), shared (blocks asked of the shared tier)";
  if (!status.contains("latency") || !status["latency"].is_object()) return;
  for (const auto& [source, h] : status["latency"].items()) {
    if (!h.is_object() || !h.contains("le") || !h.contains("counts")) continue;
    const nlohmann::json& le = h["le"];
    const nlohmann::json& counts = h["counts"];
    if (!le.is_array() || !counts.is_array() || counts.size() != le.size() + 1) continue;
    const std::string labels = mount + ",source=\"" + escape_metric_label(source) + "\"";
    uint64_t cumulative = 0;
    for (size_t i = 0; i < counts.size(); ++i) {
      cumulative += counts[i].get<uint64_t>();
      char bound[32] = "+Inf";  // %g: "0.0005", "2.5", "30", as Prometheus clients print bounds
      if (i < le.size()) std::snprintf(bound, sizeof bound, "%g", le[i].get<double>());
      const std::string bucket_labels = labels + ",le=\"" + bound + "\"";
      e.add_sample(kName, "histogram", kHelp, std::string(kName) + "_bucket", bucket_labels, std::to_string(cumulative));
    }
    e.add_sample(kName, "histogram", kHelp, std::string(kName) + "_sum", labels, metric_number(h.value("sum_s", 0.0)));
    e.add_sample(kName, "histogram", kHelp, std::string(kName) + "_count", labels, std::to_string(cumulative));
  }
}

}  // namespace

std::string prometheus_text(const std::vector<nlohmann::json>& statuses) {
  MetricExposition e;
  for (const nlohmann::json& s : statuses) {
    if (!s.is_object()) continue;
    const std::string mount = "mountpoint=\"" + escape_metric_label(metric_text_of(s, "mountpoint")) + "\"";
    e.add("hubfs_mount_info", "gauge", "The mount: its repo, revision and pinned commit",
          mount + ",repo=\"" + escape_metric_label(metric_text_of(s, "repo")) + "\",revision=\"" +
              escape_metric_label(metric_text_of(s, "revision")) + "\",commit=\"" + escape_metric_label(metric_text_of(s, "commit")) + "\"",
          "1");
    for (const MetricFamily& f : metric_families()) {
      const nlohmann::json* v = metric_field(s, f.path);
      if (v == nullptr) continue;
      std::string labels = mount;
      if (f.label) labels += std::string(",") + f.label + "=\"" + f.label_value + "\"";
      e.add(f.name, f.type, f.help, labels, metric_number(*v));
    }
    add_latency_histograms(e, mount, s);
    if (s.contains("quotas") && s["quotas"].is_object()) {
      for (const auto& [bucket, q] : s["quotas"].items()) {
        for (const MetricQuotaFamily& f : kQuotaFamilies) {
          const nlohmann::json* v = metric_field(q, {f.field});
          if (v == nullptr) continue;
          e.add(f.name, f.type, f.help, mount + ",bucket=\"" + escape_metric_label(bucket) + "\"", metric_number(*v));
        }
      }
    }
  }
  return e.str();
}

Result<MetricsAddress> parse_metrics_address(const std::string& text) {
  MetricsAddress a{"127.0.0.1", 0};
  std::string port = text;
  if (!text.empty() && text[0] == '[') {
    const size_t close = text.find("]:");
    if (close == std::string::npos) return InvalidArgument("--metrics " + text + ": expected [ADDRESS]:PORT");
    a.host = text.substr(1, close - 1);
    port = text.substr(close + 2);
  } else if (const size_t colon = text.rfind(':'); colon != std::string::npos) {
    a.host = text.substr(0, colon);
    port = text.substr(colon + 1);
  }
  char* end = nullptr;
  const long p = std::strtol(port.c_str(), &end, 10);
  if (port.empty() || *end != '\0' || p < 0 || p > 65535 || a.host.empty()) {
    return InvalidArgument("--metrics " + text + ": expected PORT, ADDRESS:PORT or [ADDRESS]:PORT (e.g. 9101 or "
                           "127.0.0.1:9101)");
  }
  a.port = static_cast<int>(p);
  return a;
}

Result<std::unique_ptr<MetricsServer>> MetricsServer::start(const MetricsAddress& address,
                                                            std::function<std::string()> status_json,
                                                            std::string* published) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_NUMERICHOST | AI_PASSIVE;
  addrinfo* found = nullptr;
  const std::string port = std::to_string(address.port);
  if (int rc = getaddrinfo(address.host.c_str(), port.c_str(), &hints, &found); rc != 0) {
    return InvalidArgument("--metrics: " + address.host + " is not an IP address (" + gai_strerror(rc) + ")");
  }
  std::unique_ptr<MetricsServer> server(new MetricsServer());
  server->listen_fd_ = socket(found->ai_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
  int one = 1;
  if (server->listen_fd_ >= 0) setsockopt(server->listen_fd_, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  if (server->listen_fd_ < 0 || bind(server->listen_fd_, found->ai_addr, found->ai_addrlen) != 0 ||
      listen(server->listen_fd_, 16) != 0) {
    const int err = errno;
    freeaddrinfo(found);
    return Status(Code::kUnavailable, "--metrics: cannot listen on " + address.host + ":" + port + " (" +
                                          strerror(err) + "); choose another port");
  }
  freeaddrinfo(found);
  sockaddr_storage bound{};
  socklen_t len = sizeof bound;
  getsockname(server->listen_fd_, reinterpret_cast<sockaddr*>(&bound), &len);
  char host[NI_MAXHOST], serv[NI_MAXSERV];
  getnameinfo(reinterpret_cast<sockaddr*>(&bound), len, host, sizeof host, serv, sizeof serv,
              NI_NUMERICHOST | NI_NUMERICSERV);
  server->bound_ = (bound.ss_family == AF_INET6 ? "[" + std::string(host) + "]" : std::string(host)) + ":" + serv;
  if (pipe2(server->stop_pipe_, O_CLOEXEC) != 0) return Status(Code::kUnavailable, "--metrics: pipe failed");
  server->status_json_ = std::move(status_json);
  if (published) *published = server->bound_;
  server->thread_ = std::thread([s = server.get()] { s->serve(); });
  log_info("metrics (Prometheus text) at http://" + server->bound_ + "/metrics");
  return server;
}

MetricsServer::~MetricsServer() {
  if (thread_.joinable()) {
    const char stop = 1;
    (void)!write(stop_pipe_[1], &stop, 1);
    thread_.join();
  }
  for (int fd : {listen_fd_, stop_pipe_[0], stop_pipe_[1]})
    if (fd >= 0) close(fd);
}

void MetricsServer::serve() {
  for (;;) {
    pollfd fds[2] = {{listen_fd_, POLLIN, 0}, {stop_pipe_[0], POLLIN, 0}};
    if (poll(fds, 2, -1) < 0) {
      if (errno == EINTR) continue;
      return;
    }
    if (fds[1].revents) return;
    const int fd = accept4(listen_fd_, nullptr, nullptr, SOCK_CLOEXEC);
    if (fd < 0) continue;
    answer(fd);
    close(fd);
  }
}

void MetricsServer::answer(int fd) {
  // A scrape's request is a few hundred bytes; a client that sends nothing for 2 s is dropped.
  timeval timeout{2, 0};
  setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, sizeof timeout);
  setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &timeout, sizeof timeout);
  std::string request;
  char buf[2048];
  while (request.find("\r\n\r\n") == std::string::npos && request.size() < 16384) {
    const ssize_t n = read(fd, buf, sizeof buf);
    if (n <= 0) return;
    request.append(buf, static_cast<size_t>(n));
  }
  const std::string line = request.substr(0, request.find("\r\n"));
  std::string status = "200 OK", type = "text/plain; version=0.0.4; charset=utf-8", body;
  if (line.rfind("GET /metrics ", 0) == 0 || line.rfind("GET /metrics?", 0) == 0) {
    body = prometheus_text({nlohmann::json::parse(status_json_(), nullptr, false)});
  } else {
    status = "404 Not Found";
    type = "text/plain; charset=utf-8";
    body = "hubfs serves its metrics at /metrics\n";
  }
  const std::string response = "HTTP/1.1 " + status + "\r\nContent-Type: " + type +
                               "\r\nContent-Length: " + std::to_string(body.size()) + "\r\nConnection: close\r\n\r\n" +
                               body;
  size_t off = 0;
  while (off < response.size()) {
    // MSG_NOSIGNAL: a scraper that hung up must not end the daemon with SIGPIPE.
    const ssize_t n = send(fd, response.data() + off, response.size() - off, MSG_NOSIGNAL);
    if (n <= 0) return;
    off += static_cast<size_t>(n);
  }
}

}  // namespace hubfs
