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
namespace {

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
  r = run("read " + path + " /data '[0,1],[0,1]'");
  EXPECT_NE(r.code, 0);
  EXPECT_THAT(r.out, ::testing::HasSubstr("Only one indexing vector"));
  r = run("read " + path + " /missing");
  EXPECT_NE(r.code, 0);
  EXPECT_THAT(r.out, ::testing::HasSubstr("no dataset '/missing'"));
  r = run("bench " + path + " /data --repeat 1");
  ASSERT_EQ(r.code, 0) << r.out;
  EXPECT_TRUE(nlohmann::json::parse(r.out).contains("speedup"));
}

}  // namespace
}  // namespace h5chunk::testing
