// The h5chunk command: read prints one JSON line and writes raw C-order bytes; info explains
// the fast path; errors go to stderr with a non-zero exit. Skipped when the binary is not built.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <nlohmann/json.hpp>

#include "h5_fixture.h"
#include "support/temp_dir.h"

namespace h5chunk::testing {
namespace HUBFS_UNITY_ID {

const std::string kBinary = std::string(HUBFS_BIN_DIR) + "/h5chunk";

struct CliRun {
  int code;
  std::string out;
};

CliRun run(const std::string& args) {
  std::string cmd = kBinary + " " + args + " 2>&1";
  FILE* p = ::popen(cmd.c_str(), "r");
  std::string out;
  char buf[4096];
  size_t n;
  while ((n = std::fread(buf, 1, sizeof buf, p)) > 0) out.append(buf, n);
  int status = ::pclose(p);
  return {WIFEXITED(status) ? WEXITSTATUS(status) : -1, out};
}

class Cli : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(std::filesystem::exists(kBinary)) << kBinary << " not built (test_h5chunk depends on it)";
    spec.shape = {6, 4, 50};
    spec.chunk = {1, 4, 50};
    spec.codec = Codec::kBloscLz4;
    data = make_data(spec);
    write_dataset(path, spec, data);
  }
  hubfs::testing::TempDir dir;
  std::string path = (dir / "cli.h5").string();
  DatasetSpec spec;
  Bytes data;
};

TEST_F(Cli, ReadPrintsJsonAndWritesRawBytes) {
  const std::string out = (dir / "out.bin").string();
  CliRun r = run("read " + path + " /data -1 -o " + out + " --threads 2");
  ASSERT_EQ(r.code, 0) << r.out;
  auto j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j["shape"], nlohmann::json::array({4, 50}));
  EXPECT_EQ(j["dtype"], "float32");
  EXPECT_EQ(j["bytes"], 4 * 50 * 4);
  EXPECT_TRUE(j.contains("fast_path"));
  EXPECT_TRUE(j.contains("ms"));
  EXPECT_EQ(j["numpy"], "'<f4'");
  std::ifstream f(out, std::ios::binary);
  Bytes got((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
  EXPECT_EQ(got, Bytes(data.end() - 4 * 50 * 4, data.end()));
}

TEST_F(Cli, InfoAndErrors) {
  CliRun r = run("info " + path);
  ASSERT_EQ(r.code, 0) << r.out;
  EXPECT_THAT(r.out, ::testing::HasSubstr("/data"));
  EXPECT_THAT(r.out, ::testing::HasSubstr("blosc (32001)"));
  EXPECT_THAT(r.out, ::testing::HasSubstr("fast path: yes"));
  EXPECT_THAT(r.out, ::testing::HasSubstr("numpy dtype: '<f4'"));  // np.dtype(ast.literal_eval(...))
  r = run("read " + path + " /data '[0,9],[0,1]'");
  EXPECT_NE(r.code, 0);
  EXPECT_THAT(r.out, ::testing::HasSubstr("Index (9) out of range for (0-5) on axis 0"));
  r = run("read " + path + " /missing");
  EXPECT_NE(r.code, 0);
  EXPECT_THAT(r.out, ::testing::HasSubstr("no dataset '/missing'"));
  r = run("bench " + path + " /data --repeat 1");
  ASSERT_EQ(r.code, 0) << r.out;
  EXPECT_TRUE(nlohmann::json::parse(r.out).contains("speedup"));
}

// --route fast: the fast path whatever the size (this read is 1.6 KB, far below auto's 1 MiB),
// orthogonal multi-list selections included; --route auto sends the same small read to
// H5Dread; a dataset the fast path cannot read fails with why and the fix.
TEST_F(Cli, RouteChoosesTheReader) {
  const std::string out = (dir / "out.bin").string();
  const std::string sel = "'[5,1,1],...,::-7'";  // orthogonal: frames 5,1,1; samples 49,42,...,0
  CliRun r = run("read " + path + " /data " + sel + " --route fast -o " + out);
  ASSERT_EQ(r.code, 0) << r.out;
  auto j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j["shape"], nlohmann::json::array({3, 4, 8}));
  EXPECT_EQ(j["fast_path"], true);
  std::ifstream f(out, std::ios::binary);
  Bytes got((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
  Bytes want;
  for (int frame : {5, 1, 1}) {
    for (int t = 0; t < 4; ++t) {
      for (int s = 49; s >= 0; s -= 7) {
        const uint8_t* p = &data[((size_t(frame) * 4 + t) * 50 + s) * 4];
        want.insert(want.end(), p, p + 4);
      }
    }
  }
  EXPECT_EQ(got, want);

  r = run("read " + path + " /data " + sel + " --route auto");
  ASSERT_EQ(r.code, 0) << r.out;
  j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j["fast_path"], false);
  EXPECT_THAT(j["fallback"].get<std::string>(), ::testing::HasSubstr("small read"));
  r = run("read " + path + " /data 0 --route h5dread");
  ASSERT_EQ(r.code, 0) << r.out;
  EXPECT_EQ(nlohmann::json::parse(r.out)["fast_path"], false);
  r = run("read " + path + " /data 0 --route sideways");
  EXPECT_NE(r.code, 0);

  // A contiguous dataset: --route fast names the reason and the fix instead of falling back.
  const std::string flat = (dir / "flat.h5").string();
  DatasetSpec contiguous;
  contiguous.shape = {6, 50};
  write_dataset(flat, contiguous, make_data(contiguous));
  r = run("read " + flat + " /data --route fast");
  if (r.code == 0) {
    EXPECT_EQ(nlohmann::json::parse(r.out)["fast_path"], true);  // contiguous reads went fast
  } else {
    EXPECT_THAT(r.out, ::testing::HasSubstr("the fast path cannot read it: the dataset is stored contiguous"));
    EXPECT_THAT(r.out, ::testing::HasSubstr("Fix: "));
  }
  r = run("read " + flat + " /data --route auto");
  EXPECT_EQ(r.code, 0) << r.out;
}

}  // namespace
}  // namespace h5chunk::testing
