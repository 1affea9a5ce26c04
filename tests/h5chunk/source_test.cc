// Files without a local path (h5chunk/byte_source.h): libhdf5 reads the metadata through the
// source driver (source_driver.h), h5chunk reads the chunk index and the chunks through the same
// source, and each read's chunk list reaches the source as one hint. Results equal the local
// file's read; a source's error comes back with its own code and message.
#include <fcntl.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <atomic>
#include <fstream>
#include <mutex>

#include "h5_fixture.h"
#include "h5chunk/reader.h"
#include "h5chunk/source_driver.h"
#include "support/temp_dir.h"

namespace h5chunk::testing {
namespace HUBFS_UNITY_ID {

using ::testing::HasSubstr;

// A local file as a ByteSource that records what it was asked, and can fail on demand.
class RecordingSource : public ByteSource {
 public:
  explicit RecordingSource(const std::string& path) : name_("test://" + path) {
    fd_ = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    size_ = static_cast<uint64_t>(::lseek(fd_, 0, SEEK_END));
  }
  ~RecordingSource() override { ::close(fd_); }
  const std::string& name() const override { return name_; }
  uint64_t size() const override { return size_; }
  hubfs::Result<size_t> pread(void* dst, uint64_t offset, size_t len, const std::atomic<bool>*) override {
    reads_.fetch_add(1);
    if (fail_.load()) return hubfs::Status(hubfs::Code::kTimeout, "no answer from the Hub in 5 s; retry later");
    ssize_t n = ::pread(fd_, dst, len, static_cast<off_t>(offset));
    if (n < 0) return hubfs::IoError("pread failed");
    return static_cast<size_t>(n);
  }
  void hint(const std::vector<std::pair<uint64_t, uint64_t>>& ranges) override {
    std::lock_guard<std::mutex> lock(mu_);
    hints_.push_back(ranges);
  }
  std::vector<std::vector<std::pair<uint64_t, uint64_t>>> hints() {
    std::lock_guard<std::mutex> lock(mu_);
    return hints_;
  }
  void fail(bool on) { fail_.store(on); }
  uint64_t reads() const { return reads_.load(); }

 private:
  std::string name_;
  int fd_ = -1;
  uint64_t size_ = 0;
  std::atomic<bool> fail_{false};
  std::atomic<uint64_t> reads_{0};
  std::mutex mu_;
  std::vector<std::vector<std::pair<uint64_t, uint64_t>>> hints_;
};

struct SourceFile {
  hubfs::testing::TempDir dir;
  std::string path = (dir / "s.h5").string();
  DatasetSpec spec;
  Bytes data;
  explicit SourceFile(Codec codec, bool contiguous = false) {
    spec.shape = {12, 16, 300};
    if (!contiguous) spec.chunk = {1, 16, 300};
    spec.codec = contiguous ? Codec::kNone : codec;
    data = make_data(spec);
    write_dataset(path, spec, data);
  }
};

Bytes bytes_of(const Array& a) { return Bytes(a.data(), a.data() + a.nbytes()); }

TEST(SourceTest, ReadsEqualTheLocalFileOnEveryRoute) {
  for (Codec codec : {Codec::kDeflateShuffle, Codec::kBloscLz4, Codec::kNone}) {
    SCOPED_TRACE(codec_name(codec));
    SourceFile f(codec);
    auto local = File::open(f.path, quiet_options());
    ASSERT_TRUE(local.ok()) << local.status().message();
    auto source = std::make_shared<RecordingSource>(f.path);
    auto remote = File::open(source, quiet_options());
    ASSERT_TRUE(remote.ok()) << remote.status().message();
    EXPECT_EQ(remote->path(), source->name());
    auto paths = remote->dataset_paths();
    ASSERT_TRUE(paths.ok());
    EXPECT_EQ(*paths, std::vector<std::string>{"/data"});
    auto ld = local->dataset("/data");
    auto rd = remote->dataset("/data");
    ASSERT_TRUE(ld.ok() && rd.ok()) << rd.status().message();
    for (const char* sel : {":", "2:9", "5", "[7,1,3],::-2,100:200"}) {
      for (Route route : {Route::kFastPath, Route::kH5Dread}) {
        SCOPED_TRACE(std::string(sel) + (route == Route::kH5Dread ? " h5dread" : " fast"));
        auto want = ld->read(sel, via(route));
        auto got = rd->read(sel, via(route));
        ASSERT_TRUE(want.ok() && got.ok()) << got.status().message();
        EXPECT_EQ(got->stats.fast_path, route == Route::kFastPath);
        EXPECT_EQ(bytes_of(*got), bytes_of(*want));
      }
    }
  }
}

TEST(SourceTest, ContiguousDatasetsReadThroughTheSource) {
  SourceFile f(Codec::kNone, /*contiguous=*/true);
  auto source = std::make_shared<RecordingSource>(f.path);
  auto file = File::open(source, quiet_options());
  ASSERT_TRUE(file.ok()) << file.status().message();
  auto d = file->dataset("data");
  ASSERT_TRUE(d.ok());
  auto got = d->read("3:11", via(Route::kFastPath));
  ASSERT_TRUE(got.ok()) << got.status().message();
  EXPECT_TRUE(got->stats.fast_path);
  const size_t frame = 16 * 300 * 4;
  EXPECT_EQ(bytes_of(*got), Bytes(f.data.begin() + 3 * frame, f.data.begin() + 11 * frame));
}

TEST(SourceTest, OneHintNamesEveryChunkOfTheRead) {
  SourceFile f(Codec::kDeflateShuffle);
  auto source = std::make_shared<RecordingSource>(f.path);
  auto file = File::open(source, quiet_options());
  ASSERT_TRUE(file.ok()) << file.status().message();
  auto d = file->dataset("data");
  ASSERT_TRUE(d.ok());
  auto got = d->read("2:10", via(Route::kFastPath));
  ASSERT_TRUE(got.ok()) << got.status().message();
  auto hints = source->hints();
  ASSERT_EQ(hints.size(), 1u);
  ASSERT_EQ(hints[0].size(), 8u);  // frames 2..9, one chunk each
  for (uint64_t frame = 2; frame < 10; ++frame) {
    StoredChunk c = stored_chunk(f.path, "/data", {frame, 0, 0});
    EXPECT_EQ(hints[0][frame - 2], std::make_pair(c.offset, c.size)) << frame;
  }
}

// A caller that knows the bytes are local (ReadOptions::hint_chunks false: a FrameDataset frame
// whose blocks are all in hubfs's disk cache) reads with no hint, one chunk or many; the bytes
// are the same.
TEST(SourceTest, AReadAskedNotToHintItsChunksSendsNoHint) {
  SourceFile f(Codec::kDeflateShuffle);
  auto source = std::make_shared<RecordingSource>(f.path);
  auto file = File::open(source, quiet_options());
  ASSERT_TRUE(file.ok()) << file.status().message();
  auto d = file->dataset("data");
  ASSERT_TRUE(d.ok());
  ReadOptions quiet = via(Route::kFastPath);
  quiet.hint_chunks = false;
  for (const char* sel : {"4", "2:10"}) {
    SCOPED_TRACE(sel);
    auto hinted = d->read(sel, via(Route::kFastPath));
    const size_t before = source->hints().size();
    auto unhinted = d->read(sel, quiet);
    ASSERT_TRUE(hinted.ok() && unhinted.ok()) << unhinted.status().message();
    EXPECT_GE(before, 1u);                       // the default announces the chunks
    EXPECT_EQ(source->hints().size(), before);   // this read did not
    EXPECT_TRUE(unhinted->stats.fast_path);
    EXPECT_EQ(bytes_of(*unhinted), bytes_of(*hinted));
  }
}

// A hinted read of at least kPrefaultOutputFrom has its output's pages mapped ahead of the
// decoders (while a cold read's chunks are on their way); the bytes are the file's all the
// same. A smaller read, and a read of a local file (no hint), map nothing ahead.
TEST(SourceTest, ALargeHintedReadMapsItsOutputAhead) {
  hubfs::testing::TempDir dir;
  const std::string path = (dir / "big.h5").string();
  DatasetSpec spec;
  spec.shape = {8, 1024, 1024};  // 32 MiB of float32
  spec.chunk = {1, 1024, 1024};
  spec.codec = Codec::kNone;
  const Bytes data = make_data(spec);
  write_dataset(path, spec, data);
  auto source = std::make_shared<RecordingSource>(path);
  auto file = File::open(source, quiet_options());
  ASSERT_TRUE(file.ok()) << file.status().message();
  auto d = file->dataset("/data");
  ASSERT_TRUE(d.ok());
  auto all = d->read(":", via(Route::kFastPath));
  ASSERT_TRUE(all.ok()) << all.status().message();
  EXPECT_EQ(all->stats.prefaulted_bytes, kPrefaultOutputFrom);
  EXPECT_EQ(bytes_of(*all), data);
  auto some = d->read("2:5", via(Route::kFastPath));
  ASSERT_TRUE(some.ok()) << some.status().message();
  EXPECT_EQ(some->stats.prefaulted_bytes, 0u);
  EXPECT_EQ(bytes_of(*some), Bytes(data.begin() + 2 * (4 << 20), data.begin() + 5 * (4 << 20)));
  auto local = File::open(path, quiet_options());
  ASSERT_TRUE(local.ok());
  auto ld = local->dataset("/data");
  ASSERT_TRUE(ld.ok());
  auto unhinted = ld->read(":", via(Route::kFastPath));
  ASSERT_TRUE(unhinted.ok()) << unhinted.status().message();
  EXPECT_EQ(unhinted->stats.prefaulted_bytes, 0u);
  EXPECT_EQ(bytes_of(*unhinted), data);
}

TEST(SourceTest, ASourceErrorComesBackWithItsCodeAndCause) {
  SourceFile f(Codec::kDeflateShuffle);
  auto source = std::make_shared<RecordingSource>(f.path);
  auto file = File::open(source, quiet_options());
  ASSERT_TRUE(file.ok()) << file.status().message();
  auto d = file->dataset("data");
  ASSERT_TRUE(d.ok());
  source->fail(true);
  for (Route route : {Route::kFastPath, Route::kH5Dread}) {
    auto got = d->read("0:4", via(route));
    ASSERT_FALSE(got.ok());
    EXPECT_EQ(got.status().code(), hubfs::Code::kTimeout) << got.status().message();
    EXPECT_THAT(got.status().message(), HasSubstr("no answer from the Hub in 5 s"));
    EXPECT_THAT(got.status().message(), HasSubstr(source->name()));
  }
  source->fail(false);
  auto again = d->read("0:4", via(Route::kFastPath));
  ASSERT_TRUE(again.ok()) << again.status().message();
  EXPECT_EQ(bytes_of(*again), Bytes(f.data.begin(), f.data.begin() + 4 * 16 * 300 * 4));

  auto failing = std::make_shared<RecordingSource>(f.path);
  failing->fail(true);
  auto not_opened = File::open(failing, quiet_options());
  ASSERT_FALSE(not_opened.ok());
  EXPECT_EQ(not_opened.status().code(), hubfs::Code::kTimeout) << not_opened.status().message();
}

TEST(SourceTest, BytesThatAreNotHdf5AreRefusedByName) {
  hubfs::testing::TempDir dir;
  const std::string path = (dir / "x.bin").string();
  std::ofstream(path) << std::string(4096, 'x');
  auto source = std::make_shared<RecordingSource>(path);
  auto file = File::open(source, quiet_options());
  ASSERT_FALSE(file.ok());
  EXPECT_EQ(file.status().code(), hubfs::Code::kInvalidArgument);
  EXPECT_THAT(file.status().message(), HasSubstr("is not an HDF5 file"));
  EXPECT_THAT(file.status().message(), HasSubstr(source->name()));
}

TEST(SourceTest, TheFileHoldsItsSourceUntilClosed) {
  SourceFile f(Codec::kBloscLz4);
  auto source = std::make_shared<RecordingSource>(f.path);
  std::weak_ptr<RecordingSource> watch = source;
  {
    auto file = File::open(std::move(source), quiet_options());
    ASSERT_TRUE(file.ok());
    auto d = file->dataset("data");
    ASSERT_TRUE(d.ok());
    EXPECT_FALSE(watch.expired());
    auto got = d->read(":", via(Route::kFastPath));
    ASSERT_TRUE(got.ok());
    EXPECT_EQ(bytes_of(*got), f.data);
  }
  EXPECT_TRUE(watch.expired());  // libhdf5 closed the file and let go of the source
}

}  // namespace
}  // namespace h5chunk::testing
