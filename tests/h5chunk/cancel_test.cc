// ReadOptions::cancel (the Python binding's Ctrl-C): a cancelled read stops between chunks with
// kUnavailable, and the dataset stays readable.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <atomic>

#include "h5_fixture.h"
#include "support/temp_dir.h"

namespace h5chunk::testing {
namespace HUBFS_UNITY_ID {

using ::testing::HasSubstr;

TEST(Cancel, SetBeforeTheReadReadsNothing) {
  hubfs::testing::TempDir dir;
  const std::string path = (dir / "c.h5").string();
  DatasetSpec spec;
  spec.shape = {12, 32, 32};
  spec.chunk = {1, 32, 32};
  spec.codec = Codec::kBloscLz4;
  write_dataset(path, spec, make_data(spec));
  auto file = File::open(path, quiet_options());
  auto dset = file->dataset("/data");
  std::atomic<bool> cancel{true};
  std::atomic<uint64_t> chunks{0};
  ReadOptions ro = via(Route::kFastPath);
  ro.cancel = &cancel;
  ro.progress = [&](uint64_t) { chunks += 1; };
  auto got = dset->read(":", ro);
  ASSERT_FALSE(got.ok());
  EXPECT_EQ(got.status().code(), hubfs::Code::kUnavailable);
  EXPECT_THAT(got.status().message(), HasSubstr("read cancelled"));
  EXPECT_EQ(chunks.load(), 0u);
  cancel = false;
  auto again = dset->read(":", ro);
  ASSERT_TRUE(again.ok()) << again.status().message();
  EXPECT_EQ(again->stats.chunks, 12u);
}

TEST(Cancel, SetDuringTheReadStopsItEarly) {
  hubfs::testing::TempDir dir;
  const std::string path = (dir / "c.h5").string();
  DatasetSpec spec;
  spec.shape = {64, 32, 32};
  spec.chunk = {1, 32, 32};
  spec.codec = Codec::kBloscLz4;
  write_dataset(path, spec, make_data(spec));
  auto file = File::open(path, quiet_options(1));  // one worker: chunks complete in order
  auto dset = file->dataset("/data");
  std::atomic<bool> cancel{false};
  std::atomic<uint64_t> chunks{0};
  ReadOptions ro = via(Route::kFastPath);
  ro.cancel = &cancel;
  ro.progress = [&](uint64_t) {
    if (++chunks == 3) cancel = true;
  };
  auto got = dset->read(":", ro);
  ASSERT_FALSE(got.ok());
  EXPECT_THAT(got.status().message(), HasSubstr("read cancelled"));
  EXPECT_EQ(chunks.load(), 3u);
}

}  // namespace
}  // namespace h5chunk::testing
