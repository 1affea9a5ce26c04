// Reconstruction plans: V1 and V2 responses shaped as xet-core's cas.openapi.yaml and
// huggingface.js's XetBlob.ts document them, the checks on hostile ones, and the mapping of a
// file byte range to terms, fetch ranges and chunks.
#include "xet/reconstruction.h"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include <random>

#include "xet/chunker.h"
#include "xet/xorb.h"

namespace hubfs::xet {
namespace HUBFS_UNITY_ID {

using nlohmann::json;

const std::string kA = "a1b2c3d4e5f6789012345678901234567890abcdef1234567890abcdef123456";
const std::string kB = "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef";

// The V1 example of cas.openapi.yaml.
json openapi_v1() {
  return json::parse(R"({
    "offset_into_first_range": 0,
    "terms": [{"hash": ")" + kA + R"(", "unpacked_length": 263873, "range": {"start": 0, "end": 4}}],
    "fetch_info": {")" + kA + R"(": [{"range": {"start": 0, "end": 4},
        "url": "https://transfer.xethub.hf.co/xorb/default/)" + kA + R"(",
        "url_range": {"start": 0, "end": 131071}}]}
  })");
}

// Three terms over two xorbs (xorb A's chunks 0..2 and 5..7, xorb B's 3..4), V2 style: one URL
// per xorb carrying both of A's ranges.
json three_terms_v2() {
  return json::parse(R"({
    "offset_into_first_range": 100,
    "terms": [
      {"hash": ")" + kA + R"(", "unpacked_length": 1000, "range": {"start": 0, "end": 2}},
      {"hash": ")" + kB + R"(", "unpacked_length": 500, "range": {"start": 3, "end": 4}},
      {"hash": ")" + kA + R"(", "unpacked_length": 2000, "range": {"start": 5, "end": 7}}],
    "xorbs": {
      ")" + kA + R"(": [{"url": "https://cas/xorbs/a?X-Xet-Signed-Range=...",
                        "ranges": [{"chunks": {"start": 0, "end": 2}, "bytes": {"start": 0, "end": 799}},
                                   {"chunks": {"start": 5, "end": 7}, "bytes": {"start": 2000, "end": 3999}}]}],
      ")" + kB + R"(": [{"url": "https://cas/xorbs/b", "ranges": [{"chunks": {"start": 0, "end": 10},
                                                                  "bytes": {"start": 0, "end": 9999}}]}]}
  })");
}

TEST(ReconstructionTest, ParsesTheOpenapiV1Example) {
  auto p = parse_reconstruction_v1(openapi_v1().dump());
  ASSERT_TRUE(p.ok()) << p.status().message();
  ASSERT_EQ(p->terms.size(), 1u);
  EXPECT_EQ(p->terms[0].xorb.hex(), kA);
  EXPECT_EQ(p->terms[0].chunks, (ChunkRange{0, 4}));
  EXPECT_EQ(p->terms[0].unpacked_length, 263873u);
  EXPECT_EQ(p->content_length(), 263873u);
  auto src = find_term_source(*p, 0);
  ASSERT_TRUE(src.ok());
  EXPECT_EQ(src->fetch->url, "https://transfer.xethub.hf.co/xorb/default/" + kA);
  EXPECT_EQ(src->range->bytes, (ByteRange{0, 131071}));
  EXPECT_EQ(src->range->bytes.length(), 131072u);
}

TEST(ReconstructionTest, ParsesV2WithMultiRangeUrls) {
  auto p = parse_reconstruction_v2(three_terms_v2().dump());
  ASSERT_TRUE(p.ok()) << p.status().message();
  ASSERT_EQ(p->terms.size(), 3u);
  EXPECT_EQ(p->offset_into_first_range, 100u);
  EXPECT_EQ(p->content_length(), 3400u);
  auto a = p->fetches.at(*MerkleHash::from_hex(kA));
  ASSERT_EQ(a.size(), 1u);
  ASSERT_EQ(a[0].ranges.size(), 2u);
  auto src = find_term_source(*p, 2);
  ASSERT_TRUE(src.ok());
  EXPECT_EQ(src->range->bytes, (ByteRange{2000, 3999}));
  // Term 1 is B's chunk 3, held by B's wider range 0..10.
  auto b = find_term_source(*p, 1);
  ASSERT_TRUE(b.ok());
  EXPECT_EQ(b->range->chunks, (ChunkRange{0, 10}));
}

TEST(ReconstructionTest, MapsAFileRangeToTerms) {
  auto p = parse_reconstruction_v2(three_terms_v2().dump());
  ASSERT_TRUE(p.ok()) << p.status().message();
  // The plan was asked for Range: bytes=5000-; term 0 starts 100 bytes before that.
  const uint64_t start = 5000;
  auto r = map_read(*p, start, 5000, 3400);  // all of it
  ASSERT_TRUE(r.ok()) << r.status().message();
  ASSERT_EQ(r->size(), 3u);
  EXPECT_EQ((*r)[0].file_offset, 4900u);
  EXPECT_EQ((*r)[0].skip, 100u);
  EXPECT_EQ((*r)[0].take, 900u);
  EXPECT_EQ((*r)[1].skip, 0u);
  EXPECT_EQ((*r)[1].take, 500u);
  EXPECT_EQ((*r)[2].take, 2000u);
  EXPECT_EQ((*r)[2].source.range->bytes, (ByteRange{2000, 3999}));

  // Straddling terms 1 and 2.
  r = map_read(*p, start, 5000 + 900 + 400, 200);
  ASSERT_TRUE(r.ok());
  ASSERT_EQ(r->size(), 2u);
  EXPECT_EQ((*r)[0].term_index, 1u);
  EXPECT_EQ((*r)[0].skip, 400u);
  EXPECT_EQ((*r)[0].take, 100u);
  EXPECT_EQ((*r)[1].term_index, 2u);
  EXPECT_EQ((*r)[1].skip, 0u);
  EXPECT_EQ((*r)[1].take, 100u);

  // Inside one term; at the very end; empty.
  r = map_read(*p, start, 8399, 1);
  ASSERT_TRUE(r.ok());
  ASSERT_EQ(r->size(), 1u);
  EXPECT_EQ((*r)[0].skip, 1999u);
  r = map_read(*p, start, 6000, 0);
  ASSERT_TRUE(r.ok());
  EXPECT_TRUE(r->empty());

  // Outside the plan: before its start, past its end, and an overflowing length.
  EXPECT_EQ(map_read(*p, start, 4999, 10).status().code(), Code::kOutOfRange);
  EXPECT_EQ(map_read(*p, start, 8399, 2).status().code(), Code::kOutOfRange);
  EXPECT_EQ(map_read(*p, start, 5000, UINT64_MAX).status().code(), Code::kOutOfRange);
}

TEST(ReconstructionTest, ChunksForBytes) {
  // A term of chunks of 100, 50, 200 bytes.
  const std::vector<uint32_t> ends = {100, 150, 350};
  auto s = chunks_for_bytes(ends, 0, 350);
  ASSERT_TRUE(s.ok());
  EXPECT_EQ(s->first, 0u);
  EXPECT_EQ(s->end, 3u);
  s = chunks_for_bytes(ends, 100, 50);  // exactly chunk 1
  ASSERT_TRUE(s.ok());
  EXPECT_EQ(s->first, 1u);
  EXPECT_EQ(s->end, 2u);
  EXPECT_EQ(s->offset_in_first, 0u);
  s = chunks_for_bytes(ends, 99, 2);  // the last byte of chunk 0 and the first of chunk 1
  ASSERT_TRUE(s.ok());
  EXPECT_EQ(s->first, 0u);
  EXPECT_EQ(s->end, 2u);
  EXPECT_EQ(s->offset_in_first, 99u);
  s = chunks_for_bytes(ends, 200, 1);
  ASSERT_TRUE(s.ok());
  EXPECT_EQ(s->first, 2u);
  EXPECT_EQ(s->end, 3u);
  EXPECT_EQ(s->offset_in_first, 50u);
  EXPECT_FALSE(chunks_for_bytes(ends, 350, 1).ok());
  EXPECT_FALSE(chunks_for_bytes(ends, 300, 51).ok());
  EXPECT_FALSE(chunks_for_bytes(ends, 0, 0).ok());
  EXPECT_FALSE(chunks_for_bytes({}, 0, 1).ok());
}

// Each mutation of a valid response must be refused, with a message saying what is wrong.
TEST(ReconstructionTest, RefusesMalformedV1) {
  struct Case {
    const char* why;
    std::function<void(json&)> mutate;
  };
  const std::vector<Case> cases = {
      {"no terms", [](json& j) { j.erase("terms"); }},
      {"terms not an array", [](json& j) { j["terms"] = 5; }},
      {"bad hash", [](json& j) { j["terms"][0]["hash"] = "xyz"; }},
      {"short hash", [](json& j) { j["terms"][0]["hash"] = kA.substr(1); }},
      {"negative length", [](json& j) { j["terms"][0]["unpacked_length"] = -1; }},
      {"float length", [](json& j) { j["terms"][0]["unpacked_length"] = 1.5; }},
      {"string length", [](json& j) { j["terms"][0]["unpacked_length"] = "263873"; }},
      {"length beyond its chunks", [](json& j) { j["terms"][0]["unpacked_length"] = 4 * 131072 + 1; }},
      {"length below its chunk count", [](json& j) { j["terms"][0]["unpacked_length"] = 3; }},
      {"empty chunk range", [](json& j) { j["terms"][0]["range"]["end"] = 0; }},
      {"inverted chunk range", [](json& j) { j["terms"][0]["range"] = {{"start", 5}, {"end", 4}}; }},
      {"huge chunk index", [](json& j) { j["terms"][0]["range"]["end"] = 1ull << 40; }},
      {"offset past the first term", [](json& j) { j["offset_into_first_range"] = 263873; }},
      {"no offset", [](json& j) { j.erase("offset_into_first_range"); }},
      {"no fetch_info", [](json& j) { j.erase("fetch_info"); }},
      {"term without a source", [](json& j) { j["fetch_info"][kA][0]["range"]["end"] = 3; }},
      {"source for another xorb", [](json& j) {
         j["fetch_info"][kB] = j["fetch_info"][kA];
         j["fetch_info"].erase(kA);
       }},
      {"inverted url_range", [](json& j) { j["fetch_info"][kA][0]["url_range"] = {{"start", 10}, {"end", 9}}; }},
      {"url_range too small for its chunks", [](json& j) { j["fetch_info"][kA][0]["url_range"]["end"] = 30; }},
      {"url_range too big for its chunks", [](json& j) { j["fetch_info"][kA][0]["url_range"]["end"] = 1ull << 40; }},
      {"no url", [](json& j) { j["fetch_info"][kA][0].erase("url"); }},
      {"empty url", [](json& j) { j["fetch_info"][kA][0]["url"] = ""; }},
      {"bad fetch_info key", [](json& j) { j["fetch_info"]["nothex"] = json::array(); }},
  };
  ASSERT_TRUE(parse_reconstruction_v1(openapi_v1().dump()).ok());
  for (const auto& c : cases) {
    json j = openapi_v1();
    c.mutate(j);
    auto p = parse_reconstruction_v1(j.dump());
    ASSERT_FALSE(p.ok()) << c.why;
    EXPECT_EQ(p.status().code(), Code::kCorrupt) << c.why;
    EXPECT_NE(p.status().message().find("reconstruction response"), std::string::npos) << c.why;
  }
  EXPECT_FALSE(parse_reconstruction_v1("{").ok());
  EXPECT_FALSE(parse_reconstruction_v1("[]").ok());
  EXPECT_FALSE(parse_reconstruction_v1("").ok());
}

TEST(ReconstructionTest, RefusesMalformedV2) {
  struct Case {
    const char* why;
    std::function<void(json&)> mutate;
  };
  const std::vector<Case> cases = {
      {"no xorbs", [](json& j) { j.erase("xorbs"); }},
      {"empty fetch list", [](json& j) { j["xorbs"][kB] = json::array(); }},
      {"no ranges", [](json& j) { j["xorbs"][kA][0]["ranges"] = json::array(); }},
      {"overlapping ranges", [](json& j) { j["xorbs"][kA][0]["ranges"][1]["chunks"]["start"] = 1; }},
      {"unsorted ranges", [](json& j) {
         std::swap(j["xorbs"][kA][0]["ranges"][0], j["xorbs"][kA][0]["ranges"][1]);
       }},
      {"overlapping bytes", [](json& j) { j["xorbs"][kA][0]["ranges"][1]["bytes"]["start"] = 799; }},
      {"term 2 uncovered", [](json& j) { j["xorbs"][kA][0]["ranges"].erase(1); }},
      {"offset in a plan with no terms", [](json& j) { j["terms"] = json::array(); }},
  };
  ASSERT_TRUE(parse_reconstruction_v2(three_terms_v2().dump()).ok());
  for (const auto& c : cases) {
    json j = three_terms_v2();
    c.mutate(j);
    EXPECT_FALSE(parse_reconstruction_v2(j.dump()).ok()) << c.why;
  }
  // The empty file: no terms, offset 0.
  auto empty = parse_reconstruction_v2(R"({"offset_into_first_range": 0, "terms": [], "xorbs": {}})");
  ASSERT_TRUE(empty.ok()) << empty.status().message();
  EXPECT_EQ(empty->content_length(), 0u);
  auto r = map_read(*empty, 0, 0, 0);
  ASSERT_TRUE(r.ok());
  EXPECT_TRUE(r->empty());
}

// The whole read path on bytes in memory: chunk a file, pack it into a xorb, describe it with a
// V1 plan, then serve random ranges from the plan: fetch ranges sliced out of the xorb, decoded,
// checked against the footer's chunk hashes, trimmed to the term and the read.
TEST(ReconstructionTest, EndToEndReadsThroughAXorb) {
  std::mt19937_64 rng(22);
  std::string file(700000, '\0');
  for (size_t i = 0; i < file.size(); ++i) file[i] = static_cast<char>(i % 3 ? rng() : i / 1000);
  XorbBuilder builder(CompressionScheme::kLz4);
  size_t start = 0;
  for (size_t end : chunk_boundaries(file.data(), file.size())) {
    ASSERT_TRUE(builder.add_chunk(file.data() + start, end - start).ok());
    start = end;
  }
  const std::string xorb = builder.finish();
  const auto* x = reinterpret_cast<const uint8_t*>(xorb.data());
  auto footer = parse_footer(x, xorb.size());
  ASSERT_TRUE(footer.ok()) << footer.status().message();
  const uint32_t n = static_cast<uint32_t>(footer->chunk_hashes.size());
  ASSERT_GE(n, 6u);
  const std::string hash = builder.hash().hex();

  // Two terms, [0, 3) and [3, n); the second fetched through a range that starts at chunk 2.
  auto packed_start = [&](uint32_t c) -> uint64_t { return c ? footer->chunk_ends[c - 1] : 0; };
  auto unpacked = [&](uint32_t a, uint32_t b) -> uint64_t {
    return footer->unpacked_ends[b - 1] - (a ? footer->unpacked_ends[a - 1] : 0);
  };
  json plan = {{"offset_into_first_range", 0},
               {"terms", {{{"hash", hash}, {"unpacked_length", unpacked(0, 3)}, {"range", {{"start", 0}, {"end", 3}}}},
                          {{"hash", hash}, {"unpacked_length", unpacked(3, n)}, {"range", {{"start", 3}, {"end", n}}}}}},
               {"fetch_info",
                {{hash,
                  {{{"url", "mem://a"}, {"range", {{"start", 0}, {"end", 3}}},
                    {"url_range", {{"start", 0}, {"end", packed_start(3) - 1}}}},
                   {{"url", "mem://b"}, {"range", {{"start", 2}, {"end", n}}},
                    {"url_range", {{"start", packed_start(2)}, {"end", packed_start(n) - 1}}}}}}}}};
  auto p = parse_reconstruction_v1(plan.dump());
  ASSERT_TRUE(p.ok()) << p.status().message();
  ASSERT_EQ(p->content_length(), file.size());

  std::vector<HashAndSize> chunks;
  for (uint32_t i = 0; i < n; ++i) chunks.push_back({footer->chunk_hashes[i], unpacked(i, i + 1)});
  EXPECT_EQ(xorb_hash(chunks), footer->xorb_hash);

  for (int round = 0; round < 12; ++round) {
    const uint64_t off = rng() % file.size();
    const uint64_t len = 1 + rng() % (file.size() - off);
    auto reads = map_read(*p, 0, off, len);
    ASSERT_TRUE(reads.ok()) << reads.status().message();
    std::string got;
    for (const auto& r : *reads) {
      const XorbRange& range = *r.source.range;
      const ReconstructionTerm& term = p->terms[r.term_index];
      auto d = decode_chunks(x + range.bytes.start, range.bytes.length(), range.chunks.start, range.chunks.count(),
                             range.chunks.count() * kMaxChunkSize);
      ASSERT_TRUE(d.ok()) << d.status().message();
      ASSERT_TRUE(verify_chunks(*d, range.chunks.start, *footer).ok());
      const uint32_t first = term.chunks.start - range.chunks.start;
      const uint64_t term_begin = first ? d->ends[first - 1] : 0;
      const uint64_t term_end = d->ends[term.chunks.end - range.chunks.start - 1];
      ASSERT_EQ(term_end - term_begin, term.unpacked_length);
      got += d->data.substr(term_begin + r.skip, r.take);
    }
    ASSERT_EQ(got, file.substr(off, len)) << "read " << off << "+" << len;
  }
}

}  // namespace
}  // namespace hubfs::xet
