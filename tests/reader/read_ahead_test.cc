// The read-ahead policy alone: reads in, ranges out, no threads, no network.
#include "reader/read_ahead.h"

#include <gtest/gtest.h>

namespace hubfs {
namespace HUBFS_UNITY_ID {

constexpr uint64_t kMiB = 1 << 20;

class ReadAheadPolicyTest : public ::testing::Test {
 protected:
  // 1 MiB blocks, windows of 4..128 blocks, requests of up to 8 blocks over 16 connections, runs
  // of 2 blocks before read-ahead, a window of at most 0.4 of the run past the first: the mount's
  // defaults.
  ReadAheadPolicy policy_{ReadAheadOptions{}};
  ReadAheadState state_;

  // A read that missed (its blocks came over the network), as BlockReader reports it.
  static ReadFacts missed(bool hinted = false) {
    ReadFacts f;
    f.missed = true;
    f.hinted = hinted;
    return f;
  }
  // A read of `blocks` whole blocks starting at block `first` that missed, as the caller records it.
  std::optional<ReadAheadPlan> read(uint64_t first, uint64_t blocks, uint64_t file_blocks = 1000,
                                    bool hinted = false) {
    return read_with(first, blocks, missed(hinted), file_blocks);
  }
  std::optional<ReadAheadPlan> read_with(uint64_t first, uint64_t blocks, const ReadFacts& facts,
                                         uint64_t file_blocks = 1000) {
    auto r = policy_.on_read(state_, first * kMiB, (first + blocks) * kMiB, file_blocks * kMiB, facts);
    if (r) state_.prefetched_to = r->blocks.last + 1;  // the caller fetched all of it
    return r;
  }
  // Reads blocks [from, to) one by one; returns the blocks asked for ahead.
  uint64_t stream(uint64_t from, uint64_t to, uint64_t file_blocks = 1000) {
    uint64_t asked = 0;
    for (uint64_t b = from; b < to; ++b)
      if (auto r = read(b, 1, file_blocks)) asked += r->blocks.count();
    return asked;
  }
};

TEST_F(ReadAheadPolicyTest, AFirstReadIsNotSequentialAndFetchesNothingAhead) {
  EXPECT_EQ(read(0, 1), std::nullopt);
  EXPECT_EQ(state_.window_blocks, 0u);
  EXPECT_EQ(state_.next_offset, kMiB);
}

TEST_F(ReadAheadPolicyTest, ARunEarnsReadAheadOnlyPastAnMmapFaultsReadAround) {
  // A fault's read-around: one kernel read of 1 MiB (read_ahead_kb), not aligned to a block, so
  // it spans two. No read-ahead for that.
  EXPECT_EQ(policy_.on_read(state_, 100 * kMiB + kMiB / 2, 101 * kMiB + kMiB / 2, 1000 * kMiB, missed()), std::nullopt);
  // The stream's second 1 MiB read: two blocks read in order, a stream. Its window is the first
  // one, min_readahead_blocks (0.4 of the run is less).
  auto r = policy_.on_read(state_, 101 * kMiB + kMiB / 2, 102 * kMiB + kMiB / 2, 1000 * kMiB, missed());
  ASSERT_TRUE(r.has_value());
  EXPECT_EQ(state_.window_blocks, 4u);
  EXPECT_EQ(*r, (ReadAheadPlan{BlockRange{103, 106}, 1}));
  // Two aligned blocks read one at a time earn it as well, at the second.
  state_ = ReadAheadState{};
  EXPECT_EQ(read(200, 1), std::nullopt);
  r = read(201, 1);
  ASSERT_TRUE(r.has_value());
  EXPECT_EQ(state_.window_blocks, 4u);
  EXPECT_EQ(*r, (ReadAheadPlan{BlockRange{202, 205}, 1}));
  // Fifteen blocks on, 6 blocks (0.4 of a run of 15, past the first window) go as 1-block
  // requests, on six connections at once.
  stream(202, 215);
  r = read(215, 1);
  ASSERT_TRUE(r.has_value());
  EXPECT_EQ(state_.window_blocks, 6u);
  EXPECT_EQ(r->blocks_per_request, 1u);
}

// A reader as fast as the link (every read misses or waits: h5py's first chunk through a mount,
// before any pause tells its reads apart) has its first window ahead from the run's second block
// on, not 0.4 of the run: at 1-3 blocks it waited a round trip for each 40% it read.
TEST_F(ReadAheadPolicyTest, AShortRunGetsTheFirstWindowAheadNotAFractionOfItself) {
  EXPECT_EQ(read(100, 1), std::nullopt);  // not the file's start, which reaches further
  for (uint64_t b = 101; b < 110; ++b) {
    read(b, 1);
    EXPECT_GE(state_.window_blocks, 4u) << b;
    EXPECT_GE(state_.prefetched_to, b + 5) << "fewer than 4 blocks ahead of block " << b;
    EXPECT_LE(state_.prefetched_to, b + 5) << "more than the first window ahead of block " << b;
  }
}

// h5py opening a file through a mount: the kernel reads block 0 in pieces of 16-512 KiB (its
// metadata, then the start of its first chunk), then goes on in 1 MiB pieces not aligned to
// blocks. The piece that reaches block 1 makes the run a stream and gets the first window (it
// waited for the piece after, which had read two blocks' bytes: a round trip more for h5py's
// first chunk), and at the file's start its reach is the file's first 16 MiB.
TEST_F(ReadAheadPolicyTest, AStreamEarnsReadAheadAtThePieceThatReachesItsSecondBlock) {
  const uint64_t file = 162 * kMiB;
  uint64_t at = 0;
  for (uint64_t size : {16 * 1024, 64 * 1024, 128 * 1024, 256 * 1024, 512 * 1024}) {
    EXPECT_EQ(policy_.on_read(state_, at, at + size, file, missed()), std::nullopt) << at;
    at += size;
  }
  auto r = policy_.on_read(state_, at, at + kMiB, file, missed());  // blocks 0-1: 2000 KiB read
  ASSERT_TRUE(r.has_value());
  EXPECT_EQ(r->blocks, (BlockRange{2, 15}));
  EXPECT_EQ(state_.window_blocks, 4u);
  // The same further in: counted from the block the run began in, not from the file's start.
  state_ = ReadAheadState{};
  at = 100 * kMiB + kMiB / 2;
  EXPECT_EQ(policy_.on_read(state_, at, at + kMiB / 4, file, missed()), std::nullopt);
  at += kMiB / 4;
  EXPECT_EQ(policy_.on_read(state_, at, at + kMiB / 8, file, missed()), std::nullopt) << "one block is no stream";
  at += kMiB / 8;
  r = policy_.on_read(state_, at, at + kMiB / 2, file, missed());  // reaches block 101
  ASSERT_TRUE(r.has_value());
  EXPECT_EQ(r->blocks, (BlockRange{102, 105}));
}

// A program reading a file from its start (h5py: its metadata, then its first chunk) has the
// file's first 16 MiB asked for at once when its run earns read-ahead, not a window of 4 that
// grows a round trip at a time. That is the run's reach, not its window: past it the window goes
// on as it would have. A warm run reaches no further than its window, and a run elsewhere in the
// file gets its first window.
TEST_F(ReadAheadPolicyTest, AFileReadFromItsStartReachesItsFirst16MiBAtOnce) {
  EXPECT_EQ(read(0, 1), std::nullopt);
  auto r = read(1, 1);
  ASSERT_TRUE(r.has_value());
  EXPECT_EQ(*r, (ReadAheadPlan{BlockRange{2, 15}, 1}));  // one block a request, over 14 connections
  EXPECT_EQ(state_.window_blocks, 4u);
  // Reading on inside those 16 MiB asks nothing more until the window reaches past them.
  uint64_t b = 2;
  for (; b < 16; ++b) {
    auto more = read(b, 1);
    if (more) {
      EXPECT_EQ(more->blocks.first, 16u) << b;
      break;
    }
  }
  EXPECT_GE(b, 10u) << "the window reached past the first 16 MiB at block " << b;
  EXPECT_LE(state_.prefetched_to, b + 1 + state_.window_blocks) << "more than the window past the first 16 MiB";
  // A run from the file's start whose blocks come from the disk cache fetches nothing, and reads
  // its window only.
  state_ = ReadAheadState{};
  ReadFacts disk;
  disk.from_disk = true;
  EXPECT_EQ(read_with(0, 1, disk), std::nullopt);
  r = read_with(1, 1, disk);
  ASSERT_TRUE(r.has_value());
  EXPECT_FALSE(r->fetch);
  EXPECT_EQ(r->blocks.last, 1u + state_.window_blocks);
  // The reach is in bytes: 64 blocks of 256 KiB. 0: the first window alone.
  ReadAheadOptions small;
  small.block_size = kMiB / 4;
  ReadAheadState s;
  ReadAheadPolicy quarter(small);
  EXPECT_EQ(quarter.on_read(s, 0, kMiB / 4, 1000 * kMiB, missed()), std::nullopt);
  r = quarter.on_read(s, kMiB / 4, kMiB / 2, 1000 * kMiB, missed());
  ASSERT_TRUE(r.has_value());
  EXPECT_EQ(r->blocks, (BlockRange{2, 61}));  // whole requests of 4 blocks: the last 2 come with the next read
  ReadAheadOptions none;
  none.start_window_bytes = 0;
  ReadAheadPolicy first_window_only(none);
  s = ReadAheadState{};
  EXPECT_EQ(first_window_only.on_read(s, 0, kMiB, 1000 * kMiB, missed()), std::nullopt);
  r = first_window_only.on_read(s, kMiB, 2 * kMiB, 1000 * kMiB, missed());
  ASSERT_TRUE(r.has_value());
  EXPECT_EQ(r->blocks, (BlockRange{2, 5}));
}

TEST_F(ReadAheadPolicyTest, AStoppedRunWasFetchedAtMostOneAndAHalfTimesOver) {
  // h5py reading 5 contiguous 10-block chunks, in 1-block reads: the run stops at block 50.
  const uint64_t ahead = stream(0, 50);
  EXPECT_GT(ahead, 0u);
  EXPECT_LE(state_.prefetched_to, 50u + 20u);
}

// h5py through hubfs.open reads a 10-block chunk in one read: from its second chunk on it gets
// the next chunk ahead (to arrive while it decodes this one); a run of 5 chunks that stops was
// still fetched at most 1.5 times over.
TEST_F(ReadAheadPolicyTest, AReaderOfNBlocksAtATimeGetsItsNextReadAhead) {
  EXPECT_EQ(read(0, 10), std::nullopt);  // the first read: not sequential yet
  uint64_t fetched_to = 10;
  for (uint64_t chunk = 1; chunk < 5; ++chunk) {
    auto r = read(chunk * 10, 10);
    ASSERT_TRUE(r.has_value()) << chunk;
    EXPECT_GE(r->blocks.last + 1, (chunk + 2) * 10) << "the next chunk is not all ahead: " << chunk;
    fetched_to = std::max(fetched_to, r->blocks.last + 1);
  }
  EXPECT_LE(fetched_to, 75u) << "more than 1.5x the 50 blocks read";
  // A reader of one block at a time is unchanged (a mount's reads): 2 blocks earn the first window.
  state_ = ReadAheadState{};
  EXPECT_EQ(read(100, 1), std::nullopt);
  ASSERT_TRUE(read(101, 1).has_value());
  EXPECT_EQ(state_.window_blocks, 4u);
}

TEST_F(ReadAheadPolicyTest, TheWindowGrowsToItsCapAndFillsEveryConnectionWithWholeRequests) {
  stream(0, 330);
  EXPECT_EQ(state_.window_blocks, 128u);  // the cap, after a run of 320 blocks
  // At the cap: 8-block requests (128 over 16 connections), refilled in whole requests.
  std::optional<ReadAheadPlan> r;
  uint64_t b = 330;
  for (; !r && b < 340; ++b) r = read(b, 1);
  ASSERT_TRUE(r.has_value());
  EXPECT_EQ(r->blocks_per_request, 8u);
  EXPECT_EQ(r->blocks.count() % 8, 0u);
  EXPECT_LE(state_.prefetched_to, b + 128u);
}

TEST_F(ReadAheadPolicyTest, FromTheDiskCacheTheWindowGrowsFasterFetchesNothingAndNothingIsFetchedWhole) {
  ReadFacts warm;
  warm.from_disk = true;  // the caller found the read's blocks on disk
  bool asked = false;
  for (uint64_t b = 0; b < 40; ++b) {
    if (auto r = read_with(b, 1, warm)) {
      EXPECT_FALSE(r->fetch) << "a warm read asked for a fetch at block " << b;
      asked = true;
    }
  }
  EXPECT_TRUE(asked) << "a warm stream gets its window from the disk cache";
  EXPECT_EQ(state_.window_blocks, 128u);  // 4x a run of 40 blocks, capped; over the network: 16
  EXPECT_FALSE(state_.fetching);
  state_ = ReadAheadState{};
  for (uint64_t i = 0; i < 20; ++i) EXPECT_EQ(read_with(i * 37 % 300, 1, warm, 300), std::nullopt);
  EXPECT_FALSE(state_.whole_file);
}

// Reads served from memory (nothing of theirs was loaded) or from the disk cache: however long
// the stream, and however randomly read, nothing is fetched.
TEST_F(ReadAheadPolicyTest, WarmReadsNeverFetch) {
  ReadFacts memory;  // no miss, no mark, nothing loaded
  ReadFacts disk;
  disk.from_disk = true;
  for (uint64_t b = 0; b < 300; ++b) {
    auto r = read_with(b, 1, b % 3 ? memory : disk);
    EXPECT_TRUE(!r || !r->fetch) << "block " << b;
  }
  for (uint64_t i = 0; i < 50; ++i) {
    auto r = read_with(i * 37 % 300, 1, i % 2 ? memory : disk, 300);
    EXPECT_TRUE(!r || !r->fetch) << "random read " << i;
  }
  EXPECT_FALSE(state_.whole_file);
  EXPECT_FALSE(state_.fetching);
}

// A stream starts fetching ahead at a miss; between marks (the other pieces of a block a read
// already took the mark of, blocks a hint brought) it asks nothing; reading a block read-ahead
// fetched (its mark) continues it; once its reads come from disk it fetches no more.
TEST_F(ReadAheadPolicyTest, AMissStartsFetchingAndConsumingReadAheadContinuesIt) {
  ReadFacts memory, marked, disk;
  marked.marked = true;
  disk.from_disk = true;
  // Blocks 0-3 miss: the run earns read-ahead (the file's first 16 MiB), fetched.
  std::optional<ReadAheadPlan> r;
  for (uint64_t b = 0; b < 4; ++b)
    if (auto plan = read(b, 1)) r = plan;
  ASSERT_TRUE(r.has_value());
  EXPECT_TRUE(r->fetch);
  EXPECT_TRUE(state_.fetching);
  // Reads of what read-ahead fetched: unmarked ones ask nothing, marked ones continue.
  uint64_t continued = 0;
  // Each block in two reads (as the kernel sends them): the first takes the block's mark.
  for (uint64_t b = 4; b < 200; ++b) {
    if (auto more = policy_.on_read(state_, b * kMiB, b * kMiB + kMiB / 2, 1000 * kMiB, marked)) {
      EXPECT_TRUE(more->fetch);
      EXPECT_GT(more->blocks.first, b);
      state_.prefetched_to = more->blocks.last + 1;
      ++continued;
    }
    EXPECT_EQ(policy_.on_read(state_, b * kMiB + kMiB / 2, (b + 1) * kMiB, 1000 * kMiB, memory), std::nullopt)
        << "an unmarked read continued the stream at " << b;
  }
  EXPECT_GT(continued, 10u);
  EXPECT_GT(state_.prefetched_to, 200u) << "the stream stopped";
  // The stream reaches blocks the disk cache held: it turns warm and fetches nothing more.
  for (uint64_t b = 200; b < 260; ++b) {
    auto w = read_with(b, 1, disk);
    EXPECT_TRUE(!w || !w->fetch) << b;
  }
  EXPECT_FALSE(state_.fetching);
  // A miss again: fetching resumes from the read on, not past the disk window (blocks it only
  // looked for on disk are asked for again).
  r = read(260, 1);
  ASSERT_TRUE(r.has_value());
  EXPECT_TRUE(r->fetch);
  EXPECT_EQ(r->blocks.first, 261u);
}

// Over the network the window grows only when the reader catches up with it: a read that takes
// the mark of a block already arrived keeps it; one that waited for its marked block doubles it,
// never past per_run_factor of the run.
TEST_F(ReadAheadPolicyTest, TheWindowGrowsOnlyWhenTheReaderWaitsForReadAhead) {
  ReadFacts arrived, waited;
  arrived.marked = true;
  waited.marked = true;
  waited.waited = true;
  for (uint64_t b = 0; b < 20; ++b) read(b, 1);  // misses: the window follows the run
  const uint32_t window = state_.window_blocks;
  EXPECT_EQ(window, 8u);  // 0.4 of 20 blocks
  // A reader slower than the link: every block it reads had arrived. The window holds.
  for (uint64_t b = 20; b < 120; ++b) {
    auto r = read_with(b, 1, arrived);
    if (r) {
      EXPECT_LE(r->blocks.last, b + window) << b;
    }
    EXPECT_EQ(state_.window_blocks, window) << b;
  }
  // It waits for one: the window doubles, and again at each waiting read after, up to the bound.
  read_with(120, 1, waited);
  EXPECT_EQ(state_.window_blocks, 2 * window);
  read_with(121, 1, waited);
  EXPECT_EQ(state_.window_blocks, 4 * window);
  for (uint64_t b = 121; b < 200; ++b) read_with(b, 1, waited);
  EXPECT_EQ(state_.window_blocks, 80u) << "0.4 of a 200-block run: the bound still holds";
}

// h5py through a mount reads a 10-block chunk in a burst of 1-block reads, then decodes while
// the link is idle. Read-ahead that kept up with the last bursts does not grow, so the blocks
// fetched past the last chunk read are those of that window, well under per_run_factor of the run.
TEST_F(ReadAheadPolicyTest, ABurstyReaderThatStopsWastesItsWindowNotAFractionOfTheRun) {
  ReadFacts arrived, waited;
  arrived.marked = waited.marked = waited.waited = true;
  uint64_t fetched_to = 0;
  for (uint64_t b = 0; b < 50; ++b) {
    // Blocks asked for before the burst began landed during the pause; those asked for during
    // the burst are on their way; the rest miss.
    const ReadFacts facts = b < fetched_to ? arrived : b < state_.prefetched_to ? waited : missed();
    if (auto r = read_with(b, 1, facts)) {
      EXPECT_TRUE(r->fetch);
    }
    if (b % 10 == 9) fetched_to = state_.prefetched_to;  // the burst ends: its read-ahead lands
  }
  EXPECT_LE(state_.prefetched_to, 50u + 12u) << "more than 1.24x the 50 blocks read";
  EXPECT_LT(state_.window_blocks, 20u) << "the window reached 0.4 of the run: it grew while the reader kept up";
}

// The same reader through a mount, its pause now seen (ReadFacts::paused: h5py decoding): from
// its second chunk on it gets its last whole chunk ahead at the chunk's first piece, where the
// window of a reader that keeps up stayed at 0.4 of the run (4 blocks at block 11: the chunk's
// other 7 blocks each waited a round trip). A run that stops was fetched one chunk over.
TEST_F(ReadAheadPolicyTest, AReaderThatPausesBetweenItsReadsGetsItsLastReadAheadThroughAMount) {
  ReadFacts arrived;
  arrived.marked = true;
  for (uint64_t b = 0; b < 11; ++b) read(b, 1);  // the first chunk: misses, in 1-block pieces
  EXPECT_LE(state_.window_blocks, 4u);
  ReadFacts paused = arrived;
  paused.paused = true;
  auto r = read_with(11, 1, paused);  // the next chunk's first piece, after the decoding pause
  ASSERT_TRUE(r.has_value());
  EXPECT_EQ(state_.last_burst_bytes, 11 * kMiB);
  EXPECT_GE(state_.window_blocks, 11u);
  EXPECT_GE(r->blocks.last, 21u) << "the rest of the chunk is not all ahead";
  uint64_t fetched_to = state_.prefetched_to;
  for (uint64_t b = 12; b < 55; ++b) {
    read_with(b, 1, b % 11 == 0 ? paused : arrived);
    fetched_to = std::max(fetched_to, state_.prefetched_to);
  }
  EXPECT_LE(fetched_to, 55u + 11u) << "more than one chunk past the last one read";
}

// The same reader on a loaded machine: a piece of its second chunk comes late, and the policy
// takes that for a pause, cutting the chunk's read in two. The window stays the size of the
// reader's reads (its largest, the first chunk), not of the one-block read the false pause cut
// off (5 blocks at block 12: 0.4 of the run, and the third chunk's tail waited a round trip).
TEST_F(ReadAheadPolicyTest, APauseSeenInsideAReadKeepsTheWindowOfTheReadersReads) {
  ReadFacts arrived;
  arrived.marked = true;
  for (uint64_t b = 0; b < 11; ++b) read(b, 1);  // the first chunk
  ReadFacts paused = arrived;
  paused.paused = true;
  read_with(11, 1, paused);  // the second chunk's first piece
  EXPECT_GE(state_.window_blocks, 11u);
  read_with(12, 1, paused);  // its second piece, late: a false pause
  EXPECT_EQ(state_.last_burst_bytes, kMiB);
  EXPECT_EQ(state_.largest_burst_bytes, 11 * kMiB);
  EXPECT_GE(state_.window_blocks, 11u) << "the window shrank to the read the false pause cut off";
  for (uint64_t b = 13; b < 22; ++b) read_with(b, 1, arrived);
  EXPECT_GE(state_.prefetched_to, 22u + 11u) << "the third chunk is not all asked for by the second's end";
}

// A reader that never pauses (cat, or the kernel's pieces of one long read) keeps the window of
// the rules above, and a read elsewhere forgets the reader's last read.
TEST_F(ReadAheadPolicyTest, WithoutAPauseOrAfterAJumpTheLastReadGivesNothingAhead) {
  ReadFacts arrived;
  arrived.marked = true;
  for (uint64_t b = 0; b < 11; ++b) read(b, 1);
  for (uint64_t b = 11; b < 22; ++b) read_with(b, 1, arrived);
  EXPECT_EQ(state_.last_burst_bytes, 0u);
  EXPECT_EQ(state_.burst_bytes, 22 * kMiB);
  EXPECT_LE(state_.window_blocks, 4u);
  ReadFacts paused = arrived;
  paused.paused = true;
  read_with(22, 1, paused);
  EXPECT_EQ(state_.last_burst_bytes, 22 * kMiB);
  paused.missed = true;
  read_with(500, 1, paused);  // a jump: a new run, with no last read of its own
  EXPECT_EQ(state_.last_burst_bytes, 0u);
  EXPECT_EQ(state_.largest_burst_bytes, 0u);
  EXPECT_EQ(state_.burst_bytes, kMiB);
  EXPECT_EQ(state_.window_blocks, 0u);
}

// A file hinted, prefetched or warm: reads whose blocks a hint brought carry no mark, so however
// sequential, they fetch nothing; nor does a random pattern fetch the file whole.
TEST_F(ReadAheadPolicyTest, ReadsOfHintedOrPrefetchedBlocksStartNoFetch) {
  ReadFacts prefetched;  // in memory, brought by a hint: no miss, no mark
  for (uint64_t b = 0; b < 100; ++b) EXPECT_TRUE(!read_with(b, 1, prefetched) || !state_.fetching) << b;
  EXPECT_FALSE(state_.fetching);
  ReadFacts hinted;
  hinted.missed = true;  // even a miss of a hinted file: its reader said what it needs
  hinted.hinted = true;
  state_ = ReadAheadState{};
  for (uint64_t b = 0; b < 100; ++b) EXPECT_EQ(read_with(b, 1, hinted), std::nullopt) << b;
  for (uint64_t i = 0; i < 20; ++i) EXPECT_EQ(read_with(i * 37 % 300, 1, hinted, 300), std::nullopt) << i;
}

TEST_F(ReadAheadPolicyTest, RequestsAreSpreadOverTheConnections) {
  EXPECT_EQ(policy_.request_blocks(1), 1u);
  EXPECT_EQ(policy_.request_blocks(10), 1u);   // ten connections, one block each
  EXPECT_EQ(policy_.request_blocks(16), 1u);
  EXPECT_EQ(policy_.request_blocks(17), 2u);
  EXPECT_EQ(policy_.request_blocks(64), 4u);
  EXPECT_EQ(policy_.request_blocks(1000), 8u);  // never above the largest request
}

TEST_F(ReadAheadPolicyTest, AReadsOwnRequestGoesInPartsOverTheIdleConnections) {
  // A tenth of what one connection moves in a round trip: 50 MB/s x 50 ms / 10.
  EXPECT_EQ(policy_.min_part_bytes(), 250000u);
  // (bytes, the read's requests, request slots busy) of 16 connections
  EXPECT_EQ(policy_.demand_parts(kMiB, 1, 0), 4u);         // a random 1 MiB block: 4 parts of 256 KiB
  EXPECT_EQ(policy_.demand_parts(kMiB, 2, 0), 4u);         // an mmap fault's two blocks: 4 each
  EXPECT_EQ(policy_.demand_parts(kMiB, 1, 4), 4u);         // the second block of a fault, after the first
  EXPECT_EQ(policy_.demand_parts(8 * kMiB, 1, 0), 16u);    // never more parts than idle connections
  EXPECT_EQ(policy_.demand_parts(8 * kMiB, 1, 11), 5u);
  EXPECT_EQ(policy_.demand_parts(kMiB, 10, 0), 1u);        // ten requests share sixteen: no room
  EXPECT_EQ(policy_.demand_parts(kMiB, 1, 15), 1u);        // nothing idle but its own slot
  EXPECT_EQ(policy_.demand_parts(kMiB, 1, 16), 1u);
  EXPECT_EQ(policy_.demand_parts(kMiB, 1, 40), 1u);        // another reader's parts fill them
  EXPECT_EQ(policy_.demand_parts(300000, 1, 0), 1u);       // parts would be under the minimum
  EXPECT_EQ(policy_.demand_parts(kMiB, 0, 0), 1u);
}

TEST_F(ReadAheadPolicyTest, RefillsOnlyWholeRequestsExceptAtTheEndOfTheFile) {
  state_ = ReadAheadState{};
  state_.next_offset = 10 * kMiB;
  state_.window_blocks = 128;  // at its cap: 8-block requests
  state_.run_bytes = 400 * kMiB;
  state_.prefetched_to = 11 + 125;  // 125 blocks already ahead of block 10: room 3 < one request
  state_.fetching = true;           // a stream whose window is fetched
  EXPECT_EQ(read(10, 1), std::nullopt);
  // Six blocks further on there is room for 9: one whole request of 8 goes, not 9 blocks.
  state_.next_offset = 16 * kMiB;
  auto r = read(16, 1);
  ASSERT_TRUE(r.has_value());
  EXPECT_EQ(r->blocks, (BlockRange{136, 143}));
  // Near the end of a file the last, short request goes out too.
  state_ = ReadAheadState{};
  stream(100, 105, 112);
  auto tail = read(105, 1, 112);
  ASSERT_TRUE(tail.has_value());
  stream(106, 112, 112);
  EXPECT_EQ(state_.prefetched_to, 112u);  // up to the last block
  EXPECT_EQ(read(111, 1, 112), std::nullopt);  // nothing is left past the last block
}

TEST_F(ReadAheadPolicyTest, RandomAccessResetsTheRunAndFetchesNothing) {
  stream(0, 20);
  ASSERT_GT(state_.window_blocks, 0u);
  EXPECT_EQ(read(500, 1), std::nullopt);
  EXPECT_EQ(state_.window_blocks, 0u);
  EXPECT_EQ(state_.run_bytes, kMiB);  // a new run, of this read
  EXPECT_EQ(state_.prefetched_to, 0u);
  EXPECT_EQ(state_.random_reads, 1u);
  // A read a little before where the last ended still counts as the same stream (the kernel
  // sends one stream's pieces from several threads, out of order).
  read(501, 1);
  read(503, 1);
  read(502, 1);  // 500-503: four blocks
  EXPECT_EQ(state_.run_bytes, 4 * kMiB);
  EXPECT_EQ(state_.random_reads, 0u);  // a run that earned read-ahead forgets the random reads
}

TEST_F(ReadAheadPolicyTest, ASmallFileReadAtRandomIsFetchedWholeAfterEnoughRandomReads) {
  // A 300-block (300 MiB) file: the link moves it in 16 round trips (640 MB), so after 4 random
  // reads it is fetched whole, and later reads continue from where the caller's budget stopped.
  const uint64_t file_blocks = 300;
  std::optional<ReadAheadPlan> r;
  for (uint64_t i = 0; i < 3; ++i) {
    EXPECT_EQ(read(i * 37 % file_blocks, 1, file_blocks), std::nullopt) << i;
  }
  r = policy_.on_read(state_, 250 * kMiB, 251 * kMiB, file_blocks * kMiB, missed());
  ASSERT_TRUE(r.has_value());
  EXPECT_TRUE(state_.whole_file);
  // A wave per read: 8 blocks on each of the 16 connections.
  EXPECT_EQ(r->blocks, (BlockRange{0, 127}));
  EXPECT_EQ(r->blocks_per_request, 8u);
  state_.prefetched_to = 100;  // the budget stopped the caller at block 100
  r = policy_.on_read(state_, 3 * kMiB, 4 * kMiB, file_blocks * kMiB, missed());
  ASSERT_TRUE(r.has_value());
  EXPECT_EQ(r->blocks, (BlockRange{100, 227}));
  state_.prefetched_to = 228;
  r = policy_.on_read(state_, 9 * kMiB, 10 * kMiB, file_blocks * kMiB, missed());
  ASSERT_TRUE(r.has_value());
  EXPECT_EQ(r->blocks, (BlockRange{228, file_blocks - 1}));  // the rest
  state_.prefetched_to = file_blocks;
  EXPECT_EQ(read(7, 1, file_blocks), std::nullopt);  // all of it asked for: nothing more
}

TEST_F(ReadAheadPolicyTest, ABigFileReadAtRandomIsNeverFetchedWhole) {
  // 3000 blocks (3 GiB): more than the link moves in 16 round trips. 100 random reads fetch
  // only what they touch.
  const uint64_t file_blocks = 3000;
  for (uint64_t i = 0; i < 100; ++i) {
    EXPECT_EQ(read(i * 997 % file_blocks, 1, file_blocks), std::nullopt) << i;
  }
  EXPECT_FALSE(state_.whole_file);
}

// `hubfs mount --read-ahead SIZE`: a cap on every byte the rules fetch ahead. With 4 MiB, a
// stream never has more than 4 blocks asked for past its last read (the file's first 16 MiB
// included), a reader of 10-block reads neither, and a file bigger than the cap is never fetched
// whole; a warm stream's window from the disk cache fetches nothing and stays uncapped. 0: no
// read-ahead at all.
TEST_F(ReadAheadPolicyTest, TheReadAheadCapBoundsEveryFetchAheadAndZeroTurnsItOff) {
  ReadAheadOptions capped;
  capped.max_ahead_bytes = 4 * kMiB;
  policy_ = ReadAheadPolicy(capped);
  uint64_t asked = 0;
  for (uint64_t b = 0; b < 50; ++b) {
    if (auto r = read(b, 1)) {
      EXPECT_TRUE(r->fetch);
      EXPECT_LE(r->blocks.last, b + 4) << "past the cap at block " << b;
      asked += r->blocks.count();
    }
  }
  EXPECT_GT(asked, 0u) << "a cap is not off: the stream still reads ahead";
  EXPECT_LE(state_.prefetched_to, 54u);
  // Ten blocks a read, with a pause between reads (h5py through a mount): its next read's worth
  // is more than the cap, and the cap holds.
  state_ = ReadAheadState{};
  for (uint64_t chunk = 0; chunk < 5; ++chunk) {
    ReadFacts f = missed();
    f.paused = true;
    if (auto r = read_with(100 + chunk * 10, 10, f)) {
      EXPECT_LE(r->blocks.last, 100 + chunk * 10 + 9 + 4) << chunk;
    }
  }
  // Random reads of a 300 MiB file (fetched whole after 4 of them without the cap) fetch only
  // what they touch.
  state_ = ReadAheadState{};
  for (uint64_t i = 0; i < 20; ++i) EXPECT_EQ(read(i * 37 % 300, 1, 300), std::nullopt) << i;
  EXPECT_FALSE(state_.whole_file);
  // Warm: the window from the disk cache reaches past the cap (it costs no network bytes).
  state_ = ReadAheadState{};
  ReadFacts warm;
  warm.from_disk = true;
  bool past_cap = false;
  for (uint64_t b = 0; b < 40; ++b) {
    if (auto r = read_with(b, 1, warm)) {
      EXPECT_FALSE(r->fetch);
      past_cap = past_cap || r->blocks.last > b + 4;
    }
  }
  EXPECT_TRUE(past_cap);
  // 0: nothing is ever asked for ahead, from the file's start or anywhere.
  ReadAheadOptions off;
  off.max_ahead_bytes = 0;
  policy_ = ReadAheadPolicy(off);
  state_ = ReadAheadState{};
  EXPECT_EQ(stream(0, 60), 0u);
  state_ = ReadAheadState{};
  EXPECT_EQ(stream(500, 560), 0u);
}

TEST_F(ReadAheadPolicyTest, TheWholeFileSizeFollowsTheLink) {
  ReadAheadOptions slow;
  slow.connection_bytes_per_second = 5e6;  // 40 Mbit/s per connection: 64 MB in 16 round trips
  EXPECT_EQ(slow.whole_file_bytes(), 64'000'000u);
  ReadAheadPolicy policy(slow);
  ReadAheadState state;
  for (uint64_t i = 0; i < 20; ++i)
    EXPECT_EQ(policy.on_read(state, (i * 37 % 300) * kMiB, (i * 37 % 300 + 1) * kMiB, 300 * kMiB, missed()),
              std::nullopt);
}

TEST_F(ReadAheadPolicyTest, AHintedFileGrowsItsWindowButFetchesNothingAhead) {
  for (uint64_t b = 0; b < 8; ++b) EXPECT_EQ(read(b, 1, 1000, true), std::nullopt);
  EXPECT_GT(state_.window_blocks, 0u);  // the run is still tracked: unhinted reads resume it
  EXPECT_TRUE(read(8, 1).has_value());
  // Nor is a hinted file fetched whole, however randomly it is read.
  state_ = ReadAheadState{};
  for (uint64_t i = 0; i < 20; ++i) EXPECT_EQ(read(i * 37 % 300, 1, 300, true), std::nullopt);
  EXPECT_FALSE(state_.whole_file);
}

TEST_F(ReadAheadPolicyTest, ABudgetThatStopsTheCallerEarlyIsAskedForAgainLater) {
  stream(0, 40);
  // The caller took only 1 block of the next range (its memory budget was spent).
  std::optional<ReadAheadPlan> r;
  uint64_t b = 40;
  for (; !r && b < 60; ++b) r = policy_.on_read(state_, b * kMiB, (b + 1) * kMiB, 1000 * kMiB, missed());
  ASSERT_TRUE(r.has_value());
  state_.prefetched_to = r->blocks.first + 1;
  std::optional<ReadAheadPlan> again;
  for (uint64_t c = b; !again && c < b + 20; ++c)
    again = policy_.on_read(state_, c * kMiB, (c + 1) * kMiB, 1000 * kMiB, missed());
  ASSERT_TRUE(again.has_value());
  EXPECT_LE(again->blocks.first, std::max(state_.prefetched_to, b + 20));
  EXPECT_GE(again->blocks.first, state_.prefetched_to);
}

TEST_F(ReadAheadPolicyTest, ASmallFileAndPartialBlocksStayInsideTheFile) {
  // A 6.5-block file read in 100 KiB pieces: nothing past its last block is ever asked for.
  const uint64_t size = 13 * kMiB / 2;
  bool asked = false;
  for (uint64_t off = 0; off < size; off += 100 << 10) {
    auto r = policy_.on_read(state_, off, std::min(size, off + (100 << 10)), size, missed());
    if (r) {
      EXPECT_LE(r->blocks.last, 6u);
      state_.prefetched_to = r->blocks.last + 1;
      asked = true;
    }
  }
  EXPECT_TRUE(asked);
}

}  // namespace
}  // namespace hubfs
