#include <gtest/gtest.h>

#include <condition_variable>
#include <thread>

#include "hub/hub_client.h"
#include "hub_test_util.h"
#include "support/fake_transport.h"

namespace hubfs {
namespace HUBFS_UNITY_ID {

using std::chrono::seconds;
using testing::FakeTransport;
using testing::has_header;
using testing::header_or_empty;
using testing::ManualHubClock;
using testing::respond;

const RepoRef kRepo{RepoType::kModel, "org/x", "main"};
const char kResolve[] = "https://hub.test/org/x/resolve/main/w%201.bin";
// X-Amz-Date 2023-11-14T22:13:20Z is the ManualHubClock's wall time: fully fresh.
const char kCdn[] =
    "https://cdn.test/blob?X-Amz-Algorithm=AWS4&X-Amz-Date=20231114T221320Z&X-Amz-Expires=3600&X-Amz-Signature=s1g";

HttpResponse redirect(long status, std::string to) { return respond(status, "", {{"location", std::move(to)}}); }

struct LocateTest : ::testing::Test {
  ManualHubClock clock;
  HubConfig config() {
    HubConfig c = testing::test_config();
    c.env = clock.env();
    return c;
  }
};

TEST_F(LocateTest, RedirectToCdnGivesSignedUrlWithoutToken) {
  FakeTransport t([](const HttpRequest&) { return redirect(302, kCdn); });
  HubClient c(config(), t);
  auto r = c.locate(kRepo, "w 1.bin");
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_EQ(r->url, kCdn);
  EXPECT_FALSE(find_header(r->headers, "Authorization"));
  auto reqs = t.requests();
  ASSERT_EQ(reqs.size(), 1u);
  EXPECT_EQ(reqs[0].method, "HEAD");
  EXPECT_EQ(reqs[0].url, kResolve);
  EXPECT_EQ(header_or_empty(reqs[0], "Authorization"), std::string("Bearer ") + testing::kToken);
  EXPECT_EQ(header_or_empty(reqs[0], "Accept-Encoding"), "identity");
}

TEST_F(LocateTest, MetadataTimeoutTravelsWithResolvesAndApiCalls) {
  FakeTransport t([](const HttpRequest& r) {
    if (r.method == "HEAD") return redirect(302, kCdn);
    return respond(200, R"({"sha":"0123456789abcdef0123456789abcdef01234567"})");
  });
  HubConfig cfg = config();
  cfg.metadata_timeout = std::chrono::seconds(25);
  HubClient c(cfg, t);
  ASSERT_TRUE(c.locate(kRepo, "w 1.bin").ok());
  (void)c.repo_info(kRepo);  // only the request it sends matters here
  auto reqs = t.requests();
  ASSERT_EQ(reqs.size(), 2u);
  for (const HttpRequest& r : reqs) EXPECT_EQ(r.timeout, std::chrono::milliseconds(25000)) << r.url;

  FakeTransport plain([](const HttpRequest&) { return redirect(302, kCdn); });
  HubClient unset(config(), plain);
  ASSERT_TRUE(unset.locate(kRepo, "w 1.bin").ok());
  EXPECT_FALSE(plain.requests().at(0).timeout);  // the transport's own timeouts apply
}

TEST_F(LocateTest, SecondLocateReusesTheUrl) {
  FakeTransport t([](const HttpRequest&) { return redirect(302, kCdn); });
  HubClient c(config(), t);
  ASSERT_TRUE(c.locate(kRepo, "w 1.bin").ok());
  auto again = c.locate(kRepo, "w 1.bin");
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(again->url, kCdn);
  EXPECT_EQ(t.request_count(), 1u);
}

TEST_F(LocateTest, PathsRevisionsAndReposAreRememberedApart) {
  FakeTransport t([](const HttpRequest&) { return redirect(302, kCdn); });
  HubClient c(config(), t);
  ASSERT_TRUE(c.locate(kRepo, "a").ok());
  ASSERT_TRUE(c.locate(kRepo, "b").ok());
  ASSERT_TRUE(c.locate(RepoRef{RepoType::kModel, "org/x", "v2"}, "a").ok());
  ASSERT_TRUE(c.locate(RepoRef{RepoType::kDataset, "org/x", "main"}, "a").ok());
  EXPECT_EQ(t.request_count(), 4u);
  ASSERT_TRUE(c.locate(kRepo, "/a").ok());  // same file as "a"
  EXPECT_EQ(t.request_count(), 4u);
}

TEST_F(LocateTest, AmzExpiryWithMarginTriggersReResolve) {
  FakeTransport t([](const HttpRequest&) { return redirect(302, kCdn); });
  HubClient c(config(), t);
  auto r = c.locate(kRepo, "w 1.bin");
  ASSERT_TRUE(r.ok());
  // 3600 s signed, 60 s margin.
  EXPECT_EQ(r->expires, clock.steady_at(1000 + 3600 - 60));
  clock.steady_s = 1000 + 3600 - 61;
  ASSERT_TRUE(c.locate(kRepo, "w 1.bin").ok());
  EXPECT_EQ(t.request_count(), 1u);
  clock.steady_s = 1000 + 3600 - 60;
  ASSERT_TRUE(c.locate(kRepo, "w 1.bin").ok());
  EXPECT_EQ(t.request_count(), 2u);
}

TEST_F(LocateTest, AmzDateInThePastShortensTheLifetime) {
  FakeTransport t([](const HttpRequest&) { return redirect(302, kCdn); });
  clock.wall_s = 1700000000 + 1000;  // signed 1000 s ago
  HubClient c(config(), t);
  auto r = c.locate(kRepo, "f");
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->expires, clock.steady_at(1000 + 2600 - 60));
}

TEST_F(LocateTest, AmzDateOurClockDisagreesWithIsTakenAsNow) {
  FakeTransport t([](const HttpRequest&) { return redirect(302, kCdn); });
  clock.wall_s = 1700000000 + 99999;  // our clock is a day ahead: the URL "expired" already
  HubClient c(config(), t);
  auto r = c.locate(kRepo, "f");
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->expires, clock.steady_at(1000 + 3600 - 60));
}

TEST_F(LocateTest, ExpiresUnixParam) {
  for (const char* name : {"Expires", "expires"}) {
    const std::string cdn = std::string("https://cdn.test/f?") + name + "=" + std::to_string(1700000000 + 1800) +
                            "&Signature=x&Key-Pair-Id=k";
    FakeTransport t([&](const HttpRequest&) { return redirect(302, cdn); });
    HubClient c(config(), t);
    auto r = c.locate(kRepo, "f");
    ASSERT_TRUE(r.ok());
    EXPECT_EQ(r->expires, clock.steady_at(1000 + 1800 - 60)) << name;
  }
}

TEST_F(LocateTest, UndatedUrlGetsTheDefaultLifetime) {
  FakeTransport t([](const HttpRequest&) { return redirect(302, "https://cdn.test/f?sig=1"); });
  HubClient c(config(), t);
  auto r = c.locate(kRepo, "f");
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->expires, clock.steady_at(1000 + 600 - 60));
}

TEST_F(LocateTest, RefreshForcesANewResolve) {
  std::atomic<int> n{0};
  FakeTransport t([&](const HttpRequest&) { return redirect(302, std::string(kCdn) + "&n=" + std::to_string(++n)); });
  HubClient c(config(), t);
  auto first = c.locate(kRepo, "f");
  auto second = c.locate(kRepo, "f", /*refresh=*/true);
  ASSERT_TRUE(first.ok() && second.ok());
  EXPECT_NE(first->url, second->url);
  EXPECT_EQ(t.request_count(), 2u);
  auto third = c.locate(kRepo, "f");
  ASSERT_TRUE(third.ok());
  EXPECT_EQ(third->url, second->url);
  EXPECT_EQ(t.request_count(), 2u);
}

TEST_F(LocateTest, FailedRefreshForgetsTheOldUrl) {
  std::atomic<int> n{0};
  FakeTransport t([&](const HttpRequest&) {
    return ++n == 2 ? respond(503) : redirect(302, kCdn);
  });
  HubClient c(config(), t);
  ASSERT_TRUE(c.locate(kRepo, "f").ok());
  EXPECT_FALSE(c.locate(kRepo, "f", true).ok());
  ASSERT_TRUE(c.locate(kRepo, "f").ok());
  EXPECT_EQ(t.request_count(), 3u);
}

TEST_F(LocateTest, RelativeRedirectIsFollowedWithTheToken) {
  FakeTransport t([](const HttpRequest& req) {
    if (req.url == kResolve) return redirect(307, "/new-org/x/resolve/main/w%201.bin");
    return redirect(302, kCdn);
  });
  HubClient c(config(), t);
  auto r = c.locate(kRepo, "w 1.bin");
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_EQ(r->url, kCdn);
  auto reqs = t.requests();
  ASSERT_EQ(reqs.size(), 2u);
  EXPECT_EQ(reqs[1].url, "https://hub.test/new-org/x/resolve/main/w%201.bin");
  EXPECT_TRUE(has_header(reqs[1], "Authorization"));
}

TEST_F(LocateTest, AbsoluteRedirectToTheEndpointIsFollowedWithTheToken) {
  FakeTransport t([](const HttpRequest& req) {
    if (req.url == kResolve) return redirect(301, "https://HUB.test:443/new/x/resolve/main/w%201.bin");
    return respond(200);
  });
  HubClient c(config(), t);
  auto r = c.locate(kRepo, "w 1.bin");
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_EQ(r->url, "https://HUB.test:443/new/x/resolve/main/w%201.bin");
  EXPECT_TRUE(find_header(r->headers, "Authorization"));
  EXPECT_TRUE(has_header(t.requests()[1], "Authorization"));
}

TEST_F(LocateTest, SameHostOtherSchemeIsAnotherOrigin) {
  FakeTransport t([](const HttpRequest&) { return redirect(302, "http://hub.test/blob?sig=1"); });
  HubClient c(config(), t);
  auto r = c.locate(kRepo, "f");
  ASSERT_TRUE(r.ok());
  EXPECT_FALSE(find_header(r->headers, "Authorization"));
  EXPECT_EQ(t.request_count(), 1u);
}

TEST_F(LocateTest, DirectAnswerGivesTheResolveUrlWithToken) {
  FakeTransport t([](const HttpRequest&) { return respond(200, "", {{"etag", "\"abc\""}}); });
  HubClient c(config(), t);
  auto r = c.locate(kRepo, "w 1.bin");
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->url, kResolve);
  EXPECT_EQ(find_header(r->headers, "Authorization").value_or(""), std::string("Bearer ") + testing::kToken);
  EXPECT_EQ(r->expires, std::chrono::steady_clock::time_point::max());
}

TEST_F(LocateTest, ASmallFilesResolveCacheHopIsFollowedAndCountedAsAResolve) {
  // The Hub answers a small file's resolve with a relative 307 to /api/resolve-cache/ (captured:
  // huggingface/swift-transformers PR 209), which then serves the bytes.
  const std::string hop =
      "/api/resolve-cache/models/org/x/0123456789abcdef0123456789abcdef01234567/w%201.bin"
      "?%2Forg%2Fx%2Fresolve%2Fmain%2Fw%201.bin=&etag=%22abc%22";
  FakeTransport t([&](const HttpRequest& req) {
    if (req.url == kResolve) return redirect(307, hop);
    return respond(200, "", {{"etag", "\"abc\""}});
  });
  HubClient c(config(), t);
  auto r = c.locate(kRepo, "w 1.bin");
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_EQ(r->url, "https://hub.test" + hop);
  // On the endpoint: the token goes along, and the URL (commit and ETag in it) stays valid.
  EXPECT_EQ(find_header(r->headers, "Authorization").value_or(""), std::string("Bearer ") + testing::kToken);
  EXPECT_EQ(r->expires, std::chrono::steady_clock::time_point::max());
  auto reqs = t.requests();
  ASSERT_EQ(reqs.size(), 2u);
  EXPECT_EQ(reqs[1].method, "HEAD");
  EXPECT_TRUE(has_header(reqs[1], "Authorization"));
  EXPECT_EQ(c.request_counts().resolves, 2u);  // both hops are resolver calls (the Hub's quota too)
}

TEST_F(LocateTest, DirectAnswerWithoutTokenHasNoHeaders) {
  FakeTransport t([](const HttpRequest&) { return respond(200); });
  HubConfig cfg = config();
  cfg.token.reset();
  HubClient c(cfg, t);
  auto r = c.locate(kRepo, "f");
  ASSERT_TRUE(r.ok());
  EXPECT_TRUE(r->headers.empty());
  EXPECT_FALSE(has_header(t.requests()[0], "Authorization"));
}

TEST_F(LocateTest, DatasetResolveUrlHasPrefixAndEncodedRevision) {
  FakeTransport t([](const HttpRequest&) { return respond(200); });
  HubClient c(config(), t);
  ASSERT_TRUE(c.locate(RepoRef{RepoType::kDataset, "org/x", "refs/pr/3"}, "d/q?.parquet").ok());
  EXPECT_EQ(t.requests()[0].url, "https://hub.test/datasets/org/x/resolve/refs%2Fpr%2F3/d/q%3F.parquet");
}

TEST_F(LocateTest, RedirectLoopEnds) {
  FakeTransport t([](const HttpRequest&) { return redirect(302, "/org/x/resolve/main/f"); });
  HubClient c(config(), t);
  auto r = c.locate(kRepo, "f");
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), Code::kUnavailable);
  EXPECT_NE(r.status().message().find("redirects"), std::string::npos);
  EXPECT_EQ(t.request_count(), 6u);
}

TEST_F(LocateTest, RedirectWithoutLocationIsAnError) {
  FakeTransport t([](const HttpRequest&) { return respond(302); });
  HubClient c(config(), t);
  auto r = c.locate(kRepo, "f");
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("without a Location"), std::string::npos);
}

TEST_F(LocateTest, RedirectToNonHttpIsRefused) {
  FakeTransport t([](const HttpRequest&) { return redirect(302, "file:///etc/passwd"); });
  HubClient c(config(), t);
  auto r = c.locate(kRepo, "f");
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), Code::kCorrupt);
}

TEST_F(LocateTest, MissingFileIsNotFound) {
  FakeTransport t([](const HttpRequest&) {
    return respond(404, "", {{"x-error-code", "EntryNotFound"}, {"x-repo-commit", "abc"}});
  });
  HubClient c(config(), t);
  auto r = c.locate(kRepo, "dir/nope.bin");
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), Code::kNotFound);
  EXPECT_NE(r.status().message().find("file 'dir/nope.bin' not found"), std::string::npos) << r.status().message();
  // A failure is not remembered: the next call asks again.
  EXPECT_FALSE(c.locate(kRepo, "dir/nope.bin").ok());
  EXPECT_EQ(t.request_count(), 2u);
}

TEST_F(LocateTest, GatedFileSaysHowToGetAccess) {
  FakeTransport t([](const HttpRequest&) { return respond(403, "", {{"x-error-code", "GatedRepo"}}); });
  HubClient c(config(), t);
  auto r = c.locate(kRepo, "f");
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), Code::kPermissionDenied);
  EXPECT_NE(r.status().message().find("accept its conditions at https://hub.test/org/x"), std::string::npos);
  EXPECT_EQ(r.status().message().find(testing::kToken), std::string::npos);
}

TEST_F(LocateTest, TransportFailureNamesTheHost) {
  FakeTransport t([](const HttpRequest&) -> Result<HttpResponse> { return Unavailable("reset by peer"); });
  HubClient c(config(), t);
  auto r = c.locate(kRepo, "f");
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), Code::kUnavailable);
  EXPECT_NE(r.status().message().find("cannot reach https://hub.test"), std::string::npos);
}

TEST_F(LocateTest, BadPathIsRefusedWithoutARequest) {
  FakeTransport t([](const HttpRequest&) { return respond(200); });
  HubClient c(config(), t);
  for (const char* p : {"", "/", "a/../b", "..", "a//b"}) {
    auto r = c.locate(kRepo, p);
    ASSERT_FALSE(r.ok()) << p;
    EXPECT_EQ(r.status().code(), Code::kInvalidArgument) << p;
  }
  EXPECT_EQ(t.request_count(), 0u);
}

TEST_F(LocateTest, ConcurrentLocatesOfOnePathResolveOnce) {
  constexpr int kThreads = 8;
  std::mutex mu;
  std::condition_variable cv;
  int started = 0;
  // The one resolve is held open until every caller has started, so the others arrive while
  // it is in flight (or, if late, find it remembered): either way no second request may go out.
  FakeTransport t([&](const HttpRequest&) {
    std::unique_lock<std::mutex> lock(mu);
    cv.wait(lock, [&] { return started == kThreads; });
    return redirect(302, kCdn);
  });
  HubClient c(config(), t);
  std::vector<std::thread> threads;
  std::vector<Result<Location>> results(kThreads, Result<Location>(Internal("not run")));
  for (int i = 0; i < kThreads; ++i) {
    threads.emplace_back([&, i] {
      {
        std::lock_guard<std::mutex> lock(mu);
        ++started;
      }
      cv.notify_all();
      results[i] = c.locate(kRepo, "w 1.bin");
    });
  }
  for (auto& th : threads) th.join();
  EXPECT_EQ(t.request_count(), 1u);
  for (const auto& r : results) {
    ASSERT_TRUE(r.ok()) << r.status().message();
    EXPECT_EQ(r->url, kCdn);
  }
}

TEST_F(LocateTest, ConcurrentLocatesShareAFailureToo) {
  constexpr int kThreads = 4;
  std::mutex mu;
  std::condition_variable cv;
  int started = 0;
  FakeTransport t([&](const HttpRequest&) {
    std::unique_lock<std::mutex> lock(mu);
    cv.wait(lock, [&] { return started == kThreads; });
    return respond(404, "", {{"x-error-code", "EntryNotFound"}});
  });
  HubClient c(config(), t);
  std::vector<std::thread> threads;
  std::atomic<int> not_found{0};
  for (int i = 0; i < kThreads; ++i) {
    threads.emplace_back([&] {
      {
        std::lock_guard<std::mutex> lock(mu);
        ++started;
      }
      cv.notify_all();
      if (c.locate(kRepo, "f").status().code() == Code::kNotFound) ++not_found;
    });
  }
  for (auto& th : threads) th.join();
  // Callers that shared the resolve got its failure; late ones asked again and failed alike.
  EXPECT_EQ(not_found.load(), kThreads);
}

// ---- probe_file: what one resolve answer says of a file (huggingface_hub's get_hf_file_metadata)

const char kCommit[] = "0123456789abcdef0123456789abcdef01234567";
const char kSha[] = "ABCDEF0123456789abcdef0123456789abcdef0123456789abcdef0123456789";
const char kXet[] = "00112233445566778899aabbccddeeff00112233445566778899aabbccddeeff";

TEST_F(LocateTest, ProbeOfAnLfsFileGivesCommitSizeShaXetHashAndTheCdnLocation) {
  FakeTransport t([](const HttpRequest&) {
    return respond(302, "", {{"location", kCdn}, {"x-repo-commit", kCommit}, {"x-linked-size", "3300000"},
                             {"x-linked-etag", std::string("\"") + kSha + "\""}, {"etag", "\"other\""},
                             {"x-xet-hash", kXet}});
  });
  HubClient c(config(), t);
  auto p = c.probe_file(kRepo, "w 1.bin");
  ASSERT_TRUE(p.ok()) << p.status().message();
  EXPECT_EQ(p->commit, kCommit);
  EXPECT_EQ(p->entry.path, "w 1.bin");
  EXPECT_FALSE(p->entry.is_dir);
  EXPECT_EQ(p->entry.size, 3300000u);
  ASSERT_TRUE(p->entry.lfs_sha256);
  EXPECT_EQ(*p->entry.lfs_sha256, "abcdef0123456789abcdef0123456789abcdef0123456789abcdef0123456789");
  EXPECT_EQ(p->entry.content_id(), "sha256:abcdef0123456789abcdef0123456789abcdef0123456789abcdef0123456789");
  ASSERT_TRUE(p->entry.xet_hash);
  EXPECT_EQ(*p->entry.xet_hash, kXet);
  ASSERT_TRUE(p->location);
  EXPECT_EQ(p->location->url, kCdn);
  auto reqs = t.requests();
  ASSERT_EQ(reqs.size(), 1u);
  EXPECT_EQ(reqs[0].method, "HEAD");
  EXPECT_EQ(reqs[0].url, kResolve);
  EXPECT_EQ(c.request_counts().resolves, 1u);
}

// A small file served directly has only its plain ETag, which a proxy may compute its own way:
// it is listed, not described from the answer. One the Hub serves directly but links all the
// same is described, with no location (the resolve URL names the branch).
TEST_F(LocateTest, AProbeOfAFileServedDirectlyNeedsItsLinkedSha) {
  FakeTransport plain([](const HttpRequest&) {
    return respond(200, "", {{"x-repo-commit", kCommit}, {"etag", "\"0123456789abcdef0123456789abcdef01234567\""},
                             {"content-length", "12"}});
  });
  HubClient c(config(), plain);
  EXPECT_EQ(c.probe_file(kRepo, "w 1.bin").status().code(), Code::kUnsupported);

  FakeTransport linked([](const HttpRequest&) {
    // A weak linked ETag, as _normalize_etag accepts it.
    return respond(200, "", {{"x-repo-commit", kCommit}, {"x-linked-etag", std::string("W/\"") + kSha + "\""},
                             {"x-linked-size", "12"}, {"content-length", "12"}});
  });
  HubClient d(config(), linked);
  auto p = d.probe_file(kRepo, "w 1.bin");
  ASSERT_TRUE(p.ok()) << p.status().message();
  EXPECT_EQ(p->entry.size, 12u);
  EXPECT_EQ(p->entry.content_id(), "sha256:abcdef0123456789abcdef0123456789abcdef0123456789abcdef0123456789");
  EXPECT_FALSE(p->location);
}

TEST_F(LocateTest, AProbeMissingOrMangledMetadataIsUnsupportedNotGuessed) {
  const Headers lfs = {{"location", kCdn}, {"x-repo-commit", kCommit}, {"x-linked-size", "3300000"},
                       {"x-linked-etag", std::string("\"") + kSha + "\""}};
  auto without = [&](std::string_view drop, Headers add = {}) {
    Headers h;
    for (const auto& kv : lfs)
      if (kv.first != drop) h.push_back(kv);
    for (auto& kv : add) h.push_back(kv);
    return h;
  };
  const std::vector<Headers> answers = {
      without("x-repo-commit"),
      without("x-repo-commit", {{"x-repo-commit", "main"}}),
      without("x-linked-size"),
      without("x-linked-size", {{"x-linked-size", "-1"}}),
      without("x-linked-size", {{"x-linked-size", "18446744073709551616"}}),
      without("x-linked-etag"),
      without("x-linked-etag", {{"x-linked-etag", "\"0123456789abcdef0123456789abcdef01234567\""}}),
  };
  for (const Headers& h : answers) {
    FakeTransport t([&](const HttpRequest&) { return respond(302, "", h); });
    HubClient c(config(), t);
    auto p = c.probe_file(kRepo, "w 1.bin");
    ASSERT_FALSE(p.ok());
    EXPECT_EQ(p.status().code(), Code::kUnsupported) << p.status().message();
  }
  FakeTransport missing([](const HttpRequest&) {
    return respond(404, "", {{"x-error-code", "EntryNotFound"}, {"x-repo-commit", kCommit}});
  });
  HubClient c(config(), missing);
  EXPECT_EQ(c.probe_file(kRepo, "w 1.bin").status().code(), Code::kNotFound);
}

TEST_F(LocateTest, AnAdoptedLocationAnswersLocateOfThePinnedPathWithoutARequest) {
  FakeTransport t([](const HttpRequest&) { return redirect(302, "https://cdn.test/other"); });
  HubClient c(config(), t);
  RepoRef pinned = kRepo;
  pinned.revision = kCommit;
  c.adopt_location(pinned, "w 1.bin", Location{kCdn, {}, clock.env()->now() + seconds(600), {}});
  auto r = c.locate(pinned, "w 1.bin");
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_EQ(r->url, kCdn);
  EXPECT_EQ(t.request_count(), 0u);
  auto other = c.locate(kRepo, "w 1.bin");  // the branch's own key is not touched
  ASSERT_TRUE(other.ok());
  EXPECT_EQ(other->url, "https://cdn.test/other");
}

}  // namespace
}  // namespace hubfs
