// Damage to a dataset's object header (its layout or dataspace message) that makes libhdf5's
// H5Dread loop, grow without bound or crash is refused by h5chunk on every route but
// --route h5dread, by the library and by the CLI: a diagnosis naming the damage, never a hand-over
// to H5Dread. Each file is written by the test and patched byte by byte.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <cstdio>
#include <cstring>
#include <filesystem>

#include "h5_fixture.h"
#include "hostile_util.h"
#include "support/temp_dir.h"

namespace h5chunk::testing {
namespace HUBFS_UNITY_ID {

using ::testing::HasSubstr;

const std::string kCli = std::string(HUBFS_BIN_DIR) + "/h5chunk";

struct CliRun {
  int code;  // exit status; -1 when killed by a signal
  std::string out;
};

// The CLI under `timeout` (a hang is a failure here, not a stuck test).
CliRun run_cli(const std::string& args) {
  const std::string cmd = "timeout -s KILL 60 " + kCli + " " + args + " 2>&1";
  FILE* p = ::popen(cmd.c_str(), "r");
  std::string out;
  char buf[4096];
  size_t n;
  while ((n = std::fread(buf, 1, sizeof buf, p)) > 0) out.append(buf, n);
  const int status = ::pclose(p);
  return {WIFEXITED(status) ? WEXITSTATUS(status) : -1, out};
}

// The offset of the chunked Data Layout message (version 3, as the default file format writes
// it) of a dataset of `rank` dimensions: version 3, class 2 (chunked), dimensionality rank + 1.
size_t find_layout_v3(const Bytes& file, size_t rank) {
  size_t hit = 0;
  int hits = 0;
  for (size_t i = 0; i + 3 <= file.size(); ++i) {
    if (file[i] == 3 && file[i + 1] == 2 && file[i + 2] == rank + 1) hit = i, ++hits;
  }
  return hits == 1 ? hit : 0;
}

TEST(HeaderDamage, LayoutRankPatchedToZeroIsRefusedOnEveryRouteButH5Dread) {
  // A 32-d chunked dataset whose layout message has its dimensionality byte patched to 0: the
  // issue's case (H5Dread grew to 3.8 GB and hung; Python route="fast" segfaulted).
  hubfs::testing::TempDir dir;
  const std::string path = (dir / "rank0.h5").string();
  DatasetSpec spec;
  spec.shape.assign(32, 1);
  spec.shape[31] = 4;
  spec.chunk = spec.shape;
  spec.dtype = uint8_();
  write_dataset(path, spec, make_data(spec, 3));
  Bytes file = read_file_bytes(path);
  const size_t at = find_layout_v3(file, 32);
  ASSERT_GT(at, 0u) << "the layout message was not found exactly once";
  file[at + 2] = 0;
  write_file_bytes(path, file);

  auto f = File::open(path, quiet_options());
  ASSERT_TRUE(f.ok()) << f.status().message();
  auto ds = f->dataset("/data");
  if (!ds.ok()) {
    // libhdf5 1.10.8 refuses to open it ("chunk size must be > 0"): a damaged dataset, not a
    // missing one.
    EXPECT_EQ(ds.status().code(), hubfs::Code::kCorrupt) << ds.status().message();
    EXPECT_THAT(ds.status().message(), HasSubstr("is corrupt: libhdf5 cannot open it"));
  } else {
    EXPECT_FALSE(ds->info().readable);
    for (Route route : {Route::kAuto, Route::kFastPath, Route::kFastOnly}) {
      auto got = ds->read("", via(route));
      ASSERT_FALSE(got.ok());
      EXPECT_EQ(got.status().code(), hubfs::Code::kCorrupt) << got.status().message();
      EXPECT_THAT(got.status().message(), HasSubstr("layout message"));
    }
  }
  for (const char* route : {"auto", "fast"}) {
    CliRun r = run_cli("read " + path + " /data --route " + route);
    EXPECT_EQ(r.code, 1) << route << ": " << r.out;
    EXPECT_THAT(r.out, HasSubstr("corrupt")) << route;
    // The CLI skips libhdf5's exit teardown, which printed its internal state here.
    EXPECT_THAT(r.out, ::testing::Not(HasSubstr("infinite loop closing library"))) << route;
  }
}

TEST(HeaderDamage, DimensionOverItsMaximumIsRefusedBeforeH5DreadLoops) {
  // Mutation fuzz seeds 12891 and 1676: one bit of a current dimension of an unfiltered chunked
  // dataset flipped (12 -> 8388620, 10 -> 47114), its fixed maximum left as written. HDF5 never
  // writes that; libhdf5 opens it anyway and H5Dread never returned (the default route handed
  // the file to it for small reads).
  hubfs::testing::TempDir dir;
  const std::string path = (dir / "overmax.h5").string();
  DatasetSpec spec;
  spec.shape = {10, 12};
  spec.chunk = {4, 5};
  spec.dtype = int16_t_();
  write_dataset(path, spec, make_data(spec, 5));
  Bytes file = read_file_bytes(path);
  // The dataspace message: current dims, then the (equal) maximum ones.
  auto hits = find_dims(file, {10, 12, 10, 12});
  ASSERT_EQ(hits.size(), 1u);
  put_le64(&file[hits[0] + 8], 8388620);
  write_file_bytes(path, file);

  auto f = File::open(path, quiet_options());
  ASSERT_TRUE(f.ok()) << f.status().message();
  auto ds = f->dataset("/data");
  ASSERT_TRUE(ds.ok()) << ds.status().message();
  EXPECT_FALSE(ds->info().readable);
  for (Route route : {Route::kAuto, Route::kFastPath, Route::kFastOnly}) {
    for (const char* sel : {"0", "-1", "1:3"}) {
      auto got = ds->read(sel, via(route));
      ASSERT_FALSE(got.ok()) << sel;
      EXPECT_EQ(got.status().code(), hubfs::Code::kCorrupt) << got.status().message();
      EXPECT_THAT(got.status().message(), HasSubstr("axis 1 8388620 elements, over its maximum of 12"));
    }
  }
  CliRun r = run_cli("read " + path + " /data 0");
  EXPECT_EQ(r.code, 1) << r.out;
  EXPECT_THAT(r.out, HasSubstr("over its maximum of 12"));
}

}  // namespace
}  // namespace h5chunk::testing
