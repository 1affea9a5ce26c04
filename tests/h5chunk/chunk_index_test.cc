// The chunk index read from the file (chunk_index.h) against libhdf5's own answers: for every
// index type, filtered and not, 1-D to 4-D, with user blocks, edge chunks, unwritten chunks and
// chunks written with filters skipped, the parsed location of every chunk equals what
// H5Dget_chunk_info_by_coord reports; and damaged index structures give an error or libhdf5's
// bytes, never others.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <hdf5.h>
#include <fcntl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <random>
#include <set>

#include "h5_fixture.h"
#include "h5chunk/chunk_index.h"
#include "h5chunk/h5chunk.h"
#include "h5chunk/hdf5_handle.h"
#include "h5chunk/manifest.h"
#include "hostile_util.h"
#include "support/temp_dir.h"

namespace h5chunk::testing {
namespace HUBFS_UNITY_ID {

// How one test dataset is made.
struct IndexCase {
  std::string name{};
  std::vector<hsize_t> shape{}, chunk{};
  std::vector<hsize_t> maxdims{};  // empty: fixed at shape
  bool deflate = false;
  bool early_alloc = false;        // H5D_ALLOC_TIME_EARLY: implicit index when unfiltered (latest)
  double written = 1.0;            // leading fraction of axis 0 written; the rest stays unallocated
  bool write_last = true;          // also write the last element (a lone chunk at the far end)
  bool masked_chunk = false;       // overwrite chunk 0 raw with its only filter marked skipped
  std::string expect_index{};      // the index type the parse must report
  // libhdf5 1.10.8's chunk walk (H5Dget_chunk_info*) mislabels the chunks of an extensible array
  // whose unlimited axis is not the first (it reports chunk (0, 5) of a (4, 2)-chunked dataset
  // at offset (0, 10) and (0, 1) as missing), while its lookup, which H5Dread uses, finds them.
  // Such cases are compared with the lookup only.
  bool walk_reliable = true;
};

hid_t create_file(const std::string& path, bool latest, hsize_t userblock) {
  hid_t fcpl = H5Pcreate(H5P_FILE_CREATE);
  if (userblock) H5Pset_userblock(fcpl, userblock);
  hid_t fapl = H5Pcreate(H5P_FILE_ACCESS);
  if (latest) H5Pset_libver_bounds(fapl, H5F_LIBVER_LATEST, H5F_LIBVER_LATEST);
  hid_t f = H5Fcreate(path.c_str(), H5F_ACC_TRUNC, fcpl, fapl);
  H5Pclose(fcpl);
  H5Pclose(fapl);
  check(f >= 0, "H5Fcreate " + path);
  return f;
}

void write_case(hid_t f, const IndexCase& c) {
  const int rank = int(c.shape.size());
  hid_t space = H5Screate_simple(rank, c.shape.data(), c.maxdims.empty() ? nullptr : c.maxdims.data());
  hid_t dcpl = H5Pcreate(H5P_DATASET_CREATE);
  H5Pset_obj_track_times(dcpl, false);
  check(H5Pset_chunk(dcpl, rank, c.chunk.data()) >= 0, "H5Pset_chunk");
  if (c.deflate) H5Pset_deflate(dcpl, 1);
  if (c.early_alloc) H5Pset_alloc_time(dcpl, H5D_ALLOC_TIME_EARLY);
  hid_t d = H5Dcreate2(f, c.name.c_str(), H5T_NATIVE_UINT16, space, H5P_DEFAULT, dcpl, H5P_DEFAULT);
  check(d >= 0, "H5Dcreate2 " + c.name);
  // Values that depend on the position: a chunk's bytes differ from its neighbours'.
  std::vector<hsize_t> count = c.shape;
  count[0] = hsize_t(double(c.shape[0]) * c.written);
  if (count[0] > 0) {
    std::vector<uint16_t> values(size_t(h5chunk::testing::count(count)));
    for (size_t i = 0; i < values.size(); ++i) values[i] = uint16_t(i * 7 + 3);
    std::vector<hsize_t> start(rank, 0);
    hid_t mem = H5Screate_simple(rank, count.data(), nullptr);
    hid_t file_space = H5Dget_space(d);
    H5Sselect_hyperslab(file_space, H5S_SELECT_SET, start.data(), nullptr, count.data(), nullptr);
    check(H5Dwrite(d, H5T_NATIVE_UINT16, mem, file_space, H5P_DEFAULT, values.data()) >= 0, "H5Dwrite");
    H5Sclose(mem);
    H5Sclose(file_space);
  }
  if (c.write_last) {
    std::vector<hsize_t> last(rank), one(rank, 1);
    for (int k = 0; k < rank; ++k) last[k] = c.shape[k] - 1;
    hid_t mem = H5Screate_simple(rank, one.data(), nullptr);
    hid_t file_space = H5Dget_space(d);
    H5Sselect_hyperslab(file_space, H5S_SELECT_SET, last.data(), nullptr, one.data(), nullptr);
    const uint16_t v = 4242;
    check(H5Dwrite(d, H5T_NATIVE_UINT16, mem, file_space, H5P_DEFAULT, &v) >= 0, "H5Dwrite last");
    H5Sclose(mem);
    H5Sclose(file_space);
  }
  if (c.masked_chunk) {
    std::vector<hsize_t> origin(rank, 0);
    std::vector<uint8_t> raw(size_t(h5chunk::testing::count(c.chunk)) * 2, 0x5a);
    check(H5Dwrite_chunk(d, H5P_DEFAULT, 0x1, origin.data(), raw.size(), raw.data()) >= 0, "H5Dwrite_chunk");
  }
  H5Dclose(d);
  H5Pclose(dcpl);
  H5Sclose(space);
}

// What libhdf5 says about the chunk at grid position `grid` (the walk: slow, authoritative).
struct Answer {
  bool allocated;
  uint64_t offset, size;
  unsigned mask;
};
Answer hdf5_answer(hid_t d, const std::vector<uint64_t>& chunk, const std::vector<uint64_t>& grid, uint64_t base) {
  std::vector<hsize_t> origin(chunk.size());
  for (size_t k = 0; k < chunk.size(); ++k) origin[k] = grid[k] * chunk[k];
  unsigned mask = 0;
  haddr_t addr = HADDR_UNDEF;
  hsize_t size = 0;
  EXPECT_GE(H5Dget_chunk_info_by_coord(d, origin.data(), &mask, &addr, &size), 0);
  const bool allocated = addr != HADDR_UNDEF && size > 0;
  return {allocated, allocated ? addr + base : 0, allocated ? size : 0, allocated ? mask : 0};
}

// What libhdf5's lookup (the path H5Dread takes) finds at `grid`: the stored bytes and mask.
struct Direct {
  bool allocated;
  std::vector<uint8_t> bytes;
  uint32_t mask;
};
Direct hdf5_direct(hid_t d, const std::vector<uint64_t>& chunk, const std::vector<uint64_t>& grid) {
  std::vector<hsize_t> origin(chunk.size());
  for (size_t k = 0; k < chunk.size(); ++k) origin[k] = grid[k] * chunk[k];
  Direct out{false, {}, 0};
  hsize_t size = 0;
  QuietHdf5Errors quiet;  // an unwritten chunk's lookup fails: that is the answer "none"
  if (H5Dget_chunk_storage_size(d, origin.data(), &size) < 0 || size == 0) return out;
  out.allocated = true;
  out.bytes.resize(size);
  EXPECT_GE(H5Dread_chunk(d, H5P_DEFAULT, origin.data(), &out.mask, out.bytes.data()), 0);
  return out;
}

std::vector<uint8_t> file_bytes(int fd, uint64_t offset, uint64_t size) {
  std::vector<uint8_t> out(size);
  EXPECT_EQ(::pread(fd, out.data(), size, off_t(offset)), ssize_t(size));
  return out;
}

// Parses the index of every dataset in `path` through ChunkManifest and compares every chunk
// (or every `stride`-th one plus the last, for big grids) with libhdf5's lookup: the chunk's
// stored bytes and filter mask as H5Dread_chunk returns them. About 60 chunks per dataset are
// also compared with libhdf5's walk (H5Dget_chunk_info_by_coord: address, size, mask), which
// costs up to a millisecond per chunk on big indexes. Locating a chunk also cross-checks its
// size with libhdf5's lookup.
void expect_index_matches(const std::string& path, const std::vector<IndexCase>& cases, uint64_t stride = 1) {
  hid_t f = H5Fopen(path.c_str(), H5F_ACC_RDONLY, H5P_DEFAULT);
  ASSERT_GE(f, 0);
  hid_t fcpl = H5Fget_create_plist(f);
  hsize_t base = 0;
  H5Pget_userblock(fcpl, &base);
  H5Pclose(fcpl);
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  ASSERT_GE(fd, 0);
  for (const IndexCase& c : cases) {
    SCOPED_TRACE(path + ":" + c.name);
    hid_t d = H5Dopen2(f, c.name.c_str(), H5P_DEFAULT);
    ASSERT_GE(d, 0);
    std::vector<uint64_t> shape(c.shape.begin(), c.shape.end()), chunk(c.chunk.begin(), c.chunk.end());
    ChunkManifest manifest(d, shape, chunk, base);
    ASSERT_TRUE(manifest.indexed()) << manifest.index_status().message();
    EXPECT_EQ(manifest.index_type(), c.expect_index);
    std::vector<uint64_t> grid_shape, grid(shape.size(), 0);
    uint64_t total = 1;
    for (size_t k = 0; k < shape.size(); ++k) {
      grid_shape.push_back((shape[k] + chunk[k] - 1) / chunk[k]);
      total *= grid_shape.back();
    }
    uint64_t allocated = 0, compared = 0;
    const uint64_t walk_stride = stride * std::max<uint64_t>(1, total / stride / 60);
    for (uint64_t i = 0; i < total; ++i) {
      uint64_t rest = i;
      for (size_t k = shape.size(); k-- > 0;) {
        grid[k] = rest % grid_shape[k];
        rest /= grid_shape[k];
      }
      if (i % stride != 0 && i != total - 1) continue;
      auto loc = manifest.locate(grid.data());
      ASSERT_TRUE(loc.ok()) << "chunk " << i << ": " << loc.status().message();
      allocated += loc->allocated;
      ++compared;
      if (c.walk_reliable && (i % walk_stride == 0 || i == total - 1)) {
        const Answer want = hdf5_answer(d, chunk, grid, base);
        ASSERT_EQ(loc->allocated, want.allocated) << "chunk " << i;
        if (want.allocated) {
          EXPECT_EQ(loc->offset, want.offset) << "chunk " << i;
          EXPECT_EQ(loc->size, want.size) << "chunk " << i;
          EXPECT_EQ(loc->filter_mask, want.mask) << "chunk " << i;
        }
      }
      const Direct direct = hdf5_direct(d, chunk, grid);
      ASSERT_EQ(loc->allocated, direct.allocated) << "chunk " << i;
      if (direct.allocated) {
        EXPECT_EQ(loc->filter_mask, direct.mask) << "chunk " << i;
        EXPECT_EQ(file_bytes(fd, loc->offset, loc->size), direct.bytes) << "chunk " << i;
      }
    }
    // Every written chunk located was cross-checked with libhdf5's lookup once, and only once;
    // unwritten ones are the parsed index's word (the lookup's size for them can come from
    // libhdf5's chunk cache, see check_found in manifest.cc).
    EXPECT_EQ(manifest.queries(), allocated);
    EXPECT_GT(compared, 0u);
    if (stride == 1 && (c.written < 1.0 || !c.write_last)) {
      EXPECT_LT(allocated, total) << "the case meant to leave chunks unwritten";
    }
    EXPECT_GT(allocated, 0u);
    H5Dclose(d);
  }
  ::close(fd);
  H5Fclose(f);
}

std::vector<IndexCase> earliest_cases() {
  return {
      {.name = "/b1_1d", .shape = {1000}, .chunk = {3}, .written = 0.6, .expect_index = "v1 B-tree"},
      {.name = "/b1_2d_deflate", .shape = {45, 31}, .chunk = {4, 5}, .deflate = true, .written = 0.5,
       .masked_chunk = true, .expect_index = "v1 B-tree"},
      {.name = "/b1_3d_unlimited", .shape = {9, 10, 11}, .chunk = {2, 3, 4},
       .maxdims = {H5S_UNLIMITED, 10, H5S_UNLIMITED}, .expect_index = "v1 B-tree"},
      {.name = "/b1_4d", .shape = {5, 6, 7, 3}, .chunk = {2, 2, 3, 2}, .deflate = true, .written = 0.5,
       .expect_index = "v1 B-tree"},
      {.name = "/b1_none_written", .shape = {50}, .chunk = {10}, .written = 0, .write_last = true,
       .expect_index = "v1 B-tree"},
  };
}

std::vector<IndexCase> latest_cases() {
  return {
      {.name = "/single", .shape = {7, 5}, .chunk = {7, 5}, .expect_index = "single chunk"},
      {.name = "/single_deflate", .shape = {7, 5}, .chunk = {7, 5}, .deflate = true, .masked_chunk = true,
       .expect_index = "single chunk"},
      {.name = "/implicit", .shape = {20, 9}, .chunk = {3, 4}, .early_alloc = true, .expect_index = "implicit"},
      {.name = "/implicit_max", .shape = {20, 9}, .chunk = {3, 4}, .maxdims = {30, 20}, .early_alloc = true,
       .expect_index = "implicit"},
      {.name = "/fa_2d", .shape = {37, 23}, .chunk = {4, 5}, .written = 0.5, .expect_index = "fixed array"},
      {.name = "/fa_deflate_masked", .shape = {37, 23}, .chunk = {4, 5}, .deflate = true, .written = 0.7,
       .masked_chunk = true, .expect_index = "fixed array"},
      // More than 1024 entries: the data block is paged, and unwritten pages stay uninitialised.
      {.name = "/fa_paged", .shape = {5000}, .chunk = {2}, .written = 0.3, .expect_index = "fixed array"},
      {.name = "/fa_paged_deflate", .shape = {3000, 2}, .chunk = {1, 2}, .deflate = true, .written = 0.2,
       .expect_index = "fixed array"},
      {.name = "/fa_maxdims", .shape = {10, 10}, .chunk = {3, 4}, .maxdims = {20, 30}, .expect_index = "fixed array"},
      {.name = "/fa_4d", .shape = {5, 6, 7, 3}, .chunk = {2, 2, 3, 2}, .written = 0.5, .expect_index = "fixed array"},
      // One unlimited axis: extensible array (index block, then super blocks past 244 entries).
      {.name = "/ea_1d", .shape = {700}, .chunk = {1}, .maxdims = {H5S_UNLIMITED}, .written = 0.8,
       .expect_index = "extensible array"},
      {.name = "/ea_axis1_deflate", .shape = {6, 300}, .chunk = {4, 2}, .maxdims = {20, H5S_UNLIMITED},
       .deflate = true, .written = 0.5, .masked_chunk = true, .expect_index = "extensible array",
       .walk_reliable = false},
      {.name = "/ea_3d", .shape = {40, 5, 6}, .chunk = {3, 2, 4}, .maxdims = {H5S_UNLIMITED, 5, 6},
       .expect_index = "extensible array"},
      // Two unlimited axes: v2 B-tree (leaves and an internal level past ~80 records).
      {.name = "/bt2_2d", .shape = {50, 40}, .chunk = {2, 3}, .maxdims = {H5S_UNLIMITED, H5S_UNLIMITED},
       .written = 0.6, .expect_index = "v2 B-tree"},
      {.name = "/bt2_deflate", .shape = {30, 45}, .chunk = {2, 3}, .maxdims = {H5S_UNLIMITED, H5S_UNLIMITED},
       .deflate = true, .written = 0.5, .masked_chunk = true, .expect_index = "v2 B-tree"},
      {.name = "/bt2_4d", .shape = {5, 6, 7, 3}, .chunk = {2, 2, 3, 2},
       .maxdims = {H5S_UNLIMITED, 6, H5S_UNLIMITED, 3}, .expect_index = "v2 B-tree"},
  };
}

void write_cases(const std::string& path, bool latest, hsize_t userblock, const std::vector<IndexCase>& cases) {
  hid_t f = create_file(path, latest, userblock);
  for (const IndexCase& c : cases) write_case(f, c);
  H5Fclose(f);
}

TEST(ChunkIndex, Checksum) {
  // lookup3 hashlittle reference values (Jenkins' driver: "" -> 0xdeadbeef, "Four score..." ).
  EXPECT_EQ(hdf5_checksum(nullptr, 0), 0xdeadbeefu);
  const char* s = "Four score and seven years ago";
  EXPECT_EQ(hdf5_checksum(reinterpret_cast<const uint8_t*>(s), 30), 0x17770551u);
}

TEST(ChunkIndex, EarliestFormatV1BTreeMatchesLibhdf5) {
  hubfs::testing::TempDir dir;
  for (hsize_t userblock : {hsize_t(0), hsize_t(512)}) {
    const std::string path = (dir / ("earliest" + std::to_string(userblock) + ".h5")).string();
    write_cases(path, false, userblock, earliest_cases());
    expect_index_matches(path, earliest_cases());
  }
}

TEST(ChunkIndex, LatestFormatIndexesMatchLibhdf5) {
  hubfs::testing::TempDir dir;
  for (hsize_t userblock : {hsize_t(0), hsize_t(1024)}) {
    const std::string path = (dir / ("latest" + std::to_string(userblock) + ".h5")).string();
    write_cases(path, true, userblock, latest_cases());
    expect_index_matches(path, latest_cases());
  }
}

TEST(ChunkIndex, DeepTreesAndPagedExtensibleArrays) {
  hubfs::testing::TempDir dir;
  // A v1 B-tree three levels deep, a v2 B-tree with internal nodes two levels up, and an
  // extensible array reaching super blocks whose data blocks are paged (entries past ~131k,
  // mostly unwritten: only the far end is). libhdf5's walk is compared on a sample.
  const std::vector<IndexCase> earliest = {
      {.name = "/b1_deep", .shape = {9000}, .chunk = {1}, .written = 1.0, .expect_index = "v1 B-tree"}};
  const std::vector<IndexCase> latest = {
      {.name = "/bt2_deep", .shape = {120, 80}, .chunk = {1, 1}, .maxdims = {H5S_UNLIMITED, H5S_UNLIMITED},
       .expect_index = "v2 B-tree"},
      {.name = "/ea_paged", .shape = {150000}, .chunk = {1}, .maxdims = {H5S_UNLIMITED}, .written = 0.002,
       .expect_index = "extensible array"}};
  write_cases((dir / "deep_earliest.h5").string(), false, 0, earliest);
  write_cases((dir / "deep_latest.h5").string(), true, 0, latest);
  // The paged data block near the end: write a run there too.
  {
    hid_t f = H5Fopen((dir / "deep_latest.h5").string().c_str(), H5F_ACC_RDWR, H5P_DEFAULT);
    hid_t d = H5Dopen2(f, "/ea_paged", H5P_DEFAULT);
    hsize_t start = 140000, n = 3000;
    std::vector<uint16_t> v(n, 77);
    hid_t mem = H5Screate_simple(1, &n, nullptr);
    hid_t fs = H5Dget_space(d);
    H5Sselect_hyperslab(fs, H5S_SELECT_SET, &start, nullptr, &n, nullptr);
    ASSERT_GE(H5Dwrite(d, H5T_NATIVE_UINT16, mem, fs, H5P_DEFAULT, v.data()), 0);
    H5Sclose(fs);
    H5Sclose(mem);
    H5Dclose(d);
    H5Fclose(f);
  }
  expect_index_matches((dir / "deep_earliest.h5").string(), earliest, 97);
  expect_index_matches((dir / "deep_latest.h5").string(), latest, 211);
}

TEST(ChunkIndex, FilesWrittenByH5py) {
  hubfs::testing::TempDir dir;
  const std::string path = (dir / "h5py.h5").string();
  const std::string script = (dir / "write.py").string();
  std::ofstream(script) << R"(import sys, h5py, numpy as np
with h5py.File(sys.argv[1], "w") as f:
    f.create_dataset("gzip", data=np.arange(40 * 30, dtype="u2").reshape(40, 30), chunks=(3, 7), compression="gzip")
    d = f.create_dataset("grow", shape=(100, 6), maxshape=(None, 6), chunks=(7, 4), dtype="u2")
    d[:60] = 5
with h5py.File(sys.argv[1].replace(".h5", "_latest.h5"), "w", libver="latest") as f:
    f.create_dataset("gzip", data=np.arange(40 * 30, dtype="u2").reshape(40, 30), chunks=(3, 7), compression="gzip")
    d = f.create_dataset("grow", shape=(100, 6), maxshape=(None, 6), chunks=(7, 4), dtype="u2")
    d[:60] = 5
    d = f.create_dataset("both", shape=(20, 20), maxshape=(None, None), chunks=(3, 3), dtype="u2", compression="lzf")
    d[5:15] = 1
)";
  const std::string cmd = "/usr/bin/python3 " + script + " " + path + " 2>&1";
  // Debian's python3-h5py is a declared dependency (scripts/deps.sh).
  ASSERT_EQ(std::system(cmd.c_str()), 0) << "h5py could not write the test file (apt-get install python3-h5py)";
  IndexCase gzip{.name = "/gzip", .shape = {40, 30}, .chunk = {3, 7}, .expect_index = "v1 B-tree"};
  IndexCase grow{.name = "/grow", .shape = {100, 6}, .chunk = {7, 4}, .written = 0.6, .expect_index = "v1 B-tree"};
  expect_index_matches(path, {gzip, grow});
  gzip.expect_index = "fixed array";
  grow.expect_index = "extensible array";
  IndexCase both{.name = "/both", .shape = {20, 20}, .chunk = {3, 3}, .written = 0.5, .expect_index = "v2 B-tree"};
  expect_index_matches((dir / "h5py_latest.h5").string(), {gzip, grow, both});
}

// ---------------------------------------------------------------------------------------------
// Hostile index structures

// Reads every dataset of the file at `path` in a child process (libhdf5 may crash on a damaged
// file; that is not ours to judge here) through h5chunk's fast path and through H5Dread, and
// reports: 0 both agree or h5chunk refused; 1 h5chunk returned other bytes than H5Dread;
// 2 h5chunk crashed or returned bytes where H5Dread failed.
int judge(const std::string& path, const std::vector<std::string>& names) {
  pid_t pid = ::fork();
  if (pid == 0) {
    ::alarm(20);
    H5Eset_auto2(H5E_DEFAULT, nullptr, nullptr);
    int verdict = 0;
    auto file = File::open(path, quiet_options(1));
    for (const std::string& name : names) {
      if (!file.ok()) break;
      auto dset = file->dataset(name);
      if (!dset.ok()) continue;
      auto got = dset->read(":", via(Route::kFastPath));
      if (!got.ok()) continue;
      // The reference, from a fresh handle so that nothing h5chunk did is cached.
      hid_t f = H5Fopen(path.c_str(), H5F_ACC_RDONLY, H5P_DEFAULT);
      hid_t d = f >= 0 ? H5Dopen2(f, name.c_str(), H5P_DEFAULT) : -1;
      Bytes want(got->nbytes());
      const bool ref_ok = d >= 0 && H5Dread(d, H5T_NATIVE_UINT16, H5S_ALL, H5S_ALL, H5P_DEFAULT, want.data()) >= 0;
      if (d >= 0) H5Dclose(d);
      if (f >= 0) H5Fclose(f);
      if (!ref_ok) verdict = std::max(verdict, 2);
      else if (bytes_of(*got) != want) verdict = std::max(verdict, 1);
    }
    ::_exit(verdict);
  }
  int status = 0;
  ::waitpid(pid, &status, 0);
  if (WIFEXITED(status)) return WEXITSTATUS(status);
  return 3;  // crashed or hung: h5chunk's or libhdf5's; counted separately
}

TEST(ChunkIndex, DamagedIndexStructuresNeverGiveWrongBytes) {
  hubfs::testing::TempDir dir;
  const std::string clean = (dir / "clean.h5").string();
  const std::vector<IndexCase> cases = {
      {.name = "/fa", .shape = {3000}, .chunk = {2}, .written = 0.7, .expect_index = "fixed array"},
      {.name = "/ea", .shape = {600}, .chunk = {1}, .maxdims = {H5S_UNLIMITED}, .written = 0.9,
       .expect_index = "extensible array"},
      {.name = "/bt2", .shape = {30, 30}, .chunk = {2, 2}, .maxdims = {H5S_UNLIMITED, H5S_UNLIMITED},
       .expect_index = "v2 B-tree"},
  };
  write_cases(clean, true, 0, cases);
  const std::string v1 = (dir / "v1.h5").string();
  const std::vector<IndexCase> v1_cases = {
      {.name = "/b1", .shape = {800}, .chunk = {2}, .deflate = true, .expect_index = "v1 B-tree"}};
  write_cases(v1, false, 0, v1_cases);
  std::mt19937 rng(12345);
  int wrong = 0, crashed = 0, runs = 0;
  for (const auto& [path, names] : std::vector<std::pair<std::string, std::vector<std::string>>>{
           {clean, {"/fa", "/ea", "/bt2"}}, {v1, {"/b1"}}}) {
    const std::vector<uint8_t> bytes = read_file_bytes(path);
    // The index structures by their signatures: damage lands inside them.
    std::vector<size_t> starts;
    for (const char* sig : {"FAHD", "FADB", "EAHD", "EAIB", "EASB", "EADB", "BTHD", "BTIN", "BTLF", "TREE", "OHDR"}) {
      for (size_t i = 0; i + 4 <= bytes.size(); ++i) {
        if (std::memcmp(&bytes[i], sig, 4) == 0) starts.push_back(i);
      }
    }
    ASSERT_FALSE(starts.empty());
    const std::string damaged = path + ".damaged.h5";
    for (int trial = 0; trial < 20; ++trial) {
      std::vector<uint8_t> copy = bytes;
      const size_t at = std::min(copy.size() - 1, starts[rng() % starts.size()] + rng() % 64);
      if (trial % 4 == 3) {
        copy.resize(at);  // truncated inside an index structure
      } else {
        copy[at] ^= uint8_t(1u << (rng() % 8));
      }
      write_file_bytes(damaged, copy);
      const int v = judge(damaged, names);
      ++runs;
      wrong += v == 1;
      crashed += v == 3;
      EXPECT_NE(v, 1) << "trial " << trial << ": damage at " << at << " gave bytes H5Dread does not";
      if (v == 1 && std::getenv("KEEP_DAMAGED")) write_file_bytes("/tmp/damaged_" + std::to_string(trial) + ".h5", copy);
    }
  }
  EXPECT_EQ(wrong, 0);
  // Crashes here are libhdf5's as often as ours; the mutation fuzz test assigns blame. Report.
  std::printf("damaged index runs: %d, wrong bytes: %d, crashed/hung: %d\n", runs, wrong, crashed);
}

// The parser alone, in-process, on many damaged copies (no libhdf5 involved, so any crash, hang
// or sanitizer report is ours): every outcome is an error or a list of chunks inside the grid,
// each listed once. The source description comes from the undamaged file.
ChunkIndexSource describe(const std::string& path, const std::string& name) {
  hid_t f = H5Fopen(path.c_str(), H5F_ACC_RDONLY, H5P_DEFAULT);
  hid_t d = H5Dopen2(f, name.c_str(), H5P_DEFAULT);
  ChunkIndexSource src;
  hid_t fcpl = H5Fget_create_plist(f);
  size_t sa = 0, ss = 0;
  H5Pget_sizes(fcpl, &sa, &ss);
  H5Pclose(fcpl);
  src.sizeof_addr = unsigned(sa);
  src.sizeof_size = unsigned(ss);
  H5O_info_t info;
  H5Oget_info2(d, &info, H5O_INFO_BASIC);
  src.header_address = info.addr;
  hid_t space = H5Dget_space(d);
  const int rank = H5Sget_simple_extent_ndims(space);
  std::vector<hsize_t> dims(rank), maxdims(rank), chunk(rank);
  H5Sget_simple_extent_dims(space, dims.data(), maxdims.data());
  hid_t dcpl = H5Dget_create_plist(d);
  H5Pget_chunk(dcpl, rank, chunk.data());
  src.filtered = H5Pget_nfilters(dcpl) > 0;
  hid_t type = H5Dget_type(d);
  src.elem_size = H5Tget_size(type);
  for (int k = 0; k < rank; ++k) {
    src.shape.push_back(dims[k]);
    src.maxdims.push_back(maxdims[k] == H5S_UNLIMITED ? UINT64_MAX : maxdims[k]);
    src.chunk.push_back(chunk[k]);
  }
  H5Tclose(type);
  H5Pclose(dcpl);
  H5Sclose(space);
  H5Dclose(d);
  H5Fclose(f);
  return src;
}

TEST(ChunkIndex, ParserSurvivesDamagedCopies) {
  hubfs::testing::TempDir dir;
  const std::vector<IndexCase> latest = {
      {.name = "/fa", .shape = {3000}, .chunk = {2}, .deflate = true, .written = 0.7, .expect_index = "fixed array"},
      {.name = "/ea", .shape = {600}, .chunk = {1}, .maxdims = {H5S_UNLIMITED}, .deflate = true, .written = 0.9,
       .expect_index = "extensible array"},
      {.name = "/bt2", .shape = {30, 30}, .chunk = {1, 2}, .maxdims = {H5S_UNLIMITED, H5S_UNLIMITED},
       .deflate = true, .expect_index = "v2 B-tree"},
      {.name = "/single", .shape = {7, 5}, .chunk = {7, 5}, .deflate = true, .expect_index = "single chunk"},
  };
  const std::vector<IndexCase> earliest = {
      {.name = "/b1", .shape = {3000}, .chunk = {2}, .deflate = true, .expect_index = "v1 B-tree"}};
  const std::string lpath = (dir / "latest.h5").string(), epath = (dir / "earliest.h5").string();
  write_cases(lpath, true, 0, latest);
  write_cases(epath, false, 0, earliest);
  std::mt19937 rng(777);
  uint64_t errors = 0, parsed = 0;
  for (const auto& [path, cases] : std::vector<std::pair<std::string, std::vector<IndexCase>>>{{lpath, latest}, {epath, earliest}}) {
    const std::vector<uint8_t> clean = read_file_bytes(path);
    std::vector<size_t> starts;
    for (const char* sig : {"FAHD", "FADB", "EAHD", "EAIB", "EASB", "EADB", "BTHD", "BTIN", "BTLF", "TREE", "OHDR", "OCHK"}) {
      for (size_t i = 0; i + 4 <= clean.size(); ++i) {
        if (std::memcmp(&clean[i], sig, 4) == 0) starts.push_back(i);
      }
    }
    ASSERT_FALSE(starts.empty());
    const std::string damaged = path + ".damaged";
    for (const IndexCase& c : cases) {
      ChunkIndexSource src = describe(path, c.name);
      for (int trial = 0; trial < 100; ++trial) {
        std::vector<uint8_t> copy = clean;
        const int kind = trial % 5;
        const size_t at = std::min(copy.size() - 1, starts[rng() % starts.size()] + rng() % 96);
        if (kind == 0) {
          copy.resize(at);  // truncated
        } else if (kind == 1) {
          for (size_t k = at; k < std::min(copy.size(), at + 8); ++k) copy[k] = 0xff;  // an undefined address
        } else if (kind == 2) {
          copy[at] = uint8_t(rng());
        } else {
          for (int flips = 0; flips < kind - 1; ++flips) {
            const size_t where = std::min(copy.size() - 1, at + rng() % 32);
            copy[where] ^= uint8_t(1u << (rng() % 8));
          }
        }
        write_file_bytes(damaged, copy);
        src.fd = ::open(damaged.c_str(), O_RDONLY | O_CLOEXEC);
        ASSERT_GE(src.fd, 0);
        std::vector<uint64_t> grid(c.shape.size());
        std::set<std::vector<uint64_t>> seen;
        bool bad = false;
        auto result = read_chunk_index(src, [&](const IndexedChunk& chunk) -> Status {
          std::vector<uint64_t> g(chunk.grid, chunk.grid + c.shape.size());
          for (size_t k = 0; k < g.size(); ++k) {
            if (g[k] * c.chunk[k] >= c.shape[k]) bad = true;
          }
          if (!seen.insert(g).second) return hubfs::Corrupt("twice");
          return Status::Ok();
        });
        ::close(src.fd);
        EXPECT_FALSE(bad) << c.name << " trial " << trial << ": a chunk outside the grid was reported";
        if (result.ok()) ++parsed;
        else ++errors;
      }
    }
  }
  // Most damage is caught (checksums); what is not must still be a well-formed answer.
  EXPECT_GT(errors, 0u);
  std::printf("damaged copies parsed: %llu, refused: %llu\n", (unsigned long long)parsed, (unsigned long long)errors);
}

}  // namespace
}  // namespace h5chunk::testing
