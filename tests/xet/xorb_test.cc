// Xorb chunks and footers: round trips through every scheme, the layout byte for byte, and
// hostile input (lying lengths, truncation, damaged bytes), which must fail naming the chunk,
// never over-read or allocate what a header claims.
#include "xet/xorb.h"

#include <gtest/gtest.h>

#include <random>

namespace hubfs::xet {
namespace HUBFS_UNITY_ID {

std::string random_bytes(size_t n, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::string s(n, '\0');
  for (auto& c : s) c = static_cast<char>(rng());
  return s;
}

// Compressible: 4-byte float-like words drawn from 16 values (LZ4 finds repeats, byte grouping
// finds the constant exponent bytes).
std::string float_like(size_t n, uint64_t seed) {
  std::mt19937_64 rng(seed);
  uint32_t words[16];
  for (auto& w : words) w = 0x3f000000u | static_cast<uint32_t>(rng() & 0x00ffffff);
  std::string s(n, '\0');
  for (size_t i = 0; i < n; i += 4) {
    const uint32_t w = words[rng() % 16];
    for (size_t k = 0; k < 4 && i + k < n; ++k) s[i + k] = static_cast<char>(w >> (8 * k));
  }
  return s;
}

const uint8_t* u8(const std::string& s) { return reinterpret_cast<const uint8_t*>(s.data()); }

struct Built {
  std::string xorb;
  std::vector<std::string> chunks;
};

Built build(CompressionScheme scheme, const std::vector<size_t>& sizes, bool compressible, bool footer = true) {
  XorbBuilder b(scheme);
  Built out;
  uint64_t seed = 1;
  for (size_t n : sizes) {
    out.chunks.push_back(compressible ? float_like(n, seed++) : random_bytes(n, seed++));
    EXPECT_TRUE(b.add_chunk(out.chunks.back().data(), n).ok());
  }
  out.xorb = b.finish(footer);
  return out;
}

std::string concat(const std::vector<std::string>& v, size_t from = 0, size_t to = SIZE_MAX) {
  std::string s;
  for (size_t i = from; i < std::min(to, v.size()); ++i) s += v[i];
  return s;
}

TEST(XorbTest, ChunkHeaderLayout) {
  ChunkHeader h;
  h.compressed_size = 0x012345;
  h.scheme = CompressionScheme::kByteGrouping4Lz4;
  h.uncompressed_size = 0x01abcd;
  uint8_t b[8];
  write_chunk_header(h, b);
  const uint8_t want[8] = {0x00, 0x45, 0x23, 0x01, 0x02, 0xcd, 0xab, 0x01};
  EXPECT_EQ(std::memcmp(b, want, 8), 0);
  auto back = parse_chunk_header(b, 8, 0);
  ASSERT_TRUE(back.ok()) << back.status().message();
  EXPECT_EQ(back->compressed_size, h.compressed_size);
  EXPECT_EQ(back->uncompressed_size, h.uncompressed_size);
  EXPECT_EQ(back->scheme, h.scheme);
}

TEST(XorbTest, ByteGroupingMatchesTheSpecExample) {
  // xorb.md: [A1 A2 A3 A4 B1 B2 B3 B4 C1 C2] -> [A1 B1 C1 A2 B2 C2 A3 B3 A4 B4].
  const std::string in = "aAxXbByYcC";
  EXPECT_EQ(bg4_split(u8(in), in.size()), "abcABCxyXY");
  for (size_t n = 0; n < 40; ++n) {
    const auto s = random_bytes(n, n);
    const auto g = bg4_split(u8(s), n);
    EXPECT_EQ(bg4_regroup(u8(g), n), s) << n;
  }
}

TEST(XorbTest, RoundTripEveryScheme) {
  const std::vector<size_t> sizes = {1, 7, 8192, 65536, 100003, kMaxChunkSize};
  for (auto scheme : {CompressionScheme::kNone, CompressionScheme::kLz4, CompressionScheme::kByteGrouping4Lz4}) {
    for (bool compressible : {false, true}) {
      const Built b = build(scheme, sizes, compressible);
      size_t footer_bytes = 0;
      auto footer = parse_footer(u8(b.xorb), b.xorb.size(), &footer_bytes);
      ASSERT_TRUE(footer.ok()) << footer.status().message();
      ASSERT_EQ(footer->chunk_hashes.size(), sizes.size());
      EXPECT_EQ(footer->chunk_ends.back(), b.xorb.size() - footer_bytes);
      // The whole xorb: chunks until the footer.
      auto all = decode_chunks(u8(b.xorb), b.xorb.size(), 0, std::nullopt, SIZE_MAX);
      ASSERT_TRUE(all.ok()) << all.status().message();
      EXPECT_EQ(all->data, concat(b.chunks));
      EXPECT_TRUE(verify_chunks(*all, 0, *footer).ok());
      std::vector<HashAndSize> hs;
      for (const auto& c : b.chunks) hs.push_back({chunk_hash(c.data(), c.size()), c.size()});
      EXPECT_EQ(footer->xorb_hash, xorb_hash(hs));
      // A middle range, as a reconstruction fetch range gives it: chunks [2, 5).
      const size_t from = footer->chunk_ends[1], to = footer->chunk_ends[4];
      auto mid = decode_chunks(u8(b.xorb) + from, to - from, 2, 3, SIZE_MAX);
      ASSERT_TRUE(mid.ok()) << mid.status().message();
      EXPECT_EQ(mid->data, concat(b.chunks, 2, 5));
      EXPECT_TRUE(verify_chunks(*mid, 2, *footer).ok());
      if (compressible && scheme != CompressionScheme::kNone) {
        EXPECT_LT(footer->chunk_ends.back(), concat(b.chunks).size() * 9 / 10) << "compressible data should shrink";
      }
    }
  }
}

// decode_chunks(std::string&&) decodes inside the range's own buffer where it has room (chunks
// stored as-is need none); it must agree with the copying decoder on every range, scheme and error.
TEST(XorbTest, InPlaceDecodeAgreesWithTheCopyingOne) {
  const std::vector<size_t> sizes = {1, 7, 8192, 65536, 100003, kMaxChunkSize};
  for (auto scheme : {CompressionScheme::kNone, CompressionScheme::kLz4}) {
    for (bool compressible : {false, true}) {
      const Built b = build(scheme, sizes, compressible);
      auto footer = parse_footer(u8(b.xorb), b.xorb.size());
      ASSERT_TRUE(footer.ok());
      for (auto [lo, hi] : {std::pair<size_t, size_t>{0, 6}, {2, 5}, {5, 6}}) {
        const size_t from = lo ? footer->chunk_ends[lo - 1] : 0, to = footer->chunk_ends[hi - 1];
        auto copied = decode_chunks(u8(b.xorb) + from, to - from, lo, hi - lo, SIZE_MAX);
        auto moved = decode_chunks(b.xorb.substr(from, to - from), lo, hi - lo, SIZE_MAX);
        ASSERT_TRUE(copied.ok() && moved.ok()) << moved.status().message();
        EXPECT_EQ(moved->data, concat(b.chunks, lo, hi));
        EXPECT_EQ(moved->ends, copied->ends);
        EXPECT_EQ(moved->packed_ends, copied->packed_ends);
        EXPECT_TRUE(verify_chunks(*moved, lo, *footer).ok());
      }
    }
  }
  // The same bounds as the copying decoder, on chunks stored as-is.
  const Built b = build(CompressionScheme::kNone, {1000, 2000, 3000}, false, false);
  EXPECT_FALSE(decode_chunks(std::string(b.xorb), 0, size_t(1) << 40, SIZE_MAX).ok());
  EXPECT_FALSE(decode_chunks(std::string(b.xorb), 0, 2, SIZE_MAX).ok());
  EXPECT_FALSE(decode_chunks(std::string(b.xorb), 0, 4, SIZE_MAX).ok());
  EXPECT_TRUE(decode_chunks(std::string(b.xorb), 0, 3, 6000).ok());
  EXPECT_FALSE(decode_chunks(std::string(b.xorb), 0, 3, 5999).ok());
  std::string truncated = b.xorb.substr(0, b.xorb.size() - 1);
  EXPECT_FALSE(decode_chunks(std::move(truncated), 0, 3, SIZE_MAX).ok());
}

// Ranges mixing LZ4-compressed chunks (which decode larger than they are stored) with chunks
// stored as-is decode inside their own buffer when it has in_place_headroom's room, and agree
// with the copying decoder with or without that room.
TEST(XorbTest, MixedRangesDecodeInPlaceWithTheirHeadroom) {
  for (auto scheme : {CompressionScheme::kLz4, CompressionScheme::kByteGrouping4Lz4}) {
    for (int order = 0; order < 3; ++order) {
      // Compressible chunks first, last, or alternating with incompressible ones.
      XorbBuilder builder(scheme);
      std::vector<std::string> chunks;
      for (size_t i = 0; i < 8; ++i) {
        const bool compressible = order == 0 ? i < 4 : order == 1 ? i >= 4 : i % 2 == 0;
        const size_t n = 20000 + 7919 * i;
        chunks.push_back(compressible ? float_like(n, 100 + i) : random_bytes(n, 200 + i));
        ASSERT_TRUE(builder.add_chunk(chunks.back().data(), n).ok());
      }
      const std::string xorb = builder.finish(true);
      auto footer = parse_footer(u8(xorb), xorb.size());
      ASSERT_TRUE(footer.ok());
      for (auto [lo, hi] : {std::pair<size_t, size_t>{0, 8}, {1, 7}, {3, 5}, {6, 8}}) {
        const size_t from = lo ? footer->chunk_ends[lo - 1] : 0, to = footer->chunk_ends[hi - 1];
        const std::string want = concat(chunks, lo, hi);
        if (lo == 0 && hi == 8) {
          ASSERT_GT(want.size(), to - from) << "the xorb should hold compressed chunks";
        }
        std::string roomy;
        roomy.reserve(to - from + in_place_headroom(want.size(), to - from, hi - lo));
        roomy.assign(xorb, from, to - from);
        const char* buffer = roomy.data();
        auto moved = decode_chunks(std::move(roomy), lo, hi - lo, SIZE_MAX);
        ASSERT_TRUE(moved.ok()) << moved.status().message();
        EXPECT_EQ(moved->data, want) << int(scheme) << " " << order << " " << lo << "-" << hi;
        EXPECT_EQ(moved->data.data(), buffer) << "decoded into a second buffer";
        EXPECT_TRUE(verify_chunks(*moved, lo, *footer).ok());
        auto tight = decode_chunks(xorb.substr(from, to - from), lo, hi - lo, SIZE_MAX);
        auto copied = decode_chunks(u8(xorb) + from, to - from, lo, hi - lo, SIZE_MAX);
        ASSERT_TRUE(tight.ok() && copied.ok());
        EXPECT_EQ(tight->data, want);
        EXPECT_EQ(moved->ends, copied->ends);
        EXPECT_EQ(moved->packed_ends, copied->packed_ends);
      }
    }
  }
}

// DecodeExtras: in the decoding pass itself each chunk is hashed and the content before the
// read's first byte is left out, in place (one buffer), when the range is too tight for that
// (copied, then trimmed) and from a pointer; every way gives the chunk hashes and the content
// from the asked byte on, wherever it falls (inside a chunk, across several, past the end).
TEST(XorbTest, OnePassHashesEachChunkAndLeavesOutTheBytesBeforeTheRead) {
  for (auto scheme : {CompressionScheme::kNone, CompressionScheme::kLz4, CompressionScheme::kByteGrouping4Lz4}) {
    XorbBuilder builder(scheme);
    std::vector<std::string> chunks;
    for (size_t i = 0; i < 6; ++i) {
      const size_t n = 9000 + 5003 * i;
      chunks.push_back(i % 2 ? float_like(n, 300 + i) : random_bytes(n, 400 + i));
      ASSERT_TRUE(builder.add_chunk(chunks.back().data(), n).ok());
    }
    const std::string xorb = builder.finish(false);
    const std::string all = concat(chunks, 0, chunks.size());
    const uint32_t count = static_cast<uint32_t>(chunks.size());
    for (uint32_t keep_chunk : {0u, 1u, 3u, 5u, 6u}) {
      for (uint64_t skip : {uint64_t{0}, uint64_t{1}, uint64_t{9000}, uint64_t{30000}, uint64_t{1} << 20}) {
        SCOPED_TRACE(std::to_string(int(scheme)) + " from chunk " + std::to_string(keep_chunk) + " + " +
                     std::to_string(skip));
        DecodeExtras extras;
        extras.hash = true;
        extras.keep_from_chunk = keep_chunk;
        extras.keep_skip = skip;
        const uint64_t before = concat(chunks, 0, std::min<size_t>(keep_chunk, count)).size();
        const uint64_t dropped = std::min<uint64_t>(keep_chunk < count ? before + skip : all.size(), all.size());
        std::string roomy;
        roomy.reserve(xorb.size() + in_place_headroom(all.size(), xorb.size(), count));
        roomy.assign(xorb);
        const char* buffer = roomy.data();
        auto in_place = decode_chunks(std::move(roomy), 0, count, SIZE_MAX, extras);
        auto tight = decode_chunks(std::string(xorb), 0, count, SIZE_MAX, extras);
        auto copied = decode_chunks(u8(xorb), xorb.size(), 0, count, SIZE_MAX, extras);
        auto plain = decode_chunks(u8(xorb), xorb.size(), 0, count, SIZE_MAX);
        ASSERT_TRUE(in_place.ok() && tight.ok() && copied.ok() && plain.ok());
        EXPECT_TRUE(plain->hashes.empty()) << "hashed without being asked";
        EXPECT_EQ(in_place->data.data(), buffer) << "decoded into a second buffer";
        for (const auto* d : {&*in_place, &*tight, &*copied}) {
          EXPECT_EQ(d->dropped, dropped);
          EXPECT_EQ(d->data, all.substr(dropped));
          EXPECT_EQ(d->ends, plain->ends);
          ASSERT_EQ(d->hashes.size(), chunks.size());
          for (size_t k = 0; k < chunks.size(); ++k) {
            EXPECT_EQ(d->hashes[k], chunk_hash(chunks[k].data(), chunks[k].size())) << k;
          }
        }
      }
    }
  }
}

TEST(XorbTest, IncompressibleChunksAreStoredAsIs) {
  const Built b = build(CompressionScheme::kLz4, {5000}, false);
  auto h = parse_chunk_header(u8(b.xorb), b.xorb.size(), 0);
  ASSERT_TRUE(h.ok());
  EXPECT_EQ(h->scheme, CompressionScheme::kNone);
  EXPECT_EQ(h->compressed_size, 5000u);
}

TEST(XorbTest, FooterLayoutMatchesXetCore) {
  const Built b = build(CompressionScheme::kNone, {10, 20}, false);
  // Chunks: 2 headers + 30 bytes; the footer: 92 fixed bytes + 2 * (32 + 4 + 4), then its length.
  ASSERT_EQ(b.xorb.size(), 16 + 30 + 92 + 80 + 4u);
  const std::string footer = b.xorb.substr(46);
  EXPECT_EQ(footer.substr(0, 8), std::string("XETBLOB\x01", 8));
  EXPECT_EQ(footer.substr(40, 8), std::string("XBLBHSH\x00", 8));
  EXPECT_EQ(footer.substr(40 + 12 + 64, 8), std::string("XBLBBND\x01", 8));
  const uint8_t* tail = u8(b.xorb) + b.xorb.size() - 4;
  EXPECT_EQ(tail[0] | tail[1] << 8 | tail[2] << 16 | tail[3] << 24, 172);
  // The chunk ends: 18 and 46; the unpacked ends: 10 and 30.
  const uint8_t* ends = u8(footer) + 40 + 12 + 64 + 12;
  EXPECT_EQ(ends[0], 18);
  EXPECT_EQ(ends[4], 46);
  EXPECT_EQ(ends[8], 10);
  EXPECT_EQ(ends[12], 30);
}

TEST(XorbTest, EmptyXorbFooter) {
  const Built b = build(CompressionScheme::kLz4, {}, false);
  EXPECT_EQ(b.xorb.size(), 96u);
  auto f = parse_footer(u8(b.xorb), b.xorb.size());
  ASSERT_TRUE(f.ok()) << f.status().message();
  EXPECT_TRUE(f->chunk_hashes.empty());
}

TEST(XorbTest, HostileHeadersAreRefusedNamingTheChunk) {
  auto header = [](uint8_t version, uint32_t csize, uint8_t scheme, uint32_t usize) {
    std::string s(8, '\0');
    s[0] = static_cast<char>(version);
    s[1] = char(csize), s[2] = char(csize >> 8), s[3] = char(csize >> 16);
    s[4] = static_cast<char>(scheme);
    s[5] = char(usize), s[6] = char(usize >> 8), s[7] = char(usize >> 16);
    return s;
  };
  struct Case {
    std::string bytes;
    const char* why;
  };
  const std::vector<Case> cases = {
      {header(1, 4, 0, 4) + "abcd", "version"},
      {header(0, 4, 7, 4) + "abcd", "scheme"},
      {header(0, 4, 0, 5) + "abcd", "none with differing sizes"},
      {header(0, 10, 1, kMaxChunkSize + 1) + std::string(10, 'x'), "uncompressed too large"},
      {header(0, kMaxStoredChunkSize + 1, 1, 100), "stored too large"},
      {header(0, 100, 0, 100) + "short", "stored length past the range"},
      {header(0, 0xffffff, 1, 0xffffff), "24-bit maximum lengths"},
      {std::string("\0\0\0", 3), "truncated header"},
      {header(0, 12, 1, 100) + std::string(12, '\x55'), "LZ4 garbage"},
  };
  for (const auto& c : cases) {
    auto r = decode_chunks(u8(c.bytes), c.bytes.size(), 41, 1, SIZE_MAX);
    ASSERT_FALSE(r.ok()) << c.why;
    EXPECT_EQ(r.status().code(), Code::kCorrupt) << c.why;
    EXPECT_NE(r.status().message().find("chunk 41"), std::string::npos) << c.why << ": " << r.status().message();
  }
}

TEST(XorbTest, LyingUncompressedSizeIsAnError) {
  const std::string data = float_like(60000, 3);
  std::string x;
  ASSERT_TRUE(append_chunk(CompressionScheme::kLz4, data.data(), data.size(), &x).ok());
  ASSERT_EQ(x[4], 1);  // really compressed
  for (uint32_t lie : {59999u, 60001u, 1u, 0u, uint32_t(kMaxChunkSize)}) {
    std::string bad = x;
    bad[5] = char(lie), bad[6] = char(lie >> 8), bad[7] = char(lie >> 16);
    auto r = decode_chunks(u8(bad), bad.size(), 0, 1, SIZE_MAX);
    EXPECT_FALSE(r.ok()) << "uncompressed size " << lie;
  }
  // And a lying stored size: one byte short, one byte long.
  for (int delta : {-1, 1}) {
    std::string bad = x + (delta > 0 ? "z" : "");
    const uint32_t c = uint32_t(int(x.size()) - 8 + delta);
    bad[1] = char(c), bad[2] = char(c >> 8), bad[3] = char(c >> 16);
    EXPECT_FALSE(decode_chunks(u8(bad), bad.size(), 0, 1, SIZE_MAX).ok()) << "stored size delta " << delta;
  }
}

TEST(XorbTest, CountAndOutputBoundsAreEnforcedBeforeAllocating) {
  const Built b = build(CompressionScheme::kLz4, {1000, 2000, 3000}, true, false);
  // More chunks than the bytes could hold: refused up front (no reserve of 2^40 entries).
  EXPECT_FALSE(decode_chunks(u8(b.xorb), b.xorb.size(), 0, size_t(1) << 40, SIZE_MAX).ok());
  // Fewer chunks than the range holds: the leftover bytes are an error.
  EXPECT_FALSE(decode_chunks(u8(b.xorb), b.xorb.size(), 0, 2, SIZE_MAX).ok());
  EXPECT_FALSE(decode_chunks(u8(b.xorb), b.xorb.size(), 0, 4, SIZE_MAX).ok());
  EXPECT_TRUE(decode_chunks(u8(b.xorb), b.xorb.size(), 0, 3, 6000).ok());
  auto r = decode_chunks(u8(b.xorb), b.xorb.size(), 0, 3, 5999);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("chunk 2"), std::string::npos) << r.status().message();
}

TEST(XorbTest, HostileFootersAreRefused) {
  const Built b = build(CompressionScheme::kNone, {100, 200, 300}, false);
  ASSERT_TRUE(parse_footer(u8(b.xorb), b.xorb.size()).ok());
  auto set_u32 = [](std::string* s, size_t at, uint32_t v) {
    (*s)[at] = char(v), (*s)[at + 1] = char(v >> 8), (*s)[at + 2] = char(v >> 16), (*s)[at + 3] = char(v >> 24);
  };
  const size_t footer_at = 3 * 8 + 600;
  const size_t count_at = footer_at + 40 + 8;
  std::vector<std::pair<std::string, std::string>> cases;
  std::string s = b.xorb;
  set_u32(&s, s.size() - 4, 0xffffffff);
  cases.push_back({s, "length past the buffer"});
  s = b.xorb;
  set_u32(&s, count_at, 0xffffffff);
  cases.push_back({s, "huge chunk count"});
  s = b.xorb;
  set_u32(&s, count_at, 2);
  cases.push_back({s, "chunk count off by one"});
  s = b.xorb;
  s[footer_at] = 'Y';
  cases.push_back({s, "ident"});
  s = b.xorb;
  set_u32(&s, s.size() - 4 - 16 - 8, 7);
  cases.push_back({s, "hashes offset"});
  s = b.xorb;
  const size_t ends_at = count_at + 4 + 3 * 32 + 12;
  set_u32(&s, ends_at + 4, 3);  // chunk 1 ends before chunk 0
  cases.push_back({s, "decreasing chunk ends"});
  s = b.xorb;
  set_u32(&s, ends_at, 0xfffffffc);  // + a header's 8 bytes wraps a 32-bit sum to 4
  set_u32(&s, ends_at + 4, 4);
  cases.push_back({s, "chunk ends wrapping around 2^32"});
  cases.push_back({b.xorb.substr(0, 3), "3 bytes"});
  cases.push_back({b.xorb.substr(b.xorb.size() - 50), "a tail shorter than the footer"});
  for (const auto& [bytes, why] : cases) {
    EXPECT_FALSE(parse_footer(u8(bytes), bytes.size()).ok()) << why;
  }
  // A suffix holding the whole footer is enough.
  size_t footer_bytes = 0;
  ASSERT_TRUE(parse_footer(u8(b.xorb), b.xorb.size(), &footer_bytes).ok());
  const std::string suffix = b.xorb.substr(b.xorb.size() - footer_bytes);
  EXPECT_TRUE(parse_footer(u8(suffix), suffix.size()).ok());
}

TEST(XorbTest, DamagedContentIsCaughtByTheChunkHashes) {
  const Built b = build(CompressionScheme::kNone, {1000, 1000}, false);
  auto footer = parse_footer(u8(b.xorb), b.xorb.size());
  ASSERT_TRUE(footer.ok());
  std::string bad = b.xorb;
  bad[8 + 1000 + 8 + 500] ^= 1;  // chunk 1's content
  auto d = decode_chunks(u8(bad), footer->chunk_ends.back(), 0, 2, SIZE_MAX);
  ASSERT_TRUE(d.ok());  // an uncompressed chunk decodes whatever its bytes...
  Status s = verify_chunks(*d, 0, *footer);
  EXPECT_EQ(s.code(), Code::kCorrupt);  // ...but its hash tells
  EXPECT_NE(s.message().find("chunk 1"), std::string::npos) << s.message();
}

// Random damage anywhere in a xorb: decoding fails or yields bytes the hashes reject; it never
// crashes or reads out of bounds (ASan watches this one).
TEST(XorbTest, RandomDamageNeverPassesVerification) {
  const Built b = build(CompressionScheme::kByteGrouping4Lz4, {3000, 5000, 4000}, true);
  auto footer = parse_footer(u8(b.xorb), b.xorb.size());
  ASSERT_TRUE(footer.ok());
  const size_t chunks_len = footer->chunk_ends.back();
  std::mt19937_64 rng(7);
  for (int i = 0; i < 1500; ++i) {
    std::string bad = b.xorb.substr(0, chunks_len);
    const int flips = 1 + int(rng() % 3);
    for (int f = 0; f < flips; ++f) bad[rng() % bad.size()] ^= static_cast<char>(1 + rng() % 255);
    if (bad == b.xorb.substr(0, chunks_len)) continue;
    auto d = decode_chunks(u8(bad), bad.size(), 0, 3, 12000);
    if (!d.ok()) continue;
    if (d->data == concat(b.chunks)) continue;  // damage in a byte that does not matter (e.g. LZ4 padding)
    EXPECT_FALSE(verify_chunks(*d, 0, *footer).ok()) << "mutation " << i;
  }
  // Truncations at every length.
  for (size_t n = 0; n < chunks_len; n += 97) EXPECT_FALSE(decode_chunks(u8(b.xorb), n, 0, 3, 12000).ok()) << n;
}

}  // namespace
}  // namespace hubfs::xet
