#include <sys/wait.h>
#include "cache/block_cache.h"

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <random>
#include <thread>

#include "cache/block_file.h"
#include "fault_disk.h"
#include "page_cache.h"
#include "support/manual_env.h"
#include "support/pattern.h"
#include "support/temp_dir.h"

namespace hubfs {
namespace HUBFS_UNITY_ID {

namespace fs = std::filesystem;
using testing::FaultDisk;
using testing::TempDir;

const std::string kA = "sha256:" + std::string(64, 'a');
const std::string kB = "sha256:" + std::string(64, 'b');
const std::string kC = "sha256:" + std::string(64, 'c');
const std::string kD = "oid:" + std::string(40, 'd');

// A block's bytes, different per id and index: the support library's pattern, optimized and
// uninstrumented in the sanitizer builds (a per-byte generator here, at -O0 under TSan, cost
// ~1 s per 10 MiB).
std::string pattern(const std::string& id, uint64_t index, size_t n) {
  return testing::pattern_bytes(std::hash<std::string>()(id) + index, 0, n);
}

std::string block_path(const fs::path& dir, const std::string& id, uint64_t index) {
  auto d = block_file::digest_content_id(id);
  return (dir / "blocks" / block_file::shard_name(d) / block_file::file_name(id, d, index))
      .string();
}

// Every regular file under the cache's blocks directory, temp files included.
// Both tolerate files that vanish between the listing and the look: a cache's background
// eviction may still be removing blocks while a test counts them (seen under ASan in
// TwoInstancesSharingADirectoryNeverServeWrongBytes: file_size threw on an evicted block).
std::vector<fs::path> files_under(const fs::path& dir) {
  std::vector<fs::path> out;
  std::error_code ec;
  for (auto it = fs::recursive_directory_iterator(dir / "blocks", ec);
       !ec && it != fs::recursive_directory_iterator(); it.increment(ec)) {
    std::error_code e;
    if (it->is_regular_file(e)) out.push_back(it->path());
  }
  return out;
}

uint64_t bytes_under(const fs::path& dir) {
  uint64_t total = 0;
  for (const auto& p : files_under(dir)) {
    std::error_code e;
    const uint64_t size = fs::file_size(p, e);
    if (!e) total += size;  // gone since the listing: evicted, counts nothing
  }
  return total;
}

void flip_bit(const std::string& path, size_t offset) {
  std::fstream f(path, std::ios::in | std::ios::out | std::ios::binary);
  f.seekg(static_cast<std::streamoff>(offset));
  char c;
  f.read(&c, 1);
  c ^= 0x10;
  f.seekp(static_cast<std::streamoff>(offset));
  f.write(&c, 1);
}

// Options without an Env get the real one (the tests that move time give their ManualEnv).
std::unique_ptr<BlockCache> open_cache(CacheOptions options, std::shared_ptr<CacheDisk> disk = posix_disk()) {
  if (!options.env) options.env = &Env::real();
  auto cache = BlockCache::open(options, std::move(disk));
  EXPECT_TRUE(cache.ok()) << cache.status().message();
  return cache.ok() ? std::move(cache).value() : nullptr;
}

TEST(BlockCache, RoundTripsFullEmptyAndShortLastBlocks) {
  TempDir tmp;
  auto cache = open_cache({.dir = tmp.str()});
  ASSERT_TRUE(cache);
  const std::string full = pattern(kA, 0, 1 << 20);
  const std::string last = pattern(kA, 1, 12345);
  cache->put(kA, 0, full);
  cache->put(kA, 1, last);
  cache->put(kB, 0, "");
  EXPECT_EQ(cache->get(kA, 0), full);
  EXPECT_EQ(cache->get(kA, 1), last);
  auto empty = cache->get(kB, 0);
  ASSERT_TRUE(empty.has_value());
  EXPECT_EQ(*empty, "");
  EXPECT_EQ(cache->stats().hits, 3u);
  EXPECT_EQ(cache->stats().misses, 0u);
  EXPECT_TRUE(fs::exists(block_path(tmp.path(), kA, 1)));
}

TEST(BlockCache, IdsOfAnyShapeRoundTrip) {
  TempDir tmp;
  auto cache = open_cache({.dir = tmp.str()});
  ASSERT_TRUE(cache);
  for (const std::string& id :
       std::vector<std::string>{"a/b c", "..", "", "_h00", std::string(400, 'q')}) {
    cache->put(id, 7, "bytes of " + id);
    EXPECT_EQ(cache->get(id, 7), "bytes of " + id) << id;
  }
}

TEST(BlockCache, AbsentBlockIsAMiss) {
  TempDir tmp;
  auto cache = open_cache({.dir = tmp.str()});
  ASSERT_TRUE(cache);
  cache->put(kA, 0, "zero");
  EXPECT_FALSE(cache->get(kA, 1).has_value());
  EXPECT_FALSE(cache->get(kB, 0).has_value());
  EXPECT_EQ(cache->stats().misses, 2u);
  EXPECT_EQ(cache->stats().corrupt, 0u);
}

TEST(BlockCache, APartOfABlockIsReadWithItsHeaderCheckedAndNothingElse) {
  TempDir tmp;
  auto cache = open_cache({.dir = tmp.str()});
  ASSERT_TRUE(cache);
  const std::string full = pattern(kA, 0, 1 << 20);
  cache->put(kA, 0, full);
  cache->put(kA, 1, "short last block");
  std::string part(1000, '\0');
  ASSERT_TRUE(cache->read_part(kA, 0, 4096, part.data(), part.size()));
  EXPECT_EQ(part, full.substr(4096, 1000));
  ASSERT_TRUE(cache->read_part(kA, 1, 6, part.data(), 4));
  EXPECT_EQ(part.substr(0, 4), "last");
  // Past the block's end, another key's block, an absent one: misses, nothing written.
  EXPECT_FALSE(cache->read_part(kA, 1, 10, part.data(), 100));
  EXPECT_FALSE(cache->read_part(kB, 0, 0, part.data(), 10));
  EXPECT_FALSE(cache->read_part(kA, 2, 0, part.data(), 10));
  // A block file copied onto another key's path: its header names its own key, so it is refused.
  fs::create_directories(fs::path(block_path(tmp.path(), kB, 0)).parent_path());
  fs::copy_file(block_path(tmp.path(), kA, 0), block_path(tmp.path(), kB, 0));
  EXPECT_FALSE(cache->read_part(kB, 0, 0, part.data(), 10));
  // The data's own checksum is not checked here (the caller checks what it reads): a flipped
  // byte comes back flipped, and get(), which checks it, refuses the block.
  flip_bit(block_path(tmp.path(), kA, 0), block_file::kHeaderSize + 5000);
  ASSERT_TRUE(cache->read_part(kA, 0, 4096, part.data(), part.size()));
  EXPECT_NE(part, full.substr(4096, 1000));
  EXPECT_FALSE(cache->get(kA, 0).has_value());
  EXPECT_EQ(cache->stats().corrupt, 1u);
}

TEST(BlockCache, AWholeBlockIsReadIntoTheCallersMemoryAndChecked) {
  TempDir tmp;
  auto cache = open_cache({.dir = tmp.str()});
  ASSERT_TRUE(cache);
  const std::string full = pattern(kA, 0, 1 << 20);
  cache->put(kA, 0, full);
  std::string out(full.size(), '\0');
  ASSERT_TRUE(cache->get_into(kA, 0, out.data(), out.size()));
  EXPECT_EQ(out, full);
  EXPECT_EQ(cache->stats().hits, 1u);
  // Absent: a miss, nothing written.
  std::string untouched(100, '-');
  EXPECT_FALSE(cache->get_into(kB, 0, untouched.data(), untouched.size()));
  EXPECT_EQ(untouched, std::string(100, '-'));
  EXPECT_EQ(cache->stats().misses, 1u);
  // Another length than the block's: not this block, and the block stays.
  std::string shorter(full.size() - 1, '\0');
  EXPECT_FALSE(cache->get_into(kA, 0, shorter.data(), shorter.size()));
  std::string longer(full.size() + 1, '\0');
  EXPECT_FALSE(cache->get_into(kA, 0, longer.data(), longer.size()));
  EXPECT_EQ(cache->get(kA, 0), full);
  EXPECT_EQ(cache->stats().corrupt, 0u);
}

TEST(BlockCache, ABlockReadIntoTheCallersMemoryThatFailsItsCheckIsAMissAndDeleted) {
  TempDir tmp;
  auto cache = open_cache({.dir = tmp.str()});
  ASSERT_TRUE(cache);
  const std::string data = pattern(kA, 0, 5000);
  cache->put(kA, 0, data);
  const std::string path = block_path(tmp.path(), kA, 0);
  flip_bit(path, block_file::kHeaderSize + 4321);
  std::string out(data.size(), '\0');
  EXPECT_FALSE(cache->get_into(kA, 0, out.data(), out.size()));
  EXPECT_FALSE(fs::exists(path));
  EXPECT_EQ(cache->stats().corrupt, 1u);
  EXPECT_EQ(cache->stats().hits, 0u);
  // A flipped header bit, and a file cut short, the same.
  cache->put(kA, 1, data);
  flip_bit(block_path(tmp.path(), kA, 1), 17);
  EXPECT_FALSE(cache->get_into(kA, 1, out.data(), out.size()));
  EXPECT_FALSE(fs::exists(block_path(tmp.path(), kA, 1)));
  cache->put(kA, 2, data);
  fs::resize_file(block_path(tmp.path(), kA, 2), fs::file_size(block_path(tmp.path(), kA, 2)) - 1);
  EXPECT_FALSE(cache->get_into(kA, 2, out.data(), out.size()));
  EXPECT_EQ(cache->stats().corrupt, 3u);
  EXPECT_EQ(cache->stats().hits, 0u);
  // A fresh put heals it.
  cache->put(kA, 0, data);
  ASSERT_TRUE(cache->get_into(kA, 0, out.data(), out.size()));
  EXPECT_EQ(out, data);
}

// A block's whole file read into the caller's aligned memory (a disk-tier slot): the data after
// the header, checked as get_into checks it, read past the page cache when the page cache does
// not hold the file (where the file system allows); a block failing its check is a miss and
// deleted, whichever way it was read.
TEST(BlockCache, ABlockFileReadIntoAlignedMemoryIsCheckedWhicheverWayItIsRead) {
  TempDir tmp;
  auto cache = open_cache({.dir = tmp.str()});
  ASSERT_TRUE(cache);
  const std::string full = pattern(kA, 0, 1 << 20);
  cache->put(kA, 0, full);
  cache->put(kA, 1, full);
  const std::string path = block_path(tmp.path(), kA, 0);
  const bool possible = testing::direct_reads_possible(path);
  // A multiple of the alignment, as aligned_alloc wants (the sanitizers' allocators refuse others).
  const size_t align = CacheDisk::kDirectReadAlign;
  const size_t capacity = (block_file::kHeaderSize + full.size() + align + align - 1) / align * align;
  char* file = static_cast<char*>(std::aligned_alloc(align, capacity));
  ASSERT_NE(file, nullptr);
  ASSERT_TRUE(testing::evict_from_page_cache(path));
  ASSERT_TRUE(cache->get_file_into(kA, 0, file, capacity, full.size()));
  EXPECT_EQ(std::string(file + block_file::kHeaderSize, full.size()), full);
  EXPECT_EQ(cache->stats().hits, 1u);
  EXPECT_EQ(cache->stats().direct_reads, possible ? 1u : 0u);
  // A direct read leaves nothing in the page cache: the next read is direct too.
  std::fill(file, file + capacity, '\0');
  ASSERT_TRUE(cache->get_file_into(kA, 0, file, capacity, full.size()));
  EXPECT_EQ(std::string(file + block_file::kHeaderSize, full.size()), full);
  EXPECT_EQ(cache->stats().direct_reads, possible ? 2u : 0u);
  // Held by the page cache once read the ordinary way (get): read through it, the same bytes.
  ASSERT_EQ(cache->get(kA, 0), full);
  std::fill(file, file + capacity, '\0');
  ASSERT_TRUE(cache->get_file_into(kA, 0, file, capacity, full.size()));
  EXPECT_EQ(std::string(file + block_file::kHeaderSize, full.size()), full);
  EXPECT_EQ(cache->stats().direct_reads, possible ? 2u : 0u);
  // Another length, or no room for the header and the data: not this block, and it stays.
  EXPECT_FALSE(cache->get_file_into(kA, 0, file, capacity, full.size() - 1));
  EXPECT_FALSE(cache->get_file_into(kA, 0, file, full.size(), full.size()));
  EXPECT_TRUE(fs::exists(path));
  // A flipped data bit in a file the page cache does not hold: a miss, and the file is deleted.
  const std::string bad = block_path(tmp.path(), kA, 1);
  flip_bit(bad, block_file::kHeaderSize + 777777);
  ASSERT_TRUE(testing::evict_from_page_cache(bad));
  EXPECT_FALSE(cache->get_file_into(kA, 1, file, capacity, full.size()));
  EXPECT_FALSE(fs::exists(bad));
  EXPECT_EQ(cache->stats().corrupt, 1u);
  // Absent: a miss.
  EXPECT_FALSE(cache->get_file_into(kB, 0, file, capacity, full.size()));
  std::free(file);
}

TEST(BlockCache, OverwriteReplacesAtomically) {
  TempDir tmp;
  auto cache = open_cache({.dir = tmp.str()});
  ASSERT_TRUE(cache);
  cache->put(kA, 0, "same bytes");
  cache->put(kA, 0, "same bytes");  // a second writer of the same block
  EXPECT_EQ(cache->get(kA, 0), "same bytes");
  EXPECT_EQ(files_under(tmp.path()).size(), 1u);
}

TEST(BlockCache, TornWriteLeavesNoBlockAndNoTempFile) {
  TempDir tmp;
  auto disk = std::make_shared<FaultDisk>();
  auto cache = open_cache({.dir = tmp.str()}, disk);
  ASSERT_TRUE(cache);
  disk->set_write_fault(FaultDisk::WriteFault::kTornHalfway, IoError("device failed"));
  cache->put(kA, 0, pattern(kA, 0, 100000));
  EXPECT_TRUE(files_under(tmp.path()).empty());
  EXPECT_FALSE(cache->get(kA, 0).has_value());
  EXPECT_EQ(cache->stats().write_failures, 1u);
  EXPECT_EQ(cache->stats().corrupt, 0u);
}

TEST(BlockCache, FailedRenameLeavesNoTempFile) {
  TempDir tmp;
  auto disk = std::make_shared<FaultDisk>();
  auto cache = open_cache({.dir = tmp.str()}, disk);
  ASSERT_TRUE(cache);
  disk->set_write_fault(FaultDisk::WriteFault::kRenameFails);
  cache->put(kA, 0, "data");
  EXPECT_TRUE(files_under(tmp.path()).empty());
  EXPECT_EQ(cache->stats().write_failures, 1u);
}

TEST(BlockCache, FlippedDataBitIsAMissAndTheFileIsDeleted) {
  TempDir tmp;
  auto cache = open_cache({.dir = tmp.str()});
  ASSERT_TRUE(cache);
  cache->put(kA, 0, pattern(kA, 0, 5000));
  const std::string path = block_path(tmp.path(), kA, 0);
  flip_bit(path, block_file::kHeaderSize + 4321);
  EXPECT_FALSE(cache->get(kA, 0).has_value());
  EXPECT_FALSE(fs::exists(path));
  EXPECT_EQ(cache->stats().corrupt, 1u);
  EXPECT_EQ(cache->stats().misses, 1u);
  // A fresh put heals it.
  cache->put(kA, 0, pattern(kA, 0, 5000));
  EXPECT_EQ(cache->get(kA, 0), pattern(kA, 0, 5000));
}

TEST(BlockCache, FlippedHeaderBitsAreMisses) {
  TempDir tmp;
  auto cache = open_cache({.dir = tmp.str()});
  ASSERT_TRUE(cache);
  // One offset inside each header field: magic, version, length, index, key hash, both CRCs.
  const size_t offsets[] = {0, 5, 9, 17, 30, 41, 46};
  for (size_t offset : offsets) {
    cache->put(kA, 0, "payload");
    flip_bit(block_path(tmp.path(), kA, 0), offset);
    EXPECT_FALSE(cache->get(kA, 0).has_value()) << offset;
    EXPECT_FALSE(fs::exists(block_path(tmp.path(), kA, 0))) << offset;
  }
  EXPECT_EQ(cache->stats().corrupt, std::size(offsets));
}

TEST(BlockCache, TruncatedFileIsAMiss) {
  TempDir tmp;
  auto cache = open_cache({.dir = tmp.str()});
  ASSERT_TRUE(cache);
  cache->put(kA, 0, pattern(kA, 0, 4096));
  const std::string path = block_path(tmp.path(), kA, 0);
  fs::resize_file(path, fs::file_size(path) - 1);
  EXPECT_FALSE(cache->get(kA, 0).has_value());
  cache->put(kA, 1, "x");
  fs::resize_file(block_path(tmp.path(), kA, 1), 10);  // shorter than the header
  EXPECT_FALSE(cache->get(kA, 1).has_value());
  EXPECT_EQ(cache->stats().corrupt, 2u);
}

TEST(BlockCache, FileCopiedToAnotherKeysPathIsNotAdopted) {
  TempDir tmp;
  auto cache = open_cache({.dir = tmp.str()});
  ASSERT_TRUE(cache);
  cache->put(kA, 0, "bytes of A");
  // Another content id, and another index of the same content id.
  for (auto [id, index] : {std::pair{kB, uint64_t{0}}, std::pair{kA, uint64_t{1}}}) {
    const std::string to = block_path(tmp.path(), id, index);
    fs::create_directories(fs::path(to).parent_path());
    fs::copy_file(block_path(tmp.path(), kA, 0), to);
    EXPECT_FALSE(cache->get(id, index).has_value()) << id << "." << index;
    EXPECT_FALSE(fs::exists(to));
  }
  EXPECT_EQ(cache->get(kA, 0), "bytes of A");
}

TEST(BlockCache, EvictsLeastRecentlyUsedFirst) {
  TempDir tmp;
  auto disk = std::make_shared<FaultDisk>();
  disk->use_fake_clock();  // each put and touch gets a later mtime than the one before
  const uint64_t file_size = block_file::kHeaderSize + 1000;
  CacheOptions options{.dir = tmp.str(), .budget_bytes = 3 * file_size, .low_water = 1.0};
  options.touch_interval = std::chrono::milliseconds(0);  // every hit touches
  auto cache = open_cache(options, disk);
  ASSERT_TRUE(cache);
  cache->put(kA, 0, pattern(kA, 0, 1000));
  cache->put(kB, 0, pattern(kB, 0, 1000));
  cache->put(kC, 0, pattern(kC, 0, 1000));
  ASSERT_TRUE(cache->get(kA, 0).has_value());  // A is now more recent than B and C
  cache->put(kD, 0, pattern(kD, 0, 1000));     // over budget by one block
  cache->enforce_budget();
  EXPECT_FALSE(fs::exists(block_path(tmp.path(), kB, 0)));
  EXPECT_TRUE(fs::exists(block_path(tmp.path(), kA, 0)));
  EXPECT_TRUE(fs::exists(block_path(tmp.path(), kC, 0)));
  EXPECT_TRUE(fs::exists(block_path(tmp.path(), kD, 0)));
  EXPECT_EQ(cache->stats().evictions, 1u);
  EXPECT_FALSE(cache->get(kB, 0).has_value());
}

// Files that are not blocks (a 10 GiB file dropped into a shard, one named like a block but
// larger than any block can be) are not the cache's: the budget scan neither counts nor evicts
// them, so no good block goes for their sake. (Sparse files: no disk is spent.)
TEST(BlockCache, FilesThatAreNotBlocksNeitherCountNorEvictGoodBlocks) {
  TempDir tmp;
  const uint64_t file_size = block_file::kHeaderSize + 1000;
  auto cache = open_cache({.dir = tmp.str(), .budget_bytes = 8 * file_size, .low_water = 1.0});
  ASSERT_TRUE(cache);
  for (const std::string& id : {kA, kB, kC, kD}) cache->put(id, 0, pattern(id, 0, 1000));
  const fs::path shard = fs::path(block_path(tmp.path(), kA, 0)).parent_path();
  const uint64_t ten_gib = 10ull << 30;
  for (const fs::path& junk : {shard / "junk.img", shard / "sha256_cjunk.0", tmp.path() / "blocks" / "stray"}) {
    { std::ofstream(junk.string()) << "x"; }
    fs::resize_file(junk, ten_gib);
  }
  cache->enforce_budget();
  for (const std::string& id : {kA, kB, kC, kD}) {
    EXPECT_TRUE(fs::exists(block_path(tmp.path(), id, 0))) << id;
    EXPECT_EQ(cache->get(id, 0), pattern(id, 0, 1000)) << id;
  }
  EXPECT_EQ(cache->stats().evictions, 0u);
  EXPECT_EQ(cache->stats().bytes_used, 4 * file_size) << "only blocks are counted";
  EXPECT_TRUE(fs::exists(shard / "junk.img")) << "and what is not ours is left alone";
}

TEST(BlockCache, SmallEvictionBatchesStillEvictOldestFirstDownToLowWater) {
  TempDir tmp;
  auto disk = std::make_shared<FaultDisk>();
  disk->use_fake_clock();
  const uint64_t file_size = block_file::kHeaderSize + 100;
  {
    auto roomy = open_cache({.dir = tmp.str()}, disk);
    ASSERT_TRUE(roomy);
    for (uint64_t i = 0; i < 20; ++i) roomy->put(kA, i, std::string(100, 'x'));  // 0 is oldest
  }
  // Keep 10 blocks under a low water of 10.5: 10 must go, but a scan keeps only 3 candidates.
  CacheOptions options{.dir = tmp.str(), .budget_bytes = 12 * file_size};
  options.low_water = 10.5 / 12;
  options.eviction_batch = 3;
  auto cache = open_cache(options, disk);
  ASSERT_TRUE(cache);
  cache->enforce_budget();
  for (uint64_t i = 0; i < 20; ++i)
    EXPECT_EQ(fs::exists(block_path(tmp.path(), kA, i)), i >= 10) << i;
  EXPECT_EQ(cache->stats().evictions, 10u);
}

TEST(BlockCache, OrderFollowsMtimeSetFromOutside) {
  // Another process's hits touch files too: the order is whatever the directory says.
  TempDir tmp;
  const uint64_t file_size = block_file::kHeaderSize + 100;
  auto cache = open_cache({.dir = tmp.str(), .budget_bytes = 2 * file_size, .low_water = 1.0});
  ASSERT_TRUE(cache);
  cache->put(kA, 0, std::string(100, 'a'));
  cache->put(kB, 0, std::string(100, 'b'));
  FaultDisk::set_mtime(block_path(tmp.path(), kA, 0), 100);
  FaultDisk::set_mtime(block_path(tmp.path(), kB, 0), 300);
  const std::string c_path = block_path(tmp.path(), kC, 0);
  cache->put(kC, 0, std::string(100, 'c'));
  FaultDisk::set_mtime(c_path, 200);
  cache->enforce_budget();
  EXPECT_FALSE(fs::exists(block_path(tmp.path(), kA, 0)));
  EXPECT_TRUE(fs::exists(block_path(tmp.path(), kB, 0)));
  EXPECT_TRUE(fs::exists(c_path));
}

TEST(BlockCache, BudgetIsEnforcedDownToTheLowWaterMark) {
  TempDir tmp;
  const uint64_t budget = 50'000;
  {
    // Filled under a generous budget, then reopened with a small one: whichever pass evicts
    // (the opening scan or enforce_budget) starts from 160 KB and must stop at the low water.
    auto roomy = open_cache({.dir = tmp.str(), .budget_bytes = 100 * budget});
    ASSERT_TRUE(roomy);
    for (uint64_t i = 0; i < 40; ++i) roomy->put(kA, i, pattern(kA, i, 4000));
  }
  auto cache = open_cache({.dir = tmp.str(), .budget_bytes = budget});
  ASSERT_TRUE(cache);
  cache->enforce_budget();
  EXPECT_LE(bytes_under(tmp.path()), budget * 9 / 10);
  EXPECT_GT(bytes_under(tmp.path()), budget * 9 / 10 - 4000 - block_file::kHeaderSize);
  EXPECT_LE(cache->stats().bytes_used, budget);
  EXPECT_GT(cache->stats().evictions, 0u);
  size_t kept = 0;
  for (uint64_t i = 0; i < 40; ++i) {
    auto got = cache->get(kA, i);
    if (got) {
      EXPECT_EQ(*got, pattern(kA, i, 4000));
    }
    kept += got.has_value();
  }
  EXPECT_GT(kept, 0u);
  EXPECT_EQ(cache->stats().corrupt, 0u);
}

TEST(BlockCache, PutsOverBudgetEvictInTheBackground) {
  TempDir tmp;
  const uint64_t budget = 50'000;
  auto cache = open_cache({.dir = tmp.str(), .budget_bytes = budget});
  ASSERT_TRUE(cache);
  for (uint64_t i = 0; i < 40; ++i) cache->put(kA, i, pattern(kA, i, 4000));
  cache->enforce_budget();  // waits for any background pass, and does its own if still needed
  EXPECT_LE(bytes_under(tmp.path()), budget);
  EXPECT_LE(cache->stats().bytes_used, budget);
  EXPECT_GE(cache->stats().evictions, 40u - budget / 4048);
}

TEST(BlockCache, HitsTouchAtMostOncePerInterval) {
  TempDir tmp;
  auto disk = std::make_shared<FaultDisk>();
  {
    auto cache = open_cache({.dir = tmp.str()}, disk);  // default interval: a minute
    ASSERT_TRUE(cache);
    cache->put(kA, 0, "a");
    for (int i = 0; i < 5; ++i) ASSERT_TRUE(cache->get(kA, 0).has_value());
    EXPECT_EQ(disk->touches(), 0);  // just written: its mtime is already fresh
  }
  auto cache = open_cache({.dir = tmp.str()}, disk);
  ASSERT_TRUE(cache);
  for (int i = 0; i < 5; ++i) ASSERT_TRUE(cache->get(kA, 0).has_value());
  EXPECT_EQ(disk->touches(), 1);
}

TEST(BlockCache, DiskFullIsSilentAndOtherBlocksStillServe) {
  TempDir tmp;
  auto disk = std::make_shared<FaultDisk>();
  auto cache = open_cache({.dir = tmp.str()}, disk);
  ASSERT_TRUE(cache);
  cache->put(kA, 0, "kept");
  disk->set_write_fault(FaultDisk::WriteFault::kRefuse, IoError("No space left on device"));
  cache->put(kB, 0, "lost");
  EXPECT_EQ(cache->stats().write_failures, 1u);
  EXPECT_EQ(cache->get(kA, 0), "kept");
  EXPECT_FALSE(cache->get(kB, 0).has_value());
  EXPECT_EQ(files_under(tmp.path()).size(), 1u);  // no temp file left behind
}

TEST(BlockCache, AFailureStreakBacksOffThenProbesAgain) {
  TempDir tmp;
  auto disk = std::make_shared<FaultDisk>();
  // The cache's clock, moved by the test: the backoff is measured on it, not waited out.
  hubfs::testing::ManualEnv env;  // declared before the cache: outlives it
  CacheOptions options{.dir = tmp.str()};
  options.write_backoff = std::chrono::milliseconds(20);
  options.env = &env;
  auto cache = open_cache(options, disk);
  ASSERT_TRUE(cache);
  const int attempts_before = disk->write_attempts();
  disk->set_write_fault(FaultDisk::WriteFault::kRefuse);
  for (uint64_t i = 0; i < 10; ++i) cache->put(kA, i, "x");
  EXPECT_EQ(disk->write_attempts() - attempts_before, 3);  // then the cache stopped trying
  EXPECT_EQ(cache->stats().write_failures, 3u);
  EXPECT_EQ(cache->stats().writes_skipped, 7u);
  disk->set_write_fault(FaultDisk::WriteFault::kNone);
  // Still within the backoff (the clock has not moved): skipped, though the disk would take it.
  env.advance(std::chrono::milliseconds(19));
  cache->put(kA, 0, "early");
  EXPECT_EQ(cache->stats().writes_skipped, 8u);
  EXPECT_FALSE(cache->get(kA, 0).has_value());
  // Past it: one put probes the disk again, and it works.
  env.advance(std::chrono::milliseconds(1));
  cache->put(kA, 0, "back");
  EXPECT_EQ(cache->get(kA, 0), "back");
  EXPECT_EQ(cache->stats().writes_skipped, 8u);
}

// The touch throttle goes by the cache's clock: a hit a whole interval after the last touch
// touches again.
TEST(BlockCache, AHitAnIntervalAfterTheLastTouchTouchesAgain) {
  TempDir tmp;
  auto disk = std::make_shared<FaultDisk>();
  hubfs::testing::ManualEnv env;  // declared before the cache: outlives it
  CacheOptions options{.dir = tmp.str()};
  options.env = &env;
  auto cache = open_cache(options, disk);
  ASSERT_TRUE(cache);
  cache->put(kA, 0, "a");  // fresh: no touch needed for an interval
  ASSERT_TRUE(cache->get(kA, 0).has_value());
  EXPECT_EQ(disk->touches(), 0);
  env.advance(options.touch_interval);
  ASSERT_TRUE(cache->get(kA, 0).has_value());
  ASSERT_TRUE(cache->get(kA, 0).has_value());
  EXPECT_EQ(disk->touches(), 1);
}

TEST(BlockCache, ClearingTheDirectoryUnderALiveCacheLosesNoLaterBlock) {
  TempDir tmp;
  auto cache = open_cache({.dir = tmp.str()});
  ASSERT_TRUE(cache);
  cache->put(kA, 0, "before");
  fs::remove_all(tmp / "blocks");
  EXPECT_FALSE(cache->get(kA, 0).has_value());
  cache->put(kA, 1, "after");  // same shard as block 0, whose directory the cache made before
  EXPECT_EQ(cache->get(kA, 1), "after");
  EXPECT_EQ(cache->stats().write_failures, 0u);
}

TEST(BlockCache, OversizedBlockIsRefusedNotStored) {
  TempDir tmp;
  auto cache = open_cache({.dir = tmp.str()});
  ASSERT_TRUE(cache);
  cache->put(kA, 0, std::string(block_file::kMaxDataBytes + 1, 'x'));
  EXPECT_EQ(cache->stats().write_failures, 1u);
  EXPECT_TRUE(files_under(tmp.path()).empty());
}

TEST(BlockCache, UnwritableDirectoryFailsOpenNamingThePathAndTheFix) {
  TempDir tmp;
  auto disk = std::make_shared<FaultDisk>();
  const std::string dir = tmp.str() + "/cache";
  disk->set_make_dirs_fault(PermissionDenied("creating directory " + dir + ": Permission denied"));
  auto refused = BlockCache::open({.dir = dir, .env = &Env::real()}, disk);
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.status().code(), Code::kPermissionDenied);
  EXPECT_NE(refused.status().message().find(dir), std::string::npos);
  EXPECT_NE(refused.status().message().find("--cache-dir"), std::string::npos);
  EXPECT_NE(refused.status().message().find("HUBFS_CACHE_DIR"), std::string::npos);

  // Directories can be made but files cannot be written (read-only tree, full disk).
  disk->set_make_dirs_fault(std::nullopt);
  disk->set_write_fault(FaultDisk::WriteFault::kRefuse, PermissionDenied("Read-only file system"));
  auto read_only = BlockCache::open({.dir = dir, .env = &Env::real()}, disk);
  ASSERT_FALSE(read_only.ok());
  EXPECT_NE(read_only.status().message().find(dir), std::string::npos);
}

TEST(BlockCache, AFullDiskAtOpenStillOpensAndServesOnceItDrains) {
  TempDir tmp;
  auto disk = std::make_shared<FaultDisk>();
  disk->set_write_fault(FaultDisk::WriteFault::kRefuse, IoError("No space left on device"));
  auto cache = open_cache({.dir = tmp.str()}, disk);
  ASSERT_TRUE(cache);
  cache->put(kA, 0, "a");
  EXPECT_EQ(cache->stats().write_failures, 1u);
  disk->set_write_fault(FaultDisk::WriteFault::kNone);
  cache->put(kA, 0, "a");
  EXPECT_EQ(cache->get(kA, 0), "a");
}

TEST(BlockCache, HugeBudgetNeverEvicts) {
  TempDir tmp;
  auto cache = open_cache({.dir = tmp.str(), .budget_bytes = UINT64_MAX});
  ASSERT_TRUE(cache);
  for (uint64_t i = 0; i < 10; ++i) cache->put(kA, i, "x");
  cache->enforce_budget();
  EXPECT_EQ(cache->stats().evictions, 0u);
  EXPECT_EQ(files_under(tmp.path()).size(), 10u);
}

TEST(BlockCache, RealDiskRefusalNamesThePath) {
  TempDir tmp;
  std::ofstream(tmp / "a-file") << "x";  // a directory cannot be made under a file, even by root
  const std::string dir = (tmp / "a-file" / "cache").string();
  auto cache = BlockCache::open({.dir = dir, .env = &Env::real()});
  ASSERT_FALSE(cache.ok());
  EXPECT_NE(cache.status().message().find(dir), std::string::npos) << cache.status().message();
  EXPECT_NE(cache.status().message().find("--cache-dir"), std::string::npos);
}

TEST(BlockCache, PermissionDeniedDirectoryOnRealDisk) {
  TempDir tmp;
  fs::permissions(tmp.path(), fs::perms::owner_all | fs::perms::others_read | fs::perms::others_exec);
  fs::create_directory(tmp / "locked");
  // Searchable but not writable by anyone but root: only creating the cache dir inside fails.
  fs::permissions(tmp / "locked", fs::perms::owner_read | fs::perms::owner_exec | fs::perms::others_read |
                                      fs::perms::others_exec);
  const std::string dir = (tmp / "locked" / "cache").string();
  // Root ignores directory permissions, so as root the attempt runs in a child that has dropped
  // to an unprivileged user: the refusal is real either way, never skipped.
  auto refused_properly = [&dir] {
    auto cache = BlockCache::open({.dir = dir, .env = &Env::real()});
    return !cache.ok() && cache.status().code() == Code::kPermissionDenied &&
           cache.status().message().find(dir) != std::string::npos;
  };
  if (::geteuid() != 0) {
    EXPECT_TRUE(refused_properly());
  } else {
    pid_t pid = ::fork();
    ASSERT_GE(pid, 0);
    if (pid == 0) {
      if (::setgid(65534) != 0 || ::setuid(65534) != 0) ::_exit(2);
      ::_exit(refused_properly() ? 0 : 1);
    }
    int status = 0;
    ASSERT_EQ(::waitpid(pid, &status, 0), pid);
    ASSERT_TRUE(WIFEXITED(status));
    EXPECT_EQ(WEXITSTATUS(status), 0) << "1: not refused with kPermissionDenied naming the path; 2: setuid failed";
  }
  fs::permissions(tmp / "locked", fs::perms::owner_all);
}

TEST(BlockCache, NewCacheDirectoryIsPrivate) {
  TempDir tmp;
  const fs::path dir = tmp / "nested" / "cache";
  auto cache = open_cache({.dir = dir.string()});
  ASSERT_TRUE(cache);
  cache->put(kA, 0, "a");
  for (const fs::path& p : {dir, dir / "blocks", fs::path(block_path(dir, kA, 0)).parent_path()}) {
    struct stat st;
    ASSERT_EQ(::stat(p.c_str(), &st), 0) << p;
    EXPECT_EQ(st.st_mode & 0777, 0700u) << p;
  }
  struct stat st;
  ASSERT_EQ(::stat(block_path(dir, kA, 0).c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 077, 0u);
}

TEST(BlockCache, BlocksSurviveReopen) {
  TempDir tmp;
  const std::string data = pattern(kA, 3, 70000);
  {
    auto cache = open_cache({.dir = tmp.str()});
    ASSERT_TRUE(cache);
    cache->put(kA, 3, data);
    cache->put(kB, 0, "b");
  }
  auto cache = open_cache({.dir = tmp.str()});
  ASSERT_TRUE(cache);
  EXPECT_EQ(cache->get(kA, 3), data);
  cache->enforce_budget();  // a synchronous scan: the new instance learns the directory's size
  EXPECT_EQ(cache->stats().bytes_used, bytes_under(tmp.path()));
  EXPECT_EQ(cache->stats().bytes_used, 2 * block_file::kHeaderSize + data.size() + 1);
}

TEST(BlockCache, OpenDoesNotWaitForTheScan) {
  TempDir tmp;
  auto disk = std::make_shared<FaultDisk>();
  {
    auto cache = open_cache({.dir = tmp.str()}, disk);
    ASSERT_TRUE(cache);
    cache->put(kA, 0, "a");
  }
  disk->close_gate();  // the background scan now blocks in its first listing
  const int completed_before = disk->lists_completed();
  auto cache = open_cache({.dir = tmp.str()}, disk);
  ASSERT_TRUE(cache);
  EXPECT_EQ(cache->get(kA, 0), "a");  // served while the scan is still held
  cache->put(kB, 0, "b");
  EXPECT_EQ(cache->get(kB, 0), "b");
  EXPECT_EQ(disk->lists_completed(), completed_before);
  disk->open_gate();
  cache.reset();  // and the destructor still returns: the scan stops between shards
}

TEST(BlockCache, ScanRemovesCrashedWritersTempFilesOnly) {
  TempDir tmp;
  const fs::path shard = tmp / "blocks" / "ab";
  fs::create_directories(shard);
  std::ofstream(shard / ".tmp.1.2.3") << "abandoned an age ago";
  FaultDisk::set_mtime((shard / ".tmp.1.2.3").string(), 1000);
  std::ofstream(shard / ".tmp.4.5.6") << "still being written";
  auto cache = open_cache({.dir = tmp.str()});
  ASSERT_TRUE(cache);
  cache->enforce_budget();
  EXPECT_FALSE(fs::exists(shard / ".tmp.1.2.3"));
  EXPECT_TRUE(fs::exists(shard / ".tmp.4.5.6"));
}

TEST(BlockCache, TwoInstancesSharingADirectoryNeverServeWrongBytes) {
  TempDir tmp;
  // A budget smaller than the working set, so eviction runs while others read and write.
  CacheOptions options{.dir = tmp.str(), .budget_bytes = 400'000};
  auto first = open_cache(options);
  auto second = open_cache(options);
  ASSERT_TRUE(first && second);
  const std::vector<std::string> ids = {kA, kB, kC, kD};
  auto size_of = [](uint64_t index) { return 1000 + 7919 * index % 60000; };
  std::atomic<int> wrong{0}, hits{0};
  auto worker = [&](BlockCache* cache, uint32_t seed) {
    std::mt19937 rng(seed);
    for (int op = 0; op < 600; ++op) {
      const std::string& id = ids[rng() % ids.size()];
      const uint64_t index = rng() % 6;
      if (rng() % 2) {
        cache->put(id, index, pattern(id, index, size_of(index)));
      } else if (auto got = cache->get(id, index)) {
        ++hits;
        if (*got != pattern(id, index, size_of(index))) ++wrong;
      }
    }
  };
  std::vector<std::thread> threads;
  for (uint32_t t = 0; t < 4; ++t)
    threads.emplace_back(worker, t % 2 ? first.get() : second.get(), t);
  for (auto& t : threads) t.join();
  EXPECT_EQ(wrong.load(), 0);
  EXPECT_GT(hits.load(), 0);
  EXPECT_EQ(first->stats().corrupt + second->stats().corrupt, 0u);
  first->enforce_budget();
  EXPECT_LE(bytes_under(tmp.path()), options.budget_bytes);
  for (const auto& p : files_under(tmp.path()))
    EXPECT_FALSE(block_file::is_temp_name(p.filename().string())) << p;
}

}  // namespace
}  // namespace hubfs
