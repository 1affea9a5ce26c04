// HttpTransport over one libcurl multi handle driven by one event-loop thread: connection
// reuse, HTTP/2 multiplexing where the server offers it, many transfers in flight.
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "common/env.h"
#include "common/http.h"

namespace hubfs {

struct CurlOptions {
  // Time and its thread: request timeouts and hedging delays are measured on its clock, and the
  // event loop runs on one of its executors. Required; must outlive the transport. (libcurl's
  // own timeouts and its socket waits use libcurl's clock: this transport's tests are
  // integration tests, on real sockets.)
  Env* env = nullptr;
  int max_in_flight = 16;             // transfers running at once (companions aside); more wait in a queue
  long connect_timeout_ms = 10'000;
  // curl's receive buffer per transfer, which curl allocates when a transfer starts and frees
  // when it ends: 512 KiB x max_in_flight of memory, against the 16 KiB default that held back
  // large ranges. A process whose malloc keeps freed heap (the daemon's mallopt) reuses it warm;
  // elsewhere each transfer's buffer may be faulted in afresh (docs/constants.md,
  // receive_buffer_bytes).
  long receive_buffer_bytes = 512 * 1024;
  long first_byte_timeout_ms = 30'000;  // the Hub's CDN stalls ~3 s on cold objects; allow that
  long stall_timeout_ms = 20'000;       // no byte for this long aborts the transfer (kTimeout)
  std::string user_agent = "hubfs/0.1";
  // Hedged first bytes: a GET whose first byte has not come after a delay learnt from recent
  // first-byte times (1.5 x their p95, at least hedge_min_delay_ms) is sent once more on another
  // connection; the first to answer wins and the other is cancelled. A CDN that stalls ~3 s on a
  // cold object then costs one extra request instead of the stall. Off by default (tests that
  // count requests); the mount turns it on.
  bool hedge = false;
  long hedge_min_delay_ms = 250;
  long hedge_initial_delay_ms = 1000;  // before enough first-byte times are known
  // PEM file of the CA certificates TLS peers are checked against (CURLOPT_CAINFO); "" keeps
  // libcurl's built-in store. The mount fills it from --ca-bundle or find_ca_bundle().
  std::string ca_bundle;
  // PEM text of CA certificates trusted instead of ca_bundle (CURLOPT_CAINFO_BLOB): the union of
  // several bundles the environment names (find_ca_bundles). Non-empty wins over ca_bundle.
  std::string ca_pem;
  // Proxies are not options: libcurl reads https_proxy/HTTPS_PROXY, http_proxy (lowercase
  // only), ALL_PROXY and NO_PROXY from the environment itself, as the curl command does.
};

// The first CA bundle the environment names: $REQUESTS_CA_BUNDLE, $CURL_CA_BUNDLE,
// $SSL_CERT_FILE (set and non-empty). A mount trusts all of them (find_ca_bundles).
struct CaBundle {
  std::string path;
  std::string source;  // the variable's name, for messages
};
std::optional<CaBundle> find_ca_bundle();
// Every bundle the environment names, in that order, each path once. Containers and CI images
// often set REQUESTS_CA_BUNDLE and CURL_CA_BUNDLE to the system bundle; a user who then points
// SSL_CERT_FILE at a private CA means that CA too, so a mount trusts them all (the union), not
// the first alone (which left SSL_CERT_FILE ignored whenever another variable was set).
std::vector<CaBundle> find_ca_bundles();

struct CurlStats {
  uint64_t requests = 0;    // transfers started (hedges not included)
  uint64_t hedges = 0;      // duplicate transfers started for a slow first byte
  uint64_t hedge_wins = 0;  // hedges that answered first
  uint64_t in_flight = 0;   // transfers running now (hedges included)
  uint64_t queued = 0;      // transfers waiting for a slot
};

// Callbacks run on the one event-loop thread: they must not block (no perform() on this
// transport, no disk-heavy work) and must not throw, or every other transfer waits (or the
// process ends). Submitting more work from a
// callback is fine. Requests beyond max_in_flight wait in a FIFO queue; companions
// (HttpRequest::companion: a read's further pieces) have max_in_flight / 4 slots (at least one)
// beside them.
// Failures: kTimeout for connect, first-byte and stall timeouts; kUnavailable for connect
// errors, resets and bodies cut short; kPermissionDenied for a TLS peer whose certificate is
// not trusted or a CA bundle that cannot be used (never transient: RetryingTransport does not
// retry it, and the message says how to trust the certificate); kCorrupt when the body passes request.max_body;
// kInvalidArgument for a malformed URL or a method other than GET, HEAD, POST.
// max_body applies to successful (2xx) responses only: an error response (a 503 page) is
// returned with its status and at most the first 64 KiB of its body, however long it is, so
// the status is what callers see and retry on.
class CurlTransport : public HttpTransport {
 public:
  explicit CurlTransport(CurlOptions options = {});
  ~CurlTransport() override;  // shutdown()
  void submit(HttpRequest request, Callback done) override;
  // Fails every pending and running request (kUnavailable) and joins the loop; later submits
  // fail at once. Idempotent.
  void shutdown();
  CurlStats stats() const;
  // The options it runs with (as given).
  const CurlOptions& options() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace hubfs
