// Metrics for fleets: a mount's counters in Prometheus's text format (0.0.4), served over HTTP
// by `--metrics ADDR:PORT` and printed by `hubfs status --prometheus`. Both are made from the
// daemon's status JSON (fuse/status.h), so a scrape never disagrees with `hubfs status --json`.
#pragma once

#include <atomic>
#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>

#include "common/status.h"

namespace hubfs {

// The exposition of mounts' status objects: each metric once (HELP, TYPE), a sample per mount
// labelled with its mountpoint. Fields a status lacks (null: no disk cache, no shared tier) give
// no sample.
std::string prometheus_text(const std::vector<nlohmann::json>& statuses);

// `--metrics`: "PORT" (on 127.0.0.1), "ADDR:PORT" or "[V6ADDR]:PORT"; port 0 picks a free one.
struct MetricsAddress {
  std::string host;
  int port = 0;
};
Result<MetricsAddress> parse_metrics_address(const std::string& text);

// Answers GET /metrics on its own thread with prometheus_text of status_json(); anything else
// gets 404. One connection at a time: a scrape is one short request.
class MetricsServer {
 public:
  // `published`, if given, receives address() before the first request can be answered (the
  // status JSON shows it, so a port 0 can be found).
  static Result<std::unique_ptr<MetricsServer>> start(const MetricsAddress& address,
                                                      std::function<std::string()> status_json,
                                                      std::string* published = nullptr);
  ~MetricsServer();  // stops serving and joins the thread
  // Where it listens, "HOST:PORT" with the port bound (for port 0).
  const std::string& address() const { return bound_; }

 private:
  MetricsServer() = default;
  void serve();
  void answer(int fd);

  int listen_fd_ = -1;
  int stop_pipe_[2] = {-1, -1};
  std::string bound_;
  std::function<std::string()> status_json_;
  std::thread thread_;
};

}  // namespace hubfs
