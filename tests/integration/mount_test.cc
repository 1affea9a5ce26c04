// End-to-end: the real hubfs binary mounts repos of the bundled local Hub server on real FUSE
// mounts, and ordinary programs (ls, sha256sum, h5dump) read them.
#include <hdf5.h>
#include <sys/stat.h>
#include <sys/xattr.h>
#include <fcntl.h>
#include <unistd.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <map>
#include <random>

#include <gtest/gtest.h>

#include "support/local_hub.h"
#include "support/mount_harness.h"
#include "support/temp_dir.h"

namespace fs = std::filesystem;
using namespace hubfs::testing;

namespace HUBFS_UNITY_ID {

// A zea-like HDF5 file: /data/raw_data float32 (frames, transmits, samples, elements, channels),
// one frame per chunk, Blosc lz4 + byte shuffle through the installed HDF5 plugin.
void write_blosc_h5(const std::string& path, hsize_t frames) {
  fs::create_directories(fs::path(path).parent_path());
  hsize_t dims[5] = {frames, 4, 512, 32, 1};
  hsize_t chunk[5] = {1, 4, 512, 32, 1};
  size_t n = 1;
  for (auto d : dims) n *= d;
  std::vector<float> data(n);
  for (size_t i = 0; i < n; ++i) data[i] = std::sin(float(i % 4096) / 37.0f) * float(1 + i % 7);
  hid_t file = H5Fcreate(path.c_str(), H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT);
  hid_t group = H5Gcreate2(file, "data", H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
  hid_t space = H5Screate_simple(5, dims, nullptr);
  hid_t dcpl = H5Pcreate(H5P_DATASET_CREATE);
  H5Pset_chunk(dcpl, 5, chunk);
  const unsigned cd[7] = {2, 2, 4, 0, 5, 1, 1};  // clevel 5, byte shuffle, lz4
  H5Pset_filter(dcpl, 32001, H5Z_FLAG_OPTIONAL, 7, cd);
  hid_t dset = H5Dcreate2(group, "raw_data", H5T_NATIVE_FLOAT, space, H5P_DEFAULT, dcpl, H5P_DEFAULT);
  H5Dwrite(dset, H5T_NATIVE_FLOAT, H5S_ALL, H5S_ALL, H5P_DEFAULT, data.data());
  H5Dclose(dset);
  H5Pclose(dcpl);
  H5Sclose(space);
  H5Gclose(group);
  H5Fclose(file);
}

// Relative path -> size (-1 for directories) of everything under root.
std::map<std::string, long long> tree_of(const fs::path& root) {
  std::map<std::string, long long> out;
  for (auto& e : fs::recursive_directory_iterator(root)) {
    auto rel = fs::relative(e.path(), root).string();
    if (rel == "hub.json" || rel.rfind("snapshots", 0) == 0) continue;
    out[rel] = e.is_directory() ? -1 : static_cast<long long>(e.file_size());
  }
  return out;
}

class MountTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    root_ = new TempDir();
    repo_ = root_->path() / "datasets" / "lab" / "scans";
    write_file((repo_ / "README.md").string(), "# scans\nA test repo.\n");
    write_file((repo_ / "config.json").string(), "{\"frames\": 12}\n");
    write_file((repo_ / "a/b/deep.txt").string(), "deep\n");
    write_file((repo_ / "weights/blob.bin").string(), random_bytes(3'500'000, 7));   // LFS, 4 blocks
    write_file((repo_ / "weights/odd.bin").string(), random_bytes(1'048'577, 8));   // block + 1 byte
    write_file((repo_ / "empty.txt").string(), "");
    for (int i = 0; i < 25; ++i) {  // more than one listing page (page size 10)
      write_file((repo_ / "many" / ("f" + std::to_string(i) + ".txt")).string(), std::to_string(i) + "\n");
    }
    write_blosc_h5((repo_ / "recordings/scan.hdf5").string(), 12);

    // A repo whose data.bin was re-uploaded: v1 -> c1 (old bytes), main -> c2 (new bytes).
    auto versioned = root_->path() / "models" / "lab" / "versioned";
    write_file((versioned / "hub.json").string(),
               R"({"refs": {"main": "c2", "v1": "c1"}, "commits": {"c1": {"date": "2024-01-01T00:00:00Z"},)"
               R"( "c2": {"date": "2024-02-01T00:00:00Z"}}})");
    write_file((versioned / "snapshots/c1/data.bin").string(), random_bytes(2'000'000, 1));
    write_file((versioned / "snapshots/c2/data.bin").string(), random_bytes(2'000'000, 2));

    // A private repo: needs the token, which must never reach the CDN.
    auto secret = root_->path() / "models" / "lab" / "secret";
    write_file((secret / "hub.json").string(),
               R"({"refs": {"main": "c1"}, "commits": {"c1": {"date": "2024-01-01T00:00:00Z"}}, "private": true})");
    write_file((secret / "snapshots/c1/model.bin").string(), random_bytes(1'500'000, 3));

    LocalHubOptions options;
    options.root = root_->str();
    options.page_size = 10;
    options.tokens = {"hf_testtoken123"};
    hub_ = LocalHub::start(options).release();
  }
  static void TearDownTestSuite() {
    delete hub_;
    delete root_;
  }
  void SetUp() override {
    hub_->clear_faults();
    cache_ = std::make_unique<TempDir>();
  }

  std::unique_ptr<HubfsMount> mount(const std::string& repo, std::vector<std::string> args = {}) {
    return HubfsMount::start(hub_->url(), repo, (cache_->path() / "cache").string(), args);
  }
  static long long data_requests(LocalHub& hub) {
    auto s = hub.stats();
    return s["resolve_requests"].get<long long>() + s["cdn_requests"].get<long long>();
  }

  static TempDir* root_;
  static fs::path repo_;
  static LocalHub* hub_;
  std::unique_ptr<TempDir> cache_;
};

TempDir* MountTest::root_ = nullptr;
fs::path MountTest::repo_;
LocalHub* MountTest::hub_ = nullptr;

TEST_F(MountTest, ListingMatchesTheRepo) {
  auto m = mount("datasets/lab/scans");
  EXPECT_EQ(tree_of(m->path()), tree_of(repo_));
  auto ls = run_command("ls -R " + shell_quote(m->path()));
  EXPECT_EQ(ls.exit_code, 0) << ls.output;
  EXPECT_NE(ls.output.find("deep.txt"), std::string::npos);
  EXPECT_NE(ls.output.find("f24.txt"), std::string::npos);  // past the first listing page
}

TEST_F(MountTest, EveryFileReadsBackByteForByte) {
  auto m = mount("datasets/lab/scans");
  int files = 0;
  for (auto& e : fs::recursive_directory_iterator(repo_)) {
    if (!e.is_regular_file()) continue;
    auto rel = fs::relative(e.path(), repo_).string();
    EXPECT_EQ(read_all(*m / rel), read_all(e.path().string())) << rel;
    ++files;
  }
  EXPECT_GT(files, 30);
  // sha256sum, as a user would run it, agrees too.
  auto through = run_command("cd " + shell_quote(m->path()) + " && sha256sum weights/blob.bin recordings/scan.hdf5");
  auto local = run_command("cd " + shell_quote(repo_.string()) + " && sha256sum weights/blob.bin recordings/scan.hdf5");
  EXPECT_EQ(through.exit_code, 0);
  EXPECT_EQ(through.output, local.output);
}

TEST_F(MountTest, ContentIdentityIsExposedAsXattr) {
  auto m = mount("datasets/lab/scans");
  char value[256] = {};
  ssize_t n = getxattr((*m / "weights/blob.bin").c_str(), "user.hubfs.sha256", value, sizeof value);
  ASSERT_GT(n, 0);
  auto sum = run_command("sha256sum " + shell_quote((repo_ / "weights/blob.bin").string()));
  EXPECT_EQ(sum.output.substr(0, 64), std::string(value, n));
  n = getxattr((*m / "README.md").c_str(), "user.hubfs.oid", value, sizeof value);
  EXPECT_EQ(n, 40);
}

TEST_F(MountTest, H5dumpThroughTheMountEqualsLocal) {
  auto m = mount("datasets/lab/scans");
  // Same file contents under two names: compare everything but h5dump's first line (the path).
  // The dumps (MBs of text) go to files that cmp compares, not into this process's strings:
  // under TSan their shadow was most of this suite's page faults (docs/benchmarks.md, "Session
  // 33: suite41").
  TempDir out;
  auto dump = [&](const std::string& file, const std::string& name) {
    const std::string to = shell_quote((out.path() / name).string());
    return run_command("(h5dump -d /data/raw_data " + shell_quote(file) + " > " + to + ".full && tail -n +2 " + to +
                       ".full > " + to + ")");
  };
  auto through = dump(*m / "recordings/scan.hdf5", "through");
  auto local = dump((repo_ / "recordings/scan.hdf5").string(), "local");
  ASSERT_EQ(local.exit_code, 0) << local.output.substr(0, 500);
  EXPECT_EQ(through.exit_code, 0) << through.output.substr(0, 500);
  EXPECT_GT(std::filesystem::file_size(out.path() / "local"), 1000000u);
  auto same = run_command("cmp " + shell_quote((out.path() / "through").string()) + " " +
                          shell_quote((out.path() / "local").string()));
  EXPECT_EQ(same.exit_code, 0) << same.output;
}

TEST_F(MountTest, SecondReadsMakeNoUpstreamRequests) {
  const std::vector<std::string> files = {"weights/blob.bin", "weights/odd.bin", "recordings/scan.hdf5", "README.md"};
  {
    auto m = mount("datasets/lab/scans");
    for (auto& f : files) ASSERT_EQ(read_all(*m / f), read_all((repo_ / f).string())) << f;
    hub_->reset_stats();
    for (auto& f : files) ASSERT_EQ(read_all(*m / f), read_all((repo_ / f).string())) << f;
    EXPECT_EQ(hub_->stats()["requests"].get<long long>(), 0) << hub_->stats().dump();
    // Even with the kernel's page cache gone, the bytes come from hubfs's own caches.
    ASSERT_TRUE(drop_page_cache());
    for (auto& f : files) ASSERT_EQ(read_all(*m / f), read_all((repo_ / f).string())) << f;
    EXPECT_EQ(hub_->stats()["requests"].get<long long>(), 0) << hub_->stats().dump();
  }
  // A new mount of the same repo with the same cache dir: listing again, but no data request.
  auto again = mount("datasets/lab/scans");
  hub_->reset_stats();
  ASSERT_TRUE(drop_page_cache());
  for (auto& f : files) ASSERT_EQ(read_all(*again / f), read_all((repo_ / f).string())) << f;
  EXPECT_EQ(data_requests(*hub_), 0) << hub_->stats().dump();
}

TEST_F(MountTest, ReuploadedFileReadsTheBytesOfEachRevision) {
  auto root = root_->path() / "models/lab/versioned/snapshots";
  auto old_rev = mount("lab/versioned@v1");
  auto new_rev = mount("lab/versioned");  // main
  EXPECT_EQ(read_all(*new_rev / "data.bin"), read_all((root / "c2/data.bin").string()));
  EXPECT_EQ(read_all(*old_rev / "data.bin"), read_all((root / "c1/data.bin").string()));
  EXPECT_NE(read_all(*old_rev / "data.bin"), read_all(*new_rev / "data.bin"));
}

TEST_F(MountTest, IsReadOnly) {
  auto m = mount("datasets/lab/scans");
  int fd = ::open((*m / "README.md").c_str(), O_WRONLY);
  EXPECT_EQ(fd, -1);
  EXPECT_EQ(errno, EROFS);
  EXPECT_EQ(::mkdir((*m / "newdir").c_str(), 0755), -1);
  EXPECT_EQ(errno, EROFS);
  EXPECT_EQ(::open((*m / "new.txt").c_str(), O_CREAT | O_WRONLY, 0644), -1);
  EXPECT_EQ(errno, EROFS);
  EXPECT_EQ(::rename((*m / "README.md").c_str(), (*m / "x.md").c_str()), -1);
  EXPECT_EQ(::unlink((*m / "README.md").c_str()), -1);
}

TEST_F(MountTest, PrivateRepoTokenNeverReachesTheCdn) {
  auto blocked = run_command(shell_quote(bin_path("hubfs")) + " mount --endpoint " + hub_->url() +
                             " --cache-dir " + shell_quote(cache_->str()) + " lab/secret " + shell_quote(cache_->str()));
  EXPECT_NE(blocked.exit_code, 0);
  EXPECT_NE(blocked.output.find("HF_TOKEN"), std::string::npos) << blocked.output;

  setenv("HF_TOKEN", "hf_testtoken123", 1);
  auto m = mount("lab/secret");
  unsetenv("HF_TOKEN");
  hub_->reset_stats();
  EXPECT_EQ(read_all(*m / "model.bin"), read_all((root_->path() / "models/lab/secret/snapshots/c1/model.bin").string()));
  auto stats = hub_->stats();
  EXPECT_GT(stats["cdn_requests"].get<long long>(), 0);
  EXPECT_EQ(stats["cdn_authorization_headers"].get<long long>(), 0);
}

TEST_F(MountTest, ExpiredSignedUrlsAreResolvedAgain) {
  auto m = mount("datasets/lab/scans");
  std::string expected = read_all((repo_ / "weights/blob.bin").string());
  int fd = ::open((*m / "weights/blob.bin").c_str(), O_RDONLY);
  ASSERT_GE(fd, 0);
  std::string head(4096, '\0');
  ASSERT_EQ(pread(fd, head.data(), head.size(), 0), 4096);
  hub_->expire_urls();
  std::string tail(4096, '\0');
  ASSERT_EQ(pread(fd, tail.data(), tail.size(), 3'000'000), 4096);
  ::close(fd);
  EXPECT_EQ(head, expected.substr(0, 4096));
  EXPECT_EQ(tail, expected.substr(3'000'000, 4096));
}

TEST_F(MountTest, TransientServerErrorsAreRetried) {
  auto m = mount("datasets/lab/scans");
  hub_->add_fault({{"status", 503}, {"count", 2}, {"path_contains", "/blobs/"}, {"retry_after", 0}});
  EXPECT_EQ(read_all(*m / "weights/odd.bin"), read_all((repo_ / "weights/odd.bin").string()));
}

TEST_F(MountTest, AReadThatCannotBeServedFailsWithEioInBoundedTime) {
  auto m = mount("datasets/lab/scans", {"--read-timeout", "3"});
  hub_->add_fault({{"status", 500}, {"count", 1000}, {"path_contains", "/blobs/"}});
  int fd = ::open((*m / "weights/blob.bin").c_str(), O_RDONLY);
  ASSERT_GE(fd, 0);
  char buf[4096];
  EXPECT_EQ(::read(fd, buf, sizeof buf), -1);
  EXPECT_EQ(errno, EIO);
  ::close(fd);
  hub_->clear_faults();
}

bool is_mounted(const std::string& path) {
  std::ifstream in("/proc/self/mountinfo");
  std::string line;
  while (std::getline(in, line)) {
    if (line.find(" " + path + " ") != std::string::npos) return true;
  }
  return false;
}

TEST_F(MountTest, SigtermUnmountsCleanly) {
  for (const char* signal : {"TERM", "INT"}) {
    auto m = mount("datasets/lab/scans");
    ASSERT_TRUE(is_mounted(m->path()));
    // The daemon is the process whose command line names this mountpoint.
    auto pid = run_command("pgrep -f -- " + shell_quote("hubfs mount .*" + m->path() + "$"));
    ASSERT_EQ(pid.exit_code, 0) << pid.output;
    ASSERT_EQ(run_command(std::string("kill -") + signal + " " + pid.output).exit_code, 0);
    for (int i = 0; i < 100 && is_mounted(m->path()); ++i) usleep(100 * 1000);
    EXPECT_FALSE(is_mounted(m->path())) << "SIG" << signal << " left the mount in place";
  }
}

TEST_F(MountTest, MountErrorsNameTheCauseAndTheFix) {
  auto hubfs = shell_quote(bin_path("hubfs"));
  auto missing_repo = run_command(hubfs + " mount --endpoint " + hub_->url() + " --cache-dir " +
                                  shell_quote(cache_->str()) + " datasets/lab/nope " + shell_quote(cache_->str()));
  EXPECT_EQ(missing_repo.exit_code, 1);
  EXPECT_NE(missing_repo.output.find("not found"), std::string::npos) << missing_repo.output;

  auto missing_rev = run_command(hubfs + " mount --endpoint " + hub_->url() + " --cache-dir " +
                                 shell_quote(cache_->str()) + " datasets/lab/scans@nobranch " + shell_quote(cache_->str()));
  EXPECT_EQ(missing_rev.exit_code, 1);
  EXPECT_NE(missing_rev.output.find("nobranch"), std::string::npos) << missing_rev.output;

  auto no_dir = run_command(hubfs + " mount --endpoint " + hub_->url() + " datasets/lab/scans /nonexistent/dir");
  EXPECT_EQ(no_dir.exit_code, 1);
  EXPECT_NE(no_dir.output.find("mkdir -p"), std::string::npos) << no_dir.output;

  auto m = mount("datasets/lab/scans");
  auto busy = run_command(hubfs + " mount --endpoint " + hub_->url() + " datasets/lab/scans " + shell_quote(m->path()));
  EXPECT_EQ(busy.exit_code, 1);
  EXPECT_NE(busy.output.find("busy"), std::string::npos) << busy.output;

  // An empty mountpoint: the cache directory has blocks in it by now (non-empty is refused).
  TempDir empty;
  auto unreachable = run_command(hubfs + " mount --endpoint http://127.0.0.1:9 datasets/lab/scans " +
                                 shell_quote(empty.str()));
  EXPECT_EQ(unreachable.exit_code, 1);
  EXPECT_NE(unreachable.output.find("cannot reach"), std::string::npos) << unreachable.output;
}

}  // namespace
