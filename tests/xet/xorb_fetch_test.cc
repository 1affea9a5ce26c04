// xorb_fetch.h: exactly the listed range on the wire, with no Authorization; whatever the service
// answers that does not fit (a refusal, a status, a short or long body, a header that lies, a
// frame that decodes past its bound) is a service error, never kCorrupt.
#include "xet/xorb_fetch.h"

#include <gtest/gtest.h>

#include "net/retrying_transport.h"
#include "support/fake_transport.h"
#include "support/manual_env.h"
#include "xet/streaming_transport.h"
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
  DecodeExtras extras;
  extras.hash = true;
  auto decoded = fetch_xorb_range(transport, "http://cas/xorbs/x?sig", MerkleHash(), x.all, Deadline::never(),
                                  listed_range_output_bound(x.content.size(), 0), extras, false, counters)
                     ->take();
  ASSERT_TRUE(decoded.ok()) << decoded.status().message();
  const auto sent = transport.requests();
  ASSERT_EQ(sent.size(), 1u);
  EXPECT_EQ(find_header(sent[0].headers, "Range").value_or(""), "bytes=0-" + std::to_string(x.bytes.size() - 1));
  EXPECT_FALSE(find_header(sent[0].headers, "Authorization"));
  EXPECT_TRUE(sent[0].own_connection);
  EXPECT_EQ(counters.requests.load(), 1u);
  EXPECT_EQ(counters.bytes.load(), x.bytes.size());
  ASSERT_EQ(decoded->hashes.size(), 3u);
  EXPECT_EQ(decoded->hashes[1], chunk_hash(x.content.data() + 20'000, 20'000));
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
    for (bool streamed : {false, true}) {
      SCOPED_TRACE(std::string(c.name) + (streamed ? ", streamed" : ""));
      testing::FakeTransport scripted([&](const HttpRequest&) -> Result<HttpResponse> { return c.answer; });
      testing::StreamingTransport streaming(scripted, 1000);
      HttpTransport& transport = streamed ? static_cast<HttpTransport&>(streaming) : scripted;
      XorbFetchCounters counters;
      auto decoded =
          fetch_xorb_range(transport, "http://cas/x", MerkleHash(), x.all, Deadline::never(), 0, {}, false, counters)
              ->take();
      ASSERT_FALSE(decoded.ok());
      EXPECT_EQ(decoded.status().code(), c.code) << decoded.status().message();
    }
  }
}

// A transport that streams each attempt's body to the sink as it arrives: attempt 1 sends half
// the range and is cut (a reset), attempt 2 sends bytes that are not the range's and is cut too,
// attempt 3 the whole range. The retries (RetryingTransport) restart the decode from zero, so the
// answer is the range's chunks, exactly, with no byte of the failed attempts in them.
class CutThenWhole : public HttpTransport {
 public:
  explicit CutThenWhole(const std::string& bytes) : bytes_(bytes) {}
  void submit(HttpRequest request, Callback done) override {
    const int n = ++attempts;
    BodySink* sink = request.body_sink.get();
    EXPECT_NE(sink, nullptr);
    if (!sink) return done(Internal("no sink"));
    if (n < 3) {
      sink->begin();
      const std::string sent = n == 1 ? bytes_.substr(0, bytes_.size() / 2) : std::string(bytes_.size() / 3, '\x01');
      sink->feed(sent.data(), sent.size());
      return done(Unavailable("connection reset after " + std::to_string(sent.size()) + " bytes"));
    }
    HttpResponse r{206, {{"content-range", "bytes 0-" + std::to_string(bytes_.size() - 1) + "/" +
                                               std::to_string(bytes_.size())}}, ""};
    sink->begin();
    for (size_t at = 0; at < bytes_.size(); at += 333) sink->feed(bytes_.data() + at, std::min<size_t>(333, bytes_.size() - at));
    r.streamed = bytes_.size();
    if (request.validate) {
      Status v = request.validate(r);
      if (!v.ok()) return done(v);
    }
    done(std::move(r));
  }
  int attempts = 0;

 private:
  const std::string bytes_;
};

TEST(XorbFetchTest, ARetriedBodyIsDecodedFromZeroAgain) {
  OneXorb x;
  CutThenWhole inner(x.bytes);
  testing::ManualEnv env(testing::ManualEnv::Timers::kRunAtOnce);
  RetryingTransport transport(inner, RetryPolicy{}, env);
  XorbFetchCounters counters;
  DecodeExtras extras;
  extras.hash = true;
  auto decoded = fetch_xorb_range(transport, "http://cas/x", MerkleHash(), x.all, Deadline::never(),
                                  listed_range_output_bound(x.content.size(), 0), extras, false, counters)
                     ->take();
  ASSERT_TRUE(decoded.ok()) << decoded.status().message();
  EXPECT_EQ(inner.attempts, 3);
  EXPECT_TRUE(decoded->data == x.content);
  EXPECT_EQ(decoded->count(), 3u);
  ASSERT_EQ(decoded->hashes.size(), 3u);
  EXPECT_EQ(decoded->hashes[0], chunk_hash(x.content.data(), 20'000));
  EXPECT_EQ(counters.bytes.load(), x.bytes.size()) << "the last attempt's bytes";
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
    // The same bytes decoded as they arrive, in pieces.
    const std::string answer = body;
    testing::FakeTransport scripted([&](const HttpRequest&) -> Result<HttpResponse> {
      return partial(answer, 0, answer.size() - 1, answer.size());
    });
    testing::StreamingTransport streaming(scripted, 1000);
    XorbFetchCounters counters;
    auto streamed =
        fetch_xorb_range(streaming, "http://cas/x", MerkleHash(), listed, Deadline::never(), 0, {}, false, counters)
            ->take();
    ASSERT_FALSE(streamed.ok());
    EXPECT_EQ(streamed.status().code(), Code::kUnavailable) << streamed.status().message();
  }
}

TEST(XorbFetchTest, TheDecoderHandedOutFillsTheAnswer) {
  // What read_once maps ahead (prefault_output) is the memory the answer's bytes end up in.
  OneXorb x;
  testing::FakeTransport scripted([&](const HttpRequest&) -> Result<HttpResponse> {
    return partial(x.bytes, 0, x.bytes.size() - 1, x.bytes.size());
  });
  testing::StreamingTransport streaming(scripted, 777);
  XorbFetchCounters counters;
  std::shared_ptr<const ChunkStreamDecoder> decoder;
  DecodeExtras extras;
  extras.hash = true;
  auto pending = fetch_xorb_range(streaming, "http://cas/x", MerkleHash(), x.all, Deadline::never(),
                                  listed_range_output_bound(x.content.size(), 0), extras, false, counters, &decoder);
  ASSERT_TRUE(decoder);
  const char* base = decoder->output_base();
  EXPECT_TRUE(decoder->prefault_output(x.content.size()));
  auto decoded = pending->take();
  ASSERT_TRUE(decoded.ok()) << decoded.status().message();
  EXPECT_EQ(decoded->data.data(), base);
  EXPECT_EQ(decoded->data, x.content);
  EXPECT_EQ(decoded->hashes[2], chunk_hash(x.content.data() + 40'000, 20'000));
}

}  // namespace
}  // namespace hubfs::xet
