// The Xet read path (xet/xet_source.h) against a scripted CAS service on a fake transport: exact
// bytes for any range, the token fetched once and refreshed before exp, no Authorization on xorb
// requests, chunks verified against footers (V1) or counted unverified (V2, footers refused),
// damaged bytes refetched once and then refused, the chunk cache sparing the network.
#include "xet/xet_source.h"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include <atomic>
#include <condition_variable>
#include <future>
#include <mutex>
#include <cstdio>
#include <random>

#include "support/fake_transport.h"
#include "support/manual_env.h"
#include "support/temp_dir.h"
#include "support/wait_for.h"
#include "xet/chunker.h"

namespace hubfs::xet {
namespace HUBFS_UNITY_ID {

using nlohmann::json;

// A file in two xorbs and a CAS that answers V1 and V2 reconstructions for it.
class FakeCas {
 public:
  FakeCas() {
    std::mt19937_64 rng(7);
    content_.resize(700'000);
    for (size_t i = 0; i < content_.size(); ++i) content_[i] = static_cast<char>(rng() >> 56);
    // A compressible stretch, so LZ4 chunks are in the mix.
    for (size_t i = 200'000; i < 300'000; ++i) content_[i] = static_cast<char>(i % 7);
    auto ends = chunk_boundaries(content_.data(), content_.size());
    XorbBuilder a(CompressionScheme::kLz4), b(CompressionScheme::kLz4);
    size_t start = 0;
    std::vector<HashAndSize> chunks;
    for (size_t k = 0; k < ends.size(); ++k) {
      XorbBuilder& x = k < ends.size() / 2 ? a : b;
      auto idx = x.add_chunk(content_.data() + start, ends[k] - start);
      EXPECT_TRUE(idx.ok());
      table_.push_back({start, ends[k] - start, k < ends.size() / 2 ? size_t{0} : size_t{1}, *idx});
      chunks.push_back({chunk_hash(content_.data() + start, ends[k] - start), ends[k] - start});
      start = ends[k];
    }
    for (XorbBuilder* x : {&a, &b}) {
      hashes_.push_back(x->hash());
      bytes_.push_back(x->finish(true));
      auto f = parse_footer(reinterpret_cast<const uint8_t*>(bytes_.back().data()), bytes_.back().size());
      EXPECT_TRUE(f.ok());
      footers_.push_back(*f);
    }
    file_ = file_hash(chunks);
  }

  const std::string& content() const { return content_; }
  // Where the second xorb's bytes begin in the file.
  uint64_t second_xorb_offset() const {
    for (const Chunk& c : table_)
      if (c.xorb == 1) return c.offset;
    return content_.size();
  }
  MerkleHash file() const { return file_; }

  Result<HttpResponse> handle(const HttpRequest& r) {
    std::lock_guard<std::mutex> lock(mu_);
    const std::string range = find_header(r.headers, "Range").value_or("");
    if (r.url.find("/reconstructions/") != std::string::npos) {
      ++reconstructions;
      if (find_header(r.headers, "Authorization").value_or("") != "Bearer tok") return status(401);
      unsigned long long a = 0, b = 0;
      if (std::sscanf(range.c_str(), "bytes=%llu-%llu", &a, &b) != 2) return status(400);
      return HttpResponse{200, {}, plan(a, b, r.url.find("/v2/") != std::string::npos).dump()};
    }
    auto x = r.url.find("/xorbs/");
    if (x == std::string::npos) return status(404);
    ++xorb_gets;
    if (find_header(r.headers, "Authorization")) ++xorb_authorization;
    const std::string hex = r.url.substr(x + 7, 64);
    const size_t which = hashes_[0].hex() == hex ? 0 : 1;
    const std::string& xorb = bytes_[which];
    unsigned long long a = 0, b = 0, n = 0;
    if (std::sscanf(range.c_str(), "bytes=-%llu", &n) == 1) {
      if (r.url.find("v2") != std::string::npos) return status(403);  // signed for other bytes
      a = xorb.size() > n ? xorb.size() - n : 0;
      b = xorb.size() - 1;
    } else if (std::sscanf(range.c_str(), "bytes=%llu-%llu", &a, &b) != 2 || b >= xorb.size()) {
      return status(416);
    } else {
      ++data_gets;
      companion_gets += r.companion;
      data_bytes += b - a + 1;
    }
    HttpResponse resp{206, {{"content-range", "bytes " + std::to_string(a) + "-" + std::to_string(b) + "/" +
                                                  std::to_string(xorb.size())}},
                      xorb.substr(a, b - a + 1)};
    if (corrupt > 0 && n == 0) {
      --corrupt;
      resp.body[resp.body.size() / 2] ^= 0x01;
    }
    return resp;
  }

  int reconstructions = 0;
  int xorb_gets = 0;
  int data_gets = 0;
  int companion_gets = 0;  // data ranges sent as a read's further piece (HttpRequest::companion)
  uint64_t data_bytes = 0;  // xorb bytes sent for data ranges (not footers)
  int xorb_authorization = 0;
  int corrupt = 0;  // data answers to damage, one byte each
  std::mutex mu_;

 private:
  struct Chunk {
    uint64_t offset, size;
    size_t xorb;
    uint32_t index;
  };
  static HttpResponse status(long s) { return HttpResponse{s, {}, ""}; }

  json plan(uint64_t a, uint64_t b, bool v2) {
    size_t k = 0;
    while (k + 1 < table_.size() && table_[k + 1].offset <= a) ++k;
    json terms = json::array();
    json fetch = json::object();
    const uint64_t offset = a - table_[k].offset;
    struct Term {
      size_t xorb;
      uint32_t start, end;
      uint64_t len;
    };
    std::vector<Term> ts;
    for (; k < table_.size() && table_[k].offset <= b; ++k) {
      const Chunk& c = table_[k];
      if (!ts.empty() && ts.back().xorb == c.xorb && ts.back().end == c.index) {
        ++ts.back().end;
        ts.back().len += c.size;
      } else {
        ts.push_back({c.xorb, c.index, c.index + 1, c.size});
      }
    }
    for (const Term& t : ts) {
      const std::string hex = hashes_[t.xorb].hex();
      const auto& ends = footers_[t.xorb].chunk_ends;
      const uint64_t first = t.start ? ends[t.start - 1] : 0, last = ends[t.end - 1] - 1;
      terms.push_back({{"hash", hex}, {"unpacked_length", t.len}, {"range", {{"start", t.start}, {"end", t.end}}}});
      if (v2) {
        fetch[hex] = json::array({{{"url", "http://cas/xorbs/" + hex + "?v2"},
                                   {"ranges", json::array({{{"chunks", {{"start", t.start}, {"end", t.end}}},
                                                            {"bytes", {{"start", first}, {"end", last}}}}})}}});
      } else {
        fetch[hex].push_back({{"url", "http://cas/xorbs/" + hex},
                              {"range", {{"start", t.start}, {"end", t.end}}},
                              {"url_range", {{"start", first}, {"end", last}}}});
      }
    }
    return {{"offset_into_first_range", offset}, {"terms", terms}, {v2 ? "xorbs" : "fetch_info", fetch}};
  }

  std::string content_;
  std::vector<Chunk> table_;
  std::vector<MerkleHash> hashes_;
  std::vector<std::string> bytes_;
  std::vector<XorbFooter> footers_;
  MerkleHash file_;
};

class XetSourceTest : public ::testing::Test {
 protected:
  XetSourceTest() : transport_([this](const HttpRequest& r) { return cas_.handle(r); }) {
    env_.wall = [this] { return now_.load(); };
  }

  std::unique_ptr<XetReader> reader(XetReaderOptions options = {}) {
    options.threads = 4;
    options.env = &env_;
    TokenSource tokens = [this]() -> Result<XetToken> {
      ++token_calls_;
      return XetToken{"http://cas", "tok", now_.load() + std::chrono::seconds(100)};
    };
    return std::make_unique<XetReader>(transport_, tokens, options);
  }

  FakeCas cas_;
  testing::FakeTransport transport_;
  std::atomic<int> token_calls_{0};
  std::atomic<std::chrono::system_clock::time_point> now_{std::chrono::system_clock::time_point(std::chrono::seconds(1'700'000'000))};
  // The readers' Env: its wall time is now_, moved by the test.
  testing::FunctionEnv env_;
};

TEST_F(XetSourceTest, ReadsAnyRangeExactlyAndVerifiesEveryChunk) {
  auto r = reader();
  const std::string& want = cas_.content();
  const uint64_t size = want.size();
  for (hubfs::ByteRange range : {hubfs::ByteRange{0, size}, hubfs::ByteRange{1, 100}, hubfs::ByteRange{340'000, 40'000},
                                 hubfs::ByteRange{size - 1, 1}, hubfs::ByteRange{65'000, 200'000}}) {
    auto got = r->fetch(cas_.file(), size, range);
    ASSERT_TRUE(got.ok()) << got.status().message();
    EXPECT_TRUE(*got == want.substr(range.offset, range.length)) << range.offset << "+" << range.length;
  }
  auto s = r->stats();
  EXPECT_EQ(token_calls_.load(), 1);
  EXPECT_GT(s.chunks_verified, 0u);
  EXPECT_EQ(s.unverified_bytes, 0u);
  EXPECT_EQ(s.footer_requests, 2u) << "one footer per xorb";
  EXPECT_EQ(s.files_verified, 1u) << "the whole-file read's chunks hash to the file's Xet hash";
  EXPECT_EQ(s.file_hash_mismatches, 0u);
  EXPECT_EQ(cas_.xorb_authorization, 0);
  auto empty = r->fetch(cas_.file(), size, {5, 0});
  ASSERT_TRUE(empty.ok());
  EXPECT_TRUE(empty->empty());
  EXPECT_EQ(r->fetch(cas_.file(), size, {size - 1, 2}).status().code(), Code::kInvalidArgument);
}

// A read whose bytes lie in two xorbs sends a range from each at once; the second goes as the
// first's companion (HttpRequest::companion: the transport does not make it wait for a slot that
// the read already holds). A read inside one xorb sends one ordinary range.
TEST_F(XetSourceTest, AReadAcrossTwoXorbsSendsItsSecondRangeAsACompanion) {
  auto r = reader();
  const std::string& want = cas_.content();
  const uint64_t boundary = cas_.second_xorb_offset();
  ASSERT_GT(boundary, 20'000u);
  ASSERT_LT(boundary + 20'000, want.size());
  auto inside = r->fetch(cas_.file(), want.size(), {boundary - 20'000, 10'000});
  ASSERT_TRUE(inside.ok()) << inside.status().message();
  EXPECT_EQ(cas_.data_gets, 1);
  EXPECT_EQ(cas_.companion_gets, 0);
  auto across = r->fetch(cas_.file(), want.size(), {boundary - 10'000, 20'000});
  ASSERT_TRUE(across.ok()) << across.status().message();
  EXPECT_TRUE(*across == want.substr(boundary - 10'000, 20'000));
  EXPECT_EQ(cas_.data_gets, 3);
  EXPECT_EQ(cas_.companion_gets, 1);
}

TEST_F(XetSourceTest, DamagedBytesAreFetchedAgainOnceThenRefused) {
  auto r = reader();
  const std::string& want = cas_.content();
  cas_.corrupt = 1;
  auto got = r->fetch(cas_.file(), want.size(), {0, want.size()});
  ASSERT_TRUE(got.ok()) << got.status().message();
  EXPECT_TRUE(*got == want);
  EXPECT_EQ(r->stats().refetches, 1u);

  cas_.corrupt = 1000;
  auto bad = r->fetch(cas_.file(), want.size(), {1000, 300'000});
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().code(), Code::kCorrupt) << bad.status().message();
  EXPECT_EQ(r->stats().corrupt, 1u);
}

// A stream's second read asks for a plan covering the next window, and the reads after it use
// that plan (no round trip for theirs); each fetches only the chunks holding its bytes, located
// by the xorbs' footers, not the window's whole terms. Every byte is verified, and the chunks the
// reads served still make up the file's hash.
TEST_F(XetSourceTest, AStreamSharesOneWindowPlanAndFetchesOnlyItsChunks) {
  XetReaderOptions o;
  // Past the end of this 700 KB file; a quarter of it is more than the first read leaves, so no
  // look-ahead runs beside the reads (that is the next test).
  o.plan_window_bytes = 4 << 20;
  auto r = reader(o);
  const std::string& want = cas_.content();
  const uint64_t step = 200'000;
  for (uint64_t off = 0; off < want.size(); off += step) {
    const uint64_t n = std::min<uint64_t>(step, want.size() - off);
    auto got = r->fetch(cas_.file(), want.size(), {off, n});
    ASSERT_TRUE(got.ok()) << got.status().message();
    ASSERT_TRUE(*got == want.substr(off, n)) << off;
  }
  EXPECT_EQ(cas_.reconstructions, 2) << "an exact plan for the first read, one window for the rest";
  // Whole terms of the window would be ~1.7x the file (each read fetching the rest of its xorb);
  // the reads' own chunks are the file plus a chunk or two where two reads meet.
  EXPECT_LT(cas_.data_bytes, want.size() * 14 / 10);
  const auto s = r->stats();
  EXPECT_GT(s.chunks_verified, 0u);
  EXPECT_EQ(s.unverified_bytes, 0u);
  EXPECT_EQ(s.refetches, 0u);
  EXPECT_EQ(s.files_verified, 1u) << "the narrowed reads' chunks, at their file offsets, hash to the file";
  EXPECT_EQ(s.file_hash_mismatches, 0u);
  // A read that jumps elsewhere inside the window needs no plan either.
  auto back = r->fetch(cas_.file(), want.size(), {250'000, 1000});
  ASSERT_TRUE(back.ok());
  EXPECT_TRUE(*back == want.substr(250'000, 1000));
  EXPECT_EQ(cas_.reconstructions, 2);
}

// After a file's first read (an application opening it), the next window's plan and its xorbs'
// footers are fetched in the background: the reads that follow need neither round trip.
TEST_F(XetSourceTest, AFilesFirstReadPlansTheNextWindowAhead) {
  XetReaderOptions o;
  o.plan_window_bytes = 1 << 20;
  auto r = reader(o);
  const std::string& want = cas_.content();
  ASSERT_TRUE(r->fetch(cas_.file(), want.size(), {0, 1000}).ok());
  // The first read's own plan and footer, then the look-ahead's plan and the second xorb's footer.
  testing::wait_for_state([&] { return r->stats().reconstructions == 2 && r->stats().footer_requests == 2; });
  const int data_gets = cas_.data_gets;
  for (uint64_t off : {uint64_t(1000), uint64_t(450'000), uint64_t(120'000)}) {
    auto got = r->fetch(cas_.file(), want.size(), {off, 100'000});
    ASSERT_TRUE(got.ok()) << got.status().message();
    ASSERT_TRUE(*got == want.substr(off, 100'000)) << off;
  }
  EXPECT_EQ(r->stats().reconstructions, 2u) << "the reads after the first found their plan";
  EXPECT_EQ(r->stats().footer_requests, 2u);
  EXPECT_EQ(cas_.data_gets, data_gets + 3) << "one range request per read";
  // A V2 reader, or a small file, plans nothing ahead.
  XetReaderOptions v2;
  v2.reconstruction_version = 2;
  v2.plan_window_bytes = 1 << 20;
  auto r2 = reader(v2);
  ASSERT_TRUE(r2->fetch(cas_.file(), want.size(), {0, 1000}).ok());
  r2->shutdown();
  EXPECT_EQ(r2->stats().reconstructions, 1u);
}

// A plan asked for exactly a read's range names the bytes to fetch: they go out beside the xorb's
// footer, not after it (a round trip more for the first read of every xorb). Here the footer is
// answered only once a data range has been asked for, for at most 10 s: a reader that waited for
// the footer first gets it only then.
TEST_F(XetSourceTest, AReadsOwnPlanSendsItsBytesBesideTheFooter) {
  std::mutex mu;
  std::condition_variable cv;
  bool data_asked = false;
  std::atomic<int> footers_held_too_long{0};
  testing::FakeTransport transport([&](const HttpRequest& r) {
    const std::string range = find_header(r.headers, "Range").value_or("");
    if (r.url.find("/xorbs/") != std::string::npos) {
      std::unique_lock<std::mutex> lock(mu);
      if (range.starts_with("bytes=-")) {
        if (!cv.wait_for(lock, std::chrono::seconds(10), [&] { return data_asked; })) ++footers_held_too_long;
      } else {
        data_asked = true;
        cv.notify_all();
      }
    }
    return cas_.handle(r);
  });
  XetReaderOptions o;
  o.env = &env_;
  o.plan_window_bytes = 0;  // no look-ahead: only the read's own requests
  XetReader r(transport, [this]() -> Result<XetToken> {
    return XetToken{"http://cas", "tok", now_.load() + std::chrono::seconds(100)};
  }, o);
  const std::string& want = cas_.content();
  auto got = r.fetch(cas_.file(), want.size(), {1000, 100'000});
  ASSERT_TRUE(got.ok()) << got.status().message();
  EXPECT_TRUE(*got == want.substr(1000, 100'000));
  EXPECT_EQ(footers_held_too_long.load(), 0) << "the footer was asked for before the read's bytes";
  EXPECT_GT(r.stats().chunks_verified, 0u);
  EXPECT_EQ(r.stats().footer_requests, 1u);
}

// A read inside the range of a plan on its way waits for that plan instead of asking for its
// own: here the first plan is held until a second read has joined it.
TEST_F(XetSourceTest, AReadInsideAPlanOnItsWayWaitsForIt) {
  std::mutex mu;
  std::condition_variable cv;
  bool release = false;
  std::atomic<int> plans_asked{0};
  testing::FakeTransport transport([&](const HttpRequest& r) {
    if (r.url.find("/reconstructions/") != std::string::npos) {
      ++plans_asked;
      std::unique_lock<std::mutex> lock(mu);
      cv.wait(lock, [&] { return release; });
    }
    return cas_.handle(r);
  });
  XetReaderOptions o;
  o.env = &env_;
  o.plan_window_bytes = 0;
  XetReader r(transport, [this]() -> Result<XetToken> {
    return XetToken{"http://cas", "tok", now_.load() + std::chrono::seconds(100)};
  }, o);
  const std::string& want = cas_.content();
  std::promise<Result<std::string>> first, second;
  r.fetch_async(cas_.file(), want.size(), {0, 200'000}, [&](Result<std::string> got) { first.set_value(got); });
  testing::wait_for_state([&] { return plans_asked.load() == 1; });
  r.fetch_async(cas_.file(), want.size(), {1000, 5000}, [&](Result<std::string> got) { second.set_value(got); });
  testing::wait_for_state([&] { return r.stats().plans_joined == 1; });
  {
    std::lock_guard<std::mutex> lock(mu);
    release = true;
  }
  cv.notify_all();
  auto a = first.get_future().get();
  auto b = second.get_future().get();
  ASSERT_TRUE(a.ok()) << a.status().message();
  ASSERT_TRUE(b.ok()) << b.status().message();
  EXPECT_TRUE(*a == want.substr(0, 200'000));
  EXPECT_TRUE(*b == want.substr(1000, 5000));
  EXPECT_EQ(plans_asked.load(), 1);
  EXPECT_EQ(r.stats().reconstructions, 1u);
}

// V2's URLs are signed for exactly the plan's ranges and give no footers to narrow a window's
// terms with: every read asks for its own plan there.
TEST_F(XetSourceTest, V2ReadsAskForTheirOwnPlans) {
  XetReaderOptions o;
  o.reconstruction_version = 2;
  o.plan_window_bytes = 1 << 20;
  auto r = reader(o);
  const std::string& want = cas_.content();
  for (uint64_t off : {uint64_t(0), uint64_t(100'000), uint64_t(200'000)}) {
    auto got = r->fetch(cas_.file(), want.size(), {off, 100'000});
    ASSERT_TRUE(got.ok()) << got.status().message();
    ASSERT_TRUE(*got == want.substr(off, 100'000));
  }
  EXPECT_EQ(cas_.reconstructions, 3);
}

TEST_F(XetSourceTest, TokenIsRefreshedBeforeItExpires) {
  XetReaderOptions o;
  o.plan_window_bytes = 0;  // every read asks the CAS for its plan, with the token of the moment
  auto r = reader(o);
  const uint64_t size = cas_.content().size();
  ASSERT_TRUE(r->fetch(cas_.file(), size, {0, 10}).ok());
  ASSERT_TRUE(r->fetch(cas_.file(), size, {10, 10}).ok());
  EXPECT_EQ(token_calls_.load(), 1);
  // 100 s tokens, refreshed 60 s before exp: 50 s later a read takes a fresh one.
  now_ = now_.load() + std::chrono::seconds(50);
  ASSERT_TRUE(r->fetch(cas_.file(), size, {20, 10}).ok());
  EXPECT_EQ(token_calls_.load(), 2);
}

TEST_F(XetSourceTest, V2WithoutFootersServesExactBytesCountedUnverified) {
  XetReaderOptions o;
  o.reconstruction_version = 2;
  auto r = reader(o);
  const std::string& want = cas_.content();
  auto got = r->fetch(cas_.file(), want.size(), {123, 400'000});
  ASSERT_TRUE(got.ok()) << got.status().message();
  EXPECT_TRUE(*got == want.substr(123, 400'000));
  EXPECT_EQ(r->stats().unverified_bytes, 400'000u);
  EXPECT_EQ(r->stats().chunks_verified, 0u);
  EXPECT_EQ(r->stats().files_verified, 0u);
  // The rest of the file: its chunks, hashed here as they were decoded, make up the file's hash.
  ASSERT_TRUE(r->fetch(cas_.file(), want.size(), {0, 123}).ok());
  ASSERT_TRUE(r->fetch(cas_.file(), want.size(), {400'123, want.size() - 400'123}).ok());
  EXPECT_EQ(r->stats().files_verified, 1u);
  EXPECT_EQ(r->stats().file_hash_mismatches, 0u);
}

// A repo with Xet files has its token fetched before the first read (XetRouter calls this when
// it meets one), once however often it is asked; the read then needs no token request of its own.
TEST_F(XetSourceTest, APrefetchedTokenServesTheFirstRead) {
  auto r = reader();
  r->prefetch_token();
  r->prefetch_token();
  r->shutdown();  // runs what was posted: the prefetch
  EXPECT_EQ(token_calls_.load(), 1);
  EXPECT_EQ(r->stats().token_requests, 1u);
  auto r2 = reader();
  r2->prefetch_token();
  auto got = r2->fetch(cas_.file(), cas_.content().size(), {0, 1000});
  ASSERT_TRUE(got.ok()) << got.status().message();
  EXPECT_EQ(token_calls_.load(), 2) << "one token for the second reader, prefetched or not";
}

TEST_F(XetSourceTest, ChunkCacheServesChunksWithoutTheNetwork) {
  testing::TempDir dir;
  ChunkCache cache((dir.path() / "xet-chunks").string());
  XetReaderOptions o;
  o.chunk_cache = &cache;
  auto r = reader(o);
  const std::string& want = cas_.content();
  ASSERT_TRUE(r->fetch(cas_.file(), want.size(), {0, want.size()}).ok());
  const int data_gets = cas_.data_gets;
  auto again = r->fetch(cas_.file(), want.size(), {5000, 500'000});
  ASSERT_TRUE(again.ok()) << again.status().message();
  EXPECT_TRUE(*again == want.substr(5000, 500'000));
  EXPECT_EQ(cas_.data_gets, data_gets) << "every chunk came from the cache";
  EXPECT_EQ(r->stats().cache_bytes, 500'000u);
}

TEST_F(XetSourceTest, ChunksThatDoNotMakeUpTheFileAreReported) {
  // The fake CAS answers any hash with its one file: asked for another file, every chunk checks
  // out against its xorb, but together they are not that file.
  auto r = reader();
  MerkleHash other = cas_.file();
  other.bytes[0] ^= 1;
  const std::string& want = cas_.content();
  ASSERT_TRUE(r->fetch(other, want.size(), {0, want.size()}).ok());
  EXPECT_EQ(r->stats().files_verified, 0u);
  EXPECT_EQ(r->stats().file_hash_mismatches, 1u);
  // Reported once, then forgotten with the plan that described other bytes: the next read of
  // the file asks for a fresh one.
  EXPECT_EQ(r->file_verdict(other), FileVerdict::kMismatch);
  EXPECT_EQ(r->file_verdict(other), FileVerdict::kUnknown);
  const uint64_t plans = r->stats().reconstructions;
  ASSERT_TRUE(r->fetch(other, want.size(), {0, 1000}).ok());
  EXPECT_EQ(r->stats().reconstructions, plans + 1);
}

TEST_F(XetSourceTest, AWholeReadMatchesItsFileAndPartsDoNotDecide) {
  auto r = reader();
  const std::string& want = cas_.content();
  ASSERT_TRUE(r->fetch(cas_.file(), want.size(), {0, want.size() / 2}).ok());
  EXPECT_EQ(r->file_verdict(cas_.file()), FileVerdict::kUnknown) << "half the file checks nothing whole";
  ASSERT_TRUE(r->fetch(cas_.file(), want.size(), {want.size() / 2, want.size() - want.size() / 2}).ok());
  EXPECT_EQ(r->file_verdict(cas_.file()), FileVerdict::kMatch);
  EXPECT_EQ(r->file_verdict(cas_.file()), FileVerdict::kMatch) << "a match stands";
  // Through a source: its bytes say what checks them, its verdict is the reader's.
  auto source = r->source_for(cas_.file());
  std::promise<Provenance> provenance;
  source->fetch_async(want.size(), {0, 100}, [&](Result<std::string> got, Provenance p) {
    EXPECT_TRUE(got.ok());
    provenance.set_value(p);
  }, Deadline::never());
  EXPECT_EQ(provenance.get_future().get(), Provenance::kFileHashed);
  EXPECT_EQ(source->file_verdict(), FileVerdict::kMatch);
}

}  // namespace
}  // namespace hubfs::xet
