// Xet hashes against xet-core's and huggingface.js's reference values.
#include "xet/hash.h"

#include <gtest/gtest.h>

#include "merkle_vectors.h"

namespace hubfs::xet {
namespace HUBFS_UNITY_ID {

MerkleHash H(const char* hex) {
  auto h = MerkleHash::from_hex(hex);
  EXPECT_TRUE(h.has_value()) << hex;
  return h.value_or(MerkleHash{});
}

// xet-core data_hash.rs test_hash_hex_string_endianness: raw bytes and their text form.
TEST(XetHashTest, HexFormReversesEachEightByteWord) {
  const uint8_t raw[32] = {22,  175, 58, 132, 4,   75,  131, 214, 190, 153, 138, 66,  226, 3,   153, 242,
                           204, 86,  80, 234, 249, 153, 80,  99,  159, 80,  65,  138, 236, 231, 149, 78};
  MerkleHash h;
  std::memcpy(h.bytes.data(), raw, 32);
  EXPECT_EQ(h.hex(), "d6834b04843aaf16f29903e2428a99be635099f9ea5056cc4e95e7ec8a41509f");
  EXPECT_EQ(H("d6834b04843aaf16f29903e2428a99be635099f9ea5056cc4e95e7ec8a41509f"), h);
  EXPECT_EQ(H("D6834B04843AAF16F29903E2428A99BE635099F9EA5056CC4E95E7EC8A41509F"), h);
  EXPECT_EQ(h.word(0), 0xd6834b04843aaf16ull);
  EXPECT_EQ(h.word(3), 0x4e95e7ec8a41509full);
}

TEST(XetHashTest, FromHexRejectsMalformed) {
  EXPECT_FALSE(MerkleHash::from_hex(""));
  EXPECT_FALSE(MerkleHash::from_hex("abcdef"));
  EXPECT_FALSE(MerkleHash::from_hex(std::string(63, '0')));
  EXPECT_FALSE(MerkleHash::from_hex(std::string(65, '0')));
  EXPECT_FALSE(MerkleHash::from_hex(std::string(63, '0') + "g"));
  EXPECT_FALSE(MerkleHash::from_hex(std::string(62, '0') + " 1"));
  EXPECT_TRUE(MerkleHash::from_hex(std::string(64, '0')));
}

// xet-core aggregated_hashes.rs test_correctness: 18 chunk lists from empty to 100 chunks with
// sizes past 2^32, each with its xorb hash and three salted file hashes.
TEST(XetHashTest, XorbAndFileHashesMatchXetCoreReference) {
  const auto& vectors = test::merkle_vectors();
  ASSERT_EQ(vectors.size(), 18u);
  for (size_t i = 0; i < vectors.size(); ++i) {
    const auto& v = vectors[i];
    std::vector<HashAndSize> chunks;
    for (const auto& c : v.chunks) chunks.push_back({H(c.hash_hex), c.size});
    EXPECT_EQ(xorb_hash(chunks).hex(), v.xorb_hash_hex) << "case " << i;
    for (const auto& s : v.file_hashes) {
      EXPECT_EQ(file_hash_with_salt(chunks, H(s.salt_hex)).hex(), s.file_hash_hex) << "case " << i;
    }
    EXPECT_EQ(file_hash(chunks).hex(), v.file_hashes[0].file_hash_hex) << "case " << i;
  }
}

// One internal node by hand: the format of hashing.md's example (lines "{hex} : {size}\n").
TEST(XetHashTest, MergeNodesHashesTheDocumentedLines) {
  const std::vector<HashAndSize> children = {
      {H("1f6a2b8e9d3c4075a2e8c5fd4f0b763e6f3c1d7a9b2e6487de3f91ab7c6d5401"), 10000},
      {H("7c94fe2a38bdcf9b4d2a6f7e1e08ac35bc24a7903d6f5a0e7d1c2b93e5f748de"), 20000},
      {H("cfd18a92e0743bb09e56dbf76ea2c34d99b5a0cf271f8d429b6cd148203df061"), 25000},
      {H("e38d7c09a21b4cf8d0f92b3a85e6df19f7c20435e0b1c78a9d635f7b8c2e4da1"), 64000},
  };
  const std::string text =
      "1f6a2b8e9d3c4075a2e8c5fd4f0b763e6f3c1d7a9b2e6487de3f91ab7c6d5401 : 10000\n"
      "7c94fe2a38bdcf9b4d2a6f7e1e08ac35bc24a7903d6f5a0e7d1c2b93e5f748de : 20000\n"
      "cfd18a92e0743bb09e56dbf76ea2c34d99b5a0cf271f8d429b6cd148203df061 : 25000\n"
      "e38d7c09a21b4cf8d0f92b3a85e6df19f7c20435e0b1c78a9d635f7b8c2e4da1 : 64000\n";
  const auto node = merge_nodes(children.data(), children.size());
  EXPECT_EQ(node.size, 119000u);
  EXPECT_EQ(node.hash.bytes, Blake3::keyed_hash(kInternalNodeKey, text.data(), text.size()));
}

TEST(XetHashTest, ChunkHashIsKeyedBlake3AndIncrementalAgrees) {
  std::string data(200000, '\0');
  for (size_t i = 0; i < data.size(); ++i) data[i] = static_cast<char>(i * 7 + 13);
  const auto h = chunk_hash(data.data(), data.size());
  EXPECT_EQ(h.bytes, Blake3::keyed_hash(kDataKey, data.data(), data.size()));
  ChunkHasher inc;
  inc.update(data.data(), 12345);
  inc.update(data.data() + 12345, data.size() - 12345);
  EXPECT_EQ(inc.finalize(), h);
  // A one-byte change changes the hash.
  data[100000] ^= 1;
  EXPECT_NE(chunk_hash(data.data(), data.size()), h);
}

// huggingface.js packages/xetchunk-wasm/tests/index.test.ts ("verified against Rust thin-wasm").
TEST(XetHashTest, HmacAndVerificationHashMatchHuggingfaceJs) {
  const auto hash = H("118bbac5c38b2bca9c2b7ae8307786de066696b91b2b5ccb7dbbd4608c966882");
  const auto key = H("abcdef0123456789abcdef0123456789abcdef0123456789abcdef0123456789");
  MerkleHash hm;
  hm.bytes = Blake3::keyed_hash(key.bytes, hash.bytes.data(), hash.bytes.size());
  EXPECT_EQ(hm.hex(), "1e1f5ae2bae99fe030647a14a8c5fe6cdce57826387a7552236dfbebed533e04");

  const MerkleHash run[2] = {hash, H("7884d4de4bcc904767362a91e97eb6c2b6bc5f3a61b640d0cad8bb1129ff0827")};
  EXPECT_EQ(range_verification_hash(run, 2).hex(), "82d580dd3896919ef870af78b2c7bd21e67e79777922bbc8cef1fc21630c308c");
}

TEST(XetHashTest, EmptyFileHashIsZero) {
  EXPECT_EQ(file_hash({}).hex(), std::string(64, '0'));
  EXPECT_EQ(xorb_hash({}).hex(), std::string(64, '0'));
}

}  // namespace
}  // namespace hubfs::xet
