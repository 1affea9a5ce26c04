// xorb_fetch.h: exactly the listed range on the wire, with no Authorization; whatever the service
// answers that does not fit (a refusal, a status, a short or long body, a header that lies, a
// frame that decodes past its bound) is a service error, never kCorrupt.
#include "xet/xorb_fetch.h"

#include <gtest/gtest.h>

#include "support/fake_transport.h"
#include "xet/chunker.h"

namespace hubfs::xet {
namespace HUBFS_UNITY_ID {

struct OneXorb {
  std::string bytes;
  XorbRange all;
  std::string content;
  OneXorb() {
    XorbBuilder b(CompressionScheme::kLz4);
    for (int i = 0; i < 3; ++i) {
      std::string chunk(20'000, static_cast<char>('a' + i));  // compresses: LZ4 chunks
      content += chunk;
      EXPECT_TRUE(b.add_chunk(chunk.data(), chunk.size()).ok());
    }
    bytes = b.finish(false);
    all = {{0, 3}, {0, bytes.size() - 1}};
  }
};

HttpResponse partial(const std::string& body, uint64_t a, uint64_t b, uint64_t total) {
  return HttpResponse{206, {{"content-range", "bytes " + std::to_string(a) + "-" + std::to_string(b) + "/" +
                                                 std::to_string(total)}},
                      body};
}

TEST(XorbFetchTest, AsksForExactlyTheListedRangeAndDecodesItsChunks) {
  OneXorb x;
  testing::FakeTransport transport([&](const HttpRequest& r) -> Result<HttpResponse> {
    return partial(x.bytes, 0, x.bytes.size() - 1, x.bytes.size() + 500);
  });
  XorbFetchCounters counters;
  auto body = fetch_xorb_range(transport, "http://cas/xorbs/x?sig", x.all.bytes, Deadline::never(),
                               listed_range_headroom(x.all, x.content.size(), 0), false, counters)
                  ->take();
  ASSERT_TRUE(body.ok()) << body.status().message();
  const auto sent = transport.requests();
  ASSERT_EQ(sent.size(), 1u);
  EXPECT_EQ(find_header(sent[0].headers, "Range").value_or(""), "bytes=0-" + std::to_string(x.bytes.size() - 1));
  EXPECT_FALSE(find_header(sent[0].headers, "Authorization"));
  EXPECT_TRUE(sent[0].own_connection);
  EXPECT_EQ(counters.requests.load(), 1u);
  EXPECT_EQ(counters.bytes.load(), x.bytes.size());
  auto decoded = decode_listed_range(std::move(*body), MerkleHash(), x.all);
  ASSERT_TRUE(decoded.ok()) << decoded.status().message();
  EXPECT_EQ(decoded->data, x.content);
  EXPECT_EQ(decoded->count(), 3u);
  EXPECT_EQ(decoded->ends[0], 20'000u);
}

TEST(XorbFetchTest, AnswersThatDoNotFitAreServiceErrors) {
  OneXorb x;
  const uint64_t n = x.bytes.size();
  struct Case {
    const char* name;
    HttpResponse answer;
    Code code;
  };
  for (const Case& c : {Case{"refused", HttpResponse{403, {}, "signature"}, Code::kPermissionDenied},
                        Case{"500", HttpResponse{500, {}, ""}, Code::kUnavailable},
                        Case{"200 ignoring the range", HttpResponse{200, {}, x.bytes}, Code::kUnavailable},
                        Case{"short", partial(x.bytes.substr(0, n / 2), 0, n - 1, n), Code::kUnavailable},
                        Case{"long", partial(x.bytes + "xx", 0, n - 1, n), Code::kUnavailable}}) {
    SCOPED_TRACE(c.name);
    testing::FakeTransport transport([&](const HttpRequest&) -> Result<HttpResponse> { return c.answer; });
    XorbFetchCounters counters;
    auto body = fetch_xorb_range(transport, "http://cas/x", x.all.bytes, Deadline::never(), 0, false, counters)->take();
    ASSERT_FALSE(body.ok());
    EXPECT_EQ(body.status().code(), c.code) << body.status().message();
  }
}

TEST(XorbFetchTest, BytesThatDoNotDecodeAreServiceErrors) {
  OneXorb x;
  // A chunk header whose stored size lies.
  std::string lying = x.bytes;
  lying[1] = static_cast<char>(lying[1] ^ 0x10);
  // A header claiming more than the largest chunk (a decompression bomb's way in).
  std::string bomb = x.bytes;
  bomb[5] = bomb[6] = static_cast<char>(0xff);
  bomb[7] = 0x7f;
  // Fewer chunks than listed.
  XorbRange four = x.all;
  four.chunks.end = 4;
  for (auto [name, body, listed] : {std::tuple{"lying header", lying, x.all}, std::tuple{"bomb", bomb, x.all},
                                    std::tuple{"fewer chunks", x.bytes, four}}) {
    SCOPED_TRACE(name);
    auto decoded = decode_listed_range(body, MerkleHash(), listed);
    ASSERT_FALSE(decoded.ok());
    EXPECT_EQ(decoded.status().code(), Code::kUnavailable) << decoded.status().message();
  }
}

}  // namespace
}  // namespace hubfs::xet
