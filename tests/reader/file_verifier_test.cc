// Whole-file verification alone: blocks put in a memory tier by hand, what happened reported by
// the test as BlockReader reports it (blocks_arrived, read_reached_end, loaded_from_tiers), on
// one thread (the try_lock hand-off between threads is exercised by block_reader_test).
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
    return VerifiedFile{"data/f.bin", content_id_, memory_id_, content_.size(), 0, with_source_ ? &source_ : nullptr};
  }
  // Block b of `source` (the bytes "received") into memory, as BlockReader puts a block it loaded;
  // source_checked: as if fetched from the file's own checking source.
  FileVerifier::Batch::value_type put(uint64_t b, const std::string& source, bool source_checked = false) {
    const size_t len = std::min<size_t>(kBlock, source.size() - b * kBlock);
    BlockBytes bytes{std::make_shared<const std::string>(source.substr(b * kBlock, len)), 0, len, source_checked};
    memory_.put(BlockId{memory_id_, b, len}, bytes);
    return {b, bytes};
  }
  // Blocks `indices` into memory, then reported as one batch: the verdicts they were released
  // with, each block released once and in order (checked here).
  std::vector<Status> arrive_batch(FileVerifier& v, const std::vector<uint64_t>& indices, const std::string& source,
                                   bool source_checked = false) {
    FileVerifier::Batch batch;
    for (uint64_t b : indices) batch.push_back(put(b, source, source_checked));
    std::vector<Status> verdicts;
    v.blocks_arrived(file(), batch, [&](size_t i, const Status& verdict) {
      EXPECT_EQ(i, verdicts.size()) << "released out of order";
      verdicts.push_back(verdict);
    });
    EXPECT_EQ(verdicts.size(), batch.size()) << "every block is released before blocks_arrived returns";
    return verdicts;
  }
  // One block arrived alone: the verdict its waiters were released with.
  Status arrive(FileVerifier& v, uint64_t b, const std::string& source, bool source_checked = false) {
    std::vector<Status> verdicts = arrive_batch(v, {b}, source, source_checked);
    return verdicts.empty() ? Internal("not released") : verdicts[0];
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
      // As TierStack::drop_failed_file does: the file's blocks leave memory.
      ++corrupt_calls_;
      dropped_ = std::string(f.memory_id);
      dropped_epoch_ = f.epoch;
      for (uint64_t b = 0; b * kBlock < f.size; ++b) memory_.remove(BlockId{f.memory_id, b, 0});
    });
  }

  std::string content_, content_id_, memory_id_ = "sha256:the-file";
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
    EXPECT_TRUE(arrive(v, b, content_).ok()) << b;
    EXPECT_EQ(v.files_verified(), 0u) << b;
  }
  EXPECT_TRUE(arrive(v, 4, content_).ok());
  EXPECT_EQ(v.files_verified(), 1u);
  EXPECT_EQ(corrupt_calls_, 0);
  // The read of the last block asks again: the verdict stands, nothing is hashed twice.
  EXPECT_TRUE(v.read_reached_end(file()).ok());
  EXPECT_EQ(v.files_verified(), 1u);
}

// Blocks that came before the first one count as arrived while they are in memory; the hash
// then runs through them in order.
TEST_F(FileVerifierTest, BlocksOutOfOrderAreHashedInOrder) {
  FileVerifier v = make();
  for (uint64_t b : {3, 1, 4, 2}) EXPECT_TRUE(arrive(v, b, content_).ok()) << b;
  EXPECT_EQ(v.files_verified(), 0u) << "no hash without block 0";
  EXPECT_TRUE(arrive(v, 0, content_).ok());
  EXPECT_EQ(v.files_verified(), 1u);
}

// One flipped bit: the file's blocks of that epoch are dropped (on_corrupt, which moves the
// epoch), the arrival that finished the hash gets kCorrupt naming the file; the next pass hashes
// afresh.
TEST_F(FileVerifierTest, AMismatchDropsTheFileAndFailsTheArrival) {
  FileVerifier v = make();
  std::string bad = content_;
  bad[2 * kBlock + 7] ^= 0x20;
  for (uint64_t b = 0; b < 4; ++b) EXPECT_TRUE(arrive(v, b, bad).ok()) << b;
  EXPECT_EQ(corrupt_calls_, 0) << "nothing fails before the file is whole";
  Status last = arrive(v, 4, bad);
  EXPECT_EQ(last.code(), Code::kCorrupt);
  EXPECT_NE(last.message().find("data/f.bin"), std::string::npos) << last.message();
  EXPECT_EQ(v.failures(), 1u);
  EXPECT_EQ(corrupt_calls_, 1);
  EXPECT_EQ(dropped_, memory_id_);
  EXPECT_EQ(dropped_epoch_, 0u);
  // Good bytes fetched again verify.
  for (uint64_t b = 0; b < 5; ++b) EXPECT_TRUE(arrive(v, b, content_).ok()) << b;
  EXPECT_EQ(v.files_verified(), 1u);
  EXPECT_EQ(corrupt_calls_, 1);
}

// A file read at its first block alone (an HDF5 open) is not hashed: the hash begins with the
// first block past it, from the first block (still in memory), and the file verifies; or fails.
TEST_F(FileVerifierTest, TheFirstBlockAloneIsNotHashedUntilABlockPastItArrives) {
  for (bool corrupt : {false, true}) {
    SCOPED_TRACE(corrupt ? "corrupt" : "good");
    for (uint64_t b = 0; b < 5; ++b) memory_.remove(BlockId{memory_id_, b, 0});
    std::string bytes = content_;
    if (corrupt) bytes[5] ^= 1;  // in the first block
    FileVerifier v = make();
    EXPECT_TRUE(arrive(v, 0, bytes).ok());
    EXPECT_TRUE(arrive(v, 0, bytes).ok());  // read again: still nothing hashed
    EXPECT_EQ(v.blocks_hashed(), 0u);
    EXPECT_TRUE(arrive(v, 1, bytes).ok());
    EXPECT_EQ(v.blocks_hashed(), 2u);
    for (uint64_t b = 2; b < 4; ++b) EXPECT_TRUE(arrive(v, b, bytes).ok());
    EXPECT_EQ(arrive(v, 4, bytes).code(), corrupt ? Code::kCorrupt : Code::kOk);
    EXPECT_EQ(v.files_verified(), corrupt ? 0u : 1u);
    EXPECT_EQ(v.failures(), corrupt ? 1u : 0u);
  }
}

// The second block already in memory when the first arrives (read ahead, or read first), or a
// file of one block: the first block's arrival begins the hash.
TEST_F(FileVerifierTest, TheFirstBlockBeginsTheHashWhenTheSecondIsInMemoryOrItIsTheWholeFile) {
  FileVerifier v = make();
  EXPECT_TRUE(arrive(v, 1, content_).ok());
  EXPECT_EQ(v.blocks_hashed(), 0u) << "no hash without block 0";
  EXPECT_TRUE(arrive(v, 0, content_).ok());
  EXPECT_EQ(v.blocks_hashed(), 2u);
  const std::string one = content_.substr(0, 100);
  const std::string one_id = "sha256:" + sha256_hex(one);
  const std::string one_memory = "sha256:one-block";
  BlockBytes bytes{std::make_shared<const std::string>(one), 0, one.size()};
  memory_.put(BlockId{one_memory, 0, one.size()}, bytes);
  Status verdict = Internal("not released");
  v.blocks_arrived(VerifiedFile{"one.bin", one_id, one_memory, one.size()}, {{0, bytes}},
                   [&](size_t, const Status& s) { verdict = s; });
  EXPECT_TRUE(verdict.ok()) << verdict.message();
  EXPECT_EQ(v.files_verified(), 1u);
  EXPECT_EQ(v.blocks_hashed(), 3u);
}

// A block evicted before its turn stalls the hash: the file goes unverified, never fails.
TEST_F(FileVerifierTest, ABlockEvictedBeforeItsTurnLeavesTheFileUnverified) {
  FileVerifier v = make();
  arrive(v, 0, content_);
  arrive(v, 2, content_);
  memory_.remove(BlockId{memory_id_, 2, 0});
  arrive(v, 1, content_);
  arrive(v, 3, content_);
  EXPECT_TRUE(arrive(v, 4, content_).ok());
  EXPECT_EQ(v.files_verified(), 0u);
  EXPECT_EQ(v.failures(), 0u);
  EXPECT_TRUE(v.read_reached_end(file()).ok());
}

// A batch that leaves blocks missing is released whole before anything is hashed: a block the
// caller drops in its last release (as if evicted during the write-back) is not in the hash.
TEST_F(FileVerifierTest, ABatchIsReleasedBeforeItIsHashed) {
  FileVerifier v = make();
  std::vector<Status> verdicts;
  v.blocks_arrived(file(), {put(0, content_), put(1, content_)}, [&](size_t i, const Status& verdict) {
    verdicts.push_back(verdict);
    if (i == 1) memory_.remove(BlockId{memory_id_, 1, 0});
  });
  ASSERT_EQ(verdicts.size(), 2u);
  EXPECT_TRUE(verdicts[0].ok() && verdicts[1].ok());
  // The hash stopped at block 1: the rest of the file arrives, and it stays unverified.
  std::vector<Status> rest = arrive_batch(v, {2, 3, 4}, content_);
  EXPECT_TRUE(rest[2].ok());
  EXPECT_EQ(v.files_verified(), 0u);
  EXPECT_EQ(v.failures(), 0u);
}

// Without another thread hashing, the arrival hashes what memory holds in order at once: once in
// the hash, blocks may leave memory.
TEST_F(FileVerifierTest, ABatchIsHashedAtOnceWhenTheFileIsFree) {
  FileVerifier v = make();
  arrive_batch(v, {0, 1, 2}, content_);
  for (uint64_t b = 0; b < 3; ++b) memory_.remove(BlockId{memory_id_, b, 0});
  std::vector<Status> rest = arrive_batch(v, {3, 4}, content_);
  EXPECT_TRUE(rest[1].ok());
  EXPECT_EQ(v.files_verified(), 1u);
}

// The batch that completes the file: its other blocks are released before the hash, its last
// one with the verdict (here a failure, its blocks already dropped).
TEST_F(FileVerifierTest, TheCompletingBatchGivesItsLastBlockTheVerdict) {
  FileVerifier v = make();
  std::string bad = content_;
  bad[4 * kBlock + 3] ^= 1;
  FileVerifier::Batch batch;
  for (uint64_t b = 0; b < 5; ++b) batch.push_back(put(b, bad));
  std::vector<int> corrupt_calls_at_release;
  std::vector<Status> verdicts;
  v.blocks_arrived(file(), batch, [&](size_t, const Status& verdict) {
    corrupt_calls_at_release.push_back(corrupt_calls_);
    verdicts.push_back(verdict);
  });
  ASSERT_EQ(verdicts.size(), 5u);
  for (size_t i = 0; i < 4; ++i) {
    EXPECT_TRUE(verdicts[i].ok()) << i;
    EXPECT_EQ(corrupt_calls_at_release[i], 0) << i << ": released before the hash";
  }
  EXPECT_EQ(verdicts[4].code(), Code::kCorrupt);
  EXPECT_EQ(corrupt_calls_at_release[4], 1) << "released after the file's blocks were dropped";
  EXPECT_EQ(v.failures(), 1u);
}

// A read of the file's last block, every block in memory but the hash never told of them (its
// record pushed out, say): the read hashes the file and gets its verdict.
TEST_F(FileVerifierTest, AReadAtTheEndHashesAFileMemoryHoldsWhole) {
  std::string bad = content_;
  bad[kBlock] ^= 4;
  {
    FileVerifier v = make();
    for (uint64_t b = 0; b < 5; ++b) put(b, content_);
    EXPECT_TRUE(v.read_reached_end(file()).ok());
    EXPECT_EQ(v.files_verified(), 1u);
  }
  FileVerifier v = make();
  for (uint64_t b = 0; b < 5; ++b) put(b, bad);
  EXPECT_EQ(v.read_reached_end(file()).code(), Code::kCorrupt);
  EXPECT_EQ(corrupt_calls_, 1);
}

// With a block missing, the read at the end returns at once and nothing is decided.
TEST_F(FileVerifierTest, AReadAtTheEndWithABlockMissingIsOk) {
  FileVerifier v = make();
  std::string bad = content_;
  bad[0] ^= 1;
  for (uint64_t b : {0, 1, 2, 4}) put(b, bad);
  EXPECT_TRUE(v.read_reached_end(file()).ok());
  EXPECT_EQ(v.files_verified(), 0u);
  EXPECT_EQ(corrupt_calls_, 0);
}

// A loader far ahead of the hash takes its turn; one close behind it does not. (Blocks put in
// memory unreported stand for blocks another thread left to the one hashing.)
TEST_F(FileVerifierTest, ALoaderFarAheadOfTheHashCatchesItUp) {
  for (bool far : {false, true}) {
    SCOPED_TRACE(far ? "far" : "near");
    for (uint64_t b = 0; b < 5; ++b) memory_.remove(BlockId{memory_id_, b, 0});
    FileVerifier v = make();
    arrive(v, 0, content_);  // hashed at once
    for (uint64_t b = 1; b < 4; ++b) put(b, content_);
    v.loaded_from_tiers(file(), far ? 1000 : 3);
    EXPECT_EQ(v.files_verified(), 0u);
    // Blocks 0-3 in the hash (far) no longer stall it once evicted; else (near) they do.
    for (uint64_t b = 0; b < 4; ++b) memory_.remove(BlockId{memory_id_, b, 0});
    EXPECT_TRUE(arrive(v, 4, content_).ok());
    EXPECT_EQ(v.files_verified(), far ? 1u : 0u);
  }
}

TEST_F(FileVerifierTest, DisabledHashesNothing) {
  FileVerifier v = make({.block_size = kBlock, .enabled = false});
  std::string bad = content_;
  bad[0] ^= 1;
  EXPECT_EQ(arrive_batch(v, {0, 1}, bad).size(), 2u);
  for (uint64_t b = 2; b < 5; ++b) EXPECT_TRUE(arrive(v, b, bad).ok());
  EXPECT_TRUE(v.read_reached_end(file()).ok());
  v.loaded_from_tiers(file(), 1000);
  EXPECT_EQ(corrupt_calls_, 0);
  EXPECT_EQ(v.files_verified(), 0u);
}

// At most max_files hashes are kept: the oldest goes, and its file is simply not verified.
TEST_F(FileVerifierTest, OnlyTheNewestHashesAreKept) {
  FileVerifier v = make({.block_size = kBlock, .max_files = 1});
  arrive_batch(v, {0, 1}, content_);  // its hash begins
  EXPECT_EQ(v.blocks_hashed(), 2u);
  const std::string other_id = "sha256:other";
  BlockBytes one{std::make_shared<const std::string>("x"), 0, 1};
  memory_.put(BlockId{other_id, 0, 1}, one);
  const std::string other_content_id = "sha256:" + std::string(64, '0');
  VerifiedFile other{"o", other_content_id, other_id, 1};
  Status other_verdict;
  // Starts a second hash: the first one's record goes.
  v.blocks_arrived(other, {{0, one}}, [&](size_t, const Status& verdict) { other_verdict = verdict; });
  EXPECT_EQ(other_verdict.code(), Code::kCorrupt) << "the other file's one byte does not hash to zeros";
  for (uint64_t b = 2; b < 5; ++b) arrive(v, b, content_);
  // The first file's record went; its next arrival started a new one from the blocks in memory,
  // so it still verifies.
  EXPECT_EQ(v.files_verified(), 1u);
  EXPECT_EQ(v.failures(), 1u);
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
    EXPECT_TRUE(arrive(v, b, content_, true).ok()) << b;
    EXPECT_TRUE(v.read_reached_end(file()).ok()) << "incomplete: nothing to wait for";
  }
  EXPECT_EQ(source_.asked, 0) << "asked only once the file is complete";
  EXPECT_EQ(v.files_verified(), 0u);
  EXPECT_TRUE(arrive(v, 4, content_, true).ok());
  EXPECT_EQ(source_.asked, 1);
  EXPECT_EQ(v.files_verified(), 1u);
  EXPECT_EQ(v.files_verified_by_source(), 1u);
  EXPECT_EQ(corrupt_calls_, 0);
  EXPECT_TRUE(v.read_reached_end(file()).ok());  // the last block's read: the verdict stands
  EXPECT_EQ(source_.asked, 1);
}

// The source's mismatch is a failed hash: blocks dropped, the completing arrival and the last
// block's read get kCorrupt.
TEST_F(FileVerifierTest, TheSourcesMismatchFailsTheFileLikeAFailedHash) {
  with_source_ = true;
  source_.verdict = FileVerdict::kMismatch;
  FileVerifier v = make();
  for (uint64_t b = 0; b < 4; ++b) arrive(v, b, content_, true);
  Status last = arrive(v, 4, content_, true);
  EXPECT_EQ(last.code(), Code::kCorrupt);
  EXPECT_NE(last.message().find("Xet hash"), std::string::npos) << last.message();
  EXPECT_EQ(v.failures(), 1u);
  EXPECT_EQ(corrupt_calls_, 1);
  EXPECT_EQ(dropped_, memory_id_);
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
    EXPECT_TRUE(arrive(v, 4, content_, true).ok());
    EXPECT_EQ(v.files_verified(), 1u);
    EXPECT_EQ(v.files_verified_by_source(), 0u);
  }
  for (uint64_t b = 0; b < 5; ++b) memory_.remove(BlockId{memory_id_, b, 0});  // a fresh start
  std::string bad = content_;
  bad[3 * kBlock] ^= 1;
  FileVerifier v = make();
  for (uint64_t b = 0; b < 4; ++b) arrive(v, b, bad, true);
  EXPECT_EQ(arrive(v, 4, bad, true).code(), Code::kCorrupt);
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
  EXPECT_EQ(arrive(v, 4, content_, true).code(), Code::kCorrupt);
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
  EXPECT_TRUE(arrive(v, 4, content_, true).ok());
  EXPECT_EQ(source_.asked, 0);
  EXPECT_EQ(v.files_verified(), 1u);
  EXPECT_EQ(v.files_verified_by_source(), 0u);
}

// A batch of source-checked blocks with one from elsewhere in it: hashed, as one at a time.
TEST_F(FileVerifierTest, ABatchWithOneBlockFromElsewhereHasTheFileHashed) {
  with_source_ = true;
  source_.verdict = FileVerdict::kMatch;
  std::string bad = content_;
  bad[4 * kBlock] ^= 1;
  FileVerifier v = make();
  arrive_batch(v, {0, 1, 2, 3}, content_, true);
  FileVerifier::Batch last{put(4, bad, /*source_checked=*/false)};
  Status verdict;
  v.blocks_arrived(file(), last, [&](size_t, const Status& s) { verdict = s; });
  EXPECT_EQ(verdict.code(), Code::kCorrupt);
  EXPECT_EQ(source_.asked, 0);
}

}  // namespace
}  // namespace hubfs
