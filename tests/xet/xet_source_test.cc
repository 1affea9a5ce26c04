// The Xet read path (xet/xet_source.h) against a scripted CAS on a fake transport that signs as
// the service does: each xorb URL for its listed ranges only, any other Range refused (403).
// Exact bytes for any range from V2 plans (V1 where V2 answers 404/501), exactly the signed ranges
// asked for, the whole-file check deciding, the chunk cache taking only verified chunks, and every
// way the service can fail turned into a service error (retried once, never kCorrupt, never a
// short read).
#include "xet/xet_source.h"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <cstring>
#include <optional>
#include <functional>
#include <future>
#include <mutex>
#include <random>
#include <set>

#include "common/log.h"
#include "support/fake_transport.h"
#include "xet/streaming_transport.h"
#include "support/manual_env.h"
#include "support/temp_dir.h"
#include "xet/chunker.h"

namespace hubfs::xet {
namespace HUBFS_UNITY_ID {

using nlohmann::json;

enum class PlanFault { kNone, kMalformedJson, kSchema, kLyingLength, kStatus500, kReordered };
enum class XorbFault { kNone, kShort, kLong, kLyingHeader, kStatus500, kFlip, kFlipEarly };

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
  uint64_t size() const { return content_.size(); }
  uint64_t second_xorb_offset() const {
    for (const Chunk& c : table_)
      if (c.xorb == 1) return c.offset;
    return content_.size();
  }
  MerkleHash file() const { return file_; }

  Result<HttpResponse> handle(const HttpRequest& r) {
    const bool is_plan = r.url.find("/reconstructions/") != std::string::npos;
    if (is_plan && on_plan) on_plan();  // outside mu_: it may move the test's clock
    if (!is_plan && on_xorb) on_xorb();
    std::lock_guard<std::mutex> lock(mu_);
    const std::string range = find_header(r.headers, "Range").value_or("");
    if (is_plan) {
      ++reconstructions;
      const bool v2 = r.url.find("/v2/") != std::string::npos;
      if (v2 && v2_status) return status(v2_status);
      v1_plans += !v2;
      if (find_header(r.headers, "Authorization").value_or("") != "Bearer tok") return status(401);
      unsigned long long a = 0, b = 0;
      if (std::sscanf(range.c_str(), "bytes=%llu-%llu", &a, &b) != 2) return status(400);
      const PlanFault fault = plan_faults > 0 ? plan_fault : PlanFault::kNone;
      if (fault != PlanFault::kNone) --plan_faults;
      if (fault == PlanFault::kStatus500) return status(500);
      if (fault == PlanFault::kMalformedJson) return HttpResponse{200, {}, "{\"terms\": [{\"hash\": "};
      json p = plan(a, b, v2, fault == PlanFault::kReordered);
      if (fault == PlanFault::kSchema) p["terms"][0]["range"] = "everything";
      if (fault == PlanFault::kLyingLength) {
        // Within what its chunks could hold, but not what they decode to.
        p["terms"][0]["unpacked_length"] = p["terms"][0]["unpacked_length"].get<uint64_t>() - 1;
      }
      return HttpResponse{200, {}, p.dump()};
    }
    auto x = r.url.find("/xorbs/");
    if (x == std::string::npos) return status(404);
    ++xorb_gets;
    if (find_header(r.headers, "Authorization")) ++xorb_authorization;
    const std::string hex = r.url.substr(x + 7, 64);
    const size_t which = hashes_[0].hex() == hex ? 0 : 1;
    const std::string& xorb = bytes_[which];
    // Signed as the service signs: the URL's listed ranges, one per request, nothing else.
    const std::string signed_for = r.url.substr(r.url.find("?r=") + 3);
    std::set<std::string> allowed;
    for (size_t s = 0; s < signed_for.size();) {
      size_t e = signed_for.find(',', s);
      if (e == std::string::npos) e = signed_for.size();
      allowed.insert("bytes=" + signed_for.substr(s, e - s));
      s = e + 1;
    }
    if (!allowed.count(range)) {
      ++refused;
      return status(403);
    }
    unsigned long long a = 0, b = 0;
    std::sscanf(range.c_str(), "bytes=%llu-%llu", &a, &b);
    ++data_gets;
    companion_gets += r.companion;
    data_bytes += b - a + 1;
    HttpResponse resp{206, {{"content-range", "bytes " + std::to_string(a) + "-" + std::to_string(b) + "/" +
                                                  std::to_string(xorb.size())}},
                      xorb.substr(a, b - a + 1)};
    const XorbFault fault = xorb_faults > 0 ? xorb_fault : XorbFault::kNone;
    if (fault != XorbFault::kNone) --xorb_faults;
    switch (fault) {
      case XorbFault::kNone: break;
      case XorbFault::kShort: resp.body.resize(resp.body.size() / 2); break;
      case XorbFault::kLong: resp.body += "trailing bytes"; break;
      case XorbFault::kLyingHeader: resp.body[1] = static_cast<char>(resp.body[1] ^ 0x40); break;  // stored size
      case XorbFault::kStatus500: return status(500);
      case XorbFault::kFlip: resp.body[resp.body.size() / 2] ^= 0x01; break;
      case XorbFault::kFlipEarly: resp.body[resp.body.size() / 8] ^= 0x01; break;
    }
    return resp;
  }

  int reconstructions = 0;
  int v1_plans = 0;
  int xorb_gets = 0;
  int data_gets = 0;
  int companion_gets = 0;
  int refused = 0;  // xorb requests for a range the URL was not signed for
  uint64_t data_bytes = 0;
  int xorb_authorization = 0;
  long v2_status = 0;  // answered to every V2 plan request when set
  PlanFault plan_fault = PlanFault::kNone;
  int plan_faults = 0;
  XorbFault xorb_fault = XorbFault::kNone;
  int xorb_faults = 0;
  // Run as each plan / xorb request arrives, before it is answered (set before any read).
  std::function<void()> on_plan, on_xorb;
  std::mutex mu_;

 private:
  struct Chunk {
    uint64_t offset, size;
    size_t xorb;
    uint32_t index;
  };
  static HttpResponse status(long s) { return HttpResponse{s, {}, ""}; }

  std::string byte_range(size_t xorb, uint32_t start, uint32_t end) const {
    const auto& ends = footers_[xorb].chunk_ends;
    return std::to_string(start ? ends[start - 1] : 0) + "-" + std::to_string(ends[end - 1] - 1);
  }

  json plan(uint64_t a, uint64_t b, bool v2, bool reorder) {
    size_t k = 0;
    while (k + 1 < table_.size() && table_[k + 1].offset <= a) ++k;
    const uint64_t offset = a - table_[k].offset;
    struct Term {
      size_t xorb;
      uint32_t start, end;
      uint64_t len;
    };
    std::vector<Term> ts;
    for (; k < table_.size() && table_[k].offset <= b; ++k) {
      const Chunk& c = table_[k];
      // One term per chunk where the plan is to be reordered, else runs of a xorb's chunks.
      if (!reorder && !ts.empty() && ts.back().xorb == c.xorb && ts.back().end == c.index) {
        ++ts.back().end;
        ts.back().len += c.size;
      } else {
        ts.push_back({c.xorb, c.index, c.index + 1, c.size});
      }
    }
    if (reorder && ts.size() > 3) std::swap(ts[1], ts[2]);
    json terms = json::array();
    json fetch = json::object();
    std::map<size_t, std::vector<std::pair<uint32_t, uint32_t>>> by_xorb;
    for (const Term& t : ts) {
      terms.push_back({{"hash", hashes_[t.xorb].hex()},
                       {"unpacked_length", t.len},
                       {"range", {{"start", t.start}, {"end", t.end}}}});
      by_xorb[t.xorb].push_back({t.start, t.end});
    }
    for (auto& [xorb, ranges] : by_xorb) {
      const std::string hex = hashes_[xorb].hex();
      std::sort(ranges.begin(), ranges.end());
      std::vector<std::pair<uint32_t, uint32_t>> merged;
      for (auto r : ranges) {
        if (!merged.empty() && r.first <= merged.back().second) {
          merged.back().second = std::max(merged.back().second, r.second);
        } else {
          merged.push_back(r);
        }
      }
      if (v2) {
        std::string sig;
        json listed = json::array();
        for (auto [s, e] : merged) {
          sig += (sig.empty() ? "" : ",") + byte_range(xorb, s, e);
          const std::string br = byte_range(xorb, s, e);
          const uint64_t first = std::stoull(br.substr(0, br.find('-'))), last = std::stoull(br.substr(br.find('-') + 1));
          listed.push_back({{"chunks", {{"start", s}, {"end", e}}}, {"bytes", {{"start", first}, {"end", last}}}});
        }
        fetch[hex] = json::array({{{"url", "http://cas/xorbs/" + hex + "?r=" + sig}, {"ranges", listed}}});
      } else {
        for (auto [s, e] : merged) {
          const std::string br = byte_range(xorb, s, e);
          const uint64_t first = std::stoull(br.substr(0, br.find('-'))), last = std::stoull(br.substr(br.find('-') + 1));
          fetch[hex].push_back({{"url", "http://cas/xorbs/" + hex + "?r=" + br},
                                {"range", {{"start", s}, {"end", e}}},
                                {"url_range", {{"start", first}, {"end", last}}}});
        }
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
  XetSourceTest() : transport_([this](const HttpRequest& r) { return cas_.handle(r); }), streaming_(transport_, 4093) {}

  std::unique_ptr<XetReader> reader(XetReaderOptions options = {}) {
    options.threads = 4;
    options.env = &env_;
    TokenSource tokens = [this]() -> Result<XetToken> {
      ++token_calls_;
      return XetToken{"http://cas", "tok", env_.system_now() + std::chrono::seconds(100)};
    };
    // Xorb bodies reach the reader in pieces, as from CurlTransport: chunks span them.
    return std::make_unique<XetReader>(streaming_, tokens, options);
  }

  // Reads the whole file in `step`-byte pieces; true when every piece was exact.
  bool read_whole(XetReader& r, uint64_t step, const std::string& block_key = "") {
    for (uint64_t off = 0; off < cas_.size(); off += step) {
      const uint64_t n = std::min<uint64_t>(step, cas_.size() - off);
      auto got = r.fetch(cas_.file(), cas_.size(), {off, n}, Deadline::never(), block_key);
      if (!got.ok() || *got != cas_.content().substr(off, n)) return false;
    }
    return true;
  }

  FakeCas cas_;
  testing::FakeTransport transport_;
  testing::StreamingTransport streaming_;
  std::atomic<int> token_calls_{0};
  testing::ManualEnv env_;
};

TEST_F(XetSourceTest, ReadsAnyRangeExactlyAskingOnlyForSignedRanges) {
  auto r = reader();
  const std::string& want = cas_.content();
  const uint64_t size = want.size();
  for (hubfs::ByteRange range : {hubfs::ByteRange{1, 100}, hubfs::ByteRange{340'000, 40'000},
                                 hubfs::ByteRange{size - 1, 1}, hubfs::ByteRange{65'000, 200'000}}) {
    auto got = r->fetch(cas_.file(), size, range);
    ASSERT_TRUE(got.ok()) << got.status().message();
    EXPECT_TRUE(*got == want.substr(range.offset, range.length)) << range.offset << "+" << range.length;
  }
  EXPECT_EQ(r->stats().files_verified, 0u) << "parts of a file are not content-verified";
  EXPECT_EQ(r->stats().unverified_bytes, r->stats().served_bytes);
  auto whole = r->fetch(cas_.file(), size, {0, size});
  ASSERT_TRUE(whole.ok()) << whole.status().message();
  EXPECT_TRUE(*whole == want);
  auto s = r->stats();
  EXPECT_EQ(cas_.refused, 0) << "a range the URL was not signed for (a footer, a narrowing)";
  EXPECT_EQ(cas_.v1_plans, 0) << "V2 by default";
  EXPECT_EQ(s.reconstruction_version, 2);
  EXPECT_EQ(token_calls_.load(), 1);
  EXPECT_EQ(s.files_verified, 1u) << "the whole read's chunks hash to the file's Xet hash";
  EXPECT_EQ(s.file_hash_mismatches, 0u);
  EXPECT_EQ(s.retries, 0u);
  EXPECT_EQ(cas_.xorb_authorization, 0);
  auto empty = r->fetch(cas_.file(), size, {5, 0});
  ASSERT_TRUE(empty.ok());
  EXPECT_TRUE(empty->empty());
  EXPECT_EQ(r->fetch(cas_.file(), size, {size - 1, 2}).status().code(), Code::kInvalidArgument);
}

// A read inside a kept plan's range uses it: its one term starts many chunks before the read, so
// the decode leaves out every byte before the read's first (DecodeExtras) in the range's own
// buffer. The bytes are exact wherever the read starts and ends, with no new plan or range.
TEST_F(XetSourceTest, AReadInsideAKeptPlanIsCutFromItsFirstByte) {
  auto r = reader();
  const std::string& want = cas_.content();
  const uint64_t size = want.size();
  ASSERT_TRUE(r->fetch(cas_.file(), size, {0, size}).ok());
  const int plans = cas_.reconstructions;
  for (hubfs::ByteRange range : {hubfs::ByteRange{0, 1}, hubfs::ByteRange{123'457, 99'999},
                                 hubfs::ByteRange{250'001, 3}, hubfs::ByteRange{size / 2 + 11, size / 2 - 11},
                                 hubfs::ByteRange{size - 70'000, 70'000}}) {
    auto got = r->fetch(cas_.file(), size, range);
    ASSERT_TRUE(got.ok()) << got.status().message();
    EXPECT_TRUE(*got == want.substr(range.offset, range.length)) << range.offset << "+" << range.length;
  }
  EXPECT_EQ(cas_.reconstructions, plans) << "reads inside the whole read's plan ask for none";
  EXPECT_EQ(cas_.refused, 0);
  EXPECT_EQ(r->stats().file_hash_mismatches, 0u);
}

// xet-core's rule: a service without V2 answers 404 or 501, and the client uses V1 from then on,
// asking for each term's url_range exactly.
TEST_F(XetSourceTest, FallsBackToV1OnlyOn404Or501) {
  for (long code : {404L, 501L}) {
    cas_.v2_status = code;
    cas_.v1_plans = 0;
    auto r = reader();
    ASSERT_TRUE(read_whole(*r, 150'000)) << code;
    EXPECT_EQ(r->stats().reconstruction_version, 1);
    EXPECT_EQ(r->stats().files_verified, 1u);
    EXPECT_EQ(cas_.v1_plans, 5) << "one plan per read, each asked with V1 after the first refusal";
    EXPECT_EQ(cas_.refused, 0);
  }
  // Any other answer to V2 is the service failing, not a reason to change versions.
  cas_.v2_status = 503;
  auto r = reader();
  auto got = r->fetch(cas_.file(), cas_.size(), {0, 1000});
  EXPECT_FALSE(got.ok());
  EXPECT_EQ(got.status().code(), Code::kUnavailable) << got.status().message();
  EXPECT_EQ(r->stats().reconstruction_version, 2);
}

// A read whose bytes lie in two xorbs sends a range from each at once; the second goes as the
// first's companion. A read inside one xorb sends one ordinary range.
TEST_F(XetSourceTest, AReadAcrossTwoXorbsSendsItsSecondRangeAsACompanion) {
  auto r = reader();
  const std::string& want = cas_.content();
  const uint64_t boundary = cas_.second_xorb_offset();
  ASSERT_GT(boundary, 20'000u);
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

// Every way the storage service can fail is a service error: retried once with a fresh plan (so a
// single fault costs nothing but a retry), then kUnavailable for the router's bridge. Never
// kCorrupt, never a short read, never more than two plans for a read.
TEST_F(XetSourceTest, AFailingServiceIsAServiceErrorRetriedOnce) {
  struct Case {
    const char* name;
    PlanFault plan;
    XorbFault xorb;
  };
  for (const Case& c : {Case{"malformed JSON", PlanFault::kMalformedJson, XorbFault::kNone},
                        Case{"schema", PlanFault::kSchema, XorbFault::kNone},
                        Case{"lying length", PlanFault::kLyingLength, XorbFault::kNone},
                        Case{"plan 500", PlanFault::kStatus500, XorbFault::kNone},
                        Case{"short body", PlanFault::kNone, XorbFault::kShort},
                        Case{"long body", PlanFault::kNone, XorbFault::kLong},
                        Case{"lying chunk header", PlanFault::kNone, XorbFault::kLyingHeader},
                        Case{"xorb 500", PlanFault::kNone, XorbFault::kStatus500}}) {
    SCOPED_TRACE(c.name);
    cas_.plan_fault = c.plan;
    cas_.xorb_fault = c.xorb;
    const hubfs::ByteRange range{100'000, 500'000};
    // Once: the retry reads it exactly.
    cas_.plan_faults = cas_.xorb_faults = 1;
    auto r = reader();
    auto got = r->fetch(cas_.file(), cas_.size(), range);
    ASSERT_TRUE(got.ok()) << got.status().message();
    EXPECT_TRUE(*got == cas_.content().substr(range.offset, range.length));
    EXPECT_EQ(r->stats().retries, 1u);
    // Always: a service error after two attempts.
    cas_.plan_faults = cas_.xorb_faults = 1000;
    const int plans = cas_.reconstructions;
    auto r2 = reader();
    auto bad = r2->fetch(cas_.file(), cas_.size(), range);
    ASSERT_FALSE(bad.ok());
    EXPECT_EQ(bad.status().code(), Code::kUnavailable) << bad.status().message();
    EXPECT_LE(cas_.reconstructions - plans, 2);
    EXPECT_EQ(r2->stats().service_errors, 1u);
    EXPECT_EQ(r2->stats().served_bytes, 0u);
  }
}

// The caller's buffer for XetReader::fetch_into_async: a string of the range's length.
struct StringBuffer : RangeBuffer {
  explicit StringBuffer(size_t n) : bytes(n, '\0') {}
  void write(uint64_t offset, const char* data, size_t n) override { std::memcpy(bytes.data() + offset, data, n); }
  void read(uint64_t offset, char* out, size_t n) const override { std::memcpy(out, bytes.data() + offset, n); }
  std::string bytes;
};

// What a fetch into a buffer reported, and its end.
struct Reported {
  std::mutex mu;
  std::vector<uint64_t> ready;
  bool done_seen_before_last_ready = false;
  std::optional<Status> done;
  OneShot<Status> finished;
};

void fetch_into(XetReader& r, const FakeCas& cas, hubfs::ByteRange range, const std::shared_ptr<StringBuffer>& into,
                const std::shared_ptr<Reported>& rep) {
  r.fetch_into_async(
      cas.file(), cas.size(), range, into,
      [rep](uint64_t n) {
        std::lock_guard<std::mutex> lock(rep->mu);
        if (rep->done) rep->done_seen_before_last_ready = true;
        rep->ready.push_back(n);
      },
      [rep](Status s) {
        {
          std::lock_guard<std::mutex> lock(rep->mu);
          rep->done = s;
        }
        rep->finished.set(s);
      });
}

// A read into a buffer reports its bytes chunk by chunk as they are decoded, before it ends,
// from an answer whose status and Content-Range were checked first; a read that may tile the
// file alone (checked before it answers) reports nothing.
TEST_F(XetSourceTest, AReadIntoABufferReportsItsBytesChunkByChunkBeforeItEnds) {
  auto r = reader();
  const hubfs::ByteRange range{10'000, 300'000};
  ASSERT_LT(range.offset + range.length, cas_.second_xorb_offset()) << "one term, one listed range";
  auto into = std::make_shared<StringBuffer>(range.length);
  auto rep = std::make_shared<Reported>();
  fetch_into(*r, cas_, range, into, rep);
  Status s = rep->finished.take();
  ASSERT_TRUE(s.ok()) << s.message();
  EXPECT_TRUE(into->bytes == cas_.content().substr(range.offset, range.length));
  ASSERT_GE(rep->ready.size(), 2u) << "reported as its chunks came, not once at the end";
  EXPECT_LT(rep->ready.front(), range.length);
  EXPECT_EQ(rep->ready.back(), range.length);
  EXPECT_TRUE(std::is_sorted(rep->ready.begin(), rep->ready.end()));
  EXPECT_FALSE(rep->done_seen_before_last_ready);
  // Two terms (across the xorbs): each reported as it is assembled.
  const hubfs::ByteRange across{cas_.second_xorb_offset() - 50'000, 100'000};
  auto into2 = std::make_shared<StringBuffer>(across.length);
  auto rep2 = std::make_shared<Reported>();
  fetch_into(*r, cas_, across, into2, rep2);
  ASSERT_TRUE(rep2->finished.take().ok());
  EXPECT_TRUE(into2->bytes == cas_.content().substr(across.offset, across.length));
  ASSERT_FALSE(rep2->ready.empty());
  EXPECT_EQ(rep2->ready.back(), across.length);
  // The whole file: exact, nothing reported.
  auto whole = std::make_shared<StringBuffer>(cas_.size());
  auto rep3 = std::make_shared<Reported>();
  fetch_into(*r, cas_, {0, cas_.size()}, whole, rep3);
  ASSERT_TRUE(rep3->finished.take().ok());
  EXPECT_TRUE(whole->bytes == cas_.content());
  EXPECT_TRUE(rep3->ready.empty());
}

// A failed answer's reported bytes may be served already: the retry compares what it brings for
// them, never writes them, and fails on a difference (the file's check then hashes exactly the
// bytes served). Here the first answer is cut short, the retry flips a byte the first reported.
TEST_F(XetSourceTest, ARetryThatBringsOtherBytesForReportedOnesFails) {
  const hubfs::ByteRange range{10'000, 300'000};
  cas_.xorb_fault = XorbFault::kShort;
  cas_.xorb_faults = 1;
  std::atomic<int> xorbs{0};
  cas_.on_xorb = [&] {
    if (++xorbs == 2) {
      std::lock_guard<std::mutex> lock(cas_.mu_);
      cas_.xorb_fault = XorbFault::kFlipEarly;
      cas_.xorb_faults = 1;
    }
  };
  auto r = reader();
  auto into = std::make_shared<StringBuffer>(range.length);
  auto rep = std::make_shared<Reported>();
  fetch_into(*r, cas_, range, into, rep);
  Status s = rep->finished.take();
  EXPECT_EQ(s.code(), Code::kUnavailable) << s.message();
  EXPECT_NE(s.message().find("different bytes"), std::string::npos) << s.message();
  ASSERT_FALSE(rep->ready.empty()) << "the short answer's first chunks were reported";
  const uint64_t served = rep->ready.back();
  EXPECT_TRUE(into->bytes.compare(0, served, cas_.content(), range.offset, served) == 0)
      << "what was reported is never overwritten";
  EXPECT_EQ(r->stats().retries, 1u);
  // The same with a retry that brings the same bytes: exact.
  cas_.on_xorb = nullptr;
  cas_.xorb_fault = XorbFault::kShort;
  cas_.xorb_faults = 1;
  auto r2 = reader();
  auto into2 = std::make_shared<StringBuffer>(range.length);
  auto rep2 = std::make_shared<Reported>();
  fetch_into(*r2, cas_, range, into2, rep2);
  ASSERT_TRUE(rep2->finished.take().ok());
  EXPECT_TRUE(into2->bytes == cas_.content().substr(range.offset, range.length));
  EXPECT_EQ(r2->stats().retries, 1u);
}

// Each attempt may use only a share of the time the read has left, and a plan request a few
// seconds of it: a service that trickles leaves the bridge its time.
TEST_F(XetSourceTest, AnAttemptUsesOnlyItsShareOfTheReadsDeadline) {
  auto r = reader();
  // 80 s left: an attempt gets a quarter of it, a plan request at most 10 s of that.
  const Deadline deadline = Deadline::after(std::chrono::seconds(80), env_.clock());
  ASSERT_TRUE(r->fetch(cas_.file(), cas_.size(), {0, 1000}, deadline).ok());
  const auto requests = transport_.requests();
  ASSERT_GE(requests.size(), 2u);
  for (const HttpRequest& q : requests) {
    const bool plan = q.url.find("/reconstructions/") != std::string::npos;
    EXPECT_LE(q.deadline.remaining(), plan ? std::chrono::milliseconds(10'000) : std::chrono::milliseconds(20'000))
        << q.url;
    EXPECT_FALSE(q.deadline.is_never());
    // A plan past 16 MiB, or a body past its range, is cut off by the transport as it arrives.
    unsigned long long a = 0, b = 0;
    if (plan) {
      EXPECT_EQ(q.max_body, uint64_t(16) << 20);
    } else if (std::sscanf(find_header(q.headers, "Range").value_or("").c_str(), "bytes=%llu-%llu", &a, &b) == 2) {
      EXPECT_EQ(q.max_body, b - a + 2) << "one byte past the range: a longer body is refused";
    } else {
      ADD_FAILURE() << "a xorb request without a closed range: " << q.url;
    }
  }
}

// A plan whose terms are reordered passes every per-chunk test (each term is a real piece of its
// xorb): the whole-file check is what finds it. A read of the whole file is checked before it
// answers: its bytes are dropped (none reaches the chunk cache), fetched once more with a fresh
// plan, and the answer is exact.
TEST_F(XetSourceTest, AReorderedPlanFailsTheFileCheckAndTheWholeReadIsFetchedAgain) {
  testing::TempDir dir;
  std::mutex blocks_mu;
  std::string blocks;  // what the caller's block cache would hold of the file
  ChunkCache cache((dir.path() / "xet-chunks").string(), 0,
                   [&](const std::string&, uint64_t offset, uint64_t length, char* out) {
                     std::lock_guard<std::mutex> lock(blocks_mu);
                     if (offset + length > blocks.size()) return false;
                     std::memcpy(out, blocks.data() + offset, length);
                     return true;
                   });
  XetReaderOptions o;
  o.chunk_cache = &cache;
  auto r = reader(o);
  cas_.plan_fault = PlanFault::kReordered;
  cas_.plan_faults = 1;
  auto got = r->fetch(cas_.file(), cas_.size(), {0, cas_.size()}, Deadline::never(), "key");
  ASSERT_TRUE(got.ok()) << got.status().message();
  EXPECT_TRUE(*got == cas_.content()) << "the reordered plan's bytes were never answered";
  EXPECT_EQ(cas_.reconstructions, 2) << "a fresh plan for the second fetch";
  EXPECT_EQ(r->stats().file_hash_mismatches, 1u);
  EXPECT_EQ(r->stats().whole_read_refetches, 1u);
  EXPECT_EQ(r->stats().served_bytes, cas_.size()) << "the dropped attempt's bytes were not served";
  EXPECT_EQ(r->file_verdict(cas_.file()), FileVerdict::kMatch);
  EXPECT_GT(cache.stats().stored, 0u);
  {
    std::lock_guard<std::mutex> lock(blocks_mu);
    blocks = cas_.content();
  }
  const int gets = cas_.data_gets;
  auto cached = r->fetch(cas_.file(), cas_.size(), {5000, 500'000});
  ASSERT_TRUE(cached.ok());
  EXPECT_TRUE(*cached == cas_.content().substr(5000, 500'000));
  EXPECT_EQ(cas_.data_gets, gets) << "every chunk from the cache";
  EXPECT_EQ(r->stats().cache_bytes, 500'000u);
}

// Corrupt xorb answers (a flipped byte each, which no per-chunk test can see) in a read of the
// whole file: the read is fetched once more and answers exactly, the first time; what it costs
// is the first attempt's bytes. A corruption that does not go away is a named service error
// (the router then reads through the bridge), after two attempts, with nothing served or kept.
TEST_F(XetSourceTest, CorruptXorbAnswersInAWholeReadCostARefetchNotAnError) {
  testing::TempDir dir;
  // A chunk cache per reader (a verified read fills it, and the next would fetch nothing).
  int caches = 0;
  auto new_cache = [&] {
    return std::make_unique<ChunkCache>((dir.path() / ("xet-chunks" + std::to_string(++caches))).string(), 0,
                                        [&](const std::string&, uint64_t offset, uint64_t length, char* out) {
                                          if (offset + length > cas_.size()) return false;
                                          std::memcpy(out, cas_.content().data() + offset, length);
                                          return true;
                                        });
  };
  XetReaderOptions o;
  // What a clean whole read fetches (no chunk cache: every chunk from the xorbs).
  ASSERT_TRUE(reader()->fetch(cas_.file(), cas_.size(), {0, cas_.size()}).ok());
  const uint64_t clean_bytes = cas_.data_bytes;
  for (int corrupt : {1, 2}) {
    SCOPED_TRACE(corrupt);
    cas_.xorb_fault = XorbFault::kFlip;
    cas_.xorb_faults = corrupt;
    cas_.data_bytes = 0;
    cas_.data_gets = 0;
    auto cache = new_cache();
    o.chunk_cache = cache.get();
    auto r = reader(o);
    auto got = r->fetch(cas_.file(), cas_.size(), {0, cas_.size()}, Deadline::never(), "key" + std::to_string(corrupt));
    ASSERT_TRUE(got.ok()) << got.status().message();
    EXPECT_TRUE(*got == cas_.content());
    EXPECT_EQ(cas_.xorb_faults, 0);
    EXPECT_EQ(r->stats().retries, 1u);
    EXPECT_EQ(r->file_verdict(cas_.file()), FileVerdict::kMatch);
    // Two xorbs, each one listed range: the file's ranges twice, and nothing else.
    EXPECT_EQ(cas_.data_gets, 4);
    EXPECT_EQ(r->stats().xorb_bytes, cas_.data_bytes);
    EXPECT_EQ(cas_.data_bytes, 2 * clean_bytes) << "the refetch costs one more whole read, no more";
    EXPECT_EQ(r->stats().served_bytes, cas_.size());
    EXPECT_EQ(cas_.refused, 0);
    EXPECT_GT(cache->stats().stored, 0u) << "the second fetch's chunks, verified";
  }
  cas_.xorb_fault = XorbFault::kFlip;
  cas_.xorb_faults = 1000;
  auto cache = new_cache();
  o.chunk_cache = cache.get();
  auto r = reader(o);
  auto bad = r->fetch(cas_.file(), cas_.size(), {0, cas_.size()}, Deadline::never(), "bad");
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().code(), Code::kUnavailable) << bad.status().message();
  EXPECT_NE(bad.status().message().find("fetched twice"), std::string::npos) << bad.status().message();
  EXPECT_NE(bad.status().message().find("bridge"), std::string::npos) << bad.status().message();
  EXPECT_EQ(r->stats().served_bytes, 0u);
  EXPECT_EQ(r->stats().service_errors, 1u);
  EXPECT_EQ(r->stats().file_hash_mismatches, 2u);
  EXPECT_EQ(cache->stats().stored, 0u) << "nothing of the corrupt answers is kept";
  EXPECT_EQ(r->file_verdict(cas_.file()), FileVerdict::kUnknown) << "nothing was served, so nothing to drop";
}

// A flipped byte in a partial read cannot be seen (no chunk hashes): it is served, counted
// unverified, and kept out of the chunk cache, so a later whole read fetches every chunk afresh
// and its check decides.
TEST_F(XetSourceTest, APartialReadsBytesNeverReachTheChunkCache) {
  testing::TempDir dir;
  ChunkCache cache((dir.path() / "xet-chunks").string(), 0,
                   [&](const std::string&, uint64_t offset, uint64_t length, char* out) {
                     if (offset + length > cas_.size()) return false;
                     std::memcpy(out, cas_.content().data() + offset, length);
                     return true;
                   });
  XetReaderOptions o;
  o.chunk_cache = &cache;
  auto r = reader(o);
  cas_.xorb_fault = XorbFault::kFlip;
  cas_.xorb_faults = 1;
  auto part = r->fetch(cas_.file(), cas_.size(), {1000, 60'000}, Deadline::never(), "key");
  ASSERT_TRUE(part.ok());
  EXPECT_EQ(cache.stats().stored, 0u);
  EXPECT_GT(r->stats().unverified_bytes, 0u);
  // The whole read's chunk at that offset differs from the partial read's: the file fails its
  // check (the caller drops every block of it), and the next whole read is checked afresh.
  ASSERT_TRUE(read_whole(*r, 700'000, "key"));
  EXPECT_EQ(r->file_verdict(cas_.file()), FileVerdict::kMismatch);
  EXPECT_EQ(cache.stats().stored, 0u);
  ASSERT_TRUE(read_whole(*r, 700'000, "key"));
  EXPECT_EQ(r->file_verdict(cas_.file()), FileVerdict::kMatch);
  EXPECT_GT(cache.stats().stored, 0u);
}

TEST_F(XetSourceTest, TokenIsRefreshedBeforeItExpires) {
  auto r = reader();
  ASSERT_TRUE(r->fetch(cas_.file(), cas_.size(), {0, 10}).ok());
  ASSERT_TRUE(r->fetch(cas_.file(), cas_.size(), {10, 10}).ok());
  EXPECT_EQ(token_calls_.load(), 1);
  // 100 s tokens, refreshed 60 s before exp: 50 s later a read takes a fresh one.
  env_.advance(std::chrono::seconds(50));
  ASSERT_TRUE(r->fetch(cas_.file(), cas_.size(), {20, 10}).ok());
  EXPECT_EQ(token_calls_.load(), 2);
}

// A mount whose listing shows a Xet file fetches the token then (warm_token), once however often
// it is asked, with no plan; the first read uses it. A failed warm-up only costs the read its own
// token request, as without it.
TEST_F(XetSourceTest, AWarmedTokenIsFetchedOnceAndServesTheFirstRead) {
  env_.inline_executors(true);  // the warm-up runs within its call: counted when it returns
  auto r = reader();
  r->warm_token();
  EXPECT_EQ(token_calls_.load(), 1) << "the token is fetched at the warm-up, before any read";
  EXPECT_EQ(cas_.reconstructions, 0) << "the warm-up asks for no plan";
  r->warm_token();
  auto got = r->fetch(cas_.file(), cas_.size(), {0, 1000});
  ASSERT_TRUE(got.ok()) << got.status().message();
  EXPECT_TRUE(*got == cas_.content().substr(0, 1000));
  r->warm_token();
  EXPECT_EQ(token_calls_.load(), 1) << "one token for the warm-ups and the read";
  EXPECT_EQ(r->stats().token_requests, 1u);

  // A refused warm-up: the read asks again, and is served.
  int tries = 0;
  XetReaderOptions options;
  options.threads = 4;
  options.env = &env_;
  TokenSource failing_once = [&]() -> Result<XetToken> {
    if (++tries == 1) return Unavailable("the token endpoint is down");
    return XetToken{"http://cas", "tok", env_.system_now() + std::chrono::seconds(100)};
  };
  XetReader r2(streaming_, failing_once, options);
  r2.warm_token();
  EXPECT_EQ(tries, 1);
  auto again = r2.fetch(cas_.file(), cas_.size(), {5, 100});
  ASSERT_TRUE(again.ok()) << again.status().message();
  EXPECT_TRUE(*again == cas_.content().substr(5, 100));
  EXPECT_EQ(tries, 2);
  EXPECT_EQ(r2.stats().retries, 0u) << "the read asked its own token, not a retry";
}

TEST_F(XetSourceTest, ChunksThatDoNotMakeUpTheFileAreReported) {
  // The fake CAS answers any hash with its one file: asked for another file, every chunk decodes,
  // but together they are not that file. Read in two parts, the second decides: the bytes of the
  // first were served, so the verdict goes to the caller (which drops them).
  auto r = reader();
  MerkleHash other = cas_.file();
  other.bytes[0] ^= 1;
  const uint64_t half = cas_.size() / 2;
  ASSERT_TRUE(r->fetch(other, cas_.size(), {0, half}).ok());
  ASSERT_TRUE(r->fetch(other, cas_.size(), {half, cas_.size() - half}).ok());
  EXPECT_EQ(r->stats().files_verified, 0u);
  EXPECT_EQ(r->stats().file_hash_mismatches, 1u);
  EXPECT_EQ(r->stats().whole_read_refetches, 0u) << "the first part was answered already";
  EXPECT_EQ(r->file_verdict(other), FileVerdict::kMismatch);
  EXPECT_EQ(r->file_verdict(other), FileVerdict::kUnknown);
  const uint64_t plans = r->stats().reconstructions;
  ASSERT_TRUE(r->fetch(other, cas_.size(), {0, half}).ok());
  EXPECT_EQ(r->stats().reconstructions, plans + 1) << "the plans that described other bytes were dropped";
  // Read whole by a reader that served none of it, it is never answered: two attempts, then a
  // service error.
  auto whole = reader()->fetch(other, cas_.size(), {0, cas_.size()});
  EXPECT_EQ(whole.status().code(), Code::kUnavailable);
}

TEST_F(XetSourceTest, AWholeReadMatchesItsFileAndPartsDoNotDecide) {
  auto r = reader();
  const std::string& want = cas_.content();
  ASSERT_TRUE(r->fetch(cas_.file(), want.size(), {0, want.size() / 2}).ok());
  EXPECT_EQ(r->file_verdict(cas_.file()), FileVerdict::kUnknown) << "half the file checks nothing whole";
  ASSERT_TRUE(r->fetch(cas_.file(), want.size(), {want.size() / 2, want.size() - want.size() / 2}).ok());
  EXPECT_EQ(r->file_verdict(cas_.file()), FileVerdict::kMatch);
  EXPECT_EQ(r->file_verdict(cas_.file()), FileVerdict::kMatch) << "a match stands";
  EXPECT_EQ(r->stats().unverified_bytes, 0u);
  auto source = r->source_for(cas_.file());
  std::promise<Provenance> provenance;
  source->fetch_async(want.size(), {0, 100}, [&](Result<std::string> got, Provenance p) {
    EXPECT_TRUE(got.ok());
    provenance.set_value(p);
  }, Deadline::never());
  EXPECT_EQ(provenance.get_future().get(), Provenance::kFileHashed);
  EXPECT_EQ(source->file_verdict(), FileVerdict::kMatch);
}

// A read's debug line says when its plan was there, its ranges out and the read done, from the
// read's start on the Env's clock: the timeline of a cold read without a tracer.
TEST_F(XetSourceTest, EachReadLogsItsTimelineAtDebugLevel) {
  std::FILE* f = std::tmpfile();
  ASSERT_NE(f, nullptr);
  set_log_file(f);
  set_log_level(LogLevel::kDebug);
  // The round trips, on the manual clock: each plan answers 50 ms after it is asked, each xorb
  // range 30 ms after.
  cas_.on_plan = [this] { env_.advance(std::chrono::milliseconds(50)); };
  cas_.on_xorb = [this] { env_.advance(std::chrono::milliseconds(30)); };
  auto r = reader();
  auto cold = r->fetch(cas_.file(), cas_.size(), {1, 100});
  auto kept = r->fetch(cas_.file(), cas_.size(), {1, 100});  // the kept plan: no round trip for it
  auto whole = r->fetch(cas_.file(), cas_.size(), {0, cas_.size()});  // decides the file's check
  r->shutdown();
  set_log_level(LogLevel::kInfo);
  set_log_file(nullptr);
  ASSERT_TRUE(cold.ok()) << cold.status().message();
  ASSERT_TRUE(kept.ok()) << kept.status().message();
  ASSERT_TRUE(whole.ok()) << whole.status().message();
  std::rewind(f);
  std::string log;
  char buf[4096];
  for (size_t n; (n = std::fread(buf, 1, sizeof buf, f)) > 0;) log.append(buf, n);
  std::fclose(f);
  std::vector<std::string> lines;
  for (size_t at = log.find("Xet read "); at != std::string::npos; at = log.find("Xet read ", at + 1))
    lines.push_back(log.substr(at, log.find('\n', at) - at));
  ASSERT_EQ(lines.size(), 3u) << log;
  const std::string head = "Xet read " + cas_.file().hex().substr(0, 16) + "... bytes 1+100: ";
  // The range goes out once the plan is there; when this thread notes that, the fake CAS's
  // thread may already have moved the clock for the range's answer.
  EXPECT_EQ(lines[0].rfind(head + "plan +50 ms, 1 range out +", 0), 0u) << lines[0];
  EXPECT_NE(lines[0].find("(0 terms from the chunk cache), done +80 ms"), std::string::npos) << lines[0];
  EXPECT_EQ(lines[1].rfind(head + "plan +0 ms, 1 range out +", 0), 0u) << lines[1];
  EXPECT_NE(lines[1].find("done +30 ms"), std::string::npos) << lines[1];
  // The whole read's plan (50 ms), its two xorbs' ranges side by side (30 ms each on this clock,
  // which both fake requests move), then the file's check, which this read decides.
  const std::string file_head = "Xet file " + cas_.file().hex().substr(0, 16) +
                                "... matched its Xet hash, decided by the read of bytes 0+" +
                                std::to_string(cas_.size()) + ": checked +";
  EXPECT_NE(log.find(file_head), std::string::npos) << log;
  EXPECT_NE(log.find("(2 verified runs), its chunks kept by +"), std::string::npos) << log;
}

}  // namespace
}  // namespace hubfs::xet
