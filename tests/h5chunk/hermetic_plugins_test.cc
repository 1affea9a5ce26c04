// The h5chunk tests see exactly the HDF5 filter plugins they use, whatever else is installed.
//
// Why: to find a filter it lacks (zstd, bitshuffle: the tests use both), HDF5 dlopens every
// plugin in its search path. With Debian's python3-hdf5plugin installed, that includes the lzf
// and zfp plugins, which leak on load, and every test then failed LeakSanitizer with reports
// from "<unknown module>". Suppressing those leaks by name would also hide leaks of ours that
// pass through HDF5; instead, before any test runs, HDF5's search path (and HDF5_PLUGIN_PATH,
// for the h5chunk binary the CLI tests start) is pointed at a private directory holding links
// to just the plugins of the filters below, found in the search path HDF5 had.
#include <dirent.h>
#include <dlfcn.h>
#include <gtest/gtest.h>
#include <hdf5.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <map>
#include <memory>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "support/temp_dir.h"

namespace h5chunk::testing {
namespace HUBFS_UNITY_ID {

// The filters the tests write or read through HDF5 plugins: blosc, lz4 and bzip2 (the
// fallback-note test's "no decoder here" case).
const std::set<int> kNeededFilters = {32001, 32004, 307};

std::vector<std::string> search_path() {
  std::vector<std::string> dirs;
  unsigned n = 0;
  H5PLsize(&n);
  for (unsigned i = 0; i < n; ++i) {
    char buf[4096] = {0};
    if (H5PLget(i, buf, sizeof buf) > 0) dirs.emplace_back(buf);
  }
  return dirs;
}

// Filter id -> plugin file, for every plugin in `dirs`. Loading a plugin is what leaks, so it
// happens in a forked child that reports over a pipe and exits without a leak check.
std::map<int, std::string> filters_by_plugin(const std::vector<std::string>& dirs) {
  std::vector<std::string> files;
  for (const std::string& dir : dirs) {
    std::error_code ec;
    for (const auto& entry : std::filesystem::directory_iterator(dir, ec)) {
      if (entry.path().extension() == ".so") files.push_back(entry.path().string());
    }
  }
  std::sort(files.begin(), files.end());  // the first plugin of an id wins, deterministically
  int fds[2];
  if (::pipe(fds) != 0) return {};
  const pid_t pid = ::fork();
  if (pid == 0) {
    ::close(fds[0]);
    for (const std::string& file : files) {
      void* lib = ::dlopen(file.c_str(), RTLD_LAZY | RTLD_LOCAL);
      if (!lib) continue;
      using TypeFn = H5PL_type_t (*)();
      using InfoFn = const void* (*)();
      auto type = reinterpret_cast<TypeFn>(::dlsym(lib, "H5PLget_plugin_type"));
      auto info = reinterpret_cast<InfoFn>(::dlsym(lib, "H5PLget_plugin_info"));
      if (!type || !info || type() != H5PL_TYPE_FILTER || !info()) continue;
      const auto* cls = static_cast<const H5Z_class2_t*>(info());
      const std::string line = std::to_string(int(cls->id)) + " " + file + "\n";
      if (::write(fds[1], line.data(), line.size()) < 0) break;
    }
    ::_exit(0);
  }
  ::close(fds[1]);
  std::string out;
  char buf[4096];
  for (ssize_t n; (n = ::read(fds[0], buf, sizeof buf)) > 0;) out.append(buf, size_t(n));
  ::close(fds[0]);
  ::waitpid(pid, nullptr, 0);
  std::map<int, std::string> by_id;
  std::istringstream lines(out);
  int id;
  std::string file;
  while (lines >> id >> file) by_id.emplace(id, file);  // emplace: first (sorted) file wins
  return by_id;
}

class HermeticPlugins : public ::testing::Environment {
 public:
  void SetUp() override {
    dir_ = std::make_unique<hubfs::testing::TempDir>();
    for (const auto& [id, file] : filters_by_plugin(search_path())) {
      if (!kNeededFilters.count(id)) continue;
      std::filesystem::create_symlink(file, *dir_ / std::filesystem::path(file).filename());
    }
    const std::string dir = dir_->str();
    ::setenv("HDF5_PLUGIN_PATH", dir.c_str(), 1);
    // HDF5 read the old path when it started (search_path() above started it).
    H5PLreplace(dir.c_str(), 0);
    unsigned n = 0;
    while (H5PLsize(&n) >= 0 && n > 1) H5PLremove(n - 1);
  }
  void TearDown() override { dir_.reset(); }
  static std::string dir() { return instance_ && instance_->dir_ ? instance_->dir_->str() : ""; }
  static HermeticPlugins* instance_;

 private:
  std::unique_ptr<hubfs::testing::TempDir> dir_;
};

HermeticPlugins* HermeticPlugins::instance_ = [] {
  auto* env = new HermeticPlugins;
  ::testing::AddGlobalTestEnvironment(env);  // gtest owns it
  return env;
}();

TEST(HermeticPlugins, HDF5SeesOnlyThePluginsTheTestsUse) {
  const std::string dir = HermeticPlugins::dir();
  ASSERT_FALSE(dir.empty());
  EXPECT_EQ(search_path(), std::vector<std::string>{dir});
  EXPECT_STREQ(std::getenv("HDF5_PLUGIN_PATH"), dir.c_str());
  std::set<int> linked;
  for (const auto& [id, file] : filters_by_plugin({dir})) linked.insert(id);
  for (int id : linked) EXPECT_TRUE(kNeededFilters.count(id)) << "plugin for filter " << id << " is visible";
  // Installed or not, the leaking plugins' filters (lzf, zfp) are not found.
  EXPECT_LE(H5Zfilter_avail(H5Z_filter_t(32000)), 0);
  EXPECT_LE(H5Zfilter_avail(H5Z_filter_t(32013)), 0);
  // And the ones the tests use are, where this machine has them (Debian's blosc plugin is a
  // build dependency: see scripts/deps.sh).
  for (int id : linked) EXPECT_GT(H5Zfilter_avail(H5Z_filter_t(id)), 0) << id;
  EXPECT_TRUE(linked.count(32001)) << "no HDF5 blosc plugin found in HDF5's default search path";
}

}  // namespace
}  // namespace h5chunk::testing
