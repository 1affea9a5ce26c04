// The chunk cache's bound: least recently used chunks go first, a hit counts as a use, and what
// stays on disk is within max_bytes. (Serving and refusing damaged chunks: xet_source_test.cc.)
#include "xet/chunk_cache.h"

#include <fcntl.h>
#include <sys/stat.h>

#include <filesystem>
#include <string>

#include <gtest/gtest.h>

#include "support/temp_dir.h"

namespace hubfs::xet {
namespace HUBFS_UNITY_ID {

using testing::TempDir;

constexpr size_t kChunk = 1000;
constexpr uint64_t kFile = 32 + kChunk;  // the stored hash, then the content

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

// Sets the chunk file's mtime to `seconds` after the epoch: distinct, ordered use times without
// depending on the clock's granularity between puts.
void set_mtime(const std::string& dir, uint32_t index, time_t seconds) {
  const std::string hex = xorb_of().hex();
  const std::string path = dir + "/" + hex.substr(0, 2) + "/" + hex + "." + std::to_string(index);
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
