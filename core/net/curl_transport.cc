#include "net/curl_transport.h"

#include <curl/curl.h>
#include <strings.h>

#include <algorithm>
#include <atomic>
#include <charconv>
#include <chrono>
#include <condition_variable>
#include <cstdlib>
#include <deque>
#include <mutex>
#include <thread>
#include <unordered_map>
#include <vector>

#include "common/big_buffer.h"
#include "common/url.h"
#include "net/hedge_policy.h"
#include "net/transfer_counters.h"

namespace hubfs {
namespace {

using Clock = MonotonicClock;

// The loop wakes at least this often even when nothing happens, so a missed wakeup or a
// deadline computed before a clock hiccup can delay a timeout by at most this much.
constexpr auto kMaxPollWait = std::chrono::milliseconds(1000);
// Idle connections kept beyond one per transfer in flight: ranges each hold a CDN connection of
// their own, and the Hub's API host needs its own too.
constexpr long kSpareConnections = 4;
// Of an error response's body (a 503 page), only this much is kept: enough for the Hub's JSON
// error message, never a reason to abort the transfer and lose the status.
constexpr size_t kErrorBodyLimit = 64 * 1024;

// curl_global_init is not thread-safe on every build; do it exactly once per process.
void global_init_once() {
  static std::once_flag once;
  std::call_once(once, [] { curl_global_init(CURL_GLOBAL_DEFAULT); });
}

char ascii_lower(char c) { return (c >= 'A' && c <= 'Z') ? static_cast<char>(c - 'A' + 'a') : c; }

std::string_view trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t' || s.back() == '\r' || s.back() == '\n'))
    s.remove_suffix(1);
  return s;
}

// One request from submit() to its callback. A hedged request has two transfers (the original
// and its twin) sharing one callback slot; whichever answers first empties it.
struct Transfer {
  HttpRequest request;
  std::shared_ptr<HttpTransport::Callback> done;
  HttpResponse response;
  curl_slist* header_list = nullptr;
  const MonotonicClock* clock = nullptr;  // the transport's Env's
  Clock::time_point started{};
  Clock::time_point last_byte{};
  bool got_first_byte = false;
  long status = 0;           // from the status line, as soon as it arrives
  Transfer* partner = nullptr;  // the other transfer of a hedged pair, while both run
  bool is_twin = false;
  bool cancelled = false;    // lost the race: removed after the current perform, no callback
  std::optional<Clock::duration> first_byte_after;  // set once, read by the loop
  bool success_status() const { return status >= 200 && status < 300; }
  // Set by a callback that aborts the transfer, so the finish reports the real cause instead
  // of curl's generic "write error".
  std::optional<Status> abort_status;
  char error[CURL_ERROR_SIZE] = {0};

  ~Transfer() {
    if (header_list) curl_slist_free_all(header_list);
  }
  std::string what() const { return request.method + " " + url::url_for_log(request.url); }
};

void note_first_byte(Transfer* t) {
  t->last_byte = t->clock->now();
  if (t->got_first_byte) return;
  t->got_first_byte = true;
  t->first_byte_after = t->last_byte - t->started;
  // The race is decided: the other transfer of a hedged pair stops (the loop removes it; a
  // callback may not remove handles).
  if (t->partner && !t->cancelled) t->partner->cancelled = true;
}

size_t on_header(char* data, size_t size, size_t count, void* user) {
  auto* t = static_cast<Transfer*>(user);
  const size_t n = size * count;
  note_first_byte(t);
  std::string_view line(data, n);
  if (line.starts_with("HTTP/")) {
    // A new response begins (after a 100 Continue, say): forget the previous one's headers.
    t->response.headers.clear();
    size_t space = line.find(' ');
    long code = 0;
    if (space != std::string_view::npos && space + 4 <= line.size())
      std::from_chars(line.data() + space + 1, line.data() + space + 4, code);
    t->status = code;
    return n;
  }
  size_t colon = line.find(':');
  if (colon == std::string_view::npos) return n;  // the blank line ending the headers
  std::string name(trim(line.substr(0, colon)));
  std::transform(name.begin(), name.end(), name.begin(), ascii_lower);
  std::string_view value = trim(line.substr(colon + 1));
  // Only a successful answer is held to max_body: an error page is cut, not refused, so its
  // status (503: retry) is what the caller sees.
  if (name == "content-length" && t->request.method != "HEAD" && t->success_status()) {
    uint64_t length = 0;
    auto [end, ec] = std::from_chars(value.data(), value.data() + value.size(), length);
    if (ec == std::errc() && end == value.data() + value.size()) {
      if (length > t->request.max_body) {
        // Refuse before a single body byte arrives: no point downloading what we will drop.
        t->abort_status = Corrupt("server sent more than asked: " + t->what() + " announced " +
                                  std::to_string(length) + " bytes, the limit is " +
                                  std::to_string(t->request.max_body) +
                                  " (did the server ignore the Range header?)");
        return 0;
      }
      // The hot path: one allocation for the whole body instead of log2(n) regrowths, in huge
      // pages when large, because a fault per 4 KiB page is dear (common/big_buffer.h). A
      // streamed body (HttpRequest::body_sink) needs none.
      if (t->request.body_sink) {
        t->response.headers.emplace_back(std::move(name), std::string(value));
        return n;
      }
      const size_t room = static_cast<size_t>(length);
      t->response.body.reserve(room);
      advise_huge_pages(t->response.body.data(), room);
    }
  }
  t->response.headers.emplace_back(std::move(name), std::string(value));
  return n;
}

size_t on_body(char* data, size_t size, size_t count, void* user) {
  auto* t = static_cast<Transfer*>(user);
  const size_t n = size * count;
  note_first_byte(t);
  if (t->cancelled) return 0;  // lost a hedge race: stop downloading
  if (!t->success_status()) {
    size_t keep = std::min(n, kErrorBodyLimit - std::min(kErrorBodyLimit, t->response.body.size()));
    t->response.body.append(data, keep);
    return n;
  }
  const uint64_t so_far = t->response.body.size() + t->response.streamed;
  if (so_far + n > t->request.max_body) {
    t->abort_status = Corrupt("server sent more than asked: " + t->what() + " body passed " +
                              std::to_string(t->request.max_body) +
                              " bytes (did the server ignore the Range header?)");
    return 0;  // makes curl abort the transfer
  }
  if (BodySink* sink = t->request.body_sink.get()) {
    // Only the transfer that answered first gets here (a hedge's loser is cancelled at the
    // winner's first header byte, above), so one transfer feeds the sink, from its begin().
    if (t->response.streamed == 0) {
      sink->head(static_cast<int>(t->status), t->response.headers);
      sink->begin();
    }
    sink->feed(data, n);
    t->response.streamed += n;
    return n;
  }
  t->response.body.append(data, n);
  return n;
}

Status status_for_curl_error(CURLcode code, const Transfer& t) {
  std::string detail = t.error[0] ? std::string(t.error) : std::string(curl_easy_strerror(code));
  // curl's error buffer may end in a newline.
  while (!detail.empty() && (detail.back() == '\n' || detail.back() == '\r')) detail.pop_back();
  std::string where = t.what() + ": ";
  switch (code) {
    case CURLE_OPERATION_TIMEDOUT:
      return Timeout(where + detail + "; the server or network is slow, retry later");
    case CURLE_URL_MALFORMAT:
    case CURLE_UNSUPPORTED_PROTOCOL:
      return InvalidArgument(where + detail + "; check the endpoint URL");
    case CURLE_OUT_OF_MEMORY:
      return Internal(where + detail);
    case CURLE_PEER_FAILED_VERIFICATION:
    case CURLE_SSL_ISSUER_ERROR:
    case CURLE_SSL_PINNEDPUBKEYNOTMATCH:
    case CURLE_SSL_INVALIDCERTSTATUS:
      // Retrying cannot make a certificate trusted: fail at once, saying how to trust it.
      return PermissionDenied("the certificate of " + url::url_host(t.request.url) +
                              " is not trusted: " + detail +
                              "; if you are behind a TLS-intercepting proxy, point REQUESTS_CA_BUNDLE "
                              "or --ca-bundle at its CA certificate (PEM)");
    case CURLE_SSL_CACERT_BADFILE:
    case CURLE_SSL_CRL_BADFILE:
    case CURLE_SSL_CERTPROBLEM:
      return PermissionDenied(where + "the TLS certificate files cannot be used: " + detail +
                              "; point --ca-bundle (or REQUESTS_CA_BUNDLE, CURL_CA_BUNDLE, "
                              "SSL_CERT_FILE) at a readable PEM file of CA certificates, or unset "
                              "them to use the system's");
    default:
      // Connect failures, DNS, resets, a body cut short ("transfer closed with N bytes
      // remaining to read"), TLS and HTTP/2 stream errors: all transient from our side.
      return Unavailable(where + detail + "; check the network connection, then retry");
  }
}

}  // namespace

std::optional<CaBundle> find_ca_bundle() {
  for (const char* name : {"REQUESTS_CA_BUNDLE", "CURL_CA_BUNDLE", "SSL_CERT_FILE"}) {
    const char* v = std::getenv(name);
    if (v && *v) return CaBundle{v, name};
  }
  return std::nullopt;
}

std::vector<CaBundle> find_ca_bundles() {
  std::vector<CaBundle> out;
  for (const char* name : {"REQUESTS_CA_BUNDLE", "CURL_CA_BUNDLE", "SSL_CERT_FILE"}) {
    const char* v = std::getenv(name);
    if (!v || !*v) continue;
    const bool seen = std::any_of(out.begin(), out.end(), [&](const CaBundle& b) { return b.path == v; });
    if (!seen) out.push_back(CaBundle{v, name});
  }
  return out;
}

struct CurlTransport::Impl {
  CurlOptions options;
  Env& env;
  CURLM* multi = nullptr;
  std::unique_ptr<Executor> loop;  // the event loop's one thread (drained: joined)

  mutable std::mutex mu;  // guards `queue` and `stopping`; never held while a callback runs
  std::deque<std::unique_ptr<Transfer>> queue;
  bool stopping = false;

  // Owned by the loop thread only.
  std::unordered_map<CURL*, std::unique_ptr<Transfer>> running;
  std::vector<CURL*> idle_handles;  // reused: keeps each handle's DNS and TLS session caches
  HedgePolicy hedging;  // when a slow GET gets a twin (net/hedge_policy.h)

  // Lock order: `mu` and the counters' lock (TransferCounters) are leaves, never nested;
  // join_mu is taken with neither held, and held across the loop thread's join.
  TransferCounters counters;  // for stats(): requests, hedges, hedge_wins, in_flight

  static HedgeOptions hedge_options(const CurlOptions& o) {
    HedgeOptions h;
    h.min_delay = std::chrono::milliseconds(o.hedge_min_delay_ms);
    h.initial_delay = std::chrono::milliseconds(o.hedge_initial_delay_ms);
    h.max_in_flight = std::max(1, o.max_in_flight);
    return h;
  }

  explicit Impl(CurlOptions o)
      : options(std::move(o)), env(env_of(options.env, "CurlTransport")), hedging(hedge_options(options)) {
    options.max_in_flight = std::max(1, options.max_in_flight);
    global_init_once();
    multi = curl_multi_init();
    if (multi) {
      curl_multi_setopt(multi, CURLMOPT_PIPELINING, CURLPIPE_MULTIPLEX);
      // One connection per running transfer is the most HTTP/1.1 can use; HTTP/2 multiplexes
      // them over fewer. The pool keeps that many alive for reuse between transfers, plus a
      // few for the API host, so a stream of ranges does not push the Hub's connection out.
      const long most_running = static_cast<long>(options.max_in_flight + companion_slots());
      curl_multi_setopt(multi, CURLMOPT_MAX_HOST_CONNECTIONS, most_running);
      curl_multi_setopt(multi, CURLMOPT_MAXCONNECTS, most_running + kSpareConnections);
    }
    loop = env.new_executor(1);
    loop->post([this] { run(); });
  }

  ~Impl() {
    shutdown();
    for (CURL* h : idle_handles) curl_easy_cleanup(h);
    if (multi) curl_multi_cleanup(multi);
  }

  void shutdown() {
    {
      std::lock_guard<std::mutex> lock(mu);
      stopping = true;
    }
    if (multi) curl_multi_wakeup(multi);
    // Joined once; a second caller finds it joined. Never called from the loop thread (its
    // callbacks must not block, and shutting down from one would be a self-join).
    std::lock_guard<std::mutex> join_lock(join_mu);
    if (loop) loop->drain();
  }
  std::mutex join_mu;

  CurlStats stats() const {
    CurlStats s = counters.snapshot();
    std::lock_guard<std::mutex> lock(mu);
    s.queued = queue.size();
    return s;
  }

  void count_running() { counters.set_in_flight(running.size()); }

  void submit(HttpRequest request, Callback done) {
    auto t = std::make_unique<Transfer>();
    t->clock = &env.clock();
    t->request = std::move(request);
    t->done = std::make_shared<HttpTransport::Callback>(std::move(done));
    {
      std::lock_guard<std::mutex> lock(mu);
      if (!stopping && multi) {
        queue.push_back(std::move(t));
      }
    }
    if (t) {  // not queued: the transport is shutting down or never started
      Status s = Unavailable(t->what() + ": the HTTP transport is shut down (unmounting?)");
      finish(std::move(t), std::move(s));
      return;
    }
    curl_multi_wakeup(multi);
  }

  // Runs the callback (unless the other transfer of a hedged pair already did); the transfer
  // is gone afterwards.
  static void finish(std::unique_ptr<Transfer> t, Result<HttpResponse> result) {
    HttpTransport::Callback done;
    if (t->done) done.swap(*t->done);
    t.reset();
    if (done) done(std::move(result));
  }

  CURL* take_handle() {
    if (!idle_handles.empty()) {
      CURL* h = idle_handles.back();
      idle_handles.pop_back();
      curl_easy_reset(h);  // options go, caches and the multi's connection pool stay
      return h;
    }
    return curl_easy_init();
  }

  void release_handle(CURL* h) {
    curl_multi_remove_handle(multi, h);
    if (idle_handles.size() < static_cast<size_t>(options.max_in_flight)) {
      idle_handles.push_back(h);
    } else {
      curl_easy_cleanup(h);
    }
  }

  // Configures `h` for `t`; an error means the request cannot be sent at all.
  Status configure(CURL* h, Transfer& t) {
    const HttpRequest& r = t.request;
    if (r.method == "HEAD") {
      curl_easy_setopt(h, CURLOPT_NOBODY, 1L);
    } else if (r.method == "POST") {
      curl_easy_setopt(h, CURLOPT_POST, 1L);
      curl_easy_setopt(h, CURLOPT_POSTFIELDSIZE_LARGE, static_cast<curl_off_t>(r.body.size()));
      curl_easy_setopt(h, CURLOPT_POSTFIELDS, r.body.data());  // lives as long as `t`
    } else if (r.method != "GET") {
      return InvalidArgument(t.what() + ": unsupported HTTP method; use GET, HEAD or POST");
    }
    curl_easy_setopt(h, CURLOPT_URL, r.url.c_str());
    curl_easy_setopt(h, CURLOPT_PRIVATE, &t);
    curl_easy_setopt(h, CURLOPT_ERRORBUFFER, t.error);
    curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(h, CURLOPT_FOLLOWLOCATION, 0L);
    if (r.own_connection) {
      curl_easy_setopt(h, CURLOPT_HTTP_VERSION, static_cast<long>(CURL_HTTP_VERSION_1_1));
      curl_easy_setopt(h, CURLOPT_PIPEWAIT, 0L);
    } else {
      curl_easy_setopt(h, CURLOPT_HTTP_VERSION, static_cast<long>(CURL_HTTP_VERSION_2TLS));
      // Over TLS, transfers starting together wait for the first handshake to learn whether the
      // host speaks HTTP/2, then share its connection instead of each opening one. Not over
      // plain http, which is HTTP/1.1 here: there the wait held every other transfer back until
      // the first one had finished.
      auto origin = url::origin_of(r.url);
      curl_easy_setopt(h, CURLOPT_PIPEWAIT, origin && origin->scheme == "https" ? 1L : 0L);
    }
    curl_easy_setopt(h, CURLOPT_CONNECTTIMEOUT_MS, options.connect_timeout_ms);
    curl_easy_setopt(h, CURLOPT_USERAGENT, options.user_agent.c_str());
    curl_easy_setopt(h, CURLOPT_BUFFERSIZE, options.receive_buffer_bytes);
    curl_easy_setopt(h, CURLOPT_TCP_KEEPALIVE, 1L);
    if (!options.ca_pem.empty()) {
      // NOCOPY: options (and so ca_pem) live as long as the transport and its handles.
      curl_blob blob{const_cast<char*>(options.ca_pem.data()), options.ca_pem.size(), CURL_BLOB_NOCOPY};
      curl_easy_setopt(h, CURLOPT_CAINFO_BLOB, &blob);
    } else if (!options.ca_bundle.empty()) {
      curl_easy_setopt(h, CURLOPT_CAINFO, options.ca_bundle.c_str());
    }
    curl_easy_setopt(h, CURLOPT_HEADERFUNCTION, on_header);
    curl_easy_setopt(h, CURLOPT_HEADERDATA, &t);
    curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, on_body);
    curl_easy_setopt(h, CURLOPT_WRITEDATA, &t);

    bool has_accept_encoding = false;
    for (const auto& [name, value] : r.headers) {
      // A line break would let a header value smuggle in headers (or a second request).
      if ((name + value).find_first_of("\r\n") != std::string::npos || name.empty())
        return InvalidArgument(t.what() + ": header '" + name +
                               "' is empty or contains a line break; fix the header (a token read with a "
                               "trailing newline?)");
      if (strcasecmp(name.c_str(), "accept-encoding") == 0) has_accept_encoding = true;
      t.header_list = curl_slist_append(t.header_list, (name + ": " + value).c_str());
    }
    // Bytes must arrive exactly as stored: a compressed body would break Content-Length and
    // Content-Range arithmetic.
    if (!has_accept_encoding) t.header_list = curl_slist_append(t.header_list, "Accept-Encoding: identity");
    // No "Expect: 100-continue" round trip before a POST body.
    t.header_list = curl_slist_append(t.header_list, "Expect:");
    curl_easy_setopt(h, CURLOPT_HTTPHEADER, t.header_list);
    return Status::Ok();
  }

  // Companions (HttpRequest::companion) that may run beyond max_in_flight.
  size_t companion_slots() const { return std::max<size_t>(1, static_cast<size_t>(options.max_in_flight) / 4); }

  // Whether a transfer for `request` may start now: max_in_flight transfers, and beside them up
  // to companion_slots() companions. A hedge's twin counts as an ordinary transfer.
  bool room_for(const HttpRequest& request) const {
    size_t companions = 0;
    for (const auto& [h, t] : running) companions += t->request.companion && !t->is_twin;
    if (request.companion) return companions < companion_slots();
    return running.size() - companions < static_cast<size_t>(options.max_in_flight);
  }

  // Whether the queue's first transfer may start now. With mu held.
  bool front_may_start() const { return !queue.empty() && room_for(queue.front()->request); }

  // Moves queued transfers into the multi handle, in order, while there is room for the first.
  void start_queued() {
    for (;;) {
      std::unique_ptr<Transfer> t;
      {
        std::lock_guard<std::mutex> lock(mu);
        if (!front_may_start()) return;
        t = std::move(queue.front());
        queue.pop_front();
      }
      CURL* h = take_handle();
      if (!h) {
        Status s = Internal(t->what() + ": curl_easy_init failed (out of memory?)");
        finish(std::move(t), std::move(s));
        continue;
      }
      if (Status s = configure(h, *t); !s.ok()) {
        curl_easy_reset(h);
        idle_handles.push_back(h);
        finish(std::move(t), s);
        continue;
      }
      t->started = t->last_byte = env.now();
      if (curl_multi_add_handle(multi, h) != CURLM_OK) {
        curl_easy_cleanup(h);
        Status s = Internal(t->what() + ": curl_multi_add_handle failed");
        finish(std::move(t), std::move(s));
        continue;
      }
      running.emplace(h, std::move(t));
      counters.request_started();
    }
  }

  // Removes a running transfer; with `result`, answers its request.
  std::unique_ptr<Transfer> remove(CURL* h) {
    auto it = running.find(h);
    if (it == running.end()) return nullptr;
    std::unique_ptr<Transfer> t = std::move(it->second);
    running.erase(it);
    release_handle(h);
    if (t->partner) t->partner->partner = nullptr;
    if (t->is_twin) hedging.ended();
    return t;
  }

  CURL* handle_of(const Transfer* t) const {
    for (const auto& [h, candidate] : running)
      if (candidate.get() == t) return h;
    return nullptr;
  }

  void complete(CURL* h, Result<HttpResponse> result) {
    auto it = running.find(h);
    if (it == running.end()) return;
    Transfer* t = it->second.get();
    Transfer* partner = t->partner;
    // A hedged pair answers once. A failure (not a timeout: the original's deadline is the
    // request's) while the other transfer still runs is dropped: the other one may succeed.
    bool failed = !result.ok() || !t->success_status();
    bool timed_out = !result.ok() && result.status().code() == Code::kTimeout && !t->is_twin;
    if (partner && !partner->cancelled && failed && !timed_out) {
      remove(h);
      return;
    }
    if (partner) {
      if (CURL* ph = handle_of(partner)) remove(ph);
    }
    if (t->is_twin && !failed) counters.hedge_won();
    finish(remove(h), std::move(result));
  }

  // Transfers that lost a hedge race go without a callback.
  void sweep_cancelled() {
    std::vector<CURL*> lost;
    for (auto& [h, t] : running)
      if (t->cancelled) lost.push_back(h);
    for (CURL* h : lost) remove(h);
  }

  void learn_first_byte_times() {
    for (auto& [h, t] : running) {
      if (!t->first_byte_after) continue;
      hedging.learn(*t->first_byte_after);
      t->first_byte_after.reset();
    }
  }

  // Starts a twin for each GET still waiting for its first byte past the hedge delay, while the
  // policy has hedge slots.
  void hedge_slow_requests(Clock::time_point now) {
    if (!options.hedge) return;
    std::vector<Transfer*> slow;
    for (auto& [h, t] : running) {
      if (!t->got_first_byte && !t->partner && !t->is_twin && !t->cancelled && t->request.method == "GET" &&
          hedging.should_hedge(now - t->started))
        slow.push_back(t.get());
    }
    for (Transfer* original : slow) {
      if (!hedging.slots_left()) break;
      auto twin = std::make_unique<Transfer>();
      twin->clock = &env.clock();
      twin->request = original->request;
      twin->done = original->done;
      twin->is_twin = true;
      CURL* h = take_handle();
      if (!h) return;
      bool ok = configure(h, *twin).ok();
      // Another connection: the original's may be the one that stalls (HTTP/2 would otherwise
      // put the twin on it).
      if (ok) curl_easy_setopt(h, CURLOPT_FRESH_CONNECT, 1L);
      if (!ok || curl_multi_add_handle(multi, h) != CURLM_OK) {
        curl_easy_cleanup(h);
        return;
      }
      twin->started = twin->last_byte = now;
      twin->partner = original;
      original->partner = twin.get();
      running.emplace(h, std::move(twin));
      hedging.started();
      counters.hedge_started();
    }
  }

  void collect_finished() {
    int left = 0;
    while (CURLMsg* msg = curl_multi_info_read(multi, &left)) {
      if (msg->msg != CURLMSG_DONE) continue;
      CURL* h = msg->easy_handle;
      CURLcode code = msg->data.result;
      auto it = running.find(h);
      if (it == running.end()) continue;
      Transfer& t = *it->second;
      if (t.abort_status) {
        complete(h, *t.abort_status);
      } else if (code != CURLE_OK) {
        complete(h, status_for_curl_error(code, t));
      } else {
        long status = 0;
        curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, &status);
        t.response.status = status;
        HttpResponse response = std::move(t.response);
        complete(h, std::move(response));
      }
    }
  }

  // The first-byte and stall timeouts, checked here rather than in curl's progress callback
  // because curl only calls that while it services the transfer, and a dead peer gives it
  // nothing to service. Returns the nearest remaining deadline.
  Clock::time_point enforce_deadlines() {
    const auto now = env.now();
    Clock::time_point nearest = now + kMaxPollWait;
    std::vector<std::pair<CURL*, Status>> expired;
    for (auto& [h, t] : running) {
      // A request's own timeout (a metadata request's) replaces both of the transport's.
      const auto first_byte = t->request.timeout.value_or(std::chrono::milliseconds(options.first_byte_timeout_ms));
      const auto stall = t->request.timeout.value_or(std::chrono::milliseconds(options.stall_timeout_ms));
      Clock::time_point deadline = t->got_first_byte ? t->last_byte + stall : t->started + first_byte;
      // The read this transfer serves gives up at its own deadline: nothing waits for it after.
      if (const Deadline& read = t->request.deadline; !read.is_never()) {
        if (read.expired()) {
          expired.emplace_back(h, Timeout(t->what() + ": the read it serves reached its deadline (--read-timeout)"));
          continue;
        }
        deadline = std::min(deadline, now + read.remaining());
      }
      if (deadline <= now) {
        expired.emplace_back(
            h, t->got_first_byte
                   ? Timeout(t->what() + ": no data for " + std::to_string(stall.count()) +
                             " ms (stalled transfer); retry, or raise the stall timeout (HF_HUB_DOWNLOAD_TIMEOUT)")
                   : Timeout(t->what() + ": no response within " + std::to_string(first_byte.count()) +
                             " ms; the server is slow or unreachable, retry later"));
      } else {
        nearest = std::min(nearest, deadline);
      }
    }
    for (auto& [h, status] : expired) complete(h, status);
    return nearest;
  }

  void fail_everything() {
    std::deque<std::unique_ptr<Transfer>> queued;
    {
      std::lock_guard<std::mutex> lock(mu);
      queued.swap(queue);
    }
    std::vector<CURL*> handles;
    for (auto& [h, t] : running) handles.push_back(h);
    for (CURL* h : handles) {
      auto it = running.find(h);
      if (it == running.end()) continue;  // the other half of a hedged pair, already answered
      std::string what = it->second->what();
      complete(h, Unavailable(what + ": the HTTP transport shut down before the response came"));
    }
    for (auto& t : queued) {
      Status s = Unavailable(t->what() + ": the HTTP transport shut down before the request was sent");
      finish(std::move(t), std::move(s));
    }
  }

  void run() {
    if (!multi) return;  // submit() fails every request in this case
    for (;;) {
      {
        std::lock_guard<std::mutex> lock(mu);
        if (stopping) break;
      }
      start_queued();
      int still_running = 0;
      curl_multi_perform(multi, &still_running);
      collect_finished();
      sweep_cancelled();
      learn_first_byte_times();
      Clock::time_point nearest = enforce_deadlines();
      hedge_slow_requests(env.now());
      if (options.hedge && !running.empty())  // wake in time to hedge
        nearest = std::min(nearest, env.now() + std::chrono::milliseconds(options.hedge_min_delay_ms / 2));
      count_running();
      {
        // A finished transfer freed a slot: start the next one before sleeping.
        std::lock_guard<std::mutex> lock(mu);
        if (stopping) break;
        if (front_may_start()) continue;
      }
      auto wait = std::chrono::duration_cast<std::chrono::milliseconds>(nearest - env.now());
      int wait_ms = static_cast<int>(std::clamp<int64_t>(wait.count() + 1, 1, kMaxPollWait.count()));
      curl_multi_poll(multi, nullptr, 0, wait_ms, nullptr);
    }
    fail_everything();
    count_running();
    // A callback run by fail_everything may have submitted more work; stopping is set, so
    // submit() failed it inline and the queue stays empty.
  }
};

CurlTransport::CurlTransport(CurlOptions options) : impl_(std::make_unique<Impl>(std::move(options))) {}

CurlTransport::~CurlTransport() = default;

void CurlTransport::shutdown() { impl_->shutdown(); }

CurlStats CurlTransport::stats() const { return impl_->stats(); }

const CurlOptions& CurlTransport::options() const { return impl_->options; }

void CurlTransport::submit(HttpRequest request, Callback done) {
  impl_->submit(std::move(request), std::move(done));
}

}  // namespace hubfs
