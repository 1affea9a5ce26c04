// ChunkStreamDecoder (xorb.h): a range fed in pieces of any size decodes exactly as the whole
// range does with decode_chunks (content, boundaries, hashes, the bytes left out before a read);
// a range cut short, one with bytes after its chunks, or a damaged header mid-stream fails as the
// whole-range decode would; a reset starts again from zero (a retried body); the output's memory
// can be mapped ahead from another thread without changing a byte of what is decoded into it.
#include <gtest/gtest.h>

#include <sys/mman.h>
#include <unistd.h>

#include <random>
#include <thread>

#include "xet/xorb.h"

namespace hubfs::xet {
namespace HUBFS_UNITY_ID {

struct Range {
  std::string xorb;
  std::vector<std::string> chunks;
  std::string all;
};

// Six chunks, compressible and not, so LZ4 chunks and chunks stored as-is alternate.
Range six_chunks(CompressionScheme scheme) {
  XorbBuilder b(scheme);
  Range r;
  std::mt19937_64 rng(7);
  for (size_t i = 0; i < 6; ++i) {
    std::string c(9000 + 5003 * i, '\0');
    for (size_t k = 0; k < c.size(); ++k) c[k] = i % 2 ? static_cast<char>('a' + (k / 64) % 5) : static_cast<char>(rng());
    EXPECT_TRUE(b.add_chunk(c.data(), c.size()).ok());
    r.all += c;
    r.chunks.push_back(std::move(c));
  }
  r.xorb = b.finish(false);
  return r;
}

Result<DecodedChunks> stream(ChunkStreamDecoder& d, const std::string& bytes, size_t piece) {
  for (size_t at = 0; at < bytes.size(); at += piece)
    d.feed(reinterpret_cast<const uint8_t*>(bytes.data()) + at, std::min(piece, bytes.size() - at));
  return d.finish();
}

TEST(ChunkStreamTest, PiecesOfAnySizeDecodeAsTheWholeRange) {
  for (auto scheme : {CompressionScheme::kNone, CompressionScheme::kLz4, CompressionScheme::kByteGrouping4Lz4}) {
    const Range r = six_chunks(scheme);
    const size_t n = r.chunks.size();
    for (uint32_t keep_chunk : {0u, 2u, 6u}) {
      for (uint64_t skip : {uint64_t{0}, uint64_t{1}, uint64_t{20000}}) {
        DecodeExtras extras;
        extras.hash = true;
        extras.keep_from_chunk = keep_chunk;
        extras.keep_skip = skip;
        auto whole = decode_chunks(reinterpret_cast<const uint8_t*>(r.xorb.data()), r.xorb.size(), 10, n, SIZE_MAX,
                                   extras);
        ASSERT_TRUE(whole.ok()) << whole.status().message();
        // 1 byte at a time, a header split, pieces smaller and larger than a chunk, all at once.
        for (size_t piece : {size_t{1}, size_t{5}, size_t{8}, size_t{4093}, size_t{70000}, r.xorb.size()}) {
          if (piece == 1 && (keep_chunk || skip)) continue;  // byte by byte once per scheme is enough
          SCOPED_TRACE(std::to_string(int(scheme)) + " keep " + std::to_string(keep_chunk) + "+" +
                       std::to_string(skip) + " pieces of " + std::to_string(piece));
          ChunkStreamDecoder d(10, n, r.xorb.size(), n * kMaxChunkSize, r.all.size(), extras);
          auto got = stream(d, r.xorb, piece);
          ASSERT_TRUE(got.ok()) << got.status().message();
          EXPECT_EQ(got->dropped, whole->dropped);
          EXPECT_TRUE(got->data == whole->data);
          EXPECT_TRUE(got->data == r.all.substr(got->dropped));
          EXPECT_EQ(got->ends, whole->ends);
          EXPECT_EQ(got->packed_ends, whole->packed_ends);
          ASSERT_EQ(got->hashes.size(), n);
          for (size_t k = 0; k < n; ++k) EXPECT_EQ(got->hashes[k], chunk_hash(r.chunks[k].data(), r.chunks[k].size()));
        }
      }
    }
  }
}

TEST(ChunkStreamTest, ABodyCutShortOrTooLongFails) {
  const Range r = six_chunks(CompressionScheme::kLz4);
  const size_t n = r.chunks.size();
  // Cut inside a header, inside a payload, and at a chunk boundary (fewer chunks than listed).
  ChunkStreamDecoder probe(0, n, r.xorb.size(), SIZE_MAX, 0);
  auto full = stream(probe, r.xorb, 4096);
  ASSERT_TRUE(full.ok());
  for (size_t cut : {size_t{3}, size_t{9000}, size_t{full->packed_ends[2]}, r.xorb.size() - 1}) {
    SCOPED_TRACE(cut);
    ChunkStreamDecoder d(0, n, r.xorb.size(), SIZE_MAX, 0);
    auto got = stream(d, r.xorb.substr(0, cut), 4096);
    ASSERT_FALSE(got.ok());
    EXPECT_EQ(got.status().code(), Code::kCorrupt) << got.status().message();
  }
  // Bytes after the last listed chunk.
  ChunkStreamDecoder longer(0, n - 1, r.xorb.size(), SIZE_MAX, 0);
  auto got = stream(longer, r.xorb, 4096);
  ASSERT_FALSE(got.ok());
  EXPECT_NE(got.status().message().find("after its"), std::string::npos) << got.status().message();
  // A count the range cannot hold is refused before anything is sized by it.
  ChunkStreamDecoder impossible(0, 1'000'000'000, 64, SIZE_MAX, 0);
  EXPECT_FALSE(stream(impossible, r.xorb.substr(0, 64), 64).ok());
}

TEST(ChunkStreamTest, ADamagedHeaderMidStreamStopsTheDecode) {
  const Range r = six_chunks(CompressionScheme::kLz4);
  const size_t n = r.chunks.size();
  ChunkStreamDecoder probe(0, n, r.xorb.size(), SIZE_MAX, 0);
  auto full = stream(probe, r.xorb, r.xorb.size());
  ASSERT_TRUE(full.ok());
  std::string bad = r.xorb;
  bad[full->packed_ends[2] + 4] = 9;  // chunk 3's scheme: unknown
  ChunkStreamDecoder d(0, n, bad.size(), SIZE_MAX, 0);
  auto got = stream(d, bad, 1000);
  ASSERT_FALSE(got.ok());
  EXPECT_NE(got.status().message().find("xorb chunk 3"), std::string::npos) << got.status().message();
  // An output bound a header passes (the decompression bomb's way in) fails before decoding.
  ChunkStreamDecoder bounded(0, n, r.xorb.size(), r.chunks[0].size() + 10, 0);
  auto over = stream(bounded, r.xorb, 1000);
  ASSERT_FALSE(over.ok());
  EXPECT_NE(over.status().message().find("exceed"), std::string::npos) << over.status().message();
}

TEST(ChunkStreamTest, AResetStartsAgainFromTheFirstByte) {
  const Range r = six_chunks(CompressionScheme::kByteGrouping4Lz4);
  const size_t n = r.chunks.size();
  DecodeExtras extras;
  extras.hash = true;
  ChunkStreamDecoder d(0, n, r.xorb.size(), SIZE_MAX, r.all.size(), extras);
  // A first attempt that sent half the range, then one that sent garbage (a failure), then the range.
  d.feed(reinterpret_cast<const uint8_t*>(r.xorb.data()), r.xorb.size() / 2);
  d.reset();
  const std::string garbage(5000, '\x7f');
  d.feed(reinterpret_cast<const uint8_t*>(garbage.data()), garbage.size());
  d.reset();
  EXPECT_EQ(d.fed(), 0u);
  auto got = stream(d, r.xorb, 777);
  ASSERT_TRUE(got.ok()) << got.status().message();
  EXPECT_TRUE(got->data == r.all);
  EXPECT_EQ(got->count(), n);
  ASSERT_EQ(got->hashes.size(), n);
  EXPECT_EQ(got->hashes[5], chunk_hash(r.chunks[5].data(), r.chunks[5].size()));
}

// How many of the whole pages in [p, p + n) are mapped (mincore).
size_t resident_pages(const char* p, size_t n) {
  const uintptr_t page = static_cast<uintptr_t>(::sysconf(_SC_PAGESIZE));
  const uintptr_t first = (reinterpret_cast<uintptr_t>(p) + page - 1) / page * page;
  const uintptr_t last = (reinterpret_cast<uintptr_t>(p) + n) / page * page;
  std::vector<unsigned char> in((last - first) / page);
  EXPECT_EQ(::mincore(reinterpret_cast<void*>(first), last - first, in.data()), 0);
  size_t mapped = 0;
  for (unsigned char c : in) mapped += c & 1;
  return mapped;
}

TEST(ChunkStreamTest, PrefaultingTheOutputMapsItAndChangesNoByte) {
  const Range r = six_chunks(CompressionScheme::kLz4);
  const size_t n = r.chunks.size();
  DecodeExtras extras;
  extras.hash = true;
  // 64 MiB reserved: fresh memory from mmap (past malloc's largest threshold), nothing mapped yet.
  const size_t capacity = size_t{64} << 20;
  ChunkStreamDecoder d(0, n, r.xorb.size(), SIZE_MAX, capacity, extras);
  const char* base = d.output_base();
  ASSERT_NE(base, nullptr);
  const size_t ahead = size_t{8} << 20;
  const size_t pages = ahead / static_cast<size_t>(::sysconf(_SC_PAGESIZE));
  EXPECT_LT(resident_pages(base, ahead), pages / 2);
  // From another thread while the first half is fed (as the reader's worker does while the
  // transport's thread feeds): then every page of the first 8 MiB is mapped.
  std::thread other([&] { EXPECT_TRUE(d.prefault_output(ahead)) << "MADV_POPULATE_WRITE needs Linux 5.14 or later"; });
  d.feed(reinterpret_cast<const uint8_t*>(r.xorb.data()), r.xorb.size() / 2);
  other.join();
  EXPECT_GE(resident_pages(base, ahead), pages - 2);  // all but the partial pages at the ends
  d.feed(reinterpret_cast<const uint8_t*>(r.xorb.data()) + r.xorb.size() / 2, r.xorb.size() - r.xorb.size() / 2);
  auto got = d.finish();
  ASSERT_TRUE(got.ok()) << got.status().message();
  EXPECT_EQ(got->data.data(), base);  // decoded into the memory that was mapped, not a copy
  EXPECT_TRUE(got->data == r.all);
  ASSERT_EQ(got->hashes.size(), n);
  for (size_t k = 0; k < n; ++k) EXPECT_EQ(got->hashes[k], chunk_hash(r.chunks[k].data(), r.chunks[k].size()));
  // Never past what was reserved, and nothing to do for nothing.
  EXPECT_TRUE(ChunkStreamDecoder(0, n, r.xorb.size(), SIZE_MAX, 0, extras).prefault_output(ahead));
}

}  // namespace
}  // namespace hubfs::xet
