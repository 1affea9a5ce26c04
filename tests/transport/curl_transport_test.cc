#include "net/curl_transport.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <future>
#include <memory>
#include <mutex>
#include <string>
#include <vector>
#include <thread>

#include "net/scripted_http_server.h"

namespace hubfs {
namespace HUBFS_UNITY_ID {

// The real Env: these tests run the transport on real sockets, waiting with libcurl's clock
// (integration tests; the policies it asks, hedging and retry, are unit-tested on a manual Env).
CurlOptions real_env_options() {
  CurlOptions o;
  o.env = &Env::real();
  return o;
}

using ::testing::HasSubstr;
using ::testing::Not;
using testing::ScriptedHttpServer;
using testing::ServerConnection;
using testing::ServerRequest;

// Short timeouts keep the failure tests fast; they are bounds, never asserted durations.
constexpr long kShortTimeoutMs = 300;

HttpRequest get(const std::string& url) {
  HttpRequest r;
  r.url = url;
  return r;
}

// Waits for a submit() callback; the bound only stops a broken transport from hanging the test.
struct Pending {
  std::promise<Result<HttpResponse>> promise;
  std::future<Result<HttpResponse>> future = promise.get_future();
  HttpTransport::Callback callback() {
    return [this](Result<HttpResponse> r) { promise.set_value(std::move(r)); };
  }
};

TEST(CurlTransport, GetReturnsStatusBodyAndLowerCasedHeaders) {
  ScriptedHttpServer server([](const ServerRequest& req, ServerConnection& c) {
    c.respond(200, "hello " + req.target, {{"X-Custom-Thing", "Value One"}, {"ETag", "\"abc\""}});
  });
  CurlTransport transport(real_env_options());
  HttpRequest req = get(server.url("/file?x=1"));
  req.headers = {{"Authorization", "Bearer t"}};
  auto r = transport.perform(req);
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_EQ(r->status, 200);
  EXPECT_EQ(r->body, "hello /file?x=1");
  EXPECT_EQ(r->header("x-custom-thing"), "Value One");
  for (const auto& [name, value] : r->headers) {
    EXPECT_EQ(name, [n = name] {
      std::string l = n;
      for (char& ch : l) ch = static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
      return l;
    }()) << "header name not lower-cased";
  }
  auto seen = server.requests();
  ASSERT_EQ(seen.size(), 1u);
  EXPECT_EQ(seen[0].method, "GET");
  EXPECT_EQ(seen[0].header("authorization"), "Bearer t");
  EXPECT_EQ(seen[0].header("accept-encoding"), "identity");
  EXPECT_EQ(seen[0].header("user-agent"), "hubfs/0.1");
}

TEST(CurlTransport, HeadReadsHeadersOnlyAndIgnoresMaxBody) {
  ScriptedHttpServer server([](const ServerRequest& req, ServerConnection& c) {
    // A HEAD answer announces the length of a body it does not send.
    c.send("HTTP/1.1 200 OK\r\nContent-Length: 123456789\r\nX-Linked-Size: 123456789\r\n\r\n");
  });
  CurlTransport transport(real_env_options());
  HttpRequest req = get(server.url("/big"));
  req.method = "HEAD";
  req.max_body = 10;
  auto r = transport.perform(req);
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_EQ(r->status, 200);
  EXPECT_EQ(r->body, "");
  EXPECT_EQ(r->header("content-length"), "123456789");
  EXPECT_EQ(server.requests().at(0).method, "HEAD");
}

TEST(CurlTransport, PostSendsBody) {
  ScriptedHttpServer server([](const ServerRequest& req, ServerConnection& c) {
    c.respond(200, "got:" + req.body);
  });
  CurlTransport transport(real_env_options());
  HttpRequest req = get(server.url("/api/paths-info"));
  req.method = "POST";
  req.headers = {{"Content-Type", "application/x-www-form-urlencoded"}};
  req.body = "paths=a&paths=b";
  auto r = transport.perform(req);
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_EQ(r->body, "got:paths=a&paths=b");
  auto seen = server.requests().at(0);
  EXPECT_EQ(seen.method, "POST");
  EXPECT_EQ(seen.header("content-type"), "application/x-www-form-urlencoded");
  EXPECT_EQ(seen.header("expect"), std::nullopt);
}

TEST(CurlTransport, LargePostBodyArrivesWhole) {
  ScriptedHttpServer server([](const ServerRequest& req, ServerConnection& c) {
    c.respond(200, std::to_string(req.body.size()));
  });
  CurlTransport transport(real_env_options());
  HttpRequest req = get(server.url("/post"));
  req.method = "POST";
  req.body = std::string(3 << 20, 'p');
  auto r = transport.perform(req);
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_EQ(r->body, std::to_string(3 << 20));
}

TEST(CurlTransport, RedirectsAreReturnedNotFollowed) {
  ScriptedHttpServer server([](const ServerRequest& req, ServerConnection& c) {
    c.respond(302, "", {{"Location", "/elsewhere"}});
  });
  CurlTransport transport(real_env_options());
  auto r = transport.perform(get(server.url("/resolve/main/x")));
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_EQ(r->status, 302);
  EXPECT_EQ(r->header("location"), "/elsewhere");
  EXPECT_EQ(server.requests_handled(), 1);
}

TEST(CurlTransport, KeepAliveReusesOneConnection) {
  ScriptedHttpServer server([](const ServerRequest& req, ServerConnection& c) { c.respond(200, "ok"); });
  CurlTransport transport(real_env_options());
  constexpr int kRequests = 10;
  for (int i = 0; i < kRequests; ++i) {
    auto r = transport.perform(get(server.url("/r" + std::to_string(i))));
    ASSERT_TRUE(r.ok()) << r.status().message();
    EXPECT_EQ(r->body, "ok");
  }
  EXPECT_EQ(server.requests_handled(), kRequests);
  EXPECT_EQ(server.connections_accepted(), 1);
}

TEST(CurlTransport, NoFirstByteTimesOut) {
  ScriptedHttpServer server([&](const ServerRequest&, ServerConnection&) {});
  // The handler returns at once without answering; the connection then idles.
  CurlOptions options = real_env_options();
  options.first_byte_timeout_ms = kShortTimeoutMs;
  CurlTransport transport(options);
  auto r = transport.perform(get(server.url("/silent?X-Amz-Signature=secret")));
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), Code::kTimeout);
  EXPECT_THAT(r.status().message(), HasSubstr("/silent"));
  EXPECT_THAT(r.status().message(), Not(HasSubstr("secret")));
}

// A request's own timeout replaces the transport's (far longer) first-byte and stall timeouts.
// The wait bound only stops a transport that ignored it from hanging the test for 10 minutes.
TEST(CurlTransport, RequestTimeoutReplacesTheFirstByteTimeout) {
  ScriptedHttpServer server([&](const ServerRequest&, ServerConnection&) {});
  CurlOptions options = real_env_options();
  options.first_byte_timeout_ms = 600'000;
  CurlTransport transport(options);
  HttpRequest req = get(server.url("/silent"));
  req.timeout = std::chrono::milliseconds(kShortTimeoutMs);
  Pending p;
  transport.submit(std::move(req), p.callback());
  ASSERT_EQ(p.future.wait_for(std::chrono::seconds(60)), std::future_status::ready);
  auto r = p.future.get();
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), Code::kTimeout);
  EXPECT_THAT(r.status().message(), HasSubstr(std::to_string(kShortTimeoutMs) + " ms"));
}

TEST(CurlTransport, RequestTimeoutReplacesTheStallTimeout) {
  std::atomic<ScriptedHttpServer*> srv{nullptr};
  ScriptedHttpServer server([&](const ServerRequest&, ServerConnection& c) {
    c.send("HTTP/1.1 200 OK\r\nContent-Length: 1000\r\n\r\n" + std::string(100, 'x'));
    srv.load()->wait_for_stop();
  });
  srv = &server;
  CurlOptions options = real_env_options();
  options.stall_timeout_ms = 600'000;
  CurlTransport transport(options);
  HttpRequest req = get(server.url("/stall"));
  req.timeout = std::chrono::milliseconds(kShortTimeoutMs);
  Pending p;
  transport.submit(std::move(req), p.callback());
  ASSERT_EQ(p.future.wait_for(std::chrono::seconds(60)), std::future_status::ready);
  auto r = p.future.get();
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), Code::kTimeout);
  EXPECT_THAT(r.status().message(), HasSubstr("stalled"));
}

TEST(FindCaBundles, EveryNamedBundleOnceInOrderEmptyMeansUnset) {
  const char* names[] = {"REQUESTS_CA_BUNDLE", "CURL_CA_BUNDLE", "SSL_CERT_FILE"};
  std::vector<std::optional<std::string>> saved;
  for (const char* n : names) saved.push_back(getenv(n) ? std::optional<std::string>(getenv(n)) : std::nullopt);
  setenv("REQUESTS_CA_BUNDLE", "/sys.pem", 1);
  setenv("CURL_CA_BUNDLE", "", 1);
  setenv("SSL_CERT_FILE", "/corp.pem", 1);
  auto all = find_ca_bundles();
  setenv("CURL_CA_BUNDLE", "/sys.pem", 1);  // the same file twice is trusted once
  auto deduped = find_ca_bundles();
  for (size_t i = 0; i < 3; ++i) {
    if (saved[i]) setenv(names[i], saved[i]->c_str(), 1);
    else unsetenv(names[i]);
  }
  ASSERT_EQ(all.size(), 2u);
  EXPECT_EQ(all[0].path, "/sys.pem");
  EXPECT_EQ(all[0].source, "REQUESTS_CA_BUNDLE");
  EXPECT_EQ(all[1].path, "/corp.pem");
  EXPECT_EQ(all[1].source, "SSL_CERT_FILE");
  ASSERT_EQ(deduped.size(), 2u);
  EXPECT_EQ(deduped[1].source, "SSL_CERT_FILE");
}

TEST(CurlTransport, LateFirstByteWithinTimeoutSucceeds) {
  ScriptedHttpServer server([&](const ServerRequest&, ServerConnection& c) {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    c.respond(200, "late but fine");
  });
  CurlOptions options = real_env_options();
  options.first_byte_timeout_ms = 5'000;
  CurlTransport transport(options);
  auto r = transport.perform(get(server.url("/slow")));
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_EQ(r->body, "late but fine");
}

TEST(CurlTransport, StallMidBodyTimesOut) {
  // Atomic: the handler runs on a server thread, and TSan cannot see the ordering that the
  // socket gives (the request is sent only after srv is set).
  std::atomic<ScriptedHttpServer*> srv{nullptr};
  ScriptedHttpServer server([&](const ServerRequest&, ServerConnection& c) {
    c.send("HTTP/1.1 200 OK\r\nContent-Length: 1000\r\n\r\n" + std::string(100, 'x'));
    srv.load()->wait_for_stop();  // then nothing, forever (until the test ends)
  });
  srv = &server;
  CurlOptions options = real_env_options();
  options.stall_timeout_ms = kShortTimeoutMs;
  CurlTransport transport(options);
  auto r = transport.perform(get(server.url("/stall")));
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), Code::kTimeout);
  EXPECT_THAT(r.status().message(), HasSubstr("stalled"));
}

TEST(CurlTransport, SteadyButSlowBodyIsNotAStall) {
  // Five pieces 100 ms apart: 400 ms in all, longer than the stall timeout, yet never silent
  // for that long. The stall timeout measures silence, not duration.
  ScriptedHttpServer server([](const ServerRequest&, ServerConnection& c) {
    c.send("HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\n");
    for (int i = 0; i < 5; ++i) {
      if (i > 0) std::this_thread::sleep_for(std::chrono::milliseconds(100));
      c.send(std::string(1, static_cast<char>('a' + i)));
    }
  });
  CurlOptions options = real_env_options();
  options.stall_timeout_ms = kShortTimeoutMs;
  CurlTransport transport(options);
  auto r = transport.perform(get(server.url("/trickle")));
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_EQ(r->body, "abcde");
}

TEST(CurlTransport, ResetMidBodyIsUnavailable) {
  ScriptedHttpServer server([](const ServerRequest&, ServerConnection& c) {
    c.send("HTTP/1.1 200 OK\r\nContent-Length: 100000\r\n\r\n" + std::string(1000, 'x'));
    c.reset();
  });
  CurlTransport transport(real_env_options());
  auto r = transport.perform(get(server.url("/reset")));
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), Code::kUnavailable) << r.status().message();
}

TEST(CurlTransport, BodyCutShortIsUnavailable) {
  ScriptedHttpServer server([](const ServerRequest&, ServerConnection& c) {
    c.send("HTTP/1.1 200 OK\r\nContent-Length: 5000\r\n\r\n" + std::string(1000, 'x'));
    c.close_now();
  });
  CurlTransport transport(real_env_options());
  auto r = transport.perform(get(server.url("/short")));
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), Code::kUnavailable);
  EXPECT_THAT(r.status().message(), HasSubstr("bytes remaining"));
}

TEST(CurlTransport, ConnectionRefusedIsUnavailable) {
  int port;
  {
    ScriptedHttpServer server([](const ServerRequest&, ServerConnection&) {});
    port = server.port();
  }  // stopped: nothing listens on the port any more
  CurlTransport transport(real_env_options());
  auto r = transport.perform(get("http://127.0.0.1:" + std::to_string(port) + "/x"));
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), Code::kUnavailable);
}

TEST(CurlTransport, AnnouncedBodyPastMaxBodyIsRefused) {
  ScriptedHttpServer server([](const ServerRequest&, ServerConnection& c) {
    c.respond(200, std::string(1 << 20, 'z'));
  });
  CurlTransport transport(real_env_options());
  HttpRequest req = get(server.url("/huge"));
  req.max_body = 1000;
  auto r = transport.perform(req);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), Code::kCorrupt);
  EXPECT_THAT(r.status().message(), HasSubstr("server sent more than asked"));
}

TEST(CurlTransport, UnannouncedBodyPastMaxBodyIsAborted) {
  ScriptedHttpServer server([](const ServerRequest&, ServerConnection& c) {
    // No Content-Length: the body runs until the connection closes.
    c.send("HTTP/1.1 200 OK\r\nConnection: close\r\n\r\n" + std::string(1 << 20, 'z'));
    c.close_now();
  });
  CurlTransport transport(real_env_options());
  HttpRequest req = get(server.url("/huge"));
  req.max_body = 1000;
  auto r = transport.perform(req);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), Code::kCorrupt);
  EXPECT_THAT(r.status().message(), HasSubstr("server sent more than asked"));
}

TEST(CurlTransport, BodyExactlyMaxBodyIsAccepted) {
  ScriptedHttpServer server([](const ServerRequest&, ServerConnection& c) { c.respond(206, "0123456789"); });
  CurlTransport transport(real_env_options());
  HttpRequest req = get(server.url("/exact"));
  req.max_body = 10;
  auto r = transport.perform(req);
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_EQ(r->body, "0123456789");
}

// HttpRequest::body_sink: a successful body goes to the sink as it arrives (begin() once, before
// the first byte), HttpResponse::body stays empty and `streamed` counts it; an error page is
// still collected in `body`; a streamed body past max_body is refused as a collected one is.
class RecordingSink : public BodySink {
 public:
  void begin() override {
    ++begins;
    bytes.clear();
  }
  void feed(const char* data, size_t n) override {
    bytes.append(data, n);
    ++pieces;
  }
  int begins = 0;
  int pieces = 0;
  std::string bytes;
};

TEST(CurlTransport, ABodySinkGetsTheSuccessfulBodyAsItArrives) {
  std::string big(3 << 20, '\0');
  for (size_t i = 0; i < big.size(); ++i) big[i] = static_cast<char>(i * 7 + i / 1000);
  ScriptedHttpServer server([&](const ServerRequest& req, ServerConnection& c) {
    if (req.target == "/missing") {
      c.respond(404, "no such file");
    } else if (req.target == "/huge") {
      c.respond(206, std::string(5000, 'z'));
    } else {
      c.respond(206, big);
    }
  });
  CurlTransport transport(real_env_options());
  auto sink = std::make_shared<RecordingSink>();
  HttpRequest req = get(server.url("/big"));
  req.body_sink = sink;
  auto r = transport.perform(req);
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_EQ(r->status, 206);
  EXPECT_TRUE(r->body.empty());
  EXPECT_EQ(r->streamed, big.size());
  EXPECT_EQ(sink->begins, 1);
  EXPECT_GT(sink->pieces, 1) << "3 MiB in one piece: not streamed";
  EXPECT_TRUE(sink->bytes == big);

  auto error_sink = std::make_shared<RecordingSink>();
  HttpRequest missing = get(server.url("/missing"));
  missing.body_sink = error_sink;
  auto m = transport.perform(missing);
  ASSERT_TRUE(m.ok()) << m.status().message();
  EXPECT_EQ(m->status, 404);
  EXPECT_EQ(m->body, "no such file");
  EXPECT_EQ(m->streamed, 0u);
  EXPECT_EQ(error_sink->begins, 0) << "an error page is not the body the sink decodes";

  HttpRequest huge = get(server.url("/huge"));
  huge.body_sink = std::make_shared<RecordingSink>();
  huge.max_body = 1000;
  auto h = transport.perform(huge);
  ASSERT_FALSE(h.ok());
  EXPECT_EQ(h.status().code(), Code::kCorrupt) << h.status().message();
}

TEST(CurlTransport, UnsupportedMethodIsInvalidArgument) {
  CurlTransport transport(real_env_options());
  HttpRequest req = get("http://127.0.0.1:1/x");
  req.method = "DELETE";
  auto r = transport.perform(req);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), Code::kInvalidArgument);
}

TEST(CurlTransport, HeaderWithLineBreakIsRefusedUnsent) {
  ScriptedHttpServer server([](const ServerRequest&, ServerConnection& c) { c.respond(200, "ok"); });
  CurlTransport transport(real_env_options());
  HttpRequest req = get(server.url("/x"));
  req.headers = {{"Authorization", "Bearer t\r\nX-Injected: 1"}};
  auto r = transport.perform(req);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), Code::kInvalidArgument);
  EXPECT_THAT(r.status().message(), Not(HasSubstr("Bearer")));  // never echo a credential
  EXPECT_EQ(server.requests_handled(), 0);
  // The handle it would have used still works.
  auto ok = transport.perform(get(server.url("/y")));
  ASSERT_TRUE(ok.ok()) << ok.status().message();
  EXPECT_EQ(ok->body, "ok");
}

TEST(CurlTransport, ConcurrentSubmittersBoundedByMaxInFlight) {
  constexpr int kMaxInFlight = 4;
  constexpr int kThreads = 4;
  constexpr int kPerThread = 8;
  constexpr int kTotal = kThreads * kPerThread;  // 32 requests
  // Atomic: the handler runs on a server thread, and TSan cannot see the ordering that the
  // socket gives (the request is sent only after srv is set).
  std::atomic<ScriptedHttpServer*> srv{nullptr};
  ScriptedHttpServer server([&](const ServerRequest& req, ServerConnection& c) {
    // Hold each answer until a full set of transfers runs at once (or every request has
    // arrived; bounded), so a transport that ran more than kMaxInFlight, or fewer, shows in
    // the peak.
    srv.load()->wait_until([&] { return srv.load()->concurrent_now() >= kMaxInFlight || srv.load()->requests_handled() == kTotal; },
                    std::chrono::milliseconds(500));
    c.respond(200, "body of " + req.target);
  });
  srv = &server;
  CurlOptions options = real_env_options();
  options.max_in_flight = kMaxInFlight;
  CurlTransport transport(options);

  std::vector<std::unique_ptr<Pending>> pending(kThreads * kPerThread);
  for (auto& p : pending) p = std::make_unique<Pending>();
  std::vector<std::thread> submitters;
  for (int t = 0; t < kThreads; ++t) {
    submitters.emplace_back([&, t] {
      for (int i = 0; i < kPerThread; ++i) {
        int n = t * kPerThread + i;
        transport.submit(get(server.url("/n" + std::to_string(n))), pending[n]->callback());
      }
    });
  }
  for (auto& s : submitters) s.join();
  for (size_t n = 0; n < pending.size(); ++n) {
    auto r = pending[n]->future.get();
    ASSERT_TRUE(r.ok()) << r.status().message();
    EXPECT_EQ(r->body, "body of /n" + std::to_string(n));
  }
  EXPECT_EQ(server.requests_handled(), kThreads * kPerThread);
  EXPECT_EQ(server.peak_concurrent(), kMaxInFlight);
  EXPECT_LE(server.connections_accepted(), kMaxInFlight);
}

// A read's further piece (HttpRequest::companion) runs beside the transfers that fill every
// slot, in a slot of its own (max_in_flight / 4 of them: here one); an ordinary request, and a
// companion past those slots, wait for a transfer to end. Before, a Xet read whose bytes lay in
// two xorbs waited with its second range until the whole wave of ranges had ended.
TEST(CurlTransport, ACompanionRunsBesideAFullSetOfTransfers) {
  constexpr int kMaxInFlight = 4;
  std::mutex mu;
  std::vector<std::string> arrivals;  // targets, in the order their requests arrived
  std::atomic<ScriptedHttpServer*> srv{nullptr};
  ScriptedHttpServer server([&](const ServerRequest& req, ServerConnection& c) {
    {
      std::lock_guard<std::mutex> lock(mu);
      arrivals.push_back(req.target);
    }
    // Hold the answers while more transfers could still arrive (bounded): a transport that
    // starts too few, or too many, shows in the peak.
    srv.load()->wait_until([&] { return srv.load()->concurrent_now() > kMaxInFlight + 1; },
                           std::chrono::milliseconds(700));
    c.respond(206, "range " + req.target);
  });
  srv = &server;
  CurlOptions options = real_env_options();
  options.max_in_flight = kMaxInFlight;
  CurlTransport transport(options);
  std::vector<std::string> targets;
  std::vector<std::unique_ptr<Pending>> pending;
  auto submit = [&](const std::string& target, bool companion) {
    HttpRequest r = get(server.url(target));
    r.own_connection = true;
    r.companion = companion;
    targets.push_back(target);
    pending.push_back(std::make_unique<Pending>());
    transport.submit(std::move(r), pending.back()->callback());
  };
  for (int i = 0; i < kMaxInFlight; ++i) submit("/read" + std::to_string(i), false);
  submit("/second-piece", true);
  submit("/another-second-piece", true);
  submit("/next-read", false);
  for (size_t i = 0; i < pending.size(); ++i) {
    auto r = pending[i]->future.get();
    ASSERT_TRUE(r.ok()) << r.status().message();
    EXPECT_EQ(r->body, "range " + targets[i]);
  }
  EXPECT_EQ(server.peak_concurrent(), kMaxInFlight + 1);
  std::lock_guard<std::mutex> lock(mu);
  ASSERT_EQ(arrivals.size(), targets.size());
  std::vector<std::string> first(arrivals.begin(), arrivals.begin() + kMaxInFlight + 1);
  EXPECT_NE(std::find(first.begin(), first.end(), "/second-piece"), first.end());
  EXPECT_EQ(std::find(first.begin(), first.end(), "/next-read"), first.end());
  EXPECT_EQ(std::find(first.begin(), first.end(), "/another-second-piece"), first.end());
}

// On a fresh transport, transfers submitted together to a plain-http host run at once, each on
// its own connection, with and without own_connection (libcurl's wait for a multiplexing
// connection held every other transfer back until the first one had finished).
TEST(CurlTransport, TransfersStartingTogetherRunAtOnceOverPlainHttp) {
  for (bool own : {false, true}) {
    constexpr int kTogether = 3;
    std::atomic<ScriptedHttpServer*> srv{nullptr};
    ScriptedHttpServer server([&](const ServerRequest&, ServerConnection& c) {
      // Bounded: serialised transfers never reach kTogether, and the peak below says so.
      srv.load()->wait_until([&] { return srv.load()->concurrent_now() >= kTogether; },
                             std::chrono::milliseconds(1500));
      c.respond(206, "range");
    });
    srv = &server;
    CurlOptions options = real_env_options();
    options.max_in_flight = 16;
    CurlTransport transport(options);
    std::vector<std::unique_ptr<Pending>> pending;
    for (int i = 0; i < kTogether; ++i) {
      pending.push_back(std::make_unique<Pending>());
      HttpRequest r = get(server.url("/blob"));
      r.own_connection = own;
      transport.submit(std::move(r), pending.back()->callback());
    }
    for (auto& p : pending) {
      auto r = p->future.get();
      ASSERT_TRUE(r.ok()) << r.status().message();
      EXPECT_EQ(r->body, "range");
    }
    EXPECT_EQ(server.peak_concurrent(), kTogether) << "own_connection=" << own;
    EXPECT_EQ(server.connections_accepted(), kTogether) << "own_connection=" << own;
  }
}

TEST(CurlTransport, CallbackMaySubmitMoreWork) {
  ScriptedHttpServer server([](const ServerRequest& req, ServerConnection& c) { c.respond(200, req.target); });
  CurlTransport transport(real_env_options());
  Pending second;
  transport.submit(get(server.url("/first")), [&](Result<HttpResponse> r) {
    ASSERT_TRUE(r.ok());
    transport.submit(get(server.url("/second")), second.callback());
  });
  auto r = second.future.get();
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_EQ(r->body, "/second");
}

TEST(CurlTransport, DestructorFailsRequestsInFlightAndQueued) {
  // Atomic: the handler runs on a server thread, and TSan cannot see the ordering that the
  // socket gives (the request is sent only after srv is set).
  std::atomic<ScriptedHttpServer*> srv{nullptr};
  ScriptedHttpServer server([&](const ServerRequest&, ServerConnection&) { srv.load()->wait_for_stop(); });
  srv = &server;
  constexpr int kRequests = 8;
  std::vector<std::unique_ptr<Pending>> pending(kRequests);
  {
    CurlOptions options = real_env_options();
    options.max_in_flight = 2;  // 2 running, 6 queued
    CurlTransport transport(options);
    for (auto& p : pending) {
      p = std::make_unique<Pending>();
      transport.submit(get(server.url("/never")), p->callback());
    }
    server.wait_for_concurrency(2, std::chrono::seconds(2));
  }
  for (auto& p : pending) {
    // The destructor has returned, so every callback has already run.
    ASSERT_EQ(p->future.wait_for(std::chrono::seconds(0)), std::future_status::ready);
    auto r = p->future.get();
    ASSERT_FALSE(r.ok());
    EXPECT_EQ(r.status().code(), Code::kUnavailable);
    EXPECT_THAT(r.status().message(), HasSubstr("shut down"));
  }
}

TEST(CurlTransport, ReservesBodyFromContentLengthAndReadsMegabytes) {
  const std::string big(8 << 20, 'b');
  ScriptedHttpServer server([&](const ServerRequest&, ServerConnection& c) { c.respond(206, big); });
  CurlTransport transport(real_env_options());
  auto r = transport.perform(get(server.url("/big")));
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_EQ(r->body.size(), big.size());
  EXPECT_TRUE(r->body == big);
  // One allocation sized from Content-Length (not a doubling growth that overshoots).
  EXPECT_EQ(r->body.capacity(), big.size());
}

}  // namespace
}  // namespace hubfs

namespace hubfs {
namespace HUBFS_UNITY_ID {

// Throughput of 8 MiB range reads over loopback HTTP/1.1, 8 in flight. A measurement, not an
// assertion: run with --gtest_also_run_disabled_tests --gtest_filter=*Throughput*.
TEST(CurlTransport, DISABLED_ThroughputOf8MiBRanges) {
  constexpr size_t kRangeBytes = 8 << 20;  // the largest block the cache asks for
  constexpr int kRequests = 64;
  const std::string body(kRangeBytes, 'q');
  testing::ScriptedHttpServer server(
      [&](const testing::ServerRequest&, testing::ServerConnection& c) { c.respond(206, body); });
  CurlOptions options = real_env_options();
  options.max_in_flight = 8;
  CurlTransport transport(options);
  auto start = std::chrono::steady_clock::now();
  std::vector<std::future<Result<HttpResponse>>> futures;
  for (int i = 0; i < kRequests; ++i) {
    auto p = std::make_shared<std::promise<Result<HttpResponse>>>();
    futures.push_back(p->get_future());
    transport.submit(get(server.url("/r")), [p](Result<HttpResponse> r) { p->set_value(std::move(r)); });
  }
  size_t bytes = 0;
  for (auto& f : futures) {
    auto r = f.get();
    ASSERT_TRUE(r.ok()) << r.status().message();
    bytes += r->body.size();
  }
  double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  std::printf("%zu MiB in %.3f s: %.0f MiB/s\n", bytes >> 20, seconds, (bytes >> 20) / seconds);
}

}  // namespace
}  // namespace hubfs

namespace hubfs {
namespace HUBFS_UNITY_ID {

// The status decides, not the body's length: a 503 page longer than the range asked for is a
// 503 (retryable), with its body cut, never a "server sent more than asked".
TEST(CurlTransport, ErrorStatusWinsOverTheBodyLimit) {
  const std::string page(200'000, 'x');
  ScriptedHttpServer server([&](const ServerRequest&, ServerConnection& c) { c.respond(503, page); });
  CurlTransport transport(real_env_options());
  HttpRequest req = get(server.url("/small-file"));
  req.max_body = 10;
  auto r = transport.perform(req);
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_EQ(r->status, 503);
  EXPECT_LE(r->body.size(), 64u * 1024);
  EXPECT_GT(r->body.size(), 0u);
}

TEST(CurlTransport, SuccessfulAnswerPastTheBodyLimitIsRefused) {
  ScriptedHttpServer server([&](const ServerRequest&, ServerConnection& c) { c.respond(200, std::string(1000, 'y')); });
  CurlTransport transport(real_env_options());
  HttpRequest req = get(server.url("/big"));
  req.max_body = 10;
  auto r = transport.perform(req);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), Code::kCorrupt);
}

// The first request stalls (no first byte); its hedge, sent on another connection after the
// initial hedge delay, answers at once and wins.
TEST(CurlTransport, HedgeAnswersAStalledFirstByte) {
  std::atomic<int> seen{0};
  std::mutex mu;
  std::condition_variable cv;
  bool release = false;
  ScriptedHttpServer server([&](const ServerRequest&, ServerConnection& c) {
    if (seen++ == 0) {
      // Stall until the test ends (bounded), as a cold CDN object does.
      std::unique_lock<std::mutex> lock(mu);
      cv.wait_for(lock, std::chrono::seconds(20), [&] { return release; });
      c.respond(200, "stalled original");
      return;
    }
    c.respond(200, "hedge");
  });
  CurlOptions options = real_env_options();
  options.hedge = true;
  options.hedge_initial_delay_ms = 100;
  options.first_byte_timeout_ms = 15'000;
  CurlTransport transport(options);
  auto r = transport.perform(get(server.url("/cold")));
  {
    std::lock_guard<std::mutex> lock(mu);
    release = true;
  }
  cv.notify_all();
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_EQ(r->body, "hedge");
  CurlStats stats = transport.stats();
  EXPECT_EQ(stats.hedges, 1u);
  EXPECT_EQ(stats.hedge_wins, 1u);
  EXPECT_EQ(stats.requests, 1u);
}

// A hedged pair answers exactly once even when both answer.
TEST(CurlTransport, HedgedPairAnswersOnce) {
  std::atomic<int> seen{0};
  std::promise<void> both_sent;  // the server has answered both the original and the hedge
  std::atomic<int> sent{0};
  ScriptedHttpServer server([&](const ServerRequest&, ServerConnection& c) {
    int n = seen++;
    // The server's pace (the original slower than the hedge), not a wait of the test's.
    std::this_thread::sleep_for(std::chrono::milliseconds(n == 0 ? 400 : 300));
    c.respond(200, n == 0 ? "original" : "hedge");
    if (++sent == 2) both_sent.set_value();
  });
  CurlOptions options = real_env_options();
  options.hedge = true;
  options.hedge_initial_delay_ms = 100;
  CurlTransport transport(options);
  std::atomic<int> answers{0};
  std::promise<void> first;
  transport.submit(get(server.url("/both")), [&](Result<HttpResponse> r) {
    EXPECT_TRUE(r.ok());
    if (answers++ == 0) first.set_value();
  });
  first.get_future().wait();
  // Both answers are on the wire; shutdown() then joins the loop, so whatever it made of the
  // second one (delivered or failed as in flight) has reached the pair by the check below.
  ASSERT_EQ(both_sent.get_future().wait_for(std::chrono::seconds(60)), std::future_status::ready);
  transport.shutdown();
  EXPECT_EQ(answers.load(), 1);
}

TEST(CurlTransport, ShutdownFailsWhatIsInFlightAndLaterSubmits) {
  std::promise<void> arrived;
  std::atomic<bool> once{false};
  ScriptedHttpServer server([&](const ServerRequest&, ServerConnection&) {  // never answers
    if (!once.exchange(true)) arrived.set_value();
  });
  CurlTransport transport(real_env_options());
  std::promise<Result<HttpResponse>> p;
  transport.submit(get(server.url("/never")), [&](Result<HttpResponse> r) { p.set_value(std::move(r)); });
  // On the wire (the server has it), not merely queued.
  ASSERT_EQ(arrived.get_future().wait_for(std::chrono::seconds(60)), std::future_status::ready);
  transport.shutdown();
  auto r = p.get_future().get();
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), Code::kUnavailable);
  auto late = transport.perform(get(server.url("/late")));
  ASSERT_FALSE(late.ok());
  EXPECT_EQ(late.status().code(), Code::kUnavailable);
}

}  // namespace
}  // namespace hubfs
