// The chunk cache's bound: least recently used chunks go first, a hit counts as a use, and what
// stays on disk is within max_bytes; runs stored as copies and as locations in a file's blocks.
// (Serving and refusing damaged chunks through a read: xet_source_test.cc.)
#include "xet/chunk_cache.h"

#include <fcntl.h>
#include <sys/stat.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <mutex>
#include <optional>
#include <vector>
#include <string>

#include <gtest/gtest.h>

#include "common/counter_file.h"
#include "support/temp_dir.h"

namespace hubfs::xet {
namespace HUBFS_UNITY_ID {

using testing::TempDir;

constexpr size_t kChunk = 1000;
constexpr uint64_t kFile = 8 + 36 + kChunk;  // a run of one: magic, count, hash and size, content

std::string content(uint32_t i) { return std::string(kChunk, static_cast<char>('a' + i % 26)) + std::to_string(i); }

MerkleHash xorb_of() {
  MerkleHash h;
  h.bytes.fill(7);
  return h;
}

uint64_t bytes_on_disk(const std::filesystem::path& dir) {
  uint64_t total = 0;
  for (const auto& e : std::filesystem::recursive_directory_iterator(dir))
    if (e.is_regular_file()) total += e.file_size();
  return total;
}

// Sets the chunk's run file's mtime to `seconds` after the epoch: distinct, ordered use times without
// depending on the clock's granularity between puts.
void set_mtime(const std::string& dir, uint32_t index, time_t seconds) {
  const std::string hex = xorb_of().hex();
  const std::string path =
      dir + "/" + hex.substr(0, 2) + "/" + hex + "." + std::to_string(index) + "-" + std::to_string(index + 1);
  struct timespec times[2] = {{seconds, 0}, {seconds, 0}};
  ASSERT_EQ(::utimensat(AT_FDCWD, path.c_str(), times, 0), 0) << path;
}

void put(ChunkCache& cache, uint32_t i) {
  const std::string c = content(i);
  cache.put(xorb_of(), i, chunk_hash(c.data(), c.size()), c.data(), c.size());
}

TEST(ChunkCacheBound, EvictsTheLeastRecentlyUsedAndStaysWithinItsBound) {
  TempDir dir;
  const std::string root = (dir.path() / "chunks").string();
  const uint64_t max = 10 * (kFile + 10);  // room for 10 chunks
  ChunkCache cache(root, max);
  for (uint32_t i = 0; i < 10; ++i) put(cache, i);
  EXPECT_EQ(cache.stats().evicted, 0u);
  for (uint32_t i = 0; i < 10; ++i) set_mtime(root, i, 1'000'000 + i);  // 0 oldest ... 9 newest
  ASSERT_TRUE(cache.get(xorb_of(), 0).has_value());  // a use: 0 is now the newest
  for (uint32_t i = 10; i < 13; ++i) put(cache, i);  // past the bound: a sweep to 90%

  const auto stats = cache.stats();
  EXPECT_GT(stats.evicted, 0u);
  EXPECT_LE(bytes_on_disk(root), max);
  EXPECT_TRUE(cache.contains(xorb_of(), 0)) << "the chunk just read was evicted";
  EXPECT_FALSE(cache.contains(xorb_of(), 1)) << "the least recently used chunk survived";
  for (uint32_t i = 10; i < 13; ++i) EXPECT_TRUE(cache.contains(xorb_of(), i)) << i;
  // What stays is intact and served.
  auto got = cache.get(xorb_of(), 12);
  ASSERT_TRUE(got.has_value());
  EXPECT_EQ(*got, content(12));
}

TEST(ChunkCacheBound, ASecondCacheOnTheSameDirectoryCountsWhatIsAlreadyThere) {
  TempDir dir;
  const std::string root = (dir.path() / "chunks").string();
  {
    ChunkCache unbounded(root);
    for (uint32_t i = 0; i < 20; ++i) put(unbounded, i);
    EXPECT_EQ(unbounded.stats().evicted, 0u);
  }
  EXPECT_EQ(bytes_on_disk(root), 20 * kFile + 20 * 1 + 10 * 1);  // contents end in "0".."19"
  const uint64_t max = 10 * kFile;
  ChunkCache bounded(root, max);
  put(bounded, 20);  // its first put lists the directory: 21 chunks, over the bound
  EXPECT_GT(bounded.stats().evicted, 0u);
  EXPECT_LE(bytes_on_disk(root), max);
}

// Chunks are stored as runs (one file per fetched term); a range is served from whichever runs
// hold its pieces, and a damaged run is a miss, removed, never served.
TEST(ChunkCacheRuns, ARangeComesFromTheRunsThatHoldItsPieces) {
  TempDir dir;
  const std::string root = (dir.path() / "chunks").string();
  ChunkCache cache(root);
  auto put_run = [&](uint32_t first, uint32_t end) {
    std::vector<HashAndSize> chunks;
    std::string bytes;
    for (uint32_t i = first; i < end; ++i) {
      const std::string c = content(i);
      chunks.push_back({chunk_hash(c.data(), c.size()), c.size()});
      bytes += c;
    }
    cache.put_run(xorb_of(), first, chunks, bytes.data());
  };
  auto want = [](uint32_t first, uint32_t end) {
    std::string s;
    for (uint32_t i = first; i < end; ++i) s += content(i);
    return s;
  };
  put_run(0, 5);
  put_run(4, 9);
  put_run(12, 14);
  EXPECT_TRUE(cache.contains(xorb_of(), 0, 9));
  EXPECT_FALSE(cache.contains(xorb_of(), 8, 13)) << "chunks 9..11 are in no run";
  std::vector<HashAndSize> hashes;
  auto got = cache.get_range(xorb_of(), 2, 9, &hashes);
  ASSERT_TRUE(got.has_value());
  EXPECT_EQ(*got, want(2, 9));
  ASSERT_EQ(hashes.size(), 7u);
  EXPECT_EQ(hashes[6].hash, chunk_hash(content(8).data(), content(8).size()));
  EXPECT_FALSE(cache.get_range(xorb_of(), 8, 13).has_value());
  EXPECT_EQ(*cache.get(xorb_of(), 13), content(13));

  // One flipped byte in the second run's chunk 6: the range that needs it is a miss, the run is
  // gone, the first run still serves.
  const std::string hex = xorb_of().hex();
  const std::string second = root + "/" + hex.substr(0, 2) + "/" + hex + ".4-9";
  {
    std::fstream f(second, std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(static_cast<std::streamoff>(8 + 5 * 36 + 2 * (kChunk + 1) + 10));
    f.put('#');
  }
  EXPECT_FALSE(cache.get_range(xorb_of(), 3, 8).has_value());
  EXPECT_FALSE(std::filesystem::exists(second));
  EXPECT_EQ(cache.stats().damaged, 1u);
  EXPECT_EQ(*cache.get_range(xorb_of(), 0, 5), want(0, 5));
}

TEST(ChunkCacheBound, ZeroMeansNoBound) {
  TempDir dir;
  const std::string root = (dir.path() / "chunks").string();
  ChunkCache cache(root, 0);
  for (uint32_t i = 0; i < 50; ++i) put(cache, i);
  EXPECT_EQ(cache.stats().evicted, 0u);
  for (uint32_t i = 0; i < 50; ++i) EXPECT_TRUE(cache.contains(xorb_of(), i)) << i;
}

}  // namespace HUBFS_UNITY_ID
}  // namespace hubfs::xet

namespace hubfs::xet {
namespace HUBFS_UNITY_ID {

// What the caches on one directory served instead of the network is summed in <dir>.saved, for
// `hubfs cache info`: each cache adds its count when it goes (and every 16 MiB before that).
TEST(ChunkCacheServed, EveryCacheOnADirectoryAddsWhatItServed) {
  TempDir dir;
  const std::string root = (dir.path() / "chunks").string();
  const std::string saved = ChunkCache::saved_path(root);
  uint64_t served_bytes = 0;
  {
    ChunkCache first(root);
    for (uint32_t i = 0; i < 3; ++i) put(first, i);
    for (uint32_t i = 0; i < 3; ++i) ASSERT_TRUE(first.get(xorb_of(), i).has_value());
    EXPECT_FALSE(first.get(xorb_of(), 99).has_value());  // a miss serves nothing
    served_bytes = first.stats().hit_bytes;
    EXPECT_EQ(served_bytes, 3 * kChunk + 3);  // contents end in "0", "1", "2"
  }
  counter_file::Totals totals = counter_file::read(saved);
  EXPECT_EQ(totals["chunks"], 3u);
  EXPECT_EQ(totals["bytes"], served_bytes);
  {
    ChunkCache second(root);  // a later mount of the same cache directory
    ASSERT_TRUE(second.get(xorb_of(), 1).has_value());
  }
  totals = counter_file::read(saved);
  EXPECT_EQ(totals["chunks"], 4u);
  EXPECT_EQ(totals["bytes"], served_bytes + kChunk + 1);
}

TEST(ChunkCacheServed, ACacheThatServedNothingWritesNothing) {
  TempDir dir;
  const std::string root = (dir.path() / "chunks").string();
  { ChunkCache unused(root); }
  EXPECT_FALSE(std::filesystem::exists(ChunkCache::saved_path(root)));
}

// A stand-in for the block cache: whole files by key, each byte readable unless cut out.
struct FakeFiles {
  std::mutex mu;
  std::map<std::string, std::string> files;
  int reads = 0;
  ChunkCache::FileBytes reader() {
    return [this](const std::string& key, uint64_t offset, uint64_t length, char* out) {
      std::lock_guard<std::mutex> lock(mu);
      ++reads;
      auto it = files.find(key);
      if (it == files.end() || offset + length > it->second.size()) return false;
      std::memcpy(out, it->second.data() + offset, length);
      return true;
    };
  }
};

// A chunk cache whose locations are read back from FakeFiles.
class ChunkCacheLocations : public ::testing::Test {
 protected:
  TempDir dir;
  std::string root = (dir.path() / "chunks").string();
  FakeFiles files;
  ChunkCache cache{root, 0, files.reader()};
};

// Chunks [first, end) of the test xorb: their hashes and sizes, and their bytes back to back.
std::vector<HashAndSize> chunks_of(uint32_t first, uint32_t end, std::string* bytes) {
  std::vector<HashAndSize> chunks;
  for (uint32_t i = first; i < end; ++i) {
    const std::string c = content(i);
    chunks.push_back({chunk_hash(c.data(), c.size()), c.size()});
    *bytes += c;
  }
  return chunks;
}

TEST_F(ChunkCacheLocations, ARunIsReadBackFromTheFileItLiesInWithItsEndsKeptInline) {
  ASSERT_TRUE(cache.keeps_locations());
  // Chunks 0..6 lie in file "f" from offset 500; the read that fetched them returned file bytes
  // [1000, 5000): the first 500 bytes and the last (7 * 1001 + 500 - 5000 = 2507) lie outside it,
  // so they are kept in the run, and the file holds only what the read returned.
  std::string bytes;
  const auto chunks = chunks_of(0, 7, &bytes);
  const uint64_t at = 500, read_begin = 1000, read_end = 5000;
  std::string file(at + bytes.size() + 300, '?');
  file.replace(at, bytes.size(), bytes);
  const size_t head = read_begin - at, tail = at + bytes.size() - read_end;
  cache.put_location(xorb_of(), 0, chunks, "f", at, std::string_view(bytes).substr(0, head),
                     std::string_view(bytes).substr(bytes.size() - tail));
  // What the block cache would hold: only the read's bytes; the rest of the file is garbage.
  std::string held(file.size(), '#');
  held.replace(read_begin, read_end - read_begin, file.substr(read_begin, read_end - read_begin));
  files.files["f"] = held;

  // The run file keeps the ends, not the chunks: far smaller than the copy would be.
  const std::string hex = xorb_of().hex();
  const std::string run = root + "/" + hex.substr(0, 2) + "/" + hex + ".0-7";
  ASSERT_TRUE(std::filesystem::exists(run));
  EXPECT_LT(std::filesystem::file_size(run), 8 + 7 * 36 + 4 + 1 + 16 + head + tail + 1);

  std::vector<HashAndSize> hashes;
  auto all = cache.get_range(xorb_of(), 0, 7, &hashes);
  ASSERT_TRUE(all.has_value());
  EXPECT_EQ(*all, bytes);
  EXPECT_EQ(hashes.size(), 7u);
  // Any sub-range: one from the head alone, one from the middle, one across the tail.
  for (auto [a, b] : {std::pair<uint32_t, uint32_t>{0, 1}, {2, 4}, {3, 7}, {6, 7}}) {
    auto got = cache.get_range(xorb_of(), a, b);
    ASSERT_TRUE(got.has_value()) << a << "-" << b;
    std::string want;
    for (uint32_t i = a; i < b; ++i) want += content(i);
    EXPECT_EQ(*got, want) << a << "-" << b;
  }
  EXPECT_EQ(cache.stats().damaged, 0u);
}

TEST_F(ChunkCacheLocations, BlocksNotHeldAreAMissThatKeepsTheRunAndWrongBytesAreNeverServed) {
  std::string bytes;
  const auto chunks = chunks_of(0, 4, &bytes);
  cache.put_location(xorb_of(), 0, chunks, "f", 0, {}, {});
  const std::string hex = xorb_of().hex();
  const std::string run = root + "/" + hex.substr(0, 2) + "/" + hex + ".0-4";

  // The file's blocks are not (yet, or no longer) in the block cache: a miss, the run stays.
  EXPECT_FALSE(cache.get_range(xorb_of(), 0, 4).has_value());
  EXPECT_TRUE(std::filesystem::exists(run));
  EXPECT_EQ(cache.stats().damaged, 0u);
  files.files["f"] = bytes;
  EXPECT_EQ(*cache.get_range(xorb_of(), 0, 4), bytes);

  // The blocks now hold other bytes (one flipped): never served; the run is removed.
  files.files["f"][2 * (kChunk + 1) + 5] ^= 1;
  EXPECT_FALSE(cache.get_range(xorb_of(), 0, 4).has_value());
  EXPECT_FALSE(std::filesystem::exists(run));
  EXPECT_EQ(cache.stats().damaged, 1u);
}

TEST_F(ChunkCacheLocations, WhenOneRunCannotServeAnotherThatHoldsTheChunksDoes) {
  // Chunks 0..6 in file "gone" (never held), chunks 2..5 copied: a range inside both is served
  // from the copy, and one reaching past it is a miss.
  std::string all;
  const auto located = chunks_of(0, 6, &all);
  cache.put_location(xorb_of(), 0, located, "gone", 0, {}, {});
  std::string some;
  const auto copied = chunks_of(2, 5, &some);
  cache.put_run(xorb_of(), 2, copied, some.data());
  std::string want;
  chunks_of(2, 5, &want);
  auto got = cache.get_range(xorb_of(), 2, 5);
  ASSERT_TRUE(got.has_value());
  EXPECT_EQ(*got, want);
  EXPECT_EQ(cache.stats().damaged, 0u);
  EXPECT_FALSE(cache.get_range(xorb_of(), 1, 5).has_value());
  EXPECT_GE(files.reads, 2);
}

TEST(ChunkCacheWithoutFileBytes, RecordsNoLocationAndKeepsThoseOthersRecorded) {
  TempDir dir;
  const std::string root = (dir.path() / "chunks").string();
  ChunkCache cache(root);
  EXPECT_FALSE(cache.keeps_locations());
  std::string bytes;
  const auto chunks = chunks_of(0, 2, &bytes);
  cache.put_location(xorb_of(), 0, chunks, "f", 0, {}, {});
  EXPECT_FALSE(cache.contains(xorb_of(), 0, 2));
  EXPECT_EQ(cache.stats().stored, 0u);
  // A location another cache on the directory wrote is a miss here, kept: not damaged.
  FakeFiles files;
  files.files["f"] = bytes;
  ChunkCache(root, 0, files.reader()).put_location(xorb_of(), 0, chunks, "f", 0, {}, {});
  ASSERT_TRUE(cache.contains(xorb_of(), 0, 2));
  EXPECT_FALSE(cache.get_range(xorb_of(), 0, 2).has_value());
  EXPECT_TRUE(cache.contains(xorb_of(), 0, 2));
  EXPECT_EQ(cache.stats().damaged, 0u);
  EXPECT_EQ(*ChunkCache(root, 0, files.reader()).get_range(xorb_of(), 0, 2), bytes);
}

}  // namespace HUBFS_UNITY_ID
}  // namespace hubfs::xet
