#include "net/range_fetcher.h"

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <deque>
#include <mutex>
#include <optional>
#include <random>
#include <thread>
#include <unordered_map>

#include "common/log.h"
#include "common/task_queue.h"
#include "common/url.h"

namespace hubfs {
namespace {

// A server that ignores Range answers 200 with the whole file. For a file up to this size we
// accept that and slice (costs at most this much memory per request); for a bigger file the
// transport aborts the transfer as soon as the body passes the range length.
constexpr uint64_t kWholeFileLimit = 16ull << 20;
std::string range_text(ByteRange r) {
  return std::to_string(r.offset) + "-" + std::to_string(r.offset + r.length - 1);
}

// How long the last locate on this locator thread was held for the Hub's quota. A fetch that
// queued for a locator thread while every one was busy waited for the one that picks it up,
// whose last locate was held this long: that much of its wait was the quota's.
thread_local std::chrono::milliseconds last_locate_held{0};

Result<Location> locate_on_locator_thread(const Locator& locate, bool refresh) {
  Result<Location> location = locate(refresh);
  last_locate_held = location.ok() ? location->quota_waited : std::chrono::milliseconds(0);
  return location;
}

// The part of a wait for a locator thread, from `queued_at` until now, that the quota caused:
// at most the wait, at most the hold of the locate this thread ran before (it ran while the
// fetch queued: an idle thread would have taken the fetch at once).
std::chrono::milliseconds queued_behind_quota(const MonotonicClock& clock, MonotonicClock::time_point queued_at) {
  const auto waited = std::chrono::duration_cast<std::chrono::milliseconds>(clock.now() - queued_at);
  return std::clamp(waited, std::chrono::milliseconds(0), last_locate_held);
}

// The read's deadline after its Locator held it for the Hub's quota (Location::quota_waited):
// moved by exactly that wait. Never by the time the locate took in all, which would let a
// network fault in the resolve stretch the read past --read-timeout.
Deadline after_quota_wait(const Deadline& deadline, const Location& location, ByteRange range) {
  if (location.quota_waited.count() <= 0 || deadline.is_never()) return deadline;
  log_debug("range fetch: bytes " + range_text(range) + " keep " + std::to_string(location.quota_waited.count()) +
            " ms more than the read's deadline left: its location waited that long for the Hub's quota");
  return deadline.later_by(location.quota_waited);
}

// Runs locator refreshes off the transport's threads (a Locator may block on the network, and
// the transport's callback thread must not), on executors from the Env.
class RefreshWorker {
 public:
  using Job = std::function<void(bool cancelled)>;
  // Several threads: first resolves of different files go out together, and one slow resolve
  // does not hold up refreshes behind it.
  RefreshWorker(Env& env, int threads) : queue_(env.new_executor(threads)) {}

  void post(Job job) {
    if (stopping_.load() || !queue_->post([this, job] { job(stopping_.load()); })) job(true);
  }

  // Lets the running job finish; the rest run at once with cancelled = true. Called by the
  // RangeFetcher's owner thread (never a job), so the queue's drain never joins itself.
  void shutdown() {
    stopping_.store(true);
    queue_->drain();
  }

 private:
  std::atomic<bool> stopping_{false};
  std::unique_ptr<Executor> queue_;
};

// Where a request of a fetch_into_async puts its body as it arrives: the bytes of the range into
// the caller's buffer, any past it (a 200 with the whole file, bounded by max_body) aside. One
// transfer feeds it at a time (a retry's begins after the last ended; a losing hedge never feeds).
class IntoSink final : public BodySink {
 public:
  IntoSink(std::shared_ptr<RangeBuffer> into, uint64_t at, uint64_t length)
      : into_(std::move(into)), at_(at), length_(length) {}

  void begin() override {
    fed_ = 0;
    std::string().swap(past_);
  }

  void feed(const char* data, size_t n) override {
    if (fed_ < length_) {
      const size_t k = static_cast<size_t>(std::min<uint64_t>(n, length_ - fed_));
      into_->write(at_ + fed_, data, k);
      data += k;
      n -= k;
      fed_ += k;
    }
    past_.append(data, n);
    fed_ += n;
  }

  // A 200 carried the whole file (its size checked): its bytes [offset, offset + length_) become
  // the range's.
  void cut_whole_file(uint64_t offset) {
    std::string whole(static_cast<size_t>(std::min(fed_, length_)), '\0');
    into_->read(at_, whole.data(), whole.size());
    whole += past_;
    into_->write(at_, whole.data() + offset, static_cast<size_t>(length_));
  }

 private:
  const std::shared_ptr<RangeBuffer> into_;
  const uint64_t at_, length_;
  uint64_t fed_ = 0;
  std::string past_;
};

// A response's body length, streamed or held.
uint64_t body_length(const HttpResponse& resp) { return resp.body.size() + resp.streamed; }

// One range, across its (at most two) requests.
struct Fetch {
  std::shared_ptr<const Locator> locate;
  uint64_t file_size = 0;
  ByteRange range;
  RangeFetcher::Callback done;
  // 403 handling (and 416, see the header): a refusal asks for a fresh location (one another
  // range may already have got from the shared table). A location can itself be refused: the CDN
  // may rotate its signing key between signing and use, and a flaky edge may refuse a valid
  // signature. So a fetch asks for up to kMaxFreshLocations fresh ones at once (a stale table
  // entry does not count); after that a fetch with a deadline keeps asking with backoff until
  // its deadline, and one without takes the refusal as the answer (the bound keeps a truly
  // denied object from looping).
  static constexpr int kMaxFreshLocations = 2;
  int fresh_locations = 0;
  int waited_refusals = 0;   // refusals answered after a backoff (past kMaxFreshLocations)
  std::string replaced_url;  // set when the last location came from the shared table
  Deadline deadline;         // of the read this range serves
  // fetch_into_async: where the bytes go (this range at into_offset), and `done` gets an empty
  // string for them.
  std::shared_ptr<RangeBuffer> into;
  uint64_t into_offset = 0;

  bool may_refresh() const { return fresh_locations < kMaxFreshLocations; }

  void fail(Status s) { done(std::move(s)); }

  // Re-resolving after a protocol violation: once per fetch (another edge may answer better).
  std::mutex relocate_mu;
  bool relocate_started = false;
  std::optional<Location> relocated;  // ready for the next attempt

  // Whether a 2xx answer carries exactly the range: a 206 with the Content-Range asked for and
  // that many bytes, or a 200 with the whole file (a server that ignored Range). Anything else
  // is a protocol violation (kCorrupt): never used, retried like a 503.
  Status validate(const std::string& host, const HttpResponse& resp) const {
    const std::string what = "bytes " + range_text(range) + " from " + host;
    if (resp.status == 206) {
      const std::string expected = "bytes " + range_text(range) + "/" + std::to_string(file_size);
      auto got = resp.header("content-range");
      if (!got) return Corrupt(host + " answered 206 without Content-Range for " + what + "; refusing unverifiable bytes");
      if (*got != expected)
        return Corrupt(host + " sent Content-Range '" + *got + "', expected '" + expected +
                       "'; the file changed on the server or the server is broken");
      if (body_length(resp) != range.length)
        return Corrupt(host + " sent " + std::to_string(body_length(resp)) + " bytes for " + what + " (" +
                       std::to_string(range.length) + " expected): truncated or padded body");
    } else if (resp.status == 200 && body_length(resp) != file_size) {
      return Corrupt(host + " ignored Range: answered 200 with " + std::to_string(body_length(resp)) +
                     " bytes for " + what + " of a " + std::to_string(file_size) +
                     "-byte file; did the server ignore the Range header?");
    } else if (resp.status >= 200 && resp.status < 300 && resp.status != 200) {
      return Corrupt(host + " answered HTTP " + std::to_string(resp.status) + " to a range request for " + what);
    }
    return Status::Ok();
  }

  // Exactly range.length bytes from `r`, or why not.
  // `sink`: this request's (fetch_into_async), or null.
  Result<std::string> check(const std::string& host, Result<HttpResponse> r, IntoSink* sink) const {
    const std::string what = "bytes " + range_text(range) + " from " + host;
    if (!r.ok()) return r.status().with_context("fetching " + what);
    HttpResponse& resp = r.value();
    if (resp.status >= 200 && resp.status < 300) {
      if (Status v = validate(host, resp); !v.ok()) return v;
    }
    switch (resp.status) {
      case 206:
        if (into) return into_body(resp, sink);
        return std::move(resp.body);
      case 200:
        if (into) return into_body(resp, sink);
        if (range.offset == 0 && range.length == file_size) return std::move(resp.body);
        return resp.body.substr(range.offset, range.length);
      case 403:
        return PermissionDenied(host + " answered 403 for " + what +
                                " even after refreshing the location; check the token has access to the repo");
      case 404:
        return NotFound(host + " answered 404 for " + what + "; the file is gone from the server");
      case 416:
        return Status(Code::kOutOfRange, host + " answered 416 for " + what + " of a " +
                                             std::to_string(file_size) +
                                             "-byte file, the size the Hub lists, even after fresh locations; the "
                                             "file on the server may be shorter than listed");
      default:
        return IoError(host + " answered HTTP " + std::to_string(resp.status) + " for " + what);
    }
  }

  // A checked 2xx of a fetch_into_async: its range's bytes into `into` (already there when
  // streamed), and an empty string for `done`.
  std::string into_body(const HttpResponse& resp, IntoSink* sink) const {
    const bool whole_file = resp.status == 200;
    if (resp.streamed == 0) {  // a transport that does not stream: the body is in the response
      into->write(into_offset, resp.body.data() + (whole_file ? range.offset : 0), static_cast<size_t>(range.length));
    } else if (whole_file && range.offset != 0) {
      sink->cut_whole_file(range.offset);
    }
    return {};
  }
};

}  // namespace

// Expired URL -> the location that replaced it. When a signed URL expires, every range in
// flight on it gets a 403; the first refresh answers them all instead of one Locator round
// trip per range.
class Replacements {
 public:
  explicit Replacements(const MonotonicClock& clock) : clock_(clock) {}

  std::optional<Location> find(const std::string& expired_url) {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = by_url_.find(expired_url);
    if (it == by_url_.end() || it->second.expires <= clock_.now()) return std::nullopt;
    return it->second;
  }

  void forget(const std::string& expired_url) {
    std::lock_guard<std::mutex> lock(mu_);
    by_url_.erase(expired_url);  // order_ keeps the key until it ages out: harmless
  }

  void remember(const std::string& expired_url, const Location& fresh) {
    std::lock_guard<std::mutex> lock(mu_);
    if (by_url_.insert_or_assign(expired_url, fresh).second) order_.push_back(expired_url);
    while (order_.size() > kRemembered) {
      by_url_.erase(order_.front());
      order_.pop_front();
    }
  }

 private:
  // Only URLs that expired recently matter (requests may still be in flight on them); a few
  // hundred covers every file being read at once.
  static constexpr size_t kRemembered = 256;
  const MonotonicClock& clock_;
  std::mutex mu_;  // a leaf
  std::unordered_map<std::string, Location> by_url_;
  std::deque<std::string> order_;  // insertion order, to forget the oldest first
};

struct RangeFetcher::Shared : std::enable_shared_from_this<RangeFetcher::Shared> {
  Shared(HttpTransport& t, RangeFetcherOptions o)
      : transport(t), options(std::move(o)), env(env_of(options.env, "RangeFetcher")), backoffs(env), replacements(env.clock()),
        refresher(env, 1), locator(env, kLocatorThreads) {}
  HttpTransport& transport;
  RangeFetcherOptions options;
  Env& env;
  // Fetches waiting out a backoff before a fresh location; shutdown() runs them at once (each
  // then sees `stopping` and fails).
  ScheduledGroup backoffs;
  std::atomic<bool> stopping{false};
  Replacements replacements;
  // Refreshes after a 403 run one at a time, so all the ranges on one expired URL share one;
  // first locations and relocations after a protocol violation run on several threads.
  RefreshWorker refresher;
  RefreshWorker locator;

  // `into`: the bytes go there, at into_offset (fetch_into_async), and `done` gets an empty string.
  void start(std::shared_ptr<const Locator> locate, const Result<Location>& location, uint64_t file_size,
             ByteRange range, Callback done, Deadline deadline = Deadline::never(),
             std::shared_ptr<RangeBuffer> into = nullptr, uint64_t into_offset = 0);
  // start() of `range` in `parts` requests (RangeFetcher::fetch_async).
  void start_parts(std::shared_ptr<const Locator> locate, const Result<Location>& location, uint64_t file_size,
                   ByteRange range, uint32_t parts, Callback done, Deadline deadline,
                   std::shared_ptr<RangeBuffer> into = nullptr);
  void send(std::shared_ptr<Fetch> fetch, Location location);
  void refresh_and_resend(std::shared_ptr<Fetch> fetch, std::string expired_url);
  // A 403 or 416 from `url`: true when a fresh location and another try are under way.
  bool retry_refusal(const std::shared_ptr<Fetch>& fetch, const std::string& host, const std::string& url,
                     long status);
  std::chrono::milliseconds backoff(int waited) const;
};

std::chrono::milliseconds RangeFetcher::Shared::backoff(int waited) const {
  // Full jitter, uniform in [0, cap], the cap doubling from base_delay to max_delay.
  std::chrono::milliseconds cap = options.base_delay;
  for (int i = 0; i < waited && cap < options.max_delay; ++i) cap *= 2;
  cap = std::min(cap, options.max_delay);
  double unit = 0;
  if (options.jitter) {
    unit = std::clamp(options.jitter(), 0.0, 1.0);
  } else {
    thread_local std::mt19937_64 rng{std::random_device{}()};
    unit = std::uniform_real_distribution<double>(0.0, 1.0)(rng);
  }
  return std::chrono::milliseconds(static_cast<int64_t>(unit * static_cast<double>(cap.count())));
}

bool RangeFetcher::Shared::retry_refusal(const std::shared_ptr<Fetch>& fetch, const std::string& host,
                                         const std::string& url, long status) {
  const std::string what = host + " answered " + std::to_string(status) + " for bytes " + range_text(fetch->range);
  if (stopping.load()) return false;
  if (fetch->may_refresh()) {
    log_warning("range fetch: " + what + "; asking for a fresh location and trying again");
    refresh_and_resend(fetch, url);
    return true;
  }
  if (fetch->deadline.is_never()) return false;  // bounded: this refusal is the answer
  const std::chrono::milliseconds delay = backoff(fetch->waited_refusals);
  const std::chrono::milliseconds left = fetch->deadline.remaining();
  if (left <= delay) return false;
  ++fetch->waited_refusals;
  log_warning("range fetch: " + what + " (refused " + std::to_string(fetch->fresh_locations + 1) +
              " times); a fresh location and another try in " + std::to_string(delay.count()) + " ms, " +
              std::to_string(left.count()) + " ms left before the read's deadline");
  std::weak_ptr<Shared> weak = weak_from_this();
  auto retry = [weak, fetch, url] {
    auto self = weak.lock();
    if (!self || self->stopping.load()) {
      fetch->fail(Unavailable("fetching bytes " + range_text(fetch->range) +
                              ": the range fetcher shut down while waiting to refresh a refused location"));
      return;
    }
    self->refresh_and_resend(fetch, url);
  };
  if (!backoffs.schedule_after(delay, retry)) retry();  // stopping: it fails at once
  return true;
}

void RangeFetcher::Shared::send(std::shared_ptr<Fetch> fetch, Location location) {
  HttpRequest request;
  request.method = "GET";
  request.url = std::move(location.url);
  request.headers = std::move(location.headers);
  request.headers.emplace_back("Range", "bytes=" + range_text(fetch->range));
  request.own_connection = true;  // N ranges in flight: N connections' bandwidth
  request.deadline = fetch->deadline;
  // Room for a whole small file (a 200 we can still slice), else exactly the range.
  request.max_body = std::max(fetch->range.length, fetch->file_size <= kWholeFileLimit ? fetch->file_size : 0);
  std::string host = url::url_host(request.url);
  std::string url = request.url;
  request.validate = [fetch, host](const HttpResponse& resp) { return fetch->validate(host, resp); };
  // Each send its own sink (a refusal's resend starts afresh); a retry of this request reuses it.
  std::shared_ptr<IntoSink> sink;
  if (fetch->into) {
    sink = std::make_shared<IntoSink>(fetch->into, fetch->into_offset, fetch->range.length);
    request.body_sink = sink;
  }
  std::weak_ptr<Shared> weak = weak_from_this();
  request.before_retry = [fetch, weak](HttpRequest& req, const Status& cause) {
    std::lock_guard<std::mutex> lock(fetch->relocate_mu);
    if (fetch->relocated) {
      req.url = fetch->relocated->url;
      Headers headers = fetch->relocated->headers;
      headers.emplace_back("Range", "bytes=" + range_text(fetch->range));
      req.headers = std::move(headers);
      // Its quota wait (if any) moves no deadline: the retries on the old location went on
      // meanwhile, so the read was not waiting for it.
      return;
    }
    // 5xx, resets, timeouts: the same edge may answer next time. A violation: ask for another.
    if (fetch->relocate_started || cause.code() != Code::kCorrupt) return;
    fetch->relocate_started = true;
    // Off this (timer) thread: a Locator may block on the network. The retry after this one
    // uses the fresh location if it is ready by then.
    if (auto self = weak.lock()) {
      self->locator.post([fetch](bool cancelled) {
        if (cancelled) return;
        Result<Location> fresh = locate_on_locator_thread(*fetch->locate, true);
        if (!fresh.ok()) return;  // keep the old location: its retries may still succeed
        std::lock_guard<std::mutex> lock(fetch->relocate_mu);
        fetch->relocated = std::move(fresh).value();
      });
    }
  };
  transport.submit(std::move(request), [self = shared_from_this(), fetch, host, url, sink](Result<HttpResponse> r) {
    if (r.ok() && (r->status == 403 || r->status == 416) && self->retry_refusal(fetch, host, url, r->status)) return;
    Result<std::string> checked = fetch->check(host, std::move(r), sink.get());
    if (!checked.ok() && !fetch->deadline.is_never() && fetch->waited_refusals > 0 &&
        (checked.status().code() == Code::kPermissionDenied || checked.status().code() == Code::kOutOfRange)) {
      // Refused until the read's deadline: the read timed out, with the refusal as its cause.
      checked = Timeout(checked.status().message() + " (asked " + std::to_string(fetch->fresh_locations) +
                        " fresh locations until the read's deadline)");
    }
    fetch->done(std::move(checked));
  });
}

// A 403 on a signed URL usually means it expired: ask for a fresh one, off the transport's
// thread (unless another range already did).
void RangeFetcher::Shared::refresh_and_resend(std::shared_ptr<Fetch> fetch, std::string expired_url) {
  if (!fetch->replaced_url.empty()) {
    // The shared replacement was stale too: nobody should be handed it again.
    replacements.forget(fetch->replaced_url);
    fetch->replaced_url.clear();
  } else if (fetch->fresh_locations == 0) {
    // Only on the first 403: later ones are on a location this fetch itself just got.
    if (auto fresh = replacements.find(expired_url)) {
      fetch->replaced_url = expired_url;
      send(fetch, std::move(*fresh));
      return;
    }
  }
  ++fetch->fresh_locations;
  std::weak_ptr<Shared> weak = weak_from_this();
  refresher.post([weak, fetch, expired_url](bool cancelled) {
    auto self = weak.lock();
    if (cancelled || !self) {
      fetch->fail(Unavailable("fetching bytes " + range_text(fetch->range) +
                              ": the range fetcher shut down while refreshing an expired location"));
      return;
    }
    // Refreshes run one at a time: an earlier one may have refreshed this very URL.
    if (auto fresh = self->replacements.find(expired_url)) {
      self->send(fetch, std::move(*fresh));
      return;
    }
    Result<Location> location = (*fetch->locate)(true);
    if (!location.ok()) {
      fetch->fail(location.status().with_context("refreshing the location after a 403"));
      return;
    }
    fetch->deadline = after_quota_wait(fetch->deadline, *location, fetch->range);
    location->quota_waited = std::chrono::milliseconds(0);  // spent here, not by the ranges sharing it
    // A Locator may hand back the very URL that was refused: that is no replacement to share.
    if (location->url != expired_url) self->replacements.remember(expired_url, location.value());
    self->send(fetch, std::move(location).value());
  });
}

namespace {

// A range past the end of the file is the caller's bug; say so rather than clamp.
Status validate(uint64_t file_size, ByteRange range) {
  if (range.offset > file_size || range.length > file_size - range.offset)
    return InvalidArgument("byte range offset " + std::to_string(range.offset) + " length " +
                           std::to_string(range.length) + " runs past the end of a " + std::to_string(file_size) +
                           "-byte file (a caller bug: ranges must lie inside the file)");
  return Status::Ok();
}

}  // namespace

RangeFetcher::RangeFetcher(HttpTransport& transport, RangeFetcherOptions options)
    : shared_(std::make_shared<Shared>(transport, std::move(options))) {}

RangeFetcher::~RangeFetcher() {
  shutdown();
  shared_->locator.shutdown();
  shared_->refresher.shutdown();
}

void RangeFetcher::shutdown() {
  shared_->stopping.store(true);
  // Runs what waits for a backoff now: each sees `stopping` and fails its fetch.
  shared_->backoffs.shutdown();
}

void RangeFetcher::Shared::start(std::shared_ptr<const Locator> locate, const Result<Location>& location,
                                 uint64_t file_size, ByteRange range, Callback done, Deadline deadline,
                                 std::shared_ptr<RangeBuffer> into, uint64_t into_offset) {
  if (Status s = validate(file_size, range); !s.ok()) {
    done(std::move(s));
    return;
  }
  if (range.length == 0) {
    done(std::string());
    return;
  }
  if (!location.ok()) {
    done(location.status());
    return;
  }
  auto fetch = std::make_shared<Fetch>();
  fetch->locate = std::move(locate);
  fetch->file_size = file_size;
  fetch->range = range;
  fetch->done = std::move(done);
  fetch->into = std::move(into);
  fetch->into_offset = into_offset;
  // The read's deadline, plus what locating it waited for the Hub's quota (a location fetch()
  // shares among its ranges carries none of it: its deadline is never).
  fetch->deadline = after_quota_wait(deadline, *location, range);
  send(std::move(fetch), location.value());
}

void RangeFetcher::Shared::start_parts(std::shared_ptr<const Locator> locate, const Result<Location>& location,
                                       uint64_t file_size, ByteRange range, uint32_t parts, Callback done,
                                       Deadline deadline, std::shared_ptr<RangeBuffer> into) {
  parts = static_cast<uint32_t>(std::clamp<uint64_t>(parts, 1, std::max<uint64_t>(1, range.length)));
  if (parts == 1 || !location.ok() || !validate(file_size, range).ok()) {
    start(std::move(locate), location, file_size, range, std::move(done), deadline, std::move(into));
    return;
  }
  // The parts' answers, joined once the last is in (on whichever transport thread brings it).
  struct Gather {
    std::mutex mu;
    std::vector<std::string> bodies;
    std::optional<Status> error;
    size_t left = 0;
    Callback done;
  };
  auto gather = std::make_shared<Gather>();
  gather->bodies.resize(parts);
  gather->left = parts;
  gather->done = std::move(done);
  const uint64_t base = range.length / parts, extra = range.length % parts;
  uint64_t offset = range.offset;
  for (uint32_t i = 0; i < parts; ++i) {
    const ByteRange part{offset, base + (i < extra ? 1 : 0)};
    offset += part.length;
    // Into a buffer, each part writes its own stretch of it (their strings, joined, are empty).
    start(locate, location, file_size, part, [gather, i](Result<std::string> body) {
      std::unique_lock<std::mutex> lock(gather->mu);
      if (!body.ok()) {
        if (!gather->error) gather->error = body.status();
      } else {
        gather->bodies[i] = std::move(body).value();
      }
      if (--gather->left > 0) return;
      lock.unlock();  // the last part: nobody else touches the gather now
      if (gather->error) return gather->done(std::move(*gather->error));
      size_t total = 0;
      for (const std::string& b : gather->bodies) total += b.size();
      std::string all;
      all.reserve(total);
      for (std::string& b : gather->bodies) {
        all += b;
        std::string().swap(b);
      }
      gather->done(std::move(all));
    }, deadline, into, part.offset - range.offset);
  }
}

void RangeFetcher::fetch_async(const Locator& locate, uint64_t file_size, ByteRange range, Callback done,
                               Deadline deadline, uint32_t parts) {
  locate_and_start(locate, file_size, range, std::move(done), deadline, parts, nullptr);
}

void RangeFetcher::fetch_into_async(const Locator& locate, uint64_t file_size, ByteRange range,
                                    std::shared_ptr<RangeBuffer> into, DoneCallback done, Deadline deadline,
                                    uint32_t parts) {
  locate_and_start(locate, file_size, range, [done = std::move(done)](Result<std::string> r) { done(r.status()); },
                   deadline, parts, std::move(into));
}

void RangeFetcher::locate_and_start(const Locator& locate, uint64_t file_size, ByteRange range, Callback done,
                                    Deadline deadline, uint32_t parts, std::shared_ptr<RangeBuffer> into) {
  if (Status s = validate(file_size, range); !s.ok() || range.length == 0) {
    if (s.ok()) {
      done(std::string());
    } else {
      done(std::move(s));
    }
    return;
  }
  // The Locator may block on the network (the first resolve of a file, with its retries): never
  // on the caller's thread, whose read must be able to give up at its deadline.
  auto shared_locate = std::make_shared<const Locator>(locate);
  auto callback = std::make_shared<Callback>(std::move(done));
  std::weak_ptr<Shared> weak = shared_;
  const MonotonicClock::time_point queued_at = shared_->env.now();
  shared_->locator.post([weak, shared_locate, file_size, range, callback, deadline, queued_at, parts,
                         into = std::move(into)](bool cancelled) mutable {
    auto self = weak.lock();
    if (cancelled || !self) {
      (*callback)(Unavailable("fetching bytes " + range_text(range) + ": the range fetcher shut down"));
      return;
    }
    const std::chrono::milliseconds behind = queued_behind_quota(self->env.clock(), queued_at);
    Result<Location> location = locate_on_locator_thread(*shared_locate, false);
    if (location.ok()) location->quota_waited += behind;
    self->start_parts(shared_locate, location, file_size, range, parts, std::move(*callback), deadline,
                      std::move(into));
  });
}

std::vector<Result<std::string>> RangeFetcher::fetch(const Locator& locate, uint64_t file_size,
                                                     const std::vector<ByteRange>& ranges) {
  std::vector<Result<std::string>> results(ranges.size(), Result<std::string>(Internal("fetch never answered")));
  if (ranges.empty()) return results;

  struct Wait {
    std::mutex mu;
    std::condition_variable cv;
    size_t left;
  };
  auto wait = std::make_shared<Wait>();
  wait->left = ranges.size();

  auto shared_locate = std::make_shared<const Locator>(locate);
  // One location for all ranges: the Locator is asked once, not once per range.
  bool any_request = std::any_of(ranges.begin(), ranges.end(),
                                 [&](ByteRange r) { return r.length > 0 && validate(file_size, r).ok(); });
  Result<Location> location = any_request ? locate(false) : Result<Location>(Location{});

  for (size_t i = 0; i < ranges.size(); ++i) {
    shared_->start(shared_locate, location, file_size, ranges[i], [wait, &results, i](Result<std::string> r) {
      std::lock_guard<std::mutex> lock(wait->mu);
      results[i] = std::move(r);
      if (--wait->left == 0) wait->cv.notify_all();
    });
  }
  // Bounded: every request ends (the transport's timeouts, the refresh thread's shutdown).
  std::unique_lock<std::mutex> lock(wait->mu);
  wait->cv.wait(lock, [&] { return wait->left == 0; });
  return results;
}

Env& RangeFetcher::env() const { return shared_->env; }

}  // namespace hubfs
