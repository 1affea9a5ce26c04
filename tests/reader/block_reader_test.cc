// The read path without FUSE: a scripted transport, the real range fetcher and block cache, on a
// manual Env (a read's deadline passes when the test moves the clock).
#include "reader/block_reader.h"

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <random>
#include <thread>

#include <gtest/gtest.h>

#include "cache/fault_disk.h"
#include "reader/disk_tier.h"
#include "support/digest.h"
#include "support/fake_transport.h"
#include "support/manual_env.h"
#include "support/pattern.h"
#include "support/sanitized.h"
#include "support/temp_dir.h"
#include "support/wait_for.h"
#include "support/fetcher_env.h"

namespace hubfs {
namespace HUBFS_UNITY_ID {

using testing::FakeTransport;
using testing::TempDir;

// 64 KiB blocks, not the reader's default 1 MiB: the reader's logic counts blocks (requests,
// windows, hints, hashes), and an 11-block file of 64 KiB blocks drives it as one of 1 MiB
// blocks did, at a sixteenth of the bytes. Under the sanitizers the bytes were the cost: every
// block buffer is mapped fresh with its shadow (TSan: 40 CPU s for this file's tests at 1 MiB,
// 18 of them page faults; docs/benchmarks.md, "Session 29: suite41"). One test keeps a 1 MiB
// block, where a demand read goes in parts (OneFetchPerBlockHoweverManyReadersWait).
constexpr uint32_t kBlock = 64 * 1024;
// The kernel's read of a mount (128 KiB against a 1 MiB block), scaled with the block.
constexpr uint32_t kPiece = kBlock / 8;

// The support library's pattern: compiled optimized and uninstrumented even in the sanitizer
// builds (a per-byte generator at -O0 under TSan cost ~1 s per test to fill 10 MiB).
std::string pattern(size_t n, unsigned seed) { return testing::pattern_bytes(seed, 0, n); }

// Serves `content` as a CDN would: 206 with an exact Content-Range for every range request.
// `gate` lets a test hold answers back; `fail` makes every answer a 404.
struct FakeCdn {
  std::string content;
  std::atomic<bool> fail{false};
  // Bounded like FaultDisk's gates: a test that never opens it fails instead of hanging.
  testing::Gate gate{std::chrono::seconds(60)};

  Result<HttpResponse> answer(const HttpRequest& req) {
    gate.pass();
    HttpResponse r;
    if (fail) {
      r.status = 404;
      return r;
    }
    auto range = req.headers.empty() ? std::nullopt : find_header(req.headers, "Range");
    uint64_t a = 0, b = 0;
    if (!range || sscanf(range->c_str(), "bytes=%lu-%lu", &a, &b) != 2) {
      r.status = 200;
      r.body = content;
      return r;
    }
    r.status = 206;
    r.body = content.substr(a, b - a + 1);
    r.headers.emplace_back("content-range", "bytes " + std::to_string(a) + "-" + std::to_string(b) + "/" +
                                                std::to_string(content.size()));
    return r;
  }
  void close_gate() { gate.close(); }
  void open_gate() { gate.open(); }
};

RangeFetcherOptions fetcher_options(Env& env) {
  RangeFetcherOptions o;
  o.env = &env;
  return o;
}

using testing::wait_for_state;
using testing::sha256_hex;

class BlockReaderTest : public ::testing::Test {
 protected:
  void SetUp() override {
    // Made and hashed once per process: a copy is cheap, and the tests stay short.
    static const std::string content = pattern(10 * kBlock + 12345, 1);
    static const std::string content_id = "sha256:" + sha256_hex(content);
    cdn_.content = content;
    file_.path = "data/file.bin";
    file_.content_id = content_id;  // the real hash: whole reads verify
    file_.size = cdn_.content.size();
    file_.locate = [](bool) { return Result<Location>(Location{"http://cdn.test/blob", {}, {}}); };
    open_cache();
  }
  void open_cache(std::shared_ptr<CacheDisk> disk = posix_disk()) {
    CacheOptions o;
    o.env = &Env::real();
    o.dir = (dir_.path() / "cache").string();
    auto c = BlockCache::open(o, std::move(disk));
    ASSERT_TRUE(c.ok()) << c.status().message();
    cache_ = std::move(c).value();
  }
  // The reader's defaults but for the block size (kBlock).
  static ReaderOptions options() {
    ReaderOptions o;
    o.block_size = kBlock;
    return o;
  }
  // Where the disk cache keeps the file's blocks for a reader of kBlock blocks.
  std::string disk_key() const { return BlockReader::disk_key(file_.content_id, kBlock); }
  std::string read(BlockReader& reader, uint64_t off, size_t len, ReadState* state = nullptr) {
    std::string out(len, '\0');
    auto n = reader.read(file_, off, len, out.data(), state);
    EXPECT_TRUE(n.ok()) << n.status().message();
    out.resize(n.ok() ? *n : 0);
    return out;
  }

  // Moves the clock by `by` from another thread, once a thread waits on it (the read the test
  // runs next, waiting for its blocks): the read's deadline passes without real time passing.
  std::thread advance_once_waiting(std::chrono::milliseconds by) {
    return std::thread([this, by] {
      EXPECT_TRUE(env_.manual_clock().wait_for_sleepers(1));
      env_.advance(by);
    });
  }

  // The reader's defaults with a read timeout of 200 ms (of the manual clock).
  static ReaderOptions timing_out_options() {
    ReaderOptions o = options();
    o.read_timeout = std::chrono::milliseconds(200);
    return o;
  }
  // Reads 100 bytes at `off` while the CDN holds every answer back, the clock moved past the
  // reader's timeout once the read waits: the read's result.
  Result<size_t> read_unanswered(BlockReader& reader, uint64_t off, std::chrono::milliseconds timeout) {
    cdn_.close_gate();
    std::string out(100, '\0');
    std::thread clock = advance_once_waiting(timeout);
    auto n = reader.read(file_, off, out.size(), out.data(), nullptr);
    clock.join();
    return n;
  }

  testing::ManualEnv env_;
  TempDir dir_;
  FakeCdn cdn_;
  FakeTransport transport_{[this](const HttpRequest& r) { return cdn_.answer(r); }};
  RangeFetcher fetcher_{transport_, fetcher_options(env_)};
  std::unique_ptr<BlockCache> cache_;
  RemoteFile file_;
};

TEST_F(BlockReaderTest, ReturnsExactlyTheBytesAskedForAnywhereInTheFile) {
  BlockReader reader(cache_.get(), fetcher_, options());
  std::mt19937_64 rng(42);
  for (int i = 0; i < testing::sanitized_count(200); ++i) {
    uint64_t off = rng() % (file_.size + 100);
    size_t len = rng() % (3 * kBlock);
    std::string expected = off >= file_.size ? "" : cdn_.content.substr(off, len);
    ASSERT_EQ(read(reader, off, len), expected) << "offset " << off << " length " << len;
  }
  EXPECT_EQ(read(reader, file_.size - 5, 100), cdn_.content.substr(file_.size - 5));
  EXPECT_EQ(read(reader, 0, 0), "");
}

// On one connection, neighbouring missing blocks share one request.
TEST_F(BlockReaderTest, NeighbouringMissingBlocksShareOneRequest) {
  ReaderOptions o = options();
  o.parallel_requests = 1;
  BlockReader reader(cache_.get(), fetcher_, o);
  ASSERT_EQ(read(reader, 100, 4 * kBlock), cdn_.content.substr(100, 4 * kBlock));
  auto ranges = transport_.ranges_asked();
  ASSERT_EQ(ranges.size(), 1u);
  EXPECT_EQ(ranges[0], (ByteRange{0, 5ull * kBlock}));  // blocks 0..4, aligned
}

// With several connections, each bringing its own bandwidth, a large read's blocks are spread
// over them: 10 blocks on 4 connections go as requests of 3 (the last one shorter), all sent
// before any answers.
TEST_F(BlockReaderTest, ALargeReadIsSpreadOverTheConnections) {
  ReaderOptions o = options();
  o.parallel_requests = 4;
  BlockReader reader(cache_.get(), fetcher_, o);
  cdn_.close_gate();
  std::string out(10 * kBlock, '\0');
  std::thread t([&] { ASSERT_TRUE(reader.read(file_, 0, out.size(), out.data(), nullptr).ok()); });
  wait_for_state([&] { return transport_.request_count() >= 4; });
  cdn_.open_gate();
  t.join();
  EXPECT_EQ(out, cdn_.content.substr(0, 10 * kBlock));
  auto ranges = transport_.ranges_asked();
  std::sort(ranges.begin(), ranges.end(), [](const ByteRange& a, const ByteRange& b) { return a.offset < b.offset; });
  ASSERT_EQ(ranges.size(), 4u);
  EXPECT_EQ(ranges[0], (ByteRange{0, 3ull * kBlock}));
  EXPECT_EQ(ranges[1], (ByteRange{3ull * kBlock, 3ull * kBlock}));
  EXPECT_EQ(ranges[2], (ByteRange{6ull * kBlock, 3ull * kBlock}));
  EXPECT_EQ(ranges[3], (ByteRange{9ull * kBlock, 1ull * kBlock}));
}

// With the reader's own 1 MiB block, the whole file is block 0, and a demand read of it goes in
// parts over the idle connections (ReadAheadPolicy::demand_parts): one flight still, however many
// readers wait and however many requests carry it.
TEST_F(BlockReaderTest, OneFetchPerBlockHoweverManyReadersWait) {
  BlockReader reader(cache_.get(), fetcher_);
  ASSERT_GT(ReadAheadPolicy(reader.options().read_ahead()).demand_parts(file_.size, 1, 0), 1u)
      << "the file is too small for its one block to go in parts";
  cdn_.close_gate();
  std::vector<std::thread> readers;
  std::atomic<int> correct{0};
  for (int i = 0; i < 8; ++i) {
    readers.emplace_back([&, i] {
      std::string out(1000, '\0');
      auto n = reader.read(file_, 2 * kBlock + i * 1000, 1000, out.data(), nullptr);
      if (n.ok() && out == cdn_.content.substr(2 * kBlock + i * 1000, 1000)) ++correct;
    });
  }
  // Every reader but the one that sends the fetch joins its flight before the fetch answers.
  // The flight exists before its requests reach the transport (the fetcher sends them from its
  // own thread), so wait for both. The block goes in parts: its bytes are asked once.
  wait_for_state([&] { return reader.stats().joined_flights == 7 && transport_.bytes_asked() >= file_.size; });
  EXPECT_EQ(transport_.bytes_asked(), file_.size);
  EXPECT_GT(transport_.request_count(), 1u) << "the block did not go in parts";
  cdn_.open_gate();
  for (auto& t : readers) t.join();
  EXPECT_EQ(correct.load(), 8);
  EXPECT_EQ(transport_.bytes_asked(), file_.size);
  EXPECT_EQ(reader.stats().memory_hits, 0u);  // all eight waited on the one flight
}

TEST_F(BlockReaderTest, SecondReadIsServedFromMemoryThenFromDiskAfterRestart) {
  {
    BlockReader reader(cache_.get(), fetcher_, options());
    ASSERT_EQ(read(reader, 0, file_.size), cdn_.content);
    size_t after_first = transport_.request_count();
    ASSERT_EQ(read(reader, 0, file_.size), cdn_.content);
    EXPECT_EQ(transport_.request_count(), after_first);
    EXPECT_GT(reader.stats().memory_hits, 0u);
  }
  // A new reader (a remount) over the same cache directory: the disk serves everything.
  size_t before = transport_.request_count();
  BlockReader reader(cache_.get(), fetcher_, options());
  ASSERT_EQ(read(reader, 0, file_.size), cdn_.content);
  EXPECT_EQ(transport_.request_count(), before);
  EXPECT_EQ(reader.stats().disk_hits, 11u);
}

TEST_F(BlockReaderTest, ACorruptCachedBlockIsFetchedAgainNeverServed) {
  {
    BlockReader reader(cache_.get(), fetcher_, options());
    ASSERT_EQ(read(reader, 0, 2 * kBlock), cdn_.content.substr(0, 2 * kBlock));
  }
  // Flip one byte in the middle of every block file on disk.
  int flipped = 0;
  for (auto& e : std::filesystem::recursive_directory_iterator(dir_.path() / "cache")) {
    if (!e.is_regular_file() || e.file_size() < kBlock) continue;
    std::fstream f(e.path(), std::ios::in | std::ios::out | std::ios::binary);
    f.seekg(kBlock / 2);
    char c;
    f.read(&c, 1);
    c ^= 0x10;
    f.seekp(kBlock / 2);
    f.write(&c, 1);
    ++flipped;
  }
  ASSERT_EQ(flipped, 2);
  size_t before = transport_.request_count();
  BlockReader reader(cache_.get(), fetcher_, options());
  EXPECT_EQ(read(reader, 0, 2 * kBlock), cdn_.content.substr(0, 2 * kBlock));
  EXPECT_GT(transport_.request_count(), before);
}

TEST_F(BlockReaderTest, SequentialReadsFetchAheadRandomReadsDoNot) {
  BlockReader reader(cache_.get(), fetcher_, options());
  ReadState random;
  for (uint64_t off : {7 * kBlock + 10, 2 * kBlock + 5, 9 * kBlock + 1}) {
    ASSERT_EQ(read(reader, off, 4096, &random), cdn_.content.substr(off, 4096));
  }
  EXPECT_EQ(transport_.bytes_asked(), 3u * kBlock);  // exactly the three blocks, nothing more
  EXPECT_EQ(random.ahead.window_blocks, 0u);

  // A new file id so nothing is cached (one that verifies: read-ahead may reach the end, and a
  // whole read is checked); read it sequentially in kernel-sized pieces.
  file_.content_id = testing::git_blob_id(cdn_.content);
  const uint64_t before = transport_.bytes_asked();
  ReadState sequential;
  // Five blocks: a run earns read-ahead after two (read_ahead.h), at a read that misses (only a
  // miss starts a fetch ahead).
  for (uint64_t off = 0; off < 5 * kBlock; off += kPiece) {
    ASSERT_EQ(read(reader, off, kPiece, &sequential), cdn_.content.substr(off, kPiece));
  }
  EXPECT_GT(sequential.ahead.window_blocks, 0u);
  // Wait for read-ahead to land, then the blocks it covered cost no further request.
  // Every request the reader sent must also have reached the transport (it is sent from the
  // fetcher's thread), or one still on its way would count against the read below.
  wait_for_state([&] {
    return reader.stats().blocks_fetched >= 3 + 5 + 1 && transport_.request_count() == reader.stats().requests;
  });
  const size_t after_ahead = transport_.ranges_asked().size();
  EXPECT_GT(transport_.bytes_asked() - before, 5u * kBlock);  // the five blocks read and at least one ahead
  ASSERT_EQ(read(reader, 5 * kBlock, kBlock), cdn_.content.substr(5 * kBlock, kBlock));
  // The read may move the window on (read-ahead past block 5, sent once the reader stops
  // waiting for it: how soon depends on the machine), but it asked nothing for block 5 itself.
  const std::vector<ByteRange> ranges = transport_.ranges_asked();
  for (size_t i = after_ahead; i < ranges.size(); ++i) {
    EXPECT_GE(ranges[i].offset, 6u * kBlock) << "block 5 was asked for again";
  }
}

// Once the window fills every connection with the largest requests, a sequential stream's
// read-ahead goes out in whole requests (8 blocks) only, but at the end of the file: a refill of
// "whatever room there is" sent 1-3 block requests that pay a full round trip each. (The reader
// reads 8 blocks at a time, so its window is at least that however fast the answers come: over
// the network a window grows only while the reader catches up with it.)
TEST_F(BlockReaderTest, ReadAheadSendsWholeRequestsOnly) {
  ReaderOptions options;
  options.block_size = kBlock / 8;  // the same logic as with 1 MiB blocks, on a 128x smaller file
  options.parallel_requests = 1;   // a window of 8 blocks fills it with an 8-block request
  const uint64_t block = options.block_size;
  const uint64_t per_request = options.max_blocks_per_request;
  cdn_.content = pattern(160 * block + 777, 7);
  file_.content_id = "sha256:" + sha256_hex(cdn_.content);
  file_.size = cdn_.content.size();
  BlockReader reader(cache_.get(), fetcher_, options);
  ReadState sequential;
  for (uint64_t off = 0; off < file_.size; off += per_request * block) {
    const size_t n = static_cast<size_t>(std::min<uint64_t>(per_request * block, file_.size - off));
    ASSERT_EQ(read(reader, off, n, &sequential), cdn_.content.substr(off, n));
  }
  int whole = 0;
  for (const ByteRange& r : transport_.ranges_asked()) {
    const bool at_end = r.offset + r.length == file_.size;
    // Past the first reads (the run earns read-ahead on its second), every one is whole.
    if (r.offset >= 48 * block && !at_end) {
      EXPECT_EQ(r.length % (per_request * block), 0u) << "a partial request at block " << r.offset / block;
      ++whole;
    }
  }
  EXPECT_GT(whole, 2);
}

// A reader slower than the link (every block read-ahead asked for lands before its next read, as
// h5py's decoding between chunk reads lets it): each read takes a mark without waiting, so the
// window stays the run's first and a stop has fetched that much past the last block read, not 0.4
// of the run (the window of a reader that waits, above).
TEST_F(BlockReaderTest, AReaderSlowerThanTheLinkKeepsItsFirstReadAheadWindow) {
  ReaderOptions options;
  options.block_size = kBlock / 8;
  options.start_window_bytes = 0;  // the window alone from the file's start (its reach: read_ahead_test)
  const uint64_t block = options.block_size;
  cdn_.content = pattern(200 * block, 9);
  file_.content_id = "sha256:" + sha256_hex(cdn_.content);
  file_.size = cdn_.content.size();
  BlockReader reader(cache_.get(), fetcher_, options);
  ReadState sequential;
  for (uint64_t b = 0; b < 100; ++b) {
    ASSERT_EQ(read(reader, b * block, block, &sequential), cdn_.content.substr(b * block, block));
    wait_for_state([&] { return reader.stats().blocks_in_flight == 0; });
  }
  EXPECT_EQ(sequential.ahead.window_blocks, 4u);  // the first window (min_readahead_blocks)
  EXPECT_TRUE(sequential.ahead.fetching);
  EXPECT_EQ(reader.stats().bytes_fetched, 104 * block) << "the blocks read and the first window ahead";
}

TEST_F(BlockReaderTest, ErrorsReachTheReaderAndAreNotRemembered) {
  BlockReader reader(cache_.get(), fetcher_, options());
  cdn_.fail = true;
  std::string out(100, '\0');
  auto n = reader.read(file_, 0, 100, out.data(), nullptr);
  ASSERT_FALSE(n.ok());
  EXPECT_NE(n.status().message().find("data/file.bin"), std::string::npos) << n.status().message();
  cdn_.fail = false;
  EXPECT_EQ(read(reader, 0, 100), cdn_.content.substr(0, 100));
}

TEST_F(BlockReaderTest, AReadThatIsNotAnsweredTimesOut) {
  const ReaderOptions options = timing_out_options();
  BlockReader reader(cache_.get(), fetcher_, options);
  auto n = read_unanswered(reader, 0, options.read_timeout);
  EXPECT_FALSE(n.ok());
  EXPECT_EQ(n.status().code(), Code::kTimeout);
  cdn_.open_gate();  // the fetch then completes; the reader's destructor waits for it
}

// The kernel answers a failed read by reading the page again at once. That second read fails at
// once too, rather than waiting a second --read-timeout (and sends nothing); once the late block
// arrives, reads get it.
TEST_F(BlockReaderTest, AReadRightAfterATimeoutFailsAtOnceAndTheLateBlockIsServed) {
  const ReaderOptions options = timing_out_options();
  BlockReader reader(cache_.get(), fetcher_, options);
  auto first = read_unanswered(reader, 0, options.read_timeout);
  ASSERT_FALSE(first.ok());
  EXPECT_EQ(first.status().code(), Code::kTimeout);
  std::string out(100, '\0');
  auto again = reader.read(file_, 50, 100, out.data(), nullptr);
  ASSERT_FALSE(again.ok());
  EXPECT_EQ(again.status().code(), Code::kTimeout);
  EXPECT_NE(again.status().message().find("failing at once"), std::string::npos) << again.status().message();
  // Block 0, asked once (perhaps in parts), by the first read only.
  wait_for_state([&] { return transport_.bytes_asked() >= kBlock; });
  EXPECT_EQ(transport_.bytes_asked(), kBlock);
  cdn_.open_gate();
  while (reader.stats().memory_bytes == 0) std::this_thread::yield();  // the late answer lands
  EXPECT_EQ(read(reader, 50, 100), cdn_.content.substr(50, 100));
  EXPECT_EQ(transport_.bytes_asked(), kBlock);
}

TEST_F(BlockReaderTest, AFullCacheDiskIsNeverAReadError) {
  // The disk fills up after the cache opened: every later write fails, reads must not.
  auto disk = std::make_shared<testing::FaultDisk>();
  open_cache(disk);
  disk->set_write_fault(testing::FaultDisk::WriteFault::kRefuse);
  {
    BlockReader reader(cache_.get(), fetcher_, options());
    EXPECT_EQ(read(reader, 0, file_.size), cdn_.content);
  }
  EXPECT_GT(cache_->stats().write_failures, 0u);
}

}  // namespace
}  // namespace hubfs

namespace hubfs {
namespace HUBFS_UNITY_ID {

// Reads the whole file in kernel-sized pieces, as cat or sha256sum would; the first error ends it.
Status read_whole(BlockReader& reader, const RemoteFile& file, std::string* out) {
  ReadState state;
  out->clear();
  for (uint64_t off = 0; off < file.size; off += kPiece) {
    std::string piece(kPiece, '\0');
    auto n = reader.read(file, off, piece.size(), piece.data(), &state);
    if (!n.ok()) return n.status();
    out->append(piece.data(), *n);
  }
  return Status::Ok();
}

TEST_F(BlockReaderTest, AWholeFileReadIsCheckedAgainstItsHash) {
  BlockReader reader(cache_.get(), fetcher_, options());
  std::string got;
  ASSERT_TRUE(read_whole(reader, file_, &got).ok());
  EXPECT_EQ(got, cdn_.content);
  EXPECT_EQ(reader.stats().files_verified, 1u);
  EXPECT_EQ(reader.stats().verify_failures, 0u);
}

// A body corrupted in transit keeps its length, so no range check sees it; the whole-file hash
// does. Every block of the file then leaves memory and disk, the handle that read it gets an
// error (a whole read never ends "successfully" with corrupt bytes), and the next read on a
// new handle fetches (now good) bytes again: corrupt bytes never stick.
TEST_F(BlockReaderTest, CorruptionInTransitNeverSticks) {
  const std::string good = cdn_.content;
  cdn_.content[3 * kBlock + 17] ^= 0x40;  // one flipped bit, same length
  {
    BlockReader reader(cache_.get(), fetcher_, options());
    std::string got;
    Status st = read_whole(reader, file_, &got);
    ASSERT_FALSE(st.ok());
    EXPECT_EQ(st.code(), Code::kCorrupt);
    EXPECT_EQ(reader.stats().verify_failures, 1u);
    EXPECT_EQ(reader.content_epoch(file_), 1u);
    EXPECT_EQ(reader.stats().files_verified, 0u);
  }
  // The corrupt block is not served from the disk cache any more.
  EXPECT_FALSE(cache_->get(disk_key(), 3).has_value());

  cdn_.content = good;  // the CDN recovers
  size_t before = transport_.request_count();
  BlockReader reader(cache_.get(), fetcher_, options());
  std::string got;
  ASSERT_TRUE(read_whole(reader, file_, &got).ok());
  EXPECT_EQ(got, good);
  EXPECT_GT(transport_.request_count(), before);
  EXPECT_EQ(reader.stats().files_verified, 1u);
}

// A failed hash's cleanup takes time (a disk removal per block, the shared tier's deletes). A
// read that starts meanwhile, on a handle opened after the failure, must not find a bad block the
// cleanup has not reached yet: it fetches fresh bytes. The stress test once served a flipped byte
// again (under TSan and load) this way: the new handle's read found block 0 still on disk, was
// descheduled, and put it in memory after the cleanup had dropped the failed hash; a new hash
// began from it and its waiters got the bad bytes. Here the disk holds the read at that point.
TEST_F(BlockReaderTest, AReadDuringAFailedHashsCleanupNeverGetsTheBadBlocks) {
  auto disk = std::make_shared<testing::FaultDisk>();
  open_cache(disk);
  const std::string good = cdn_.content;
  cdn_.content[kBlock / 2] ^= 0x40;  // block 0, as the stress test's first response
  BlockReader reader(cache_.get(), fetcher_, options());
  // No handle state: no read-ahead reaches the last block before the test asks for it.
  const uint64_t last = (file_.size - 1) / kBlock;
  ASSERT_EQ(read(reader, 0, last * kBlock).size(), last * kBlock);
  // Block 0 is on disk (written back after its waiters were released).
  wait_for_state([&] { return cache_->get(disk_key(), 0).has_value(); });
  disk->close_remove_gate();
  cdn_.content = good;  // the CDN recovers: a fresh fetch brings good bytes
  Status failed;
  std::thread finisher([&] {
    // The file's last block completes the hash, which fails; the cleanup stops at the disk.
    std::string out(kBlock, '\0');
    auto n = reader.read(file_, last * kBlock, kBlock, out.data(), nullptr);
    failed = n.ok() ? Status::Ok() : n.status();
  });
  wait_for_state([&] { return disk->removes_waiting() > 0; });
  ReadState reopened;  // what FileSystem::open does for a new handle
  reopened.epoch = reader.content_epoch(file_);
  EXPECT_EQ(reopened.epoch, 1u);
  disk->close_read_gate();
  std::string got(kBlock, '\0');
  Result<size_t> n = Status::Ok();
  std::atomic<bool> done{false};
  std::thread second([&] {
    n = reader.read(file_, 0, kBlock, got.data(), &reopened);
    done = true;
  });
  // Either the read never touches the disk during the cleanup (it fetches), or it is held with
  // the disk's copy of block 0 in hand: then the cleanup finishes before it goes on.
  wait_for_state([&] { return done.load() || disk->reads_waiting() > 0; });
  disk->open_remove_gate();
  finisher.join();
  disk->open_read_gate();
  second.join();
  EXPECT_EQ(failed.code(), Code::kCorrupt);
  ASSERT_TRUE(n.ok()) << n.status().message();
  EXPECT_TRUE(got == good.substr(0, kBlock)) << "the bad block 0 was served again after the failure";
  // And once the cleanup is over, a whole read on the new handle is good and verifies.
  std::string whole;
  ASSERT_TRUE(read_whole(reader, file_, &whole).ok());
  EXPECT_TRUE(whole == good);
  EXPECT_EQ(reader.stats().files_verified, 1u);
}

// Read-ahead that runs far past the file's hash hashes before it loads more (kMaxHashLagBlocks):
// with 1 KiB blocks a stream claims 128 blocks ahead, well past 32. The file is still hashed
// once, in order, and a flipped byte deep in it still fails the read.
TEST_F(BlockReaderTest, AStreamFarAheadOfItsHashIsStillHashedOnceInOrder) {
  ReaderOptions o = options();
  o.block_size = kBlock / 64;  // 653 blocks
  {
    BlockReader reader(cache_.get(), fetcher_, o);
    std::string got;
    ASSERT_TRUE(read_whole(reader, file_, &got).ok());
    EXPECT_EQ(got, cdn_.content);
    EXPECT_EQ(reader.stats().files_verified, 1u);
    EXPECT_EQ(reader.stats().verify_failures, 0u);
  }
  cdn_.content[9 * kBlock + 5] ^= 0x01;
  BlockReader fresh(nullptr, fetcher_, o);  // no disk cache: every block from the CDN again
  std::string got;
  Status st = read_whole(fresh, file_, &got);
  EXPECT_EQ(st.code(), Code::kCorrupt);
  EXPECT_EQ(fresh.stats().verify_failures, 1u);
  EXPECT_EQ(fresh.stats().files_verified, 0u);
}

// The blocks of one response are all served before any of them is written to disk: with the
// disk's writes stuck, a read of a whole 8-block response still returns (served one by one with
// its write, the second block waited for the first one's write, past the read timeout).
TEST_F(BlockReaderTest, AResponsesBlocksAreServedBeforeAnyIsWrittenToDisk) {
  auto disk = std::make_shared<testing::FaultDisk>();
  open_cache(disk);
  ReaderOptions o = options();
  o.read_timeout = std::chrono::seconds(5);  // the stuck write lasts 10 s (the gate's own bound)
  o.parallel_requests = 1;                   // one response of 8 blocks
  disk->close_write_gate();
  {
    BlockReader reader(cache_.get(), fetcher_, o);
    std::string out(8 * kBlock, '\0');
    auto n = reader.read(file_, 0, out.size(), out.data(), nullptr);
    disk->open_write_gate();
    ASSERT_TRUE(n.ok()) << n.status().message();
    EXPECT_EQ(out, cdn_.content.substr(0, 8 * kBlock));
    EXPECT_EQ(transport_.request_count(), 1u);
  }
  // ...and every one of them was written once the disk came back.
  for (uint64_t b = 0; b < 8; ++b) EXPECT_TRUE(cache_->get(disk_key(), b).has_value()) << b;
}

TEST(ContentVerifier, GitBlobIdsAndSha256) {
  // git hash-object of "hello\n" is ce013625030ba8dba906f756967f9e9ca394464a.
  auto blob = ContentVerifier::for_content("oid:ce013625030ba8dba906f756967f9e9ca394464a", 6);
  ASSERT_TRUE(blob);
  blob->update("hel");
  blob->update("lo\n");
  EXPECT_TRUE(blob->finish().match);
  auto sha = ContentVerifier::for_content("sha256:" + sha256_hex("abc"), 3);
  ASSERT_TRUE(sha);
  sha->update("abd");
  auto verdict = sha->finish();
  EXPECT_FALSE(verdict.match);
  EXPECT_EQ(verdict.expected, sha256_hex("abc"));
  EXPECT_EQ(verdict.computed, sha256_hex("abd"));
  EXPECT_FALSE(ContentVerifier::for_content("sha256:xyz", 3));
  EXPECT_FALSE(ContentVerifier::for_content("etag:abc", 3));
}

}  // namespace
}  // namespace hubfs

namespace hubfs {
namespace HUBFS_UNITY_ID {

// The memory cache counts the buffers its blocks pin: one block kept from an 8-block response
// keeps the whole response alive, and is accounted as such, so the bound holds for real memory.
TEST_F(BlockReaderTest, MemoryCacheIsAccountedByPinnedBuffers) {
  ReaderOptions o = options();
  o.memory_cache_bytes = 3 * kBlock;
  o.parallel_requests = 1;
  BlockReader reader(cache_.get(), fetcher_, o);
  // One read of 8 blocks on one connection: one coalesced 8-block response.
  ASSERT_EQ(read(reader, 0, 8 * kBlock), cdn_.content.substr(0, 8 * kBlock));
  ReaderStats s = reader.stats();
  // The response arrived into one pooled slot per block (reader/block_slots.h): each block pins
  // only its own slot (its bytes and the disk tier's header room), so the memory tier keeps what
  // fits its budget, here two slots, rather than the whole response a shared response string pinned.
  EXPECT_EQ(s.memory_bytes, 2u * DiskTier::file_slot_bytes(kBlock));
  // A later small response evicts the big one entirely: the account drops below the budget.
  ASSERT_EQ(read(reader, 9 * kBlock, 100), cdn_.content.substr(9 * kBlock, 100));
  EXPECT_LE(reader.stats().memory_bytes, o.memory_cache_bytes);
}

}  // namespace
}  // namespace hubfs

namespace hubfs {
namespace HUBFS_UNITY_ID {

TEST_F(BlockReaderTest, HintedRangesAreFetchedAtOnceAndReadsShareThem) {
  BlockReader reader(cache_.get(), fetcher_, options());
  cdn_.close_gate();  // hold answers: everything hinted must be in flight at once
  auto started = reader.prefetch(file_, {{0, 100}, {5 * kBlock + 7, 10}, {9 * kBlock, kBlock}});
  ASSERT_TRUE(started.ok()) << started.status().message();
  EXPECT_EQ(*started, 3u * kBlock);
  // Every hinted block is claimed before prefetch() returns and asked for once: when the requests
  // cover all three, no further one can come.
  wait_for_state([&] { return transport_.bytes_asked() == 3 * kBlock; });
  EXPECT_EQ(transport_.request_count(), 3u);  // three separate blocks: three requests, together
  cdn_.open_gate();
  EXPECT_EQ(read(reader, 5 * kBlock + 7, 10), cdn_.content.substr(5 * kBlock + 7, 10));
  EXPECT_EQ(read(reader, 9 * kBlock + 5, 100), cdn_.content.substr(9 * kBlock + 5, 100));
  EXPECT_EQ(transport_.request_count(), 3u);  // the reads waited on the hinted fetches
  // Already cached: a hint costs nothing.
  auto again = reader.prefetch(file_, {{0, 100}});
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(*again, 0u);
  EXPECT_EQ(reader.stats().hints, 2u);
}

// A hint is split into parallel_requests requests of equal size, in one wave: with one slot
// the whole 11-block file is one request (not 8 + 3 as max_blocks_per_request would cut it), up
// to max_blocks_per_hinted_request blocks each. (Grading, for whole files: the next test.)
TEST_F(BlockReaderTest, HintsGoOutInOneWaveOfEqualRequests) {
  for (uint32_t slots : {1u, 2u, 4u}) {
    SCOPED_TRACE("slots " + std::to_string(slots));
    FakeTransport transport([this](const HttpRequest& r) { return cdn_.answer(r); });
    RangeFetcher fetcher(transport, testing::fetcher_on(Env::real()));
    ReaderOptions o = options();
    o.parallel_requests = slots;
    o.whole_file_hint_grade = 1.0;
    BlockReader reader(nullptr, fetcher, o);
    cdn_.close_gate();  // everything hinted must be asked for at once
    ASSERT_TRUE(reader.prefetch(file_, {{0, file_.size}}).ok());
    const size_t want = slots;  // 11 blocks over 1, 2, 4 slots: 11, 6+5, 3+3+3+2
    // Each hinted block is asked for once: once the requests cover the file, none can follow.
    wait_for_state([&] { return transport.bytes_asked() == file_.size; });
    std::vector<ByteRange> ranges = transport.ranges_asked();
    cdn_.open_gate();
    ASSERT_EQ(ranges.size(), want);
    std::sort(ranges.begin(), ranges.end(), [](const ByteRange& a, const ByteRange& b) { return a.offset < b.offset; });
    uint64_t next = 0, largest = 0, smallest = UINT64_MAX;
    for (const ByteRange& r : ranges) {
      EXPECT_EQ(r.offset, next);  // contiguous, no overlap
      next = r.offset + r.length;
      const uint64_t blocks = (r.length + kBlock - 1) / kBlock;
      largest = std::max(largest, blocks);
      smallest = std::min(smallest, blocks);
    }
    EXPECT_EQ(next, file_.size);
    EXPECT_LE(largest - smallest, 1u);  // equal, in blocks, up to one
    EXPECT_EQ(read(reader, 0, file_.size), cdn_.content);
    EXPECT_EQ(transport.request_count(), want);
  }
  // Beyond the cap, more waves: 11 blocks at most 4 per request from one slot.
  FakeTransport transport([this](const HttpRequest& r) { return cdn_.answer(r); });
  RangeFetcher fetcher(transport, testing::fetcher_on(Env::real()));
  ReaderOptions o = options();
  o.parallel_requests = 1;
  o.max_blocks_per_hinted_request = 4;
  BlockReader reader(nullptr, fetcher, o);
  ASSERT_TRUE(reader.prefetch(file_, {{0, file_.size}}).ok());
  EXPECT_EQ(read(reader, 0, file_.size), cdn_.content);
  EXPECT_EQ(transport.request_count(), 3u);
}

// A hint behind other hinted blocks still on their way shares the request slots with them: its
// runs go whole instead of one block per request (a planner hinting a few frames of many files at
// once). Alone, the same two blocks would go as two requests.
TEST_F(BlockReaderTest, AHintBehindOthersStillOnTheirWayGoesInWholeRuns) {
  FakeTransport transport([this](const HttpRequest& r) { return cdn_.answer(r); });
  RangeFetcher fetcher(transport, testing::fetcher_on(Env::real()));
  ReaderOptions o = options();
  o.parallel_requests = 4;
  BlockReader reader(nullptr, fetcher, o);
  cdn_.close_gate();  // the first hint's answers are held: its blocks are still on their way
  ASSERT_TRUE(reader.prefetch(file_, {{0, 4 * kBlock}}).ok());
  wait_for_state([&] { return transport.bytes_asked() == 4 * kBlock; });
  EXPECT_EQ(transport.request_count(), 4u);  // alone: one block per slot
  ASSERT_TRUE(reader.prefetch(file_, {{5 * kBlock, 2 * kBlock}}).ok());
  wait_for_state([&] { return transport.bytes_asked() == 6 * kBlock; });
  cdn_.open_gate();
  EXPECT_EQ(transport.request_count(), 5u);  // behind 4 waiting blocks: blocks 5-6 in one request
  EXPECT_EQ(read(reader, 0, 4 * kBlock), cdn_.content.substr(0, 4 * kBlock));
  EXPECT_EQ(read(reader, 5 * kBlock, 2 * kBlock), cdn_.content.substr(5 * kBlock, 2 * kBlock));
  EXPECT_EQ(transport.request_count(), 5u);  // the reads were served by the hinted fetches
}

// A hint asking for whole runs (a plan's, sent frame after frame) goes out as one request per run
// of neighbouring blocks even with every connection idle, where the same hint spread goes out as a
// block per connection; runs apart stay apart, and a run longer than max_blocks_per_hinted_request
// is cut there.
TEST_F(BlockReaderTest, AHintOfWholeRunsSendsEachRunInOneRequest) {
  struct Case {
    HintRequests requests;
    std::vector<ByteRange> hint;
    std::vector<uint64_t> lengths;  // of the requests, in blocks, in file order
  };
  for (const Case& c : {Case{HintRequests::kSpread, {{kBlock, 3 * kBlock}}, {1, 1, 1}},
                        Case{HintRequests::kWholeRuns, {{kBlock, 3 * kBlock}}, {3}},
                        Case{HintRequests::kWholeRuns, {{0, 2 * kBlock}, {6 * kBlock, kBlock}}, {2, 1}},
                        Case{HintRequests::kWholeRuns, {{0, 7 * kBlock}}, {3, 3, 1}}}) {
    SCOPED_TRACE(std::to_string(c.requests == HintRequests::kWholeRuns) + ", " + std::to_string(c.hint.size()) +
                 " ranges, " + std::to_string(c.lengths.size()) + " requests");
    FakeTransport transport([this](const HttpRequest& r) { return cdn_.answer(r); });
    RangeFetcher fetcher(transport, testing::fetcher_on(Env::real()));
    ReaderOptions o = options();
    o.parallel_requests = 8;
    o.max_blocks_per_hinted_request = 3;
    BlockReader reader(nullptr, fetcher, o);
    cdn_.close_gate();  // everything hinted must be asked for at once
    ASSERT_TRUE(reader.prefetch(file_, c.hint, c.requests).ok());
    uint64_t hinted = 0;
    for (uint64_t n : c.lengths) hinted += n;
    wait_for_state([&] { return transport.bytes_asked() == hinted * kBlock; });
    std::vector<ByteRange> ranges = transport.ranges_asked();
    cdn_.open_gate();
    std::sort(ranges.begin(), ranges.end(), [](const ByteRange& a, const ByteRange& b) { return a.offset < b.offset; });
    std::vector<uint64_t> lengths;
    for (const ByteRange& r : ranges) lengths.push_back(r.length / kBlock);
    EXPECT_EQ(lengths, c.lengths);
    for (const ByteRange& r : c.hint)
      EXPECT_EQ(read(reader, r.offset, r.length), cdn_.content.substr(r.offset, r.length));
    EXPECT_EQ(transport.request_count(), c.lengths.size());  // the reads were served by the hint's fetches
  }
}

// Connections beyond hint_spread_requests run more hinted runs at once; they do not cut a hint's
// runs smaller: 4 blocks hinted alone at 8 connections go as 2 requests of 2 blocks when a hint
// is spread over at most 2 slots (before, one block per connection: 4 requests), and as 4 of 1
// when it may use all 8.
TEST_F(BlockReaderTest, ConnectionsBeyondTheHintSpreadDoNotCutAHintSmaller) {
  for (const auto& [spread, want] : {std::pair<uint32_t, size_t>{2u, 2u}, std::pair<uint32_t, size_t>{8u, 4u}}) {
    SCOPED_TRACE("spread " + std::to_string(spread));
    FakeTransport transport([this](const HttpRequest& r) { return cdn_.answer(r); });
    RangeFetcher fetcher(transport, testing::fetcher_on(Env::real()));
    ReaderOptions o = options();
    o.parallel_requests = 8;
    o.hint_spread_requests = spread;
    BlockReader reader(nullptr, fetcher, o);
    cdn_.close_gate();  // everything hinted must be asked for at once
    ASSERT_TRUE(reader.prefetch(file_, {{kBlock, 4 * kBlock}}).ok());
    wait_for_state([&] { return transport.bytes_asked() == 4 * kBlock; });
    std::vector<ByteRange> ranges = transport.ranges_asked();
    cdn_.open_gate();
    ASSERT_EQ(ranges.size(), want);
    for (const ByteRange& r : ranges) EXPECT_EQ(r.length, 4 * kBlock / want);
    EXPECT_EQ(read(reader, kBlock, 4 * kBlock), cdn_.content.substr(kBlock, 4 * kBlock));
    EXPECT_EQ(transport.request_count(), want);  // the read was served by the hinted fetches
  }
}

// A hint for the whole file (hashed once its last block is in) goes out in graded requests that
// end in file order, 1 + 2 + 3 + 5 blocks at a ratio of 1.5 over 4 slots; a hint for part of it,
// or with whole-file checks off, in equal ones.
TEST_F(BlockReaderTest, AWholeFileHintGoesOutInGradedRequests) {
  struct Case {
    std::vector<ByteRange> hint;
    bool verify;
    std::vector<uint64_t> blocks;  // per request, in file order
  };
  for (const Case& c : {Case{{{0, file_.size}}, true, {1, 2, 3, 5}},
                        Case{{{0, 10 * kBlock}}, true, {3, 3, 3, 1}},
                        Case{{{0, file_.size}}, false, {3, 3, 3, 2}}}) {
    SCOPED_TRACE(std::to_string(c.hint[0].length) + " bytes, verify " + std::to_string(c.verify));
    FakeTransport transport([this](const HttpRequest& r) { return cdn_.answer(r); });
    RangeFetcher fetcher(transport, testing::fetcher_on(Env::real()));
    ReaderOptions o = options();
    o.parallel_requests = 4;
    o.whole_file_hint_grade = 1.5;
    o.verify_whole_files = c.verify;
    BlockReader reader(nullptr, fetcher, o);
    cdn_.close_gate();  // everything hinted must be asked for at once
    ASSERT_TRUE(reader.prefetch(file_, c.hint).ok());
    uint64_t hinted = 0;
    for (uint64_t b : c.blocks) hinted += b;
    const uint64_t hinted_bytes = std::min<uint64_t>(hinted * kBlock, file_.size);
    wait_for_state([&] { return transport.bytes_asked() == hinted_bytes; });
    std::vector<ByteRange> ranges = transport.ranges_asked();
    cdn_.open_gate();
    std::sort(ranges.begin(), ranges.end(), [](const ByteRange& a, const ByteRange& b) { return a.offset < b.offset; });
    std::vector<uint64_t> got;
    for (const ByteRange& r : ranges) got.push_back((r.length + kBlock - 1) / kBlock);
    EXPECT_EQ(got, c.blocks);
    EXPECT_EQ(read(reader, 0, hinted_bytes), cdn_.content.substr(0, hinted_bytes));
  }
}

// A file with a source of its own (a Xet read, checked chunk by chunk by the source) has no
// serial hash to feed in file order: its whole-file hint goes out in equal requests however the
// reader grades other files' (with the grade, 1 + 2 + 3 + 5 blocks as above).
TEST_F(BlockReaderTest, AWholeFileHintOfAFileWithItsOwnSourceGoesOutInEqualRequests) {
  // Holds every request until the test answers it from its own thread.
  struct HeldSource : RangeSource {
    void fetch_async(uint64_t, ByteRange range, Callback done, Deadline) override {
      std::lock_guard<std::mutex> lock(mu);
      held.emplace_back(range, std::move(done));
      asked += range.length;
    }
    std::mutex mu;
    std::vector<std::pair<ByteRange, Callback>> held;
    std::atomic<uint64_t> asked{0};
  };
  auto source = std::make_shared<HeldSource>();
  file_.source = source;
  FakeTransport transport([this](const HttpRequest& r) { return cdn_.answer(r); });
  RangeFetcher fetcher(transport, testing::fetcher_on(Env::real()));
  ReaderOptions o = options();
  o.parallel_requests = 4;
  o.whole_file_hint_grade = 1.5;
  BlockReader reader(nullptr, fetcher, o);
  ASSERT_TRUE(reader.prefetch(file_, {{0, file_.size}}).ok());
  wait_for_state([&] { return source->asked.load() == file_.size; });
  std::vector<std::pair<ByteRange, RangeSource::Callback>> held;
  {
    std::lock_guard<std::mutex> lock(source->mu);
    held.swap(source->held);
  }
  std::vector<uint64_t> blocks;
  for (auto& [range, done] : held) {
    blocks.push_back((range.length + kBlock - 1) / kBlock);
    done(cdn_.content.substr(range.offset, range.length), Provenance::kPlain);
  }
  std::sort(blocks.begin(), blocks.end());
  EXPECT_EQ(blocks, (std::vector<uint64_t>{2, 3, 3, 3}));
  EXPECT_EQ(read(reader, 0, file_.size), cdn_.content);
  EXPECT_EQ(transport.request_count(), 0u);  // every byte came from the source
}

// A source that reports its bytes as they arrive (RangeSource::fetch_into_async, as a Xet read
// does): every request is held, the test writes into its buffer, reports and ends it.
struct ProgressSource : RangeSource {
  struct Call {
    ByteRange range;
    std::shared_ptr<RangeBuffer> into;
    Progress progress;
    DoneInto done;
  };
  void fetch_async(uint64_t, ByteRange, Callback done, Deadline) override {
    ++string_fetches;
    std::thread([done] { done(Unavailable("this source is asked into a buffer"), Provenance::kPlain); }).detach();
  }
  void fetch_into_async(uint64_t, ByteRange range, std::shared_ptr<RangeBuffer> into, Progress progress,
                        DoneInto done, Deadline) override {
    std::lock_guard<std::mutex> lock(mu);
    calls.push_back({range, std::move(into), std::move(progress), std::move(done)});
  }
  // The next call, once it is made.
  Call take() {
    testing::wait_for_state([&] {
      std::lock_guard<std::mutex> lock(mu);
      return !calls.empty();
    });
    std::lock_guard<std::mutex> lock(mu);
    if (calls.empty()) return {};
    Call c = std::move(calls.front());
    calls.erase(calls.begin());
    return c;
  }
  std::mutex mu;
  std::vector<Call> calls;
  std::atomic<int> string_fetches{0};
};

// The first blocks of a response its source reports in are served, and written to disk, while
// its later bytes are still held: a hint's responses no longer end in every block's disk write.
TEST_F(BlockReaderTest, ABlockASourceReportsInIsServedAndWrittenBeforeItsRequestEnds) {
  auto source = std::make_shared<ProgressSource>();
  file_.source = source;
  ReaderOptions o = options();
  o.parallel_requests = 1;  // the hint in one request
  BlockReader reader(cache_.get(), fetcher_, o);
  ASSERT_TRUE(reader.prefetch(file_, {{0, 4 * kBlock}}).ok());
  ProgressSource::Call call = source->take();
  ASSERT_TRUE(call.into);
  ASSERT_EQ(call.range.offset, 0u);
  ASSERT_EQ(call.range.length, 4u * kBlock);
  // Block 0 and half of block 1 are in: block 0 alone is whole.
  call.into->write(0, cdn_.content.data(), kBlock + kBlock / 2);
  call.progress(kBlock + kBlock / 2);
  EXPECT_EQ(read(reader, 0, kBlock), cdn_.content.substr(0, kBlock));
  testing::wait_for_state([&] { return cache_->get(disk_key(), 0).has_value(); });
  EXPECT_EQ(cache_->get(disk_key(), 0), cdn_.content.substr(0, kBlock));
  EXPECT_FALSE(cache_->get(disk_key(), 1).has_value()) << "block 1 is not all in yet";
  EXPECT_EQ(reader.stats().blocks_fetched, 1u);
  // The rest, all reported: every block but the last is served now; the last waits for the
  // request's end (the source records its read for the file's verdict then).
  call.into->write(kBlock + kBlock / 2, cdn_.content.data() + kBlock + kBlock / 2, 2 * kBlock + kBlock / 2);
  call.progress(4 * kBlock);
  EXPECT_EQ(read(reader, kBlock, 2 * kBlock), cdn_.content.substr(kBlock, 2 * kBlock));
  testing::wait_for_state([&] { return cache_->get(disk_key(), 2).has_value(); });
  EXPECT_EQ(reader.stats().blocks_fetched, 3u);
  EXPECT_FALSE(cache_->get(disk_key(), 3).has_value()) << "the run's last block waits for its end";
  call.done(Status::Ok(), Provenance::kFileHashed);
  EXPECT_EQ(read(reader, 0, 4 * kBlock), cdn_.content.substr(0, 4 * kBlock));
  EXPECT_EQ(reader.stats().blocks_fetched, 4u);
  EXPECT_EQ(reader.stats().bytes_fetched, 4u * kBlock);
  EXPECT_EQ(source->string_fetches.load(), 0);
}

// A request that fails part-way: the blocks its source reported stay served; the others, whose
// bytes it did not all bring (here: wrong ones in block 1), fail their waiters and are fetched
// afresh by the next read, never served or written from the failed request.
TEST_F(BlockReaderTest, ARequestThatFailsPartWayServesOnlyTheBlocksItReported) {
  auto source = std::make_shared<ProgressSource>();
  file_.source = source;
  ReaderOptions o = options();
  o.parallel_requests = 1;
  BlockReader reader(cache_.get(), fetcher_, o);
  ASSERT_TRUE(reader.prefetch(file_, {{0, 3 * kBlock}}).ok());
  ProgressSource::Call call = source->take();
  ASSERT_TRUE(call.into);
  ASSERT_EQ(call.range.length, 3u * kBlock);
  call.into->write(0, cdn_.content.data(), kBlock);
  call.progress(kBlock);
  const std::string wrong(kBlock, 'X');
  call.into->write(kBlock, wrong.data(), wrong.size());  // never reported
  EXPECT_EQ(read(reader, 0, kBlock), cdn_.content.substr(0, kBlock));
  call.done(Unavailable("the storage service failed"), Provenance::kFileHashed);
  testing::wait_for_state([&] { return reader.stats().fetch_errors == 1; });
  // Block 1 again: a new request, answered whole by the test.
  std::thread answer([&] {
    ProgressSource::Call again = source->take();
    ASSERT_TRUE(again.into);
    EXPECT_EQ(again.range.offset, uint64_t{kBlock});
    again.into->write(0, cdn_.content.data() + again.range.offset, again.range.length);
    again.done(Status::Ok(), Provenance::kFileHashed);
  });
  EXPECT_EQ(read(reader, kBlock, kBlock), cdn_.content.substr(kBlock, kBlock));
  answer.join();
  testing::wait_for_state([&] { return cache_->get(disk_key(), 1).has_value(); });
  EXPECT_EQ(cache_->get(disk_key(), 1), cdn_.content.substr(kBlock, kBlock));
  EXPECT_EQ(cache_->get(disk_key(), 0), cdn_.content.substr(0, kBlock));
}

TEST_F(BlockReaderTest, MalformedHintsChangeNothing) {
  BlockReader reader(cache_.get(), fetcher_, options());
  EXPECT_FALSE(reader.prefetch(file_, {{0, 10}, {file_.size - 1, 2}}).ok());
  EXPECT_FALSE(reader.prefetch(file_, {{file_.size, 1}}).ok());
  EXPECT_FALSE(reader.prefetch(file_, {{5, 0}}).ok());
  EXPECT_FALSE(reader.prefetch(file_, {{UINT64_MAX - 1, 5}}).ok());
  // A hint claims its blocks before prefetch() returns: none were, nor was the hint counted (it
  // would have turned the file's read-ahead off).
  EXPECT_EQ(reader.stats().hints, 0u);
  EXPECT_EQ(reader.stats().hinted_bytes, 0u);
  ReadState sequential;
  for (uint64_t off = 0; off < 5 * kBlock; off += kPiece) read(reader, off, kPiece, &sequential);
  EXPECT_GT(sequential.ahead.window_blocks, 0u);
  EXPECT_GT(reader.stats().read_ahead_bytes, 0u);
}

TEST_F(BlockReaderTest, HintsStayWithinTheReadAheadBudget) {
  ReaderOptions o = options();
  o.max_prefetch_bytes = 3 * kBlock;
  BlockReader reader(cache_.get(), fetcher_, o);
  auto started = reader.prefetch(file_, {{0, file_.size}});
  ASSERT_TRUE(started.ok());
  EXPECT_EQ(*started, 3u * kBlock);  // the rest is skipped, to be fetched on demand
  std::string whole = read(reader, 0, file_.size);
  EXPECT_EQ(whole, cdn_.content);
}

}  // namespace
}  // namespace hubfs

namespace hubfs {
namespace HUBFS_UNITY_ID {

// Issue 42: read-ahead fetches only after a miss, and only while reads consume what it fetched.

class ReadAheadOnMissTest : public BlockReaderTest {
 protected:
  // Reads blocks [from_block, to_block) sequentially in the kernel's pieces (kPiece).
  void read_pieces(BlockReader& reader, ReadState& state, uint64_t from_block, uint64_t to_block) {
    const uint64_t end = std::min<uint64_t>(file_.size, to_block * kBlock);
    for (uint64_t off = from_block * kBlock; off < end; off += kPiece) {
      const size_t n = static_cast<size_t>(std::min<uint64_t>(kPiece, end - off));
      ASSERT_EQ(read(reader, off, n, &state), cdn_.content.substr(off, n)) << off;
    }
  }
  // Until the reader is idle: no block claimed and not yet served (read-ahead claims its blocks
  // before the read returns), and every request it counted has reached the transport (counted
  // from `sent_before`, the transport's count when this reader started).
  void settle(BlockReader& reader, size_t sent_before) {
    wait_for_state([&] {
      const ReaderStats s = reader.stats();
      return s.blocks_in_flight == 0 && transport_.request_count() - sent_before == s.requests;
    });
  }
};

// A partial read, then the same read by a new reader over the same cache (a remount): the warm
// read asks nothing of the network, though its stream runs into blocks nobody fetched.
TEST_F(ReadAheadOnMissTest, AWarmReadAfterARestartFetchesNothing) {
  // The first window alone, so that the cold stream stops short of the file's end (the file's
  // start would reach all of its 11 blocks: read_ahead.h, start_window_bytes).
  ReaderOptions o = options();
  o.start_window_bytes = 0;
  {
    BlockReader reader(cache_.get(), fetcher_, o);
    ReadState cold;
    read_pieces(reader, cold, 0, 3);  // with its first window ahead, blocks 0-6 of 11
    settle(reader, 0);
    EXPECT_GT(reader.stats().read_ahead_bytes, 0u) << "the cold stream read ahead";
  }  // shutdown: every block fetched is on disk
  const size_t before = transport_.request_count();
  BlockReader reader(cache_.get(), fetcher_, o);
  ReadState warm;
  read_pieces(reader, warm, 0, 3);
  settle(reader, before);
  EXPECT_EQ(transport_.request_count(), before) << "a warm read fetched";
  EXPECT_EQ(reader.stats().read_ahead_bytes, 0u);
  EXPECT_GT(reader.stats().disk_hits, 0u);
  EXPECT_FALSE(warm.ahead.fetching);
  // Reading on past what the cache holds misses, and the miss starts read-ahead.
  read_pieces(reader, warm, 3, 11);
  settle(reader, before);
  EXPECT_GT(transport_.request_count(), before);
  EXPECT_GT(reader.stats().read_ahead_bytes, 0u) << "a miss did not start read-ahead";
}

// A program reading a file from its start (h5py: its metadata in block 0, then its first chunk):
// the kernel's small reads within block 0 ask nothing ahead, and the piece that goes on into block
// 1 sends the file's start (here 8 blocks: blocks 2-7) out with block 1's own request.
TEST_F(ReadAheadOnMissTest, ThePieceThatReachesBlockOneStartsReadAhead) {
  ReaderOptions o = options();
  o.start_window_bytes = 8 * kBlock;
  BlockReader reader(cache_.get(), fetcher_, o);
  ReadState state;
  ASSERT_EQ(read(reader, 0, kPiece / 4, &state), cdn_.content.substr(0, kPiece / 4));
  ASSERT_EQ(read(reader, kPiece / 4, kPiece, &state), cdn_.content.substr(kPiece / 4, kPiece));
  settle(reader, 0);
  EXPECT_EQ(reader.stats().read_ahead_bytes, 0u) << "one block is no stream";
  const uint64_t at = kBlock - kPiece / 2;  // blocks 0-1, well under two blocks read
  ASSERT_EQ(read(reader, at, kPiece, &state), cdn_.content.substr(at, kPiece));
  settle(reader, 0);
  EXPECT_EQ(reader.stats().read_ahead_bytes, 6u * kBlock);
  EXPECT_EQ(state.ahead.prefetched_to, 8u);
}

// A cold stream read to the end: read-ahead continued while its blocks were consumed, every byte
// it fetched was read (nothing unread), and a partial read's unread read-ahead is counted.
TEST_F(ReadAheadOnMissTest, ConsumedReadAheadContinuesAndUnreadReadAheadIsCounted) {
  {
    BlockReader reader(cache_.get(), fetcher_, options());
    ReadState whole;
    read_pieces(reader, whole, 0, 11);
    settle(reader, 0);
    const ReaderStats s = reader.stats();
    EXPECT_GT(s.read_ahead_bytes, 2u * kBlock) << "read-ahead did not continue past its first window";
    EXPECT_EQ(s.read_ahead_used_bytes, s.read_ahead_bytes) << "a whole-file read left read-ahead unread";
  }
  file_.content_id = testing::git_blob_id(cdn_.content);  // nothing cached, and it verifies
  const size_t before = transport_.request_count();
  BlockReader reader(cache_.get(), fetcher_, options());
  ReadState partial;
  read_pieces(reader, partial, 0, 6);
  settle(reader, before);
  const ReaderStats s = reader.stats();
  EXPECT_GT(s.read_ahead_bytes, s.read_ahead_used_bytes) << "the partial read's unread read-ahead is not counted";
}

// The reader's pause, told by the clock: pieces that follow each other at once are one read of
// the program's own; one that comes ReaderOptions::reader_pause after the last returned starts
// the next, and gets the last one's worth ahead (read_ahead.h).
TEST_F(ReadAheadOnMissTest, AReadAfterTheReadersPauseGetsItsLastReadAhead) {
  const std::string sha256_id = file_.content_id;
  for (const bool pause : {false, true}) {
    // Nothing cached under either id, and both verify: read-ahead may reach the file's end.
    file_.content_id = pause ? testing::git_blob_id(cdn_.content) : sha256_id;
    const size_t before = transport_.request_count();
    BlockReader reader(cache_.get(), fetcher_, options());
    ReadState state;
    read_pieces(reader, state, 0, 5);  // one read of 5 blocks, cut into the kernel's pieces
    settle(reader, before);
    if (pause) env_.advance(reader.options().reader_pause);
    read_pieces(reader, state, 5, 6);
    if (pause) {
      EXPECT_EQ(state.ahead.last_burst_bytes, 5 * kBlock);
      EXPECT_GE(state.ahead.window_blocks, 5u);
    } else {
      EXPECT_EQ(state.ahead.last_burst_bytes, 0u) << "pieces with no pause between them were taken for reads";
      EXPECT_LT(state.ahead.window_blocks, 5u);
    }
    settle(reader, before);
  }
}

// A file whose blocks a hint (or `hubfs prefetch`) brought: its reads start no fetch, in this
// reader and in the next one over the same cache.
TEST_F(ReadAheadOnMissTest, AHintedFilesReadsStartNoFetch) {
  {
    BlockReader reader(cache_.get(), fetcher_, options());
    ASSERT_TRUE(reader.prefetch(file_, {{0, 6 * kBlock}}).ok());
    settle(reader, 0);  // a hint claims its blocks before prefetch() returns
    const size_t hinted = transport_.request_count();
    EXPECT_GT(hinted, 0u);
    ReadState state;
    read_pieces(reader, state, 0, 6);
    settle(reader, 0);
    EXPECT_EQ(transport_.request_count(), hinted);
    EXPECT_EQ(reader.stats().read_ahead_bytes, 0u);
  }
  const size_t before = transport_.request_count();
  BlockReader reader(cache_.get(), fetcher_, options());
  ReadState state;
  read_pieces(reader, state, 0, 6);
  settle(reader, before);
  EXPECT_EQ(transport_.request_count(), before);
  EXPECT_EQ(reader.stats().read_ahead_bytes, 0u);
}

}  // namespace HUBFS_UNITY_ID
}  // namespace hubfs
