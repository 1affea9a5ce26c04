#include "cache/block_file.h"

#include <gtest/gtest.h>

#include <set>

namespace hubfs::block_file {
namespace HUBFS_UNITY_ID {

const std::string kSha = "sha256:" + std::string(64, 'a');
const std::string kOid = "oid:" + std::string(40, 'b');

TEST(BlockFileName, ContentIdsAreEscapedReadably) {
  EXPECT_EQ(file_name(kSha, digest_content_id(kSha), 3), "sha256_c" + std::string(64, 'a') + ".3");
  EXPECT_EQ(file_name(kOid, digest_content_id(kOid), 0), "oid_c" + std::string(40, 'b') + ".0");
}

TEST(BlockFileName, DistinctIdsNeverShareAName) {
  // Pairs a lossy sanitiser would merge: ':' vs '_', and escapes vs their literal spelling.
  const std::vector<std::string> ids = {"a:b",
                                        "a_b",
                                        "a_cb",
                                        "a__b",
                                        "a-b",
                                        "a.b",
                                        "a/b",
                                        "a b",
                                        "_h00",
                                        "",
                                        ".",
                                        "..",
                                        ".tmp.1",
                                        std::string(300, 'x'),
                                        std::string(301, 'x'),
                                        "é"};
  std::set<std::string> names;
  for (const auto& id : ids) {
    std::string name = file_name(id, digest_content_id(id), 1);
    EXPECT_TRUE(names.insert(name).second) << id << " -> " << name;
    EXPECT_NE(name.front(), '.') << id;
    EXPECT_FALSE(is_temp_name(name)) << id;
    EXPECT_LT(name.size(), 255u) << id;
    for (char c : name)
      EXPECT_TRUE(isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '-' || c == '.') << id;
  }
}

TEST(BlockFileName, OnlyNamesAndSizesABlockCanHaveAreBlocks) {
  const uint64_t ok_size = kHeaderSize + 1000;
  for (const std::string& id : {"sha256:" + std::string(64, 'a'), std::string("oid:0123_x"), std::string(300, 'z'),
                               std::string("a b/c")}) {
    const auto d = digest_content_id(id);
    for (uint64_t index : {0ull, 7ull, 18446744073709551615ull}) {
      const std::string name = file_name(id, d, index);
      EXPECT_TRUE(is_block_file(name, ok_size)) << name;
      EXPECT_TRUE(is_block_file(name, kHeaderSize)) << "an empty block: " << name;
      EXPECT_TRUE(is_block_file(name, kHeaderSize + kMaxDataBytes)) << name;
      EXPECT_FALSE(is_block_file(name, kHeaderSize - 1)) << name;
      EXPECT_FALSE(is_block_file(name, kHeaderSize + kMaxDataBytes + 1)) << name;
      EXPECT_FALSE(is_block_file(name, 10ull << 30)) << name;
    }
  }
  for (const char* junk : {"junk.img", "junk", ".tmp.1.2.3", ".hidden.0", "a b.0", "x.", ".0", "_x.0", "a_.0",
                           "_habc.0", "sha256_cabc.-1", "sha256_cabc.123456789012345678901"}) {
    EXPECT_FALSE(is_block_file(junk, ok_size)) << junk;
  }
}

TEST(BlockFileName, ShardIsTwoHexDigits) {
  std::string shard = shard_name(digest_content_id(kSha));
  ASSERT_EQ(shard.size(), 2u);
  EXPECT_EQ(shard.find_first_not_of("0123456789abcdef"), std::string::npos) << shard;
}

TEST(BlockFileFormat, RoundTripsAndRejectsOtherKeys) {
  const Digest d = digest_content_id(kSha);
  const std::string file = encode(d, 5, "hello");
  ASSERT_EQ(file.size(), kHeaderSize + 5);
  EXPECT_TRUE(verify(file, d, 5).ok());
  EXPECT_EQ(file.substr(kHeaderSize), "hello");
  EXPECT_EQ(verify(file, d, 6).code(), Code::kCorrupt);
  EXPECT_EQ(verify(file, digest_content_id(kOid), 5).code(), Code::kCorrupt);
  EXPECT_TRUE(verify(encode(d, 0, ""), d, 0).ok());
}

TEST(BlockFileFormat, EverySingleBitFlipIsCaught) {
  const Digest d = digest_content_id(kOid);
  const std::string good = encode(d, 9, std::string(200, 'z'));
  for (size_t bit = 0; bit < good.size() * 8; ++bit) {
    std::string bad = good;
    bad[bit / 8] ^= static_cast<char>(1 << (bit % 8));
    EXPECT_FALSE(verify(bad, d, 9).ok()) << "bit " << bit;
  }
}

TEST(BlockFileFormat, ShortOrExtendedFilesAreCaught) {
  const Digest d = digest_content_id(kOid);
  const std::string good = encode(d, 1, "0123456789");
  for (size_t n = 0; n < good.size(); ++n) EXPECT_FALSE(verify(good.substr(0, n), d, 1).ok()) << n;
  EXPECT_FALSE(verify(good + "x", d, 1).ok());
}

}  // namespace
}  // namespace hubfs::block_file
