// h5chunk on hf:// without a mount (h5hub/hub_byte_source.h), over the bundled local Hub server
// (127.0.0.1, started here): libhdf5's metadata reads and h5chunk's chunk reads go through the
// session's reader and cache, a read's chunks reach the reader as one hint, the result equals the
// local file's, and a second session on the same cache fetches no data.
#include "h5hub/hub_byte_source.h"

#include <hdf5.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "h5chunk/h5chunk.h"
#include "h5hub/local_reads.h"
#include "support/local_hub.h"
#include "support/temp_dir.h"

namespace hubfs {
namespace HUBFS_UNITY_ID {

using testing::LocalHub;
using testing::LocalHubOptions;
using testing::TempDir;

// float32 (40, 64, 4096): one 1 MiB frame per chunk, deflate + shuffle; tens of the reader's
// 1 MiB blocks, so the last frames are not fetched by the reads before them (read-ahead).
constexpr hsize_t kDims[3] = {40, 64, 4096};
constexpr hsize_t kChunk[3] = {1, 64, 4096};

std::vector<float> write_frames(const std::string& path) {
  std::vector<float> data(kDims[0] * kDims[1] * kDims[2]);
  for (size_t i = 0; i < data.size(); ++i) data[i] = static_cast<float>((i * 2654435761u) % 1000) * 0.5f;
  hid_t f = H5Fcreate(path.c_str(), H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT);
  hid_t space = H5Screate_simple(3, kDims, nullptr);
  hid_t dcpl = H5Pcreate(H5P_DATASET_CREATE);
  H5Pset_chunk(dcpl, 3, kChunk);
  H5Pset_shuffle(dcpl);
  H5Pset_deflate(dcpl, 1);
  H5Gclose(H5Gcreate2(f, "data", H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT));
  hid_t d = H5Dcreate2(f, "/data/raw_data", H5T_NATIVE_FLOAT, space, H5P_DEFAULT, dcpl, H5P_DEFAULT);
  H5Dwrite(d, H5T_NATIVE_FLOAT, H5S_ALL, H5S_ALL, H5P_DEFAULT, data.data());
  H5Dclose(d);
  H5Pclose(dcpl);
  H5Sclose(space);
  H5Fclose(f);
  return data;
}

class H5HubTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    root_ = new TempDir();
    const auto repo = root_->path() / "datasets" / "lab" / "scans";
    std::filesystem::create_directories(repo);
    frames_ = new std::vector<float>(write_frames((repo / "scan.hdf5").string()));
    std::ofstream(repo / "README.md") << "# scans\n";
    std::filesystem::create_directories(repo / "sub");
    std::ofstream(repo / "sub" / "a.bin") << "a";
    std::ofstream(repo / "sub" / "b.bin") << "b";
    {
      // Three and a half of the reader's 1 MiB blocks of bytes that do not compress.
      std::ofstream noise(repo / "noise.bin", std::ios::binary);
      uint64_t x = 88172645463325252ull;
      for (size_t i = 0; i < (7u << 19) / 8; ++i) {
        x ^= x << 13, x ^= x >> 7, x ^= x << 17;
        noise.write(reinterpret_cast<const char*>(&x), 8);
      }
    }
    LocalHubOptions options;
    options.root = root_->str();
    options.latency_ms = 20;  // requests overlap when they go out together
    hub_ = LocalHub::start(options).release();
  }
  static void TearDownTestSuite() {
    delete hub_;
    delete frames_;
    delete root_;
  }

  SessionConfig config() const {
    SessionConfig c;
    c.endpoint = hub_->url();
    c.cache_dir = (cache_.path() / "cache").string();
    c.cache_size = 1ull << 30;
    c.read_timeout_s = 30;
    c.token = "";
    return c;
  }

  static TempDir* root_;
  static LocalHub* hub_;
  static std::vector<float>* frames_;
  TempDir cache_;
};
TempDir* H5HubTest::root_ = nullptr;
LocalHub* H5HubTest::hub_ = nullptr;
std::vector<float>* H5HubTest::frames_ = nullptr;

constexpr size_t kFrame = kDims[1] * kDims[2];

TEST_F(H5HubTest, ReadsFramesEqualToTheWrittenOnesWithOneHint) {
  auto source = open_hf_source("hf://datasets/lab/scans/scan.hdf5", config(), Env::real());
  ASSERT_TRUE(source.ok()) << source.status().message();
  std::shared_ptr<RepoSession> session = (*source)->file()->session();
  h5chunk::Options options;
  options.threads = 2;
  auto file = h5chunk::File::open(*source, options);
  ASSERT_TRUE(file.ok()) << file.status().message();
  auto d = file->dataset("/data/raw_data");
  ASSERT_TRUE(d.ok()) << d.status().message();
  const ReaderStats before = session->stack.reader->stats();
  auto got = d->read("2:9");
  ASSERT_TRUE(got.ok()) << got.status().message();
  EXPECT_TRUE(got->stats.fast_path) << got->stats.fallback_cause;
  ASSERT_EQ(got->nbytes(), 7 * kFrame * sizeof(float));
  EXPECT_EQ(std::memcmp(got->data(), frames_->data() + 2 * kFrame, got->nbytes()), 0);
  const ReaderStats after = session->stack.reader->stats();
  EXPECT_EQ(after.hints - before.hints, 1u);  // the 7 chunks went to the reader as one hint

  // libhdf5's own reader through the source (metadata and chunks) agrees.
  auto reference = d->read("0:6", [] {
    h5chunk::ReadOptions o;
    o.route = h5chunk::Route::kH5Dread;
    return o;
  }());
  ASSERT_TRUE(reference.ok()) << reference.status().message();
  EXPECT_EQ(std::memcmp(reference->data(), frames_->data(), reference->nbytes()), 0);
}

TEST_F(H5HubTest, ASecondSessionOnTheSameCacheFetchesNoData) {
  {
    auto source = open_hf_source("hf://datasets/lab/scans/scan.hdf5", config(), Env::real());
    ASSERT_TRUE(source.ok()) << source.status().message();
    auto file = h5chunk::File::open(*source);
    ASSERT_TRUE(file.ok()) << file.status().message();
    auto got = file->dataset("data/raw_data")->read("0:5");
    ASSERT_TRUE(got.ok()) << got.status().message();
  }
  hub_->reset_stats();
  auto source = open_hf_source("hf://datasets/lab/scans/scan.hdf5", config(), Env::real());
  ASSERT_TRUE(source.ok()) << source.status().message();
  auto file = h5chunk::File::open(*source);
  ASSERT_TRUE(file.ok()) << file.status().message();
  auto got = file->dataset("data/raw_data")->read("0:5");
  ASSERT_TRUE(got.ok()) << got.status().message();
  EXPECT_EQ(std::memcmp(got->data(), frames_->data(), got->nbytes()), 0);
  const auto stats = hub_->stats();
  EXPECT_EQ(stats["cdn_requests"].get<uint64_t>(), 0u) << stats.dump();
  EXPECT_EQ(stats["range_requests"].get<uint64_t>(), 0u) << stats.dump();
}

TEST_F(H5HubTest, ErrorsNameTheUrlAndTheCause) {
  auto missing = open_hf_source("hf://datasets/lab/scans/nope.hdf5", config(), Env::real());
  ASSERT_FALSE(missing.ok());
  EXPECT_EQ(missing.status().code(), Code::kNotFound);
  EXPECT_NE(missing.status().message().find("nope.hdf5"), std::string::npos) << missing.status().message();
  auto repo_only = open_hf_source("hf://datasets/lab/scans", config(), Env::real());
  ASSERT_FALSE(repo_only.ok());
  EXPECT_EQ(repo_only.status().code(), Code::kInvalidArgument);
  auto readme = open_hf_source("hf://datasets/lab/scans/README.md", config(), Env::real());
  ASSERT_TRUE(readme.ok()) << readme.status().message();
  auto not_hdf5 = h5chunk::File::open(*readme);
  ASSERT_FALSE(not_hdf5.ok());
  EXPECT_NE(not_hdf5.status().message().find("hf://datasets/lab/scans/README.md' is not an HDF5 file"), std::string::npos)
      << not_hdf5.status().message();
}

TEST_F(H5HubTest, AFileOpensWithoutTheHubOnceItsDirectoriesAreListedInTheCache) {
  auto source = open_hf_source("hf://datasets/lab/scans/scan.hdf5", config(), Env::real());
  ASSERT_TRUE(source.ok()) << source.status().message();
  RepoSession& session = *(*source)->file()->session();
  ListedDirs dirs;
  // The session knows its first file from the Hub's answer about it: the root is not listed.
  EXPECT_FALSE(dirs.opens_locally(session, "README.md"));
  ASSERT_TRUE(list_dir(session, "").ok());  // lists the root, and stores the listing
  EXPECT_TRUE(dirs.opens_locally(session, "README.md"));
  EXPECT_TRUE(dirs.opens_locally(session, "noise.bin"));
  EXPECT_TRUE(dirs.opens_locally(session, "data/x.h5"));  // the listed root has no "data": missing at once
  ListedDirs fresh;  // another session's, on the same cache and commit
  EXPECT_TRUE(fresh.opens_locally(session, "scan.hdf5"));
}

// A file's siblings open without the Hub when its directory's listing is stored, even where the
// root's is not: the session knows its first file's way (the directory, in the root) and that
// directory's listing, read while its pin was out; nothing is read from the cache directory to
// say so. What opens_locally says holds: such an open makes no request.
TEST_F(H5HubTest, AFileOpensWithoutTheHubWhereItsFirstFilesDirectoryIsStored) {
  {
    auto s = open_hf_source("hf://datasets/lab/scans/sub/a.bin", config(), Env::real());
    ASSERT_TRUE(s.ok()) << s.status().message();
    ASSERT_TRUE(list_dir(*(*s)->file()->session(), "sub").ok());  // stores sub/'s listing alone
  }
  auto source = open_hf_source("hf://datasets/lab/scans/sub/a.bin", config(), Env::real());
  ASSERT_TRUE(source.ok()) << source.status().message();
  auto session = (*source)->file()->session();
  // From here on the stored listings are gone: what follows is answered from the session's memory.
  // Those at a commit go; refs/ stays: the pin's thread may still be refreshing its revision
  // record there after handing on its answer (BackgroundPin), and removing the directory it
  // writes into raced that write ("Directory not empty"). Nothing under refs/ lists a directory.
  namespace fs = std::filesystem;
  for (const auto& endpoint : fs::directory_iterator(fs::path(config().cache_dir) / "listings"))
    for (const auto& repo : fs::directory_iterator(endpoint.path()))
      for (const auto& entry : fs::directory_iterator(repo.path()))
        if (entry.path().filename() != "refs") fs::remove_all(entry.path());
  for (const auto& f : fs::recursive_directory_iterator(fs::path(config().cache_dir) / "listings"))
    if (f.is_regular_file()) ASSERT_EQ(f.path().parent_path().filename(), "refs") << f.path();
  ListedDirs dirs;
  EXPECT_TRUE(dirs.opens_locally(*session, "sub/a.bin"));
  EXPECT_TRUE(dirs.opens_locally(*session, "sub/b.bin"));
  EXPECT_TRUE(dirs.opens_locally(*session, "sub/deeper/c.bin")) << "sub/ is listed: missing, without a request";
  EXPECT_FALSE(dirs.opens_locally(*session, "README.md")) << "the root's other names need its listing";
  hub_->reset_stats();
  auto b = HubFile::open(session, "sub/b.bin");
  ASSERT_TRUE(b.ok()) << b.status().message();
  auto deeper = HubFile::open(session, "sub/deeper/c.bin");
  EXPECT_EQ(deeper.status().code(), Code::kNotFound) << deeper.status().message();
  EXPECT_EQ(hub_->stats()["api_requests"].get<int>(), 0) << hub_->stats().dump();
}

// Names an earlier open walked are found again without listing: a session whose first file the
// Hub's answer described (no stored listing of its directory) finds its siblings once that
// directory is stored, and the root's name on the way because an open walked it.
TEST_F(H5HubTest, AFileOpensWithoutTheHubWhereAnEarlierOpenWalkedAndItsDirectoryIsStored) {
  auto source = open_hf_source("hf://datasets/lab/scans/sub/a.bin", config(), Env::real());
  ASSERT_TRUE(source.ok()) << source.status().message();
  auto session = (*source)->file()->session();
  ListedDirs dirs;
  EXPECT_FALSE(dirs.opens_locally(*session, "sub/b.bin")) << "sub/ is not stored";
  ASSERT_TRUE(list_dir(*session, "sub").ok());  // stores sub/'s listing alone
  EXPECT_FALSE(dirs.opens_locally(*session, "README.md")) << "the root's other names need its listing";
  dirs.opened("sub/a.bin");
  EXPECT_TRUE(dirs.opens_locally(*session, "sub/b.bin"));
  hub_->reset_stats();
  auto b = HubFile::open(session, "sub/b.bin");
  ASSERT_TRUE(b.ok()) << b.status().message();
  EXPECT_EQ(hub_->stats()["api_requests"].get<int>(), 0) << hub_->stats().dump();
}

TEST_F(H5HubTest, ReadsTheCachesAnswerRunOnTheCallersThreadWhateverTheCancelFlag) {
  // A read no block of which must come from the Hub is not handed to a helper
  // (h5hub/local_reads.h): a cancel flag already set does not stop it. One that must fetch is,
  // and the flag ends it.
  std::vector<char> head(64, 'x');
  {
    auto source = open_hf_source("hf://datasets/lab/scans/noise.bin", config(), Env::real());
    ASSERT_TRUE(source.ok()) << source.status().message();
    const HubFile& file = *(*source)->file();
    const uint64_t block = file.session()->stack.reader->options().block_size;
    ASSERT_GT(file.size(), 3 * block);
    EXPECT_TRUE(reads_locally(file, file.size(), 10));  // past the end: nothing to read
    EXPECT_TRUE(reads_locally(file, 0, 0));
    EXPECT_FALSE(reads_locally(file, 0, 16));  // nothing cached yet
    EXPECT_TRUE(reads_locally(file, 0, 16, /*recent=*/0));  // the block the last read served
    EXPECT_FALSE(reads_locally(file, block - 8, 16, /*recent=*/0));  // its neighbour is not cached

    std::atomic<bool> cancel{true};
    // Held 3 s: far longer than the cancelled read's first look at its flag.
    hub_->add_fault({{"mode", "stall"}, {"path_contains", "/blobs/"}, {"count", 1000}, {"stall_ms", 3000}});
    auto cold = (*source)->pread(head.data(), 0, head.size(), &cancel);
    hub_->clear_faults();
    ASSERT_FALSE(cold.ok());
    EXPECT_EQ(cold.status().code(), Code::kUnavailable) << cold.status().message();
    EXPECT_EQ(std::count(head.begin(), head.end(), 'x'), static_cast<long>(head.size()));
    auto fetched = (*source)->pread(head.data(), 0, head.size());  // no flag: fetched
    ASSERT_TRUE(fetched.ok()) << fetched.status().message();
    ASSERT_EQ(*fetched, head.size());
    // The block this source's last read served: read here, flag or not.
    std::vector<char> again(64, 'y');
    auto warm = (*source)->pread(again.data(), 0, again.size(), &cancel);
    ASSERT_TRUE(warm.ok()) << warm.status().message();
    EXPECT_EQ(std::memcmp(again.data(), head.data(), head.size()), 0);
  }  // the session's queued cache writes finish
  uint64_t x = 88172645463325252ull;
  x ^= x << 13, x ^= x >> 7, x ^= x << 17;
  EXPECT_EQ(std::memcmp(head.data(), &x, 8), 0);  // the file's first bytes

  // A new session on the same cache: the first block is on disk.
  auto source = open_hf_source("hf://datasets/lab/scans/noise.bin", config(), Env::real());
  ASSERT_TRUE(source.ok()) << source.status().message();
  const HubFile& file = *(*source)->file();
  const uint64_t block = file.session()->stack.reader->options().block_size;
  EXPECT_TRUE(reads_locally(file, 0, 16));
  EXPECT_TRUE(reads_locally(file, 100, block - 100));
  EXPECT_FALSE(reads_locally(file, 0, 2 * block));  // the second block is not
  EXPECT_FALSE(reads_locally(file, 0, (kMaxLocalProbeBlocks + 1) * block));  // too many to look up
  std::atomic<bool> cancel{true};
  std::vector<char> warm(64, 'z');
  auto got = (*source)->pread(warm.data(), 0, warm.size(), &cancel);
  ASSERT_TRUE(got.ok()) << got.status().message();
  EXPECT_EQ(std::memcmp(warm.data(), head.data(), head.size()), 0);

  RecentBlock recent;
  EXPECT_EQ(recent.get(), RecentBlock::kNone);
  recent.served(file, 3 * block + 5, 10);
  EXPECT_EQ(recent.get(), 3u);
  recent.served(file, block, 2 * block);  // ends in the block after
  EXPECT_EQ(recent.get(), 2u);
  recent.served(file, file.size(), 10);  // nothing read: unchanged
  EXPECT_EQ(recent.get(), 2u);
}

// A block the memory tier holds needs no look at the disk cache (a session's opens after its pin
// find their first blocks there): such a read runs on the caller's thread even once the disk
// cache has lost the block.
TEST_F(H5HubTest, ABlockInMemoryReadsLocallyWithoutItsBlockFile) {
  auto source = open_hf_source("hf://datasets/lab/scans/noise.bin", config(), Env::real());
  ASSERT_TRUE(source.ok()) << source.status().message();
  const HubFile& file = *(*source)->file();
  std::vector<char> head(64);
  auto got = (*source)->pread(head.data(), 0, head.size());  // block 0 fetched, in memory
  ASSERT_TRUE(got.ok()) << got.status().message();
  const BlockReader& reader = *file.session()->stack.reader;
  const uint64_t last = (file.size() - 1) / reader.options().block_size;
  ASSERT_GE(last, 2u);
  std::vector<uint64_t> missing = reader.not_in_memory(file.content_id(), file.size(), 0, last + 5);
  ASSERT_EQ(missing.size(), last);  // all but block 0, none past the end
  EXPECT_EQ(missing.front(), 1u);
  EXPECT_EQ(missing.back(), last);
  EXPECT_EQ(reader.not_in_memory(file.content_id(), file.size(), 2, 2), std::vector<uint64_t>{2});
  EXPECT_TRUE(reader.not_in_memory(file.content_id(), file.size(), last + 1, last + 3).empty());  // past the end
  file.session()->stack.reader->shutdown();  // the block files' writes are done; none come after
  std::filesystem::remove_all(cache_.path() / "cache" / "blocks");
  EXPECT_TRUE(reads_locally(file, 0, 16));  // in memory: no block file looked at
  EXPECT_FALSE(reads_locally(file, 2 * file.session()->stack.reader->options().block_size, 16));  // neither
}

TEST_F(H5HubTest, ACancelledReadReturnsWhileTheHubStalls) {
  auto source = open_hf_source("hf://datasets/lab/scans/scan.hdf5", config(), Env::real());
  ASSERT_TRUE(source.ok()) << source.status().message();
  // Every data request stalls (the session's read timeout is 30 s): only the cancel flag can
  // end this read early, with kUnavailable rather than a timeout. (End to end, through h5chunk
  // and Ctrl-C: tests/python/test_h5chunk_hf.py.)
  hub_->add_fault({{"mode", "stall"}, {"path_contains", "/blobs/"}, {"count", 1000}});
  std::atomic<bool> cancel{false};
  std::thread canceller([&cancel] {
    std::this_thread::sleep_for(std::chrono::milliseconds(300));
    cancel.store(true);
  });
  ASSERT_GT((*source)->size(), 0u);
  std::vector<char> buf((*source)->size(), 'x');  // the whole file: nothing of it is cached yet
  auto got = (*source)->pread(buf.data(), 0, buf.size(), &cancel);
  canceller.join();
  hub_->clear_faults();
  ASSERT_FALSE(got.ok());
  EXPECT_EQ(got.status().code(), Code::kUnavailable) << got.status().message();
  EXPECT_NE(got.status().message().find("cancelled"), std::string::npos) << got.status().message();
  EXPECT_EQ(std::count(buf.begin(), buf.end(), 'x'), static_cast<long>(buf.size()));  // nothing written
}

}  // namespace
}  // namespace hubfs
