// XetFileChecks (xet/file_check.h): the chunks reads served decide the file once they tile it;
// reordered chunks, a gap, or two different chunks at one offset never match; a mismatch is
// reported once; a match hands the fetched chunks over as runs for the chunk cache.
#include "xet/file_check.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace hubfs::xet {
namespace HUBFS_UNITY_ID {

struct FileOfChunks {
  std::vector<std::string> contents;
  std::vector<ServedChunk> chunks;
  MerkleHash file;
  MerkleHash xorb;
  uint64_t size = 0;
  explicit FileOfChunks(int n) {
    xorb.bytes[0] = 9;
    std::vector<HashAndSize> list;
    for (int i = 0; i < n; ++i) {
      contents.push_back(std::string(1000 + i, static_cast<char>('a' + i)));
      HashAndSize h{chunk_hash(contents.back().data(), contents.back().size()), contents.back().size()};
      list.push_back(h);
      chunks.push_back({h, xorb, static_cast<uint32_t>(i), false});
      size += h.size;
    }
    file = file_hash(list);
  }
  uint64_t offset_of(size_t i) const {
    uint64_t o = 0;
    for (size_t k = 0; k < i; ++k) o += chunks[k].chunk.size;
    return o;
  }
};

TEST(XetFileChecksTest, ChunksThatTileTheFileDecideItAndMatchingOnesGoToTheCache) {
  FileOfChunks f(6);
  XetFileChecks checks(4);
  // Out of order reads, one from the chunk cache: undecided until the last piece.
  auto first = std::vector<ServedChunk>(f.chunks.begin() + 3, f.chunks.end());
  EXPECT_EQ(checks.record(f.file, f.size, f.offset_of(3), first, "key").verdict, FileVerdict::kUnknown);
  auto cached = f.chunks[2];
  cached.from_cache = true;
  EXPECT_EQ(checks.record(f.file, f.size, f.offset_of(2), {cached}, "key").verdict, FileVerdict::kUnknown);
  EXPECT_EQ(checks.verdict(f.file), FileVerdict::kUnknown);
  auto done = checks.record(f.file, f.size, 0, {f.chunks[0], f.chunks[1]}, "key");
  EXPECT_EQ(done.verdict, FileVerdict::kMatch);
  EXPECT_EQ(done.block_key, "key");
  // Chunks 0-1 and 3-5: the cached one is not offered again, so two runs.
  ASSERT_EQ(done.verified_runs.size(), 2u);
  EXPECT_EQ(done.verified_runs[0].first, 0u);
  EXPECT_EQ(done.verified_runs[0].chunks.size(), 2u);
  EXPECT_EQ(done.verified_runs[1].first, 3u);
  EXPECT_EQ(done.verified_runs[1].file_offset, f.offset_of(3));
  EXPECT_EQ(done.verified_runs[1].chunks.size(), 3u);
  EXPECT_EQ(checks.verdict(f.file), FileVerdict::kMatch);
  EXPECT_EQ(checks.files_verified(), 1u);
  EXPECT_EQ(checks.verified_bytes(), f.size);
}

TEST(XetFileChecksTest, ReorderedChunksNeverMatchAndAreReportedOnce) {
  FileOfChunks f(6);
  XetFileChecks checks(4);
  auto swapped = f.chunks;
  std::swap(swapped[1], swapped[2]);
  // Another read served the first chunk: the verdict is the file reader's to take.
  EXPECT_EQ(checks.record(f.file, f.size, 0, {swapped[0]}, "key").verdict, FileVerdict::kUnknown);
  auto done = checks.record(f.file, f.size, f.offset_of(1), {swapped.begin() + 1, swapped.end()}, "key");
  EXPECT_EQ(done.verdict, FileVerdict::kMismatch);
  EXPECT_FALSE(done.dropped);
  EXPECT_TRUE(done.verified_runs.empty());
  EXPECT_EQ(checks.verdict(f.file), FileVerdict::kMismatch);
  EXPECT_EQ(checks.verdict(f.file), FileVerdict::kUnknown) << "reported once, then forgotten";
  EXPECT_EQ(checks.record(f.file, f.size, 0, f.chunks, "key").verdict, FileVerdict::kMatch) << "afresh";
}

// A read that alone tiles the file is decided before it answers: on a mismatch nothing of it was
// served, so the record is dropped (the reader fetches the file again) and no verdict is left.
TEST(XetFileChecksTest, AMismatchOfOneCallAloneLeavesNoVerdict) {
  FileOfChunks f(6);
  XetFileChecks checks(4);
  auto swapped = f.chunks;
  std::swap(swapped[1], swapped[2]);
  auto done = checks.record(f.file, f.size, 0, swapped, "key");
  EXPECT_EQ(done.verdict, FileVerdict::kMismatch);
  EXPECT_TRUE(done.dropped);
  EXPECT_EQ(checks.mismatches(), 1u);
  EXPECT_EQ(checks.verdict(f.file), FileVerdict::kUnknown);
  EXPECT_EQ(checks.record(f.file, f.size, 0, f.chunks, "key").verdict, FileVerdict::kMatch);
}

TEST(XetFileChecksTest, TwoDifferentChunksAtOneOffsetAreAMismatchAtOnce) {
  FileOfChunks f(4);
  XetFileChecks checks(4);
  EXPECT_EQ(checks.record(f.file, f.size, 0, {f.chunks[0]}, "").verdict, FileVerdict::kUnknown);
  auto other = f.chunks[0];
  other.chunk.hash.bytes[5] ^= 1;
  auto done = checks.record(f.file, f.size, 0, {other}, "");
  EXPECT_EQ(done.verdict, FileVerdict::kMismatch);
  EXPECT_NE(done.why.find("different chunks"), std::string::npos);
  EXPECT_EQ(checks.mismatches(), 1u);
}

TEST(XetFileChecksTest, RepeatedChunksLeaveAGapAndDecideNothing) {
  FileOfChunks f(4);
  XetFileChecks checks(4);
  // A plan repeating chunk 0 where 1 should be: the bytes add up, the offsets do not tile.
  std::vector<ServedChunk> repeated = {f.chunks[0], f.chunks[0], f.chunks[2], f.chunks[3]};
  const uint64_t size = f.chunks[0].chunk.size * 2 + f.chunks[2].chunk.size + f.chunks[3].chunk.size;
  EXPECT_NE(checks.record(f.file, size, 0, repeated, "").verdict, FileVerdict::kMatch);
}

TEST(XetFileChecksTest, PastMaxFilesTheOldestGoesUnchecked) {
  FileOfChunks a(2), b(3);
  XetFileChecks checks(1);
  EXPECT_EQ(checks.record(a.file, a.size, 0, {a.chunks[0]}, "").verdict, FileVerdict::kUnknown);
  EXPECT_EQ(checks.record(b.file, b.size, 0, {b.chunks[0]}, "").verdict, FileVerdict::kUnknown);
  EXPECT_EQ(checks.record(a.file, a.size, a.offset_of(1), {a.chunks[1]}, "").verdict, FileVerdict::kUnknown)
      << "a's first chunk was forgotten with its record";
}

}  // namespace
}  // namespace hubfs::xet
