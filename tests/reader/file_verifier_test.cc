// Whole-file verification alone: blocks put in a memory tier by hand, arrivals reported by the
// test, on one thread (the try_lock hand-off between threads is exercised by block_reader_test).
#include "reader/file_verifier.h"

#include <random>

#include <gtest/gtest.h>

#include "support/digest.h"

namespace hubfs {
namespace HUBFS_UNITY_ID {

constexpr uint32_t kBlock = 1024;

using testing::sha256_hex;

class FileVerifierTest : public ::testing::Test {
 protected:
  FileVerifierTest() {
    std::mt19937 rng(5);
    content_.resize(4 * kBlock + 100);  // 5 blocks, the last one short
    for (char& c : content_) c = static_cast<char>(rng());
    content_id_ = "sha256:" + sha256_hex(content_);
  }
  VerifiedFile file() const {
    return VerifiedFile{"data/f.bin", content_id_, cache_id_, content_.size(), 0, with_source_ ? &source_ : nullptr};
  }
  // Block b into memory (from `source`, the bytes "received"), then reported as arrived;
  // source_checked: as if fetched from the file's own checking source.
  FileVerifier::Arrival arrive(FileVerifier& v, uint64_t b, const std::string& source, bool source_checked = false) {
    const size_t len = std::min<size_t>(kBlock, source.size() - b * kBlock);
    memory_.put(BlockId{cache_id_, b, len},
                BlockBytes{std::make_shared<const std::string>(source.substr(b * kBlock, len)), 0, len, source_checked});
    return v.on_arrival(file(), b, source_checked);
  }
  // A source with a verdict the test sets, counting how often it is asked.
  struct FakeSource : RangeSource {
    void fetch_async(uint64_t, ByteRange, Callback, Deadline) override { ADD_FAILURE() << "not for fetching"; }
    FileVerdict file_verdict() override {
      ++asked;
      return verdict;
    }
    FileVerdict verdict = FileVerdict::kUnknown;
    int asked = 0;
  };
  FileVerifier make(FileVerifierOptions o = {.block_size = kBlock}) {
    return FileVerifier(memory_, o, [this](const VerifiedFile& f) {
      // As BlockTiers::drop_failed_file does: the file's blocks leave memory.
      ++corrupt_calls_;
      dropped_ = std::string(f.cache_id);
      dropped_epoch_ = f.epoch;
      for (uint64_t b = 0; b * kBlock < f.size; ++b) memory_.remove(BlockId{f.cache_id, b, 0});
    });
  }

  std::string content_, content_id_, cache_id_ = "sha256:the-file";
  mutable FakeSource source_;
  bool with_source_ = false;
  MemoryTier memory_{1 << 20};
  int corrupt_calls_ = 0;
  std::string dropped_;
  uint64_t dropped_epoch_ = UINT64_MAX;
};

TEST_F(FileVerifierTest, BlocksInOrderVerifyAndTheLastArrivalGetsTheVerdict) {
  FileVerifier v = make();
  for (uint64_t b = 0; b < 4; ++b) {
    FileVerifier::Arrival a = arrive(v, b, content_);
    EXPECT_FALSE(a.completed_file) << b;
    EXPECT_TRUE(v.advance(file(), /*wait=*/false).ok());
  }
  FileVerifier::Arrival last = arrive(v, 4, content_);
  EXPECT_TRUE(last.completed_file);
  EXPECT_TRUE(last.verdict.ok());
  EXPECT_EQ(v.files_verified(), 1u);
  EXPECT_EQ(corrupt_calls_, 0);
  // A later read of the last block asks again: the verdict stands, nothing is hashed twice.
  EXPECT_TRUE(v.advance(file(), /*wait=*/true).ok());
  EXPECT_EQ(v.files_verified(), 1u);
}

// Blocks that came before the first one count as arrived while they are in memory; the hash
// then runs through them in order.
TEST_F(FileVerifierTest, BlocksOutOfOrderAreHashedInOrder) {
  FileVerifier v = make();
  for (uint64_t b : {3, 1, 4, 2}) EXPECT_FALSE(arrive(v, b, content_).completed_file) << b;  // no hash without block 0
  FileVerifier::Arrival first = arrive(v, 0, content_);
  EXPECT_TRUE(first.completed_file);
  EXPECT_TRUE(first.verdict.ok());
  EXPECT_EQ(v.files_verified(), 1u);
}

// One flipped bit: the file's blocks of that epoch are dropped (on_corrupt, which moves the
// epoch), the arrival that finished the hash gets kCorrupt naming the file; the next pass hashes
// afresh.
TEST_F(FileVerifierTest, AMismatchDropsTheFileAndFailsTheArrival) {
  FileVerifier v = make();
  std::string bad = content_;
  bad[2 * kBlock + 7] ^= 0x20;
  for (uint64_t b = 0; b < 4; ++b) arrive(v, b, bad);
  FileVerifier::Arrival last = arrive(v, 4, bad);
  ASSERT_TRUE(last.completed_file);
  EXPECT_EQ(last.verdict.code(), Code::kCorrupt);
  EXPECT_NE(last.verdict.message().find("data/f.bin"), std::string::npos) << last.verdict.message();
  EXPECT_EQ(v.failures(), 1u);
  EXPECT_EQ(corrupt_calls_, 1);
  EXPECT_EQ(dropped_, cache_id_);
  EXPECT_EQ(dropped_epoch_, 0u);
  // Good bytes fetched again verify.
  for (uint64_t b = 0; b < 5; ++b) arrive(v, b, content_);
  EXPECT_EQ(v.files_verified(), 1u);
  EXPECT_EQ(corrupt_calls_, 1);
}

// A block evicted before its turn stalls the hash: the file goes unverified, never fails.
TEST_F(FileVerifierTest, ABlockEvictedBeforeItsTurnLeavesTheFileUnverified) {
  FileVerifier v = make();
  arrive(v, 0, content_);
  arrive(v, 2, content_);
  memory_.remove(BlockId{cache_id_, 2, 0});
  arrive(v, 1, content_);
  arrive(v, 3, content_);
  FileVerifier::Arrival last = arrive(v, 4, content_);
  EXPECT_TRUE(last.completed_file);
  EXPECT_TRUE(last.verdict.ok());
  EXPECT_EQ(v.files_verified(), 0u);
  EXPECT_EQ(v.failures(), 0u);
}

// A loader far ahead of the hash takes its turn; one close behind it does not.
TEST_F(FileVerifierTest, ALoaderFarAheadOfTheHashCatchesItUp) {
  FileVerifier v = make();
  arrive(v, 0, content_);
  arrive(v, 1, content_);
  v.catch_up(file(), 2);  // within the lag: nothing hashed
  arrive(v, 2, content_);
  arrive(v, 3, content_);
  v.catch_up(file(), 1000);  // far past: hashes what is in memory
  EXPECT_EQ(v.files_verified(), 0u);
  // Blocks 0-3 are in the hash now: evicting them no longer stalls it.
  for (uint64_t b = 0; b < 4; ++b) memory_.remove(BlockId{cache_id_, b, 0});
  FileVerifier::Arrival last = arrive(v, 4, content_);
  EXPECT_TRUE(last.verdict.ok());
  EXPECT_EQ(v.files_verified(), 1u);
}

TEST_F(FileVerifierTest, DisabledHashesNothing) {
  FileVerifier v = make({.block_size = kBlock, .enabled = false});
  std::string bad = content_;
  bad[0] ^= 1;
  for (uint64_t b = 0; b < 5; ++b) EXPECT_FALSE(arrive(v, b, bad).completed_file);
  EXPECT_TRUE(v.advance(file(), true).ok());
  EXPECT_EQ(corrupt_calls_, 0);
}

// At most max_files hashes are kept: the oldest goes, and its file is simply not verified.
TEST_F(FileVerifierTest, OnlyTheNewestHashesAreKept) {
  FileVerifier v = make({.block_size = kBlock, .max_files = 1});
  arrive(v, 0, content_);
  const std::string other_id = "sha256:other";
  memory_.put(BlockId{other_id, 0, 1}, BlockBytes{std::make_shared<const std::string>("x"), 0, 1});
  const std::string other_content_id = "sha256:" + std::string(64, '0');
  VerifiedFile other{"o", other_content_id, other_id, 1};
  (void)v.on_arrival(other, 0);  // starts a second hash: the first one's record goes
  for (uint64_t b = 1; b < 5; ++b) arrive(v, b, content_);
  // The first file's record went; its next arrival started a new one from the blocks in memory,
  // so it still verifies, and the other file's one byte (which does not hash to zeros) failed.
  EXPECT_EQ(v.files_verified(), 1u);
  EXPECT_EQ(v.failures(), 1u);  // the other file's one byte does not hash to zeros
  EXPECT_EQ(corrupt_calls_, 1);
  EXPECT_EQ(dropped_, other_id);
}

// A file whose every block came from its own checking source is not hashed: the source's
// verdict stands. (The content id is wrong here: a hash would fail.)
TEST_F(FileVerifierTest, AFileItsSourceCheckedTakesTheSourcesMatchUnhashed) {
  with_source_ = true;
  content_id_ = "sha256:" + std::string(64, '0');
  source_.verdict = FileVerdict::kMatch;
  FileVerifier v = make();
  for (uint64_t b : {0, 3, 1, 2}) {
    EXPECT_FALSE(arrive(v, b, content_, true).completed_file) << b;
    EXPECT_TRUE(v.advance(file(), /*wait=*/false).ok());
    EXPECT_TRUE(v.advance(file(), /*wait=*/true).ok()) << "incomplete: nothing to wait for";
  }
  EXPECT_EQ(source_.asked, 0) << "asked only once the file is complete";
  FileVerifier::Arrival last = arrive(v, 4, content_, true);
  EXPECT_TRUE(last.completed_file);
  EXPECT_TRUE(last.verdict.ok()) << last.verdict.message();
  EXPECT_EQ(source_.asked, 1);
  EXPECT_EQ(v.files_verified(), 1u);
  EXPECT_EQ(v.files_verified_by_source(), 1u);
  EXPECT_EQ(corrupt_calls_, 0);
  EXPECT_TRUE(v.advance(file(), /*wait=*/true).ok());  // the last block's read: the verdict stands
  EXPECT_EQ(source_.asked, 1);
}

// The source's mismatch is a failed hash: blocks dropped, the completing arrival and the last
// block's read get kCorrupt.
TEST_F(FileVerifierTest, TheSourcesMismatchFailsTheFileLikeAFailedHash) {
  with_source_ = true;
  source_.verdict = FileVerdict::kMismatch;
  FileVerifier v = make();
  for (uint64_t b = 0; b < 4; ++b) arrive(v, b, content_, true);
  FileVerifier::Arrival last = arrive(v, 4, content_, true);
  ASSERT_TRUE(last.completed_file);
  EXPECT_EQ(last.verdict.code(), Code::kCorrupt);
  EXPECT_NE(last.verdict.message().find("Xet hash"), std::string::npos) << last.verdict.message();
  EXPECT_EQ(v.failures(), 1u);
  EXPECT_EQ(corrupt_calls_, 1);
  EXPECT_EQ(dropped_, cache_id_);
  EXPECT_EQ(v.files_verified(), 0u);
}

// Without the source's verdict (it dropped its records), the file is hashed after all, from the
// blocks in memory: good bytes verify, bad ones fail.
TEST_F(FileVerifierTest, WithoutTheSourcesVerdictTheFileIsHashed) {
  with_source_ = true;
  source_.verdict = FileVerdict::kUnknown;
  {
    FileVerifier v = make();
    for (uint64_t b = 0; b < 4; ++b) arrive(v, b, content_, true);
    EXPECT_TRUE(arrive(v, 4, content_, true).verdict.ok());
    EXPECT_EQ(v.files_verified(), 1u);
    EXPECT_EQ(v.files_verified_by_source(), 0u);
  }
  for (uint64_t b = 0; b < 5; ++b) memory_.remove(BlockId{cache_id_, b, 0});  // a fresh start
  std::string bad = content_;
  bad[3 * kBlock] ^= 1;
  FileVerifier v = make();
  for (uint64_t b = 0; b < 4; ++b) arrive(v, b, bad, true);
  EXPECT_EQ(arrive(v, 4, bad, true).verdict.code(), Code::kCorrupt);
  EXPECT_EQ(corrupt_calls_, 1);
}

// One block from elsewhere (a bridge fallback, the disk cache) and the whole file is hashed,
// whatever the source says of the bytes it served: here a bad block from elsewhere is caught.
TEST_F(FileVerifierTest, OneBlockFromElsewhereHasTheWholeFileHashed) {
  with_source_ = true;
  source_.verdict = FileVerdict::kMatch;
  std::string bad = content_;
  bad[2 * kBlock + 1] ^= 1;
  FileVerifier v = make();
  arrive(v, 0, content_, true);
  arrive(v, 1, content_, true);
  arrive(v, 2, bad, /*source_checked=*/false);
  arrive(v, 3, content_, true);
  FileVerifier::Arrival last = arrive(v, 4, content_, true);
  ASSERT_TRUE(last.completed_file);
  EXPECT_EQ(last.verdict.code(), Code::kCorrupt);
  EXPECT_EQ(corrupt_calls_, 1);
  EXPECT_EQ(source_.asked, 0);
}

// The same when that block was in memory before the hash's record began (it arrived ahead of
// block 0), and for a file with no source of its own: good bytes hash and verify.
TEST_F(FileVerifierTest, BlocksFromElsewhereBeforeTheFirstStillHaveTheFileHashed) {
  with_source_ = true;
  source_.verdict = FileVerdict::kMismatch;  // would fail the file if it were asked
  FileVerifier v = make();
  arrive(v, 3, content_, /*source_checked=*/false);
  for (uint64_t b : {0, 1, 2}) arrive(v, b, content_, true);
  EXPECT_TRUE(arrive(v, 4, content_, true).verdict.ok());
  EXPECT_EQ(source_.asked, 0);
  EXPECT_EQ(v.files_verified(), 1u);
  EXPECT_EQ(v.files_verified_by_source(), 0u);
}

}  // namespace
}  // namespace hubfs
