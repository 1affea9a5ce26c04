// Files that name other files (external_files.h, source_driver.h): a virtual dataset's sources,
// external links and external raw storage, read through a source whose tree is a local folder
// (as an hf:// file's is its repo). Names resolve in the tree, against the naming file's folder;
// a parent holding an object at the named path never stands in for the named file; a local
// decoy file in the current directory is never read; what the tree lacks, or what lies outside
// it, is a named error. A source without a tree refuses all three.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <numeric>

#include "h5_fixture.h"
#include "h5chunk/external_files.h"
#include "h5chunk/source_driver.h"
#include "support/temp_dir.h"

namespace h5chunk::testing {
namespace HUBFS_UNITY_ID {

namespace fs = std::filesystem;

// A local file as a ByteSource, in `tree` (or none) at `path`.
class FileSource : public ByteSource {
 public:
  FileSource(const std::string& local, std::shared_ptr<FileTree> tree, std::string path)
      : name_("test://" + path), tree_(std::move(tree)), path_(std::move(path)) {
    fd_ = ::open(local.c_str(), O_RDONLY | O_CLOEXEC);
    size_ = fd_ < 0 ? 0 : static_cast<uint64_t>(::lseek(fd_, 0, SEEK_END));
  }
  ~FileSource() override {
    if (fd_ >= 0) ::close(fd_);
  }
  const std::string& name() const override { return name_; }
  uint64_t size() const override { return size_; }
  hubfs::Result<size_t> pread(void* dst, uint64_t offset, size_t len, const std::atomic<bool>*) override {
    ssize_t n = ::pread(fd_, dst, len, static_cast<off_t>(offset));
    if (n < 0) return hubfs::IoError("pread failed");
    return static_cast<size_t>(n);
  }
  void hint(const std::vector<std::pair<uint64_t, uint64_t>>&) override {}
  std::shared_ptr<FileTree> tree() const override { return tree_; }
  std::string tree_path() const override { return tree_ ? path_ : std::string(); }

 private:
  std::string name_;
  std::shared_ptr<FileTree> tree_;
  std::string path_;
  int fd_ = -1;
  uint64_t size_ = 0;
};

// A local folder as a FileTree; counts the files it opened.
class DirTree : public FileTree, public std::enable_shared_from_this<DirTree> {
 public:
  explicit DirTree(fs::path root) : root_(std::move(root)), name_("test://repo") {}
  const std::string& name() const override { return name_; }
  hubfs::Result<std::shared_ptr<ByteSource>> open(const std::string& path) override {
    opened_.push_back(path);
    if (!fs::is_regular_file(root_ / path)) return hubfs::NotFound("no file '" + path + "' in the repo");
    return std::shared_ptr<ByteSource>(std::make_shared<FileSource>((root_ / path).string(), shared_from_this(), path));
  }
  std::vector<std::string> opened_;

 private:
  fs::path root_;
  std::string name_;
};

void check_h5(herr_t r, const char* what) {
  if (r < 0) throw std::runtime_error(what);
}

// A 1-D int32 dataset `name` of `values` in the open file `f` (contiguous).
void put_ints(hid_t f, const std::string& name, const std::vector<int32_t>& values) {
  hsize_t n = values.size();
  hid_t space = H5Screate_simple(1, &n, nullptr);
  hid_t lcpl = H5Pcreate(H5P_LINK_CREATE);
  H5Pset_create_intermediate_group(lcpl, 1);
  hid_t d = H5Dcreate2(f, name.c_str(), H5T_STD_I32LE, space, lcpl, H5P_DEFAULT, H5P_DEFAULT);
  check_h5(H5Dwrite(d, H5T_NATIVE_INT32, H5S_ALL, H5S_ALL, H5P_DEFAULT, values.data()), "H5Dwrite");
  H5Dclose(d);
  H5Pclose(lcpl);
  H5Sclose(space);
}

std::vector<int32_t> iota(size_t n, int32_t first) {
  std::vector<int32_t> v(n);
  std::iota(v.begin(), v.end(), first);
  return v;
}

std::vector<int32_t> ints_of(const Array& a) {
  return std::vector<int32_t>(a.as<int32_t>(), a.as<int32_t>() + a.num_elements());
}

hid_t create(const fs::path& p) {
  fs::create_directories(p.parent_path());
  hid_t f = H5Fcreate(p.c_str(), H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT);
  if (f < 0) throw std::runtime_error("cannot create " + p.string());
  return f;
}

// `vds` in `file`: 200 int32 read from `src_file`:`src_dset` (fill -1).
void put_vds(hid_t f, const std::string& vds, const std::string& src_file, const std::string& src_dset) {
  hsize_t n = 200;
  hid_t space = H5Screate_simple(1, &n, nullptr);
  hid_t src_space = H5Screate_simple(1, &n, nullptr);
  hid_t dcpl = H5Pcreate(H5P_DATASET_CREATE);
  int32_t fill = -1;
  H5Pset_fill_value(dcpl, H5T_NATIVE_INT32, &fill);
  check_h5(H5Pset_virtual(dcpl, space, src_file.c_str(), src_dset.c_str(), src_space), "H5Pset_virtual");
  hid_t d = H5Dcreate2(f, vds.c_str(), H5T_STD_I32LE, space, H5P_DEFAULT, dcpl, H5P_DEFAULT);
  check_h5(d, "H5Dcreate2 (virtual)");
  H5Dclose(d);
  H5Pclose(dcpl);
  H5Sclose(src_space);
  H5Sclose(space);
}

// `name` in `file`: 200 int32 stored in external segments (name, offset, size).
void put_external(hid_t f, const std::string& name, const std::vector<std::tuple<std::string, off_t, hsize_t>>& segs) {
  hsize_t n = 200;
  hid_t space = H5Screate_simple(1, &n, nullptr);
  hid_t dcpl = H5Pcreate(H5P_DATASET_CREATE);
  for (const auto& [file, offset, size] : segs) {
    check_h5(H5Pset_external(dcpl, file.c_str(), offset, size), "H5Pset_external");
  }
  hid_t d = H5Dcreate2(f, name.c_str(), H5T_STD_I32LE, space, H5P_DEFAULT, dcpl, H5P_DEFAULT);
  check_h5(d, "H5Dcreate2 (external)");
  H5Dclose(d);
  H5Pclose(dcpl);
  H5Sclose(space);
}

// Restores the current directory, whatever the test did.
struct CwdGuard {
  fs::path saved = fs::current_path();
  ~CwdGuard() { fs::current_path(saved); }
};

void write_ints(const fs::path& p, const std::vector<int32_t>& v) {
  fs::create_directories(p.parent_path());
  std::ofstream(p, std::ios::binary).write(reinterpret_cast<const char*>(v.data()), std::streamsize(v.size() * 4));
}

class ExternalFilesTest : public ::testing::Test {
 protected:
  hubfs::testing::TempDir dir;
  fs::path repo = dir / "repo";
  std::shared_ptr<DirTree> tree = std::make_shared<DirTree>(repo);

  Result<File> open_in_tree(const std::string& path) {
    return File::open(std::make_shared<FileSource>((repo / path).string(), tree, path), quiet_options());
  }
  Result<File> open_without_tree(const std::string& path) {
    return File::open(std::make_shared<FileSource>((repo / path).string(), nullptr, path), quiet_options());
  }
  Result<Array> read_all(const Result<File>& f, const std::string& dset, Route route = Route::kAuto) {
    if (!f.ok()) return f.status();
    auto d = f->dataset(dset);
    if (!d.ok()) return d.status();
    return d->read("", via(route));
  }
};

TEST(ResolveInTreeTest, RelativeToTheNamingFilesFolderAndNeverOutsideTheTree) {
  EXPECT_EQ(*resolve_in_tree("sub/vds.h5", "src.h5"), "sub/src.h5");
  EXPECT_EQ(*resolve_in_tree("sub/vds.h5", "./a//b.h5"), "sub/a/b.h5");
  EXPECT_EQ(*resolve_in_tree("sub/vds.h5", "../top.h5"), "top.h5");
  EXPECT_EQ(*resolve_in_tree("vds.h5", "."), "vds.h5");
  EXPECT_EQ(*resolve_in_tree("vds.h5", "src.h5"), "src.h5");
  EXPECT_FALSE(resolve_in_tree("sub/vds.h5", "../../x.h5").ok());
  EXPECT_FALSE(resolve_in_tree("vds.h5", "/etc/passwd").ok());
  EXPECT_FALSE(resolve_in_tree("vds.h5", "http://example.com/x.h5").ok());
  EXPECT_FALSE(resolve_in_tree("vds.h5", "sub/..").ok());
  EXPECT_FALSE(resolve_in_tree("vds.h5", "").ok());
}

TEST_F(ExternalFilesTest, AVirtualDatasetReadsItsSourceFromTheTreeNotTheParentsObjectOfThatName) {
  hid_t f = create(repo / "sub/vds.h5");
  put_vds(f, "/vds", "vds_src.h5", "/src");
  put_ints(f, "/src", iota(200, 5000));  // the decoy: the same path in the parent
  H5Fclose(f);
  f = create(repo / "sub/vds_src.h5");
  put_ints(f, "/src", iota(200, 0));
  H5Fclose(f);
  for (Route route : {Route::kAuto, Route::kH5Dread}) {
    auto a = read_all(open_in_tree("sub/vds.h5"), "/vds", route);
    ASSERT_TRUE(a.ok()) << a.status().message();
    EXPECT_EQ(ints_of(*a), iota(200, 0));
  }
  EXPECT_NE(std::find(tree->opened_.begin(), tree->opened_.end(), "sub/vds_src.h5"), tree->opened_.end());
  // The local file, read by libhdf5 from the file's folder, agrees.
  auto local = File::open((repo / "sub/vds.h5").string(), quiet_options());
  ASSERT_TRUE(local.ok());
  auto a = read_all(local, "/vds");
  ASSERT_TRUE(a.ok()) << a.status().message();
  EXPECT_EQ(ints_of(*a), iota(200, 0));
  EXPECT_TRUE(local->dataset("/vds")->info().missing_sources.empty());
}

TEST_F(ExternalFilesTest, AVirtualDatasetNamingItsOwnFileReadsItself) {
  hid_t f = create(repo / "self.h5");
  put_vds(f, "/by_dot", ".", "/src");
  put_vds(f, "/by_name", "self.h5", "/src");
  put_ints(f, "/src", iota(200, 7));
  H5Fclose(f);
  auto file = open_in_tree("self.h5");
  for (const char* name : {"/by_dot", "/by_name"}) {
    auto a = read_all(file, name);
    ASSERT_TRUE(a.ok()) << name << ": " << a.status().message();
    EXPECT_EQ(ints_of(*a), iota(200, 7)) << name;
  }
}

TEST_F(ExternalFilesTest, AVirtualSourceTheTreeLacksOrOutsideItIsANamedErrorNeverFillOrTheParentsObject) {
  hid_t f = create(repo / "vds.h5");
  put_vds(f, "/no_file", "missing.h5", "/src");
  put_vds(f, "/no_dataset", "src.h5", "/nope");
  put_vds(f, "/absolute", (repo / "src.h5").string(), "/src");
  put_vds(f, "/escapes", "../repo/src.h5", "/src");
  put_ints(f, "/src", iota(200, 5000));
  put_ints(f, "/nope", iota(200, 5000));
  H5Fclose(f);
  f = create(repo / "src.h5");
  put_ints(f, "/src", iota(200, 0));
  H5Fclose(f);
  auto file = open_in_tree("vds.h5");
  ASSERT_TRUE(file.ok());
  const std::vector<std::pair<const char*, const char*>> cases = {
      {"/no_file", "missing.h5"}, {"/no_dataset", "has no dataset '/nope'"},
      {"/absolute", "absolute path, outside the repo"}, {"/escapes", "leaves the repo's root folder"}};
  for (const auto& [name, says] : cases) {
    auto a = read_all(file, name);
    ASSERT_FALSE(a.ok()) << name << " read values";
    EXPECT_NE(a.status().message().find(says), std::string::npos) << a.status().message();
    EXPECT_NE(a.status().message().find(name), std::string::npos) << a.status().message();
  }
  // Locally libhdf5 reads the missing ones as fill values; h5chunk says which they were.
  auto local = File::open((repo / "vds.h5").string(), quiet_options());
  ASSERT_TRUE(local.ok());
  auto d = local->dataset("/no_file");
  ASSERT_TRUE(d.ok());
  ASSERT_EQ(d->info().missing_sources.size(), 1u);
  EXPECT_EQ(d->info().missing_sources[0], "missing.h5:/src (no such file)");
  EXPECT_EQ(ints_of(*d->read("")), std::vector<int32_t>(200, -1));
  EXPECT_EQ(local->dataset("/no_dataset")->info().missing_sources,
            std::vector<std::string>{"src.h5:/nope (no such dataset)"});
}

TEST_F(ExternalFilesTest, AnExternalLinkOpensItsTargetInTheTree) {
  hid_t f = create(repo / "a/parent.h5");
  check_h5(H5Lcreate_external("../b/target.h5", "/data", f, "/link", H5P_DEFAULT, H5P_DEFAULT), "elink");
  check_h5(H5Lcreate_external("gone.h5", "/data", f, "/dangling", H5P_DEFAULT, H5P_DEFAULT), "elink");
  check_h5(H5Lcreate_external("/etc/passwd", "/data", f, "/outside", H5P_DEFAULT, H5P_DEFAULT), "elink");
  put_ints(f, "/data", iota(200, 5000));  // the decoy
  H5Fclose(f);
  f = create(repo / "b/target.h5");
  put_ints(f, "/data", iota(200, 0));
  H5Fclose(f);
  auto file = open_in_tree("a/parent.h5");
  auto a = read_all(file, "/link");
  ASSERT_TRUE(a.ok()) << a.status().message();
  EXPECT_EQ(ints_of(*a), iota(200, 0));
  auto dangling = read_all(file, "/dangling");
  ASSERT_FALSE(dangling.ok());
  EXPECT_EQ(dangling.status().code(), hubfs::Code::kNotFound);
  EXPECT_NE(dangling.status().message().find("gone.h5"), std::string::npos) << dangling.status().message();
  auto outside = read_all(file, "/outside");
  ASSERT_FALSE(outside.ok());
  EXPECT_NE(outside.status().message().find("outside test://repo"), std::string::npos) << outside.status().message();
  // Locally (from the file's folder, as libhdf5 resolves it), the same values.
  auto local = read_all(File::open((repo / "a/parent.h5").string(), quiet_options()), "/link");
  ASSERT_TRUE(local.ok()) << local.status().message();
  EXPECT_EQ(ints_of(*local), iota(200, 0));
}

// h5chunk's own readers read the file it opened: a dataset an external link leads to lives in
// another file, at offsets of that file, and is read by H5Dread, whatever the route.
TEST_F(ExternalFilesTest, ADatasetBehindAnExternalLinkIsReadFromItsOwnFileOnEveryRoute) {
  fs::create_directories(repo);
  for (bool chunked : {false, true}) {
    SCOPED_TRACE(chunked ? "chunked" : "contiguous");
    DatasetSpec spec;
    spec.shape = {64, 1024};
    if (chunked) spec.chunk = {8, 1024};
    spec.codec = chunked ? Codec::kDeflateShuffle : Codec::kNone;
    const Bytes data = make_data(spec);
    const std::string big = chunked ? "big_chunked.h5" : "big_contiguous.h5";
    const std::string front = chunked ? "front_chunked.h5" : "front_contiguous.h5";
    write_dataset((repo / big).string(), spec, data);
    hid_t f = create(repo / front);
    put_ints(f, "/pad", iota(100000, 9));  // the parent's bytes differ at every offset
    check_h5(H5Lcreate_external(big.c_str(), spec.name.c_str(), f, "/link", H5P_DEFAULT, H5P_DEFAULT), "elink");
    H5Fclose(f);
    for (bool in_tree : {true, false}) {
      auto file = in_tree ? open_in_tree(front) : File::open((repo / front).string(), quiet_options());
      ASSERT_TRUE(file.ok());
      for (Route route : {Route::kAuto, Route::kFastPath, Route::kH5Dread}) {
        auto a = read_all(file, "/link", route);
        ASSERT_TRUE(a.ok()) << a.status().message();
        EXPECT_TRUE(bytes_of(*a) == data) << (in_tree ? "tree" : "local") << " route " << int(route);
      }
      EXPECT_FALSE(file->dataset("/link")->info().fast_path_blocker.empty());
    }
  }
}

TEST_F(ExternalFilesTest, ExternalStorageIsReadThroughTheTreeNeverFromALocalDecoy) {
  // Two segments: 100 ints of a.bin from byte 8, then b.bin cut short after 40 ints (the rest
  // reads as zeros, as libhdf5 reads a short external file).
  write_ints(repo / "d/a.bin", iota(102, -2));
  write_ints(repo / "d/b.bin", iota(40, 100));
  hid_t f = create(repo / "d/ext.h5");
  put_external(f, "/ext", {{"a.bin", 8, 400}, {"b.bin", 0, 400}});
  put_external(f, "/outside", {{"/etc/hostname", 0, 800}});
  put_external(f, "/gone", {{"gone.bin", 0, 800}});
  H5Fclose(f);
  std::vector<int32_t> want = iota(140, 0);
  want.resize(200, 0);
  // Decoys of the same names in the current directory.
  CwdGuard cwd;
  fs::create_directories(dir / "cwd");
  write_ints(dir / "cwd/a.bin", std::vector<int32_t>(102, 666));
  write_ints(dir / "cwd/b.bin", std::vector<int32_t>(100, 666));
  fs::current_path(dir / "cwd");
  auto file = open_in_tree("d/ext.h5");
  for (Route route : {Route::kAuto, Route::kH5Dread, Route::kFastOnly}) {
    auto a = read_all(file, "/ext", route);
    ASSERT_TRUE(a.ok()) << a.status().message();
    EXPECT_EQ(ints_of(*a), want);
  }
  auto d = file->dataset("/ext");
  auto part = d->read("95:105");  // across the segments' seam: a small read, never H5Dread
  ASSERT_TRUE(part.ok());
  EXPECT_EQ(ints_of(*part), iota(10, 95));
  auto outside = read_all(file, "/outside");
  ASSERT_FALSE(outside.ok());
  EXPECT_NE(outside.status().message().find("outside test://repo"), std::string::npos) << outside.status().message();
  auto gone = read_all(file, "/gone");
  ASSERT_FALSE(gone.ok());
  EXPECT_NE(gone.status().message().find("gone.bin"), std::string::npos) << gone.status().message();
  // Locally, libhdf5 reads the names from the current directory: the decoys here...
  auto local_here = read_all(File::open((repo / "d/ext.h5").string(), quiet_options()), "/ext");
  ASSERT_TRUE(local_here.ok());
  EXPECT_EQ(ints_of(*local_here)[0], 666);
  // ...and from the file's folder, what the tree gave.
  fs::current_path(repo / "d");
  auto local = read_all(File::open((repo / "d/ext.h5").string(), quiet_options()), "/ext");
  ASSERT_TRUE(local.ok()) << local.status().message();
  EXPECT_EQ(ints_of(*local), want);
}

TEST_F(ExternalFilesTest, ASourceWithoutATreeRefusesEveryDatasetStoredElsewhere) {
  write_ints(repo / "ext.bin", iota(200, 0));
  hid_t f = create(repo / "all.h5");
  put_vds(f, "/vds", "src.h5", "/src");
  put_external(f, "/ext", {{"ext.bin", 0, 800}});
  check_h5(H5Lcreate_external("src.h5", "/src", f, "/link", H5P_DEFAULT, H5P_DEFAULT), "elink");
  put_ints(f, "/src", iota(200, 5000));  // the decoy
  H5Fclose(f);
  f = create(repo / "src.h5");
  put_ints(f, "/src", iota(200, 0));
  H5Fclose(f);
  auto file = open_without_tree("all.h5");
  ASSERT_TRUE(file.ok());
  for (const char* name : {"/vds", "/ext", "/link"}) {
    auto a = read_all(file, name);
    ASSERT_FALSE(a.ok()) << name << " read values";
    EXPECT_NE(a.status().message().find("file object"), std::string::npos) << a.status().message();
  }
  auto own = read_all(file, "/src");
  ASSERT_TRUE(own.ok());
  EXPECT_EQ(ints_of(*own), iota(200, 5000));
}

}  // namespace HUBFS_UNITY_ID
}  // namespace h5chunk::testing
