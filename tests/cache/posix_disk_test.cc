#include <gtest/gtest.h>
#include <sys/stat.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>

#include "cache/cache_disk.h"
#include "fault_disk.h"
#include "page_cache.h"
#include "support/temp_dir.h"

namespace hubfs {
namespace HUBFS_UNITY_ID {

namespace fs = std::filesystem;
using testing::TempDir;

// Memory aligned as a block buffer pool's slots are (reader/block_buffers.h). aligned_alloc
// wants a size that is a multiple of the alignment (C11; the sanitizers' allocators refuse
// others): `size` is what the test may use, rounded up for the allocation.
struct Aligned {
  static size_t rounded(size_t n) {
    const size_t a = CacheDisk::kDirectReadAlign;
    return (n + a - 1) / a * a;
  }
  explicit Aligned(size_t n)
      : p(static_cast<char*>(std::aligned_alloc(CacheDisk::kDirectReadAlign, rounded(n)))), size(n) {}
  ~Aligned() { std::free(p); }
  Aligned(const Aligned&) = delete;
  Aligned& operator=(const Aligned&) = delete;
  char* p;
  size_t size;
};

TEST(PosixDisk, MakeDirsCreatesEveryMissingLevelAndAcceptsExisting) {
  TempDir tmp;
  auto disk = posix_disk();
  const std::string deep = tmp.str() + "/a/b/c";
  ASSERT_TRUE(disk->make_dirs(deep, 0700).ok());
  EXPECT_TRUE(fs::is_directory(deep));
  EXPECT_TRUE(disk->make_dirs(deep, 0700).ok());
  std::ofstream(tmp / "file") << "x";
  Status under_file = disk->make_dirs(tmp.str() + "/file/sub", 0700);
  EXPECT_FALSE(under_file.ok());
  EXPECT_NE(under_file.message().find(tmp.str() + "/file"), std::string::npos);
}

// A FIFO where a block file belongs: opening it for reading would block until a writer came
// (forever), so every disk thread reading that block would hang. It must be refused at once
// as "not a block" (kCorrupt), in both read paths, and so is a symlink.
TEST(PosixDisk, FifoAndSymlinkAreRefusedWithoutBlocking) {
  TempDir tmp;
  auto disk = posix_disk();
  const std::string fifo = tmp.str() + "/fifo";
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  auto whole = disk->read_file(fifo, 1 << 20);
  ASSERT_FALSE(whole.ok());
  EXPECT_EQ(whole.status().code(), Code::kCorrupt);
  auto split = disk->read_file_split(fifo, 48, 1 << 20);
  ASSERT_FALSE(split.ok());
  EXPECT_EQ(split.status().code(), Code::kCorrupt);
  std::ofstream(tmp / "target") << "x";
  fs::create_symlink(tmp / "target", tmp / "link");
  auto link = disk->read_file((tmp / "link").string(), 1 << 20);
  ASSERT_FALSE(link.ok());
  EXPECT_EQ(link.status().code(), Code::kCorrupt);
}

TEST(PosixDisk, WriteNewFileRefusesToReplace) {
  TempDir tmp;
  auto disk = posix_disk();
  const std::string path = tmp.str() + "/f";
  ASSERT_TRUE(disk->write_new_file(path, "first").ok());
  EXPECT_FALSE(disk->write_new_file(path, "second").ok());  // O_EXCL
  EXPECT_EQ(*disk->read_file(path, 100), "first");
  struct stat st;
  ASSERT_EQ(::stat(path.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0600u);
}

// A file written in two pieces (a block's header, then its data where it lies) is the two
// pieces in order, whichever is empty; large enough for the kernel to take a piece in parts.
TEST(PosixDisk, AFileWrittenInTwoPiecesIsThePiecesInOrder) {
  TempDir tmp;
  auto disk = posix_disk();
  std::string big(3u << 20, '\0');
  for (size_t i = 0; i < big.size(); ++i) big[i] = static_cast<char>(i * 131 + 7);
  struct Case {
    std::string head, body;
  };
  int n = 0;
  for (const Case& c : {Case{"head", big}, Case{big, "tail"}, Case{"", big}, Case{big, ""}, Case{"", ""}}) {
    const std::string path = tmp.str() + "/f" + std::to_string(n++);
    ASSERT_TRUE(disk->write_new_file(path, c.head, c.body).ok()) << n;
    EXPECT_TRUE(*disk->read_file(path, 8u << 20) == c.head + c.body) << n;
  }
}

TEST(PosixDisk, SyncedWritesReadBackTheSame) {
  TempDir tmp;
  auto disk = posix_disk(PosixDiskOptions{.sync_data = true});
  ASSERT_TRUE(disk->write_new_file(tmp.str() + "/f", std::string(100000, 'q')).ok());
  EXPECT_EQ(*disk->read_file(tmp.str() + "/f", 100000), std::string(100000, 'q'));
}

TEST(PosixDisk, ReadReportsMissingAndOversizedDistinctly) {
  TempDir tmp;
  auto disk = posix_disk();
  EXPECT_EQ(disk->read_file(tmp.str() + "/nope", 10).status().code(), Code::kNotFound);
  ASSERT_TRUE(disk->write_new_file(tmp.str() + "/big", std::string(11, 'x')).ok());
  EXPECT_EQ(disk->read_file(tmp.str() + "/big", 10).status().code(), Code::kCorrupt);
  EXPECT_EQ(disk->read_file_split(tmp.str() + "/big", 4, 10).status().code(), Code::kCorrupt);
  EXPECT_EQ(disk->read_file(tmp.str(), 10).status().code(), Code::kCorrupt);  // a directory
}

TEST(PosixDisk, SplitReadMatchesWholeRead) {
  TempDir tmp;
  auto disk = posix_disk();
  for (size_t n : {0ul, 3ul, 48ul, 49ul, 300000ul}) {
    std::string data(n, '\0');
    for (size_t i = 0; i < n; ++i) data[i] = static_cast<char>(i * 31);
    const std::string path = tmp.str() + "/f" + std::to_string(n);
    ASSERT_TRUE(disk->write_new_file(path, data).ok());
    auto split = disk->read_file_split(path, 48, 1 << 20);
    ASSERT_TRUE(split.ok());
    EXPECT_EQ(split->head.size(), std::min<size_t>(n, 48)) << n;
    EXPECT_EQ(split->head + split->rest, data) << n;
    // The generic fallback (what a wrapping disk inherits) splits the same way.
    auto generic = disk->CacheDisk::read_file_split(path, 48, 1 << 20);
    ASSERT_TRUE(generic.ok());
    EXPECT_EQ(generic->head, split->head);
    EXPECT_EQ(generic->rest, split->rest);
  }
}

TEST(PosixDisk, ListsRegularFilesRecursivelyWithSizeAndMtime) {
  TempDir tmp;
  auto disk = posix_disk();
  ASSERT_TRUE(disk->make_dirs(tmp.str() + "/x/y", 0700).ok());
  ASSERT_TRUE(disk->write_new_file(tmp.str() + "/top", "12").ok());
  ASSERT_TRUE(disk->write_new_file(tmp.str() + "/x/y/deep", "12345").ok());
  testing::FaultDisk::set_mtime(tmp.str() + "/x/y/deep", 777);
  fs::create_symlink(tmp / "x", tmp / "loop");  // not followed
  auto listed = disk->list_files(tmp.str());
  ASSERT_TRUE(listed.ok());
  ASSERT_EQ(listed->size(), 2u);
  auto entries = listed.value();
  std::sort(entries.begin(), entries.end(),
            [](const DiskEntry& a, const DiskEntry& b) { return a.path < b.path; });
  EXPECT_EQ(entries[0].path, tmp.str() + "/top");
  EXPECT_EQ(entries[0].size, 2u);
  EXPECT_EQ(entries[1].path, tmp.str() + "/x/y/deep");
  EXPECT_EQ(entries[1].size, 5u);
  EXPECT_EQ(entries[1].mtime_ns, 777'000'000'000);
  EXPECT_EQ(disk->list_files(tmp.str() + "/absent").status().code(), Code::kNotFound);
}

TEST(PosixDisk, TouchRenameRemove) {
  TempDir tmp;
  auto disk = posix_disk();
  const std::string a = tmp.str() + "/a", b = tmp.str() + "/b";
  ASSERT_TRUE(disk->write_new_file(a, "A").ok());
  testing::FaultDisk::set_mtime(a, 5);
  ASSERT_TRUE(disk->touch(a).ok());
  EXPECT_GT(disk->list_files(tmp.str())->at(0).mtime_ns, 5'000'000'000);
  ASSERT_TRUE(disk->write_new_file(b, "B").ok());
  ASSERT_TRUE(disk->rename(a, b).ok());  // replaces
  EXPECT_EQ(*disk->read_file(b, 10), "A");
  ASSERT_TRUE(disk->remove(b).ok());
  EXPECT_EQ(disk->remove(b).code(), Code::kNotFound);
  EXPECT_EQ(disk->touch(b).code(), Code::kNotFound);
}

// A file the page cache does not hold is read with O_DIRECT straight into aligned memory (where
// the file system takes direct I/O); one it holds, or into memory not aligned, the ordinary way.
// The bytes are the file's every time.
TEST(PosixDisk, AFileThePageCacheDoesNotHoldIsReadDirectlyIntoAlignedMemory) {
  TempDir tmp;
  auto disk = posix_disk();
  const std::string path = tmp.str() + "/block";
  std::string data(1000000 + 48, '\0');  // not a multiple of any alignment
  for (size_t i = 0; i < data.size(); ++i) data[i] = static_cast<char>(i * 7 + i / 4096);
  ASSERT_TRUE(disk->write_new_file(path, data).ok());
  const bool possible = testing::direct_reads_possible(path);
  Aligned buffer(data.size() + CacheDisk::kDirectReadAlign);

  ASSERT_TRUE(testing::evict_from_page_cache(path));
  auto read = disk->read_file_into(path, buffer.p, buffer.size);
  ASSERT_TRUE(read.ok()) << read.status().message();
  EXPECT_EQ(read->size, data.size());
  EXPECT_EQ(std::string(buffer.p, read->size), data);
  EXPECT_EQ(read->direct, possible);

  // The page cache holds it now (an ordinary read put it there): read through it.
  ASSERT_TRUE(disk->read_file(path, data.size()).ok());
  std::fill(buffer.p, buffer.p + buffer.size, 'x');
  read = disk->read_file_into(path, buffer.p, buffer.size);
  ASSERT_TRUE(read.ok());
  EXPECT_FALSE(read->direct);
  EXPECT_EQ(std::string(buffer.p, read->size), data);

  // Memory not aligned, or too little room for the file rounded up: the ordinary way.
  ASSERT_TRUE(testing::evict_from_page_cache(path));
  read = disk->read_file_into(path, buffer.p + 8, buffer.size - 8);
  ASSERT_TRUE(read.ok());
  EXPECT_FALSE(read->direct);
  EXPECT_EQ(std::string(buffer.p + 8, read->size), data);
  ASSERT_TRUE(testing::evict_from_page_cache(path));
  read = disk->read_file_into(path, buffer.p, data.size());
  ASSERT_TRUE(read.ok());
  EXPECT_FALSE(read->direct);
  EXPECT_EQ(std::string(buffer.p, read->size), data);

  // Larger than the room given: refused as not a block; missing: not found.
  EXPECT_EQ(disk->read_file_into(path, buffer.p, data.size() - 1).status().code(), Code::kCorrupt);
  EXPECT_EQ(disk->read_file_into(tmp.str() + "/none", buffer.p, buffer.size).status().code(), Code::kNotFound);
}

}  // namespace
}  // namespace hubfs
