// RangeFetcher over CurlTransport on a real socket (an integration test: libcurl waits on real
// sockets with its own clock; the fetcher's rules are unit-tested in tests/net on a manual Env).
#include <gtest/gtest.h>

#include <atomic>
#include <future>
#include <memory>
#include <string>
#include <vector>

#include "net/curl_transport.h"
#include "net/range_fetcher.h"
#include "net/scripted_http_server.h"

namespace hubfs {
namespace HUBFS_UNITY_ID {

std::string file_content(uint64_t size) {
  std::string s(size, '\0');
  for (uint64_t i = 0; i < size; ++i) s[i] = static_cast<char>((i * 131 + 7) % 251);
  return s;
}

// End to end over a real socket: CurlTransport, a CDN that serves ranges, and a Locator whose
// refresh goes through the same transport (which would deadlock if the fetcher ran it on the
// transport's event-loop thread).
TEST(RangeFetcherOverCurl, ConcurrentRangesAndARefreshThroughTheSameTransport) {
  constexpr uint64_t kSize = 4 << 20;
  const std::string content = file_content(kSize);
  testing::ScriptedHttpServer server([&](const testing::ServerRequest& req, testing::ServerConnection& c) {
    if (req.target.starts_with("/resolve")) {
      c.respond(302, "", {{"Location", "/blob?sig=fresh"}});
      return;
    }
    if (req.target != "/blob?sig=fresh") {
      c.respond(403, "expired");
      return;
    }
    auto h = req.header("range");
    size_t dash = h->find('-');
    uint64_t first = std::stoull(h->substr(6, dash - 6)), last = std::stoull(h->substr(dash + 1));
    c.respond(206, content.substr(first, last - first + 1),
              {{"Content-Range", "bytes " + std::to_string(first) + "-" + std::to_string(last) + "/" +
                                     std::to_string(kSize)}});
  });
  CurlOptions options;
  options.env = &Env::real();  // real sockets: libcurl's clock (an integration test)
  options.max_in_flight = 8;
  CurlTransport transport(options);
  RangeFetcherOptions fetcher_options;
  fetcher_options.env = &Env::real();
  RangeFetcher fetcher(transport, fetcher_options);
  std::atomic<int> refreshes{0};
  Locator locate = [&](bool refresh) -> Result<Location> {
    if (!refresh) return Location{server.url("/blob?sig=old"), {}};
    ++refreshes;
    HttpRequest head;
    head.method = "HEAD";
    head.url = server.url("/resolve/main/model.bin");
    auto p = std::make_shared<std::promise<Result<HttpResponse>>>();
    auto f = p->get_future();
    transport.submit(head, [p](Result<HttpResponse> r) { p->set_value(std::move(r)); });
    // Bounded, so a deadlocked design fails the test instead of hanging it.
    if (f.wait_for(std::chrono::seconds(5)) != std::future_status::ready) return Internal("locator deadlocked");
    auto r = f.get();
    if (!r.ok()) return r.status();
    return Location{server.url(*r->header("location")), {}};
  };
  std::vector<ByteRange> ranges;
  for (uint64_t i = 0; i < 64; ++i) ranges.push_back({i * (kSize / 65) + i, 1 << 16});  // odd offsets
  auto results = fetcher.fetch(locate, kSize, ranges);
  for (size_t i = 0; i < ranges.size(); ++i) {
    ASSERT_TRUE(results[i].ok()) << results[i].status().message();
    EXPECT_TRUE(*results[i] == content.substr(ranges[i].offset, ranges[i].length)) << "range " << i;
  }
  EXPECT_EQ(refreshes.load(), 1);  // every range hit the same expired URL
  EXPECT_LE(server.connections_accepted(), options.max_in_flight);
}

}  // namespace
}  // namespace hubfs
