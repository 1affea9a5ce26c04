// Content-defined chunking against xet-core's reference boundaries and huggingface.js's chunk
// and file hashes, and the algorithm's stated properties.
#include "xet/chunker.h"

#include <gtest/gtest.h>

#include <random>

#include "chunker_vectors.h"
#include "xet/hash.h"

namespace hubfs::xet {
namespace HUBFS_UNITY_ID {

// xet-core chunking.rs create_random_data: SplitMix64 words, little-endian, cut to n bytes.
std::vector<uint8_t> splitmix_data(size_t n, uint64_t seed) {
  std::vector<uint8_t> out;
  out.reserve(n + 8);
  uint64_t state = seed;
  while (out.size() < n) {
    state += 0x9E3779B97F4A7C15ull;
    uint64_t z = state;
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    z ^= z >> 31;
    for (int i = 0; i < 8; ++i) out.push_back(static_cast<uint8_t>(z >> (8 * i)));
  }
  out.resize(n);
  return out;
}

// xet-core chunking.rs get_triggering_base_data.
std::vector<uint8_t> triggering_data(size_t n, size_t padding) {
  std::vector<uint8_t> d(std::begin(test::kTriggeringPattern), std::end(test::kTriggeringPattern));
  d.resize(d.size() + padding, 0);
  while (d.size() < n) {
    const size_t take = std::min(n - d.size(), d.size());
    d.insert(d.end(), d.begin(), d.begin() + static_cast<std::ptrdiff_t>(take));
  }
  return d;
}

// huggingface.js xetchunk-wasm tests makeData: byte i is (i * a + b) & 0xff.
std::vector<uint8_t> linear_data(size_t n, unsigned a, unsigned b) {
  std::vector<uint8_t> d(n);
  for (size_t i = 0; i < n; ++i) d[i] = static_cast<uint8_t>(i * a + b);
  return d;
}

std::vector<HashAndSize> hashed_chunks(const std::vector<uint8_t>& data) {
  std::vector<HashAndSize> out;
  size_t start = 0;
  for (size_t end : chunk_boundaries(data.data(), data.size())) {
    out.push_back({chunk_hash(data.data() + start, end - start), end - start});
    start = end;
  }
  return out;
}

TEST(ChunkerTest, HittingDataMatchesXetCoreForEveryPadding) {
  const auto& cases = test::hitting_cases();
  ASSERT_EQ(cases.size(), 128u);
  for (size_t pad = 0; pad < cases.size(); ++pad) {
    const auto data = triggering_data(65536, pad);
    ASSERT_EQ(data[11111], cases[pad].byte_at_11111) << "the test input itself is wrong, padding " << pad;
    EXPECT_EQ(chunk_boundaries(data.data(), data.size()), cases[pad].boundaries) << "padding " << pad;
  }
}

// xet-core test_correctness_1mb_random_data; the chunk hashes are huggingface.js's
// (xetchunk-wasm tests/index.test.ts, "from Rust reference").
TEST(ChunkerTest, RandomMegabyteMatchesReferenceBoundariesAndChunkHashes) {
  const auto data = splitmix_data(1000000, 0);
  ASSERT_EQ(data[0], 175);
  ASSERT_EQ(data[127], 132);
  ASSERT_EQ(data[111111], 118);
  const std::vector<size_t> want = {84493,  134421, 144853, 243318, 271793, 336457, 467529,
                                    494581, 582000, 596735, 616815, 653164, 678202, 724510,
                                    815591, 827760, 958832, 991092, 1000000};
  EXPECT_EQ(chunk_boundaries(data.data(), data.size()), want);
  const std::vector<std::string> want_hashes = {
      "6eca1e7dadaf08cca5d82d318c800f07c2ddcec115a7e8627e5edd9605b94b8d",
      "624ea34d72a06e5d43a1b8dd10763f0d22f165992c397ed97563899b27fdd88a",
      "4411d2ec847c6e3f451a7451ff3933adb4f1c31587421b9f730b698a78313b47",
      "6342bde97433e29e0779ad33eb8040d986679040361b3cc3a06230fe60dd6c9b",
      "405253fcf15bba751adc4f507d3453273daff81ed4d8acd71c521aa1cbddc0b5",
      "4482374af7f8bebfdb5c5df0299f80128d6c58886ad7b218c562b1d74064e4cb",
      "80acc8d39c853b4b8a8c6ad7b63bf2ea68f62c2226b92f06349f92cc84d213cc",
      "a7076d7d343f711fb20fe6cd023248d8d051e8fe7d44172596cd5c7ea7edaf65",
      "44755217bbb4dadc81ea7695765230a34a2e6cb3b55f373f1de35aeba79ae92c",
      "001adc1d302d5f039278325dcbd5ec3b194f4794f1629d6f962f9f4bb78a7bff",
      "f8460a337c186f07c2e225bb287a1d3d3d686dc69d0828e99640f7d8852c5b90",
      "c9bc3da29025dc1ba562d303d815151d9a937367abb766ae842a165e8493d9fe",
      "5044339dfd65e8163bdfe642614a6be604b04d6aeacf222cf219ad287bfc5cf1",
      "163622db0fe0da93f2ef964eed4c485f3c7a9c312f8e8e8a312ab4bb8141f13e",
      "e1730534a858aa0258ad8904ef12b829b8a123a1c611250275c9ca9471e4c650",
      "1fbc6854f9185caba1e1f55393f41f83b895b18f9c99245c029025ca48f1e14b",
      "8a27b66ccf05b864b6bef6fb5c970fe894f73d2330e8e98fe7841dcdbd9e9576",
      "bc70a33e7a9ec820cac24b87023469a57bdae1bf91cc3961b95806c64a525221",
      "03e5b5f5a088269ec4b329f1e04debfac4cb54b9c0facf038f7e8e0f054be7e2",
  };
  const auto chunks = hashed_chunks(data);
  ASSERT_EQ(chunks.size(), want_hashes.size());
  for (size_t i = 0; i < chunks.size(); ++i) EXPECT_EQ(chunks[i].hash.hex(), want_hashes[i]) << "chunk " << i;
}

// xet-core test_correctness_1mb_const_data: no content boundary ever, so every cut is forced.
TEST(ChunkerTest, ConstantDataIsCutAtTheMaximum) {
  const std::vector<uint8_t> data(1000000, 59);
  const std::vector<size_t> want = {131072, 262144, 393216, 524288, 655360, 786432, 917504, 1000000};
  EXPECT_EQ(chunk_boundaries(data.data(), data.size()), want);
}

// huggingface.js xetchunk-wasm "Hash functions (verified against Rust thin-wasm)".
TEST(ChunkerTest, XorbAndFileHashesOfChunkedDataMatchHuggingfaceJs) {
  const auto small = hashed_chunks(linear_data(200000, 7, 13));
  EXPECT_EQ(small.size(), 2u);
  EXPECT_EQ(xorb_hash(small).hex(), "f0755d96ee199d4f01e83da9fe2c38353de7fd38fb79a320a7d50be510026f74");
  EXPECT_EQ(file_hash(small).hex(), "d88d9e0b760f32c90b7c6592b4cb85251c01bb797371e3c637087b96ac578723");
  const auto big = hashed_chunks(linear_data(1000000, 13, 37));
  EXPECT_EQ(big.size(), 8u);
  EXPECT_EQ(xorb_hash(big).hex(), "7be289d851485c40dcde52dbcf37a7823a5ef0bfcdf1ca1c5a32ad9594c71571");
  EXPECT_EQ(file_hash(big).hex(), "041a50f3639f4a080a89237025d643e2a3e22935ca5d7dbc1a38f5c1e859f859");
}

// xet-core test_chunk_boundaries: any split of the stream gives the same chunks.
TEST(ChunkerTest, StreamingInAnyPiecesGivesTheSameBoundaries) {
  const auto data = splitmix_data(256000, 1);
  const auto want = chunk_boundaries(data.data(), data.size());
  for (size_t piece : {size_t(1), size_t(37), size_t(255), size_t(8127), size_t(70000)}) {
    Chunker c;
    std::vector<size_t> lengths;
    for (size_t off = 0; off < data.size(); off += piece) {
      c.update(data.data() + off, std::min(piece, data.size() - off), &lengths);
    }
    if (auto last = c.finish()) lengths.push_back(*last);
    std::vector<size_t> got;
    size_t end = 0;
    for (size_t l : lengths) got.push_back(end += l);
    EXPECT_EQ(got, want) << "piece " << piece;
  }
}

TEST(ChunkerTest, SmallAndEmptyInputs) {
  EXPECT_TRUE(chunk_boundaries(nullptr, 0).empty());
  const auto data = splitmix_data(kMinChunkSize - 1, 3);
  EXPECT_EQ(chunk_boundaries(data.data(), data.size()), std::vector<size_t>{kMinChunkSize - 1});
  Chunker c;
  EXPECT_FALSE(c.finish().has_value());
}

// The stated properties on random data: every chunk but the last within [min, max], each cut a
// point where the gear hash of the chunk's own bytes has the mask's bits clear (or the maximum),
// and no earlier admissible point in the chunk qualifies.
TEST(ChunkerTest, BoundariesFollowTheGearRule) {
  const auto data = splitmix_data(3 << 20, 9);
  const auto ends = chunk_boundaries(data.data(), data.size());
  ASSERT_GT(ends.size(), 20u);
  size_t start = 0;
  for (size_t i = 0; i < ends.size(); ++i) {
    const size_t len = ends[i] - start;
    uint64_t h = 0;
    size_t first_match = 0;
    for (size_t k = 0; k < len; ++k) {
      h = (h << 1) + kGearTable[data[start + k]];
      if (k + 1 >= kMinChunkSize && (h & kGearMask) == 0) {
        first_match = k + 1;
        break;
      }
    }
    if (i + 1 < ends.size()) {
      EXPECT_GE(len, kMinChunkSize);
      EXPECT_LE(len, kMaxChunkSize);
      EXPECT_TRUE(first_match == len || (first_match == 0 && len == kMaxChunkSize)) << "chunk " << i;
    } else {
      EXPECT_TRUE(first_match == 0) << "the last chunk had a boundary inside it";
    }
    start = ends[i];
  }
}

// Locality: an edit in the middle changes only the chunks around it.
TEST(ChunkerTest, AnEditChangesOnlyNearbyChunks) {
  auto data = splitmix_data(2 << 20, 5);
  const auto before = hashed_chunks(data);
  data[1 << 20] ^= 0xff;
  const auto after = hashed_chunks(data);
  size_t shared = 0;
  for (const auto& a : after)
    for (const auto& b : before)
      if (a.hash == b.hash) {
        ++shared;
        break;
      }
  EXPECT_GE(shared + 2, before.size());
  EXPECT_LT(shared, before.size());
}

}  // namespace
}  // namespace hubfs::xet
