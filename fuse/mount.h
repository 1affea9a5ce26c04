// `hubfs mount`: its configuration (defaults and size parsing in mount_config.cc) and the
// mount itself (mount.cc: wiring the stack, serving it, tearing it down in order; the
// background process in daemon.cc; mountpoint checks and `hubfs unmount` in mountpoint.cc).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "common/status.h"
#include "net/curl_transport.h"

namespace hubfs {

struct MountConfig {
  std::string repo_spec;  // [models/|datasets/|spaces/]ORG/NAME[@REVISION][/SUB/DIR]
  std::optional<std::string> repo_type;
  std::optional<std::string> subfolder;  // --subfolder: the repo directory the mount shows
  std::optional<std::string> revision;
  std::string mountpoint;
  std::string endpoint;   // already defaulted (flag, $HF_ENDPOINT, https://huggingface.co)
  std::string cache_dir;  // already defaulted
  uint64_t cache_size = 10ull << 30;
  bool foreground = false;
  std::vector<std::string> fuse_options;  // from -o, passed through
  int read_timeout_s = 120;               // a read not served by then fails with EIO
  // --rate-limit-wait: how long a request may wait, in all, for the Hub's quota windows (the
  // Hub's windows are 5 minutes: longer than that, so a spent quota is always waited out).
  int rate_limit_wait_s = 330;
  int max_requests = 16;                  // HTTP requests in flight
  // No byte for this long aborts a request (kTimeout, then retried): metadata requests (API
  // calls, resolves) and data requests (ranges of files). Unset: the transport's defaults (30 s
  // to the first byte, 20 s between bytes). Filled from HF_HUB_ETAG_TIMEOUT and
  // HF_HUB_DOWNLOAD_TIMEOUT (environment_timeouts) when no flag set them.
  std::optional<int> metadata_timeout_s;
  std::optional<int> stall_timeout_s;
  std::string log_file;                   // background mode: where logs go ("" = nowhere)
  std::string ca_bundle;                  // --ca-bundle; "" = $REQUESTS_CA_BUNDLE, ... (find_ca_bundles)
  bool debug = false;
  // --offline (or HF_HUB_OFFLINE): mount from the stored listings and blocks alone, asking the Hub
  // nothing; a revision resolves to the commit it pointed at when last mounted online.
  bool offline = false;
  // --hub: the whole Hub at the mountpoint (MNT/datasets/ORG/NAME[@REV]/...); repo_spec is empty.
  bool hub = false;
  // --shared-cache: memcached servers ("host:port") of the shared block tier; empty = none.
  std::vector<std::string> shared_cache;
  // --shared-cache-private: share blocks of private and gated repos too (anyone who can reach
  // the servers can read them).
  bool shared_cache_private = false;
  // --shared-cache-key-file: the key the cluster's machines share, authenticating every block in
  // the tier (required with --shared-cache: memcached lets anyone who reaches it write).
  std::string shared_cache_key_file;
};

// Runs the mount; returns the process exit code. Without foreground it returns once the mount
// answers (0) or has failed (non-zero, cause on stderr), leaving a daemon serving it.
int run_mount(const MountConfig& config);


// "10G", "512M", "1.5T", "4096" -> bytes (K/M/G/T are powers of 1024).
Result<uint64_t> parse_size(const std::string& text);

// Fills the timeouts no flag set from huggingface_hub's HF_HUB_ETAG_TIMEOUT (metadata) and
// HF_HUB_DOWNLOAD_TIMEOUT (data stall); a bad value is an error naming the variable.
Status apply_environment_timeouts(MountConfig& config);

// Defaults as documented in --help.
std::string default_endpoint();
std::string default_cache_dir();

// The CA certificates TLS connections trust: `flag` (--ca-bundle) alone, else every bundle the
// environment names (find_ca_bundles), else libcurl's store; fills options.ca_bundle or
// options.ca_pem. A named bundle that cannot be read is an error naming where it came from.
// The mount and `hubfs cache verify --complete` use it.
Status choose_ca_bundle(const std::string& flag, CurlOptions& options);

}  // namespace hubfs
