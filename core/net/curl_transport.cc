#include "net/curl_transport.h"

#include <curl/curl.h>
#include <strings.h>

#include <algorithm>
#include <atomic>
#include <charconv>
#include <chrono>
#include <condition_variable>
#include <deque>
#include <mutex>
#include <thread>
#include <unordered_map>
#include <vector>

#include "net/url_parts.h"

namespace hubfs {
namespace {

using Clock = std::chrono::steady_clock;

// The loop wakes at least this often even when nothing happens, so a missed wakeup or a
// deadline computed before a clock hiccup can delay a timeout by at most this much.
constexpr auto kMaxPollWait = std::chrono::milliseconds(1000);
// curl's receive buffer per transfer (512 KiB x max_in_flight of memory): against the 16 KiB
// default it took 8 MiB loopback ranges from ~270 to ~360 MiB/s on a 2-core box
// (tests/net CurlTransport.DISABLED_ThroughputOf8MiBRanges).
constexpr long kReceiveBufferBytes = 512 * 1024;

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

// One request from submit() to its callback.
struct Transfer {
  HttpRequest request;
  HttpTransport::Callback done;
  HttpResponse response;
  curl_slist* header_list = nullptr;
  Clock::time_point started{};
  Clock::time_point last_byte{};
  bool got_first_byte = false;
  // Set by a callback that aborts the transfer, so the finish reports the real cause instead
  // of curl's generic "write error".
  std::optional<Status> abort_status;
  char error[CURL_ERROR_SIZE] = {0};

  ~Transfer() {
    if (header_list) curl_slist_free_all(header_list);
  }
  std::string what() const { return request.method + " " + net::url_for_log(request.url); }
};

size_t on_header(char* data, size_t size, size_t count, void* user) {
  auto* t = static_cast<Transfer*>(user);
  const size_t n = size * count;
  t->got_first_byte = true;
  t->last_byte = Clock::now();
  std::string_view line(data, n);
  if (line.starts_with("HTTP/")) {
    // A new response begins (after a 100 Continue, say): forget the previous one's headers.
    t->response.headers.clear();
    return n;
  }
  size_t colon = line.find(':');
  if (colon == std::string_view::npos) return n;  // the blank line ending the headers
  std::string name(trim(line.substr(0, colon)));
  std::transform(name.begin(), name.end(), name.begin(), ascii_lower);
  std::string_view value = trim(line.substr(colon + 1));
  if (name == "content-length" && t->request.method != "HEAD") {
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
      // The hot path: one allocation for the whole body instead of log2(n) regrowths.
      t->response.body.reserve(static_cast<size_t>(length));
    }
  }
  t->response.headers.emplace_back(std::move(name), std::string(value));
  return n;
}

size_t on_body(char* data, size_t size, size_t count, void* user) {
  auto* t = static_cast<Transfer*>(user);
  const size_t n = size * count;
  t->got_first_byte = true;
  t->last_byte = Clock::now();
  if (t->response.body.size() + n > t->request.max_body) {
    t->abort_status = Corrupt("server sent more than asked: " + t->what() + " body passed " +
                              std::to_string(t->request.max_body) +
                              " bytes (did the server ignore the Range header?)");
    return 0;  // makes curl abort the transfer
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
    default:
      // Connect failures, DNS, resets, a body cut short ("transfer closed with N bytes
      // remaining to read"), TLS and HTTP/2 stream errors: all transient from our side.
      return Unavailable(where + detail + "; check the network connection, then retry");
  }
}

}  // namespace

struct CurlTransport::Impl {
  CurlOptions options;
  CURLM* multi = nullptr;
  std::thread loop;

  std::mutex mu;  // guards `queue` and `stopping`; never held while a callback runs
  std::deque<std::unique_ptr<Transfer>> queue;
  bool stopping = false;

  // Owned by the loop thread only.
  std::unordered_map<CURL*, std::unique_ptr<Transfer>> running;
  std::vector<CURL*> idle_handles;  // reused: keeps each handle's DNS and TLS session caches

  explicit Impl(CurlOptions o) : options(std::move(o)) {
    options.max_in_flight = std::max(1, options.max_in_flight);
    global_init_once();
    multi = curl_multi_init();
    if (multi) {
      curl_multi_setopt(multi, CURLMOPT_PIPELINING, CURLPIPE_MULTIPLEX);
      // One connection per running transfer is the most HTTP/1.1 can use; HTTP/2 multiplexes
      // them over fewer. The pool keeps that many alive for reuse between transfers.
      curl_multi_setopt(multi, CURLMOPT_MAX_HOST_CONNECTIONS, static_cast<long>(options.max_in_flight));
      curl_multi_setopt(multi, CURLMOPT_MAXCONNECTS, static_cast<long>(options.max_in_flight));
    }
    loop = std::thread([this] { run(); });
  }

  ~Impl() {
    {
      std::lock_guard<std::mutex> lock(mu);
      stopping = true;
    }
    if (multi) curl_multi_wakeup(multi);
    loop.join();
    for (CURL* h : idle_handles) curl_easy_cleanup(h);
    if (multi) curl_multi_cleanup(multi);
  }

  void submit(HttpRequest request, Callback done) {
    auto t = std::make_unique<Transfer>();
    t->request = std::move(request);
    t->done = std::move(done);
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

  // Runs the callback; the transfer is gone afterwards.
  static void finish(std::unique_ptr<Transfer> t, Result<HttpResponse> result) {
    auto done = std::move(t->done);
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
    curl_easy_setopt(h, CURLOPT_HTTP_VERSION, static_cast<long>(CURL_HTTP_VERSION_2TLS));
    // Transfers starting together wait for the first TLS handshake to learn whether the host
    // speaks HTTP/2, then share its connection instead of each opening one.
    curl_easy_setopt(h, CURLOPT_PIPEWAIT, 1L);
    curl_easy_setopt(h, CURLOPT_CONNECTTIMEOUT_MS, options.connect_timeout_ms);
    curl_easy_setopt(h, CURLOPT_USERAGENT, options.user_agent.c_str());
    curl_easy_setopt(h, CURLOPT_BUFFERSIZE, kReceiveBufferBytes);
    curl_easy_setopt(h, CURLOPT_TCP_KEEPALIVE, 1L);
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

  // Moves queued transfers into the multi handle while there is room.
  void start_queued() {
    while (running.size() < static_cast<size_t>(options.max_in_flight)) {
      std::unique_ptr<Transfer> t;
      {
        std::lock_guard<std::mutex> lock(mu);
        if (queue.empty()) return;
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
      t->started = t->last_byte = Clock::now();
      if (curl_multi_add_handle(multi, h) != CURLM_OK) {
        curl_easy_cleanup(h);
        Status s = Internal(t->what() + ": curl_multi_add_handle failed");
        finish(std::move(t), std::move(s));
        continue;
      }
      running.emplace(h, std::move(t));
    }
  }

  void complete(CURL* h, Result<HttpResponse> result) {
    auto it = running.find(h);
    if (it == running.end()) return;
    std::unique_ptr<Transfer> t = std::move(it->second);
    running.erase(it);
    release_handle(h);
    finish(std::move(t), std::move(result));
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
    const auto now = Clock::now();
    const auto first_byte = std::chrono::milliseconds(options.first_byte_timeout_ms);
    const auto stall = std::chrono::milliseconds(options.stall_timeout_ms);
    Clock::time_point nearest = now + kMaxPollWait;
    std::vector<std::pair<CURL*, Status>> expired;
    for (auto& [h, t] : running) {
      Clock::time_point deadline = t->got_first_byte ? t->last_byte + stall : t->started + first_byte;
      if (deadline <= now) {
        expired.emplace_back(
            h, t->got_first_byte
                   ? Timeout(t->what() + ": no data for " + std::to_string(options.stall_timeout_ms) +
                             " ms (stalled transfer); retry, or raise the stall timeout")
                   : Timeout(t->what() + ": no response within " +
                             std::to_string(options.first_byte_timeout_ms) +
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
      std::string what = running.at(h)->what();
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
      Clock::time_point nearest = enforce_deadlines();
      {
        // A finished transfer freed a slot: start the next one before sleeping.
        std::lock_guard<std::mutex> lock(mu);
        if (stopping) break;
        if (!queue.empty() && running.size() < static_cast<size_t>(options.max_in_flight)) continue;
      }
      auto wait = std::chrono::duration_cast<std::chrono::milliseconds>(nearest - Clock::now());
      int wait_ms = static_cast<int>(std::clamp<int64_t>(wait.count() + 1, 1, kMaxPollWait.count()));
      curl_multi_poll(multi, nullptr, 0, wait_ms, nullptr);
    }
    fail_everything();
    // A callback run by fail_everything may have submitted more work; stopping is set, so
    // submit() failed it inline and the queue stays empty.
  }
};

CurlTransport::CurlTransport(CurlOptions options) : impl_(std::make_unique<Impl>(std::move(options))) {}

CurlTransport::~CurlTransport() = default;

void CurlTransport::submit(HttpRequest request, Callback done) {
  impl_->submit(std::move(request), std::move(done));
}

}  // namespace hubfs
