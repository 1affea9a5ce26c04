// The reader's latency histograms (ReaderStats::cdn_latency, disk_latency) read the Env's clock:
// a manual Env that moves 40 ms while the CDN answers gives every range request exactly 40 ms,
// one observation per request counted, and a disk hit (no time moved) exactly 0.
#include <gtest/gtest.h>

#include "cache/block_cache.h"
#include "net/range_fetcher.h"
#include "reader/block_reader.h"
#include "support/digest.h"
#include "support/fetcher_env.h"
#include "support/fake_transport.h"
#include "support/manual_env.h"
#include "support/pattern.h"
#include "support/temp_dir.h"

namespace hubfs {
namespace HUBFS_UNITY_ID {

TEST(ReaderLatency, RangeRequestsAndDiskHitsAreTimedOnTheEnvsClock) {
  testing::ManualEnv env;
  testing::TempDir dir;
  const std::string content = testing::pattern_bytes(7, 0, (3u << 20) + 100);
  testing::FakeTransport transport([&](const HttpRequest& req) -> Result<HttpResponse> {
    env.advance(std::chrono::milliseconds(40));  // the CDN's answer takes 40 ms of the Env's time
    uint64_t a = 0, b = 0;
    auto range = find_header(req.headers, "Range");
    HttpResponse r;
    if (!range || sscanf(range->c_str(), "bytes=%lu-%lu", &a, &b) != 2) {
      r.status = 400;
      return r;
    }
    r.status = 206;
    r.body = content.substr(a, b - a + 1);
    r.headers.emplace_back("content-range", "bytes " + std::to_string(a) + "-" + std::to_string(b) + "/" +
                                                std::to_string(content.size()));
    return r;
  });
  RangeFetcher fetcher(transport, testing::fetcher_on(env));
  CacheOptions co;
  co.env = &Env::real();
  co.dir = (dir.path() / "cache").string();
  auto cache = std::move(BlockCache::open(co)).value();
  RemoteFile file;
  file.path = "f.bin";
  file.content_id = "sha256:" + testing::sha256_hex(content);
  file.size = content.size();
  file.locate = [](bool) { return Result<Location>(Location{"http://cdn.test/f", {}, {}}); };
  ReaderOptions options;
  options.parallel_requests = 1;
  {
    BlockReader reader(cache.get(), fetcher, options);
    std::string out(content.size(), '\0');
    ASSERT_TRUE(reader.read(file, 0, out.size(), out.data(), nullptr).ok());
    ASSERT_TRUE(out == content);
    reader.shutdown();  // the blocks are on disk
    const ReaderStats s = reader.stats();
    ASSERT_GT(s.requests, 0u);
    EXPECT_EQ(s.cdn_latency.count, s.requests);
    EXPECT_NEAR(s.cdn_latency.sum_s, 0.040 * static_cast<double>(s.requests), 1e-9);
    EXPECT_EQ(s.cdn_latency.counts[6], s.requests);  // (25 ms, 50 ms]
    EXPECT_EQ(s.disk_latency.count, 0u);
  }
  BlockReader again(cache.get(), fetcher, options);  // empty memory: the disk serves
  std::string out(content.size(), '\0');
  ASSERT_TRUE(again.read(file, 0, out.size(), out.data(), nullptr).ok());
  ASSERT_TRUE(out == content);
  const ReaderStats s = again.stats();
  EXPECT_EQ(s.requests, 0u);
  EXPECT_GT(s.disk_hits, 0u);
  EXPECT_EQ(s.disk_latency.count, s.disk_hits);
  EXPECT_EQ(s.disk_latency.sum_s, 0.0);  // no Env time passed, whatever the real clock did
  EXPECT_EQ(s.disk_latency.counts[0], s.disk_hits);
  again.shutdown();
}

}  // namespace HUBFS_UNITY_ID
}  // namespace hubfs
