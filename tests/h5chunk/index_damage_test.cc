// Damage h5chunk's own parser diagnoses is an error naming it on every route but --route h5dread
// (never fill values, never a hand-over to H5Dread, which crashes on some of it); unwritten
// chunks stay unwritten whatever libhdf5's chunk cache says after an H5Dread in this process;
// huge sparse extensible arrays are read in time following their written chunks.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstring>

#include "h5_fixture.h"
#include "h5chunk/chunk_index.h"
#include "hostile_util.h"
#include "support/temp_dir.h"

namespace h5chunk::testing {
namespace HUBFS_UNITY_ID {

using ::testing::HasSubstr;

void put_le(uint8_t* p, uint64_t v, size_t n) {
  for (size_t i = 0; i < n; ++i) p[i] = uint8_t(v >> (8 * i));
}

bool matches_le(const Bytes& file, size_t at, uint64_t v, size_t n) {
  if (at + n > file.size()) return false;
  for (size_t i = 0; i < n; ++i) {
    if (file[at + i] != uint8_t(v >> (8 * i))) return false;
  }
  return true;
}

// Sets the stored size of the chunk at `origin` to 0 in its index entry, and re-seals the
// checksum of the index block holding it (so that only the entry is wrong). Array and v2 B-tree
// entries are (address, size in `size_bytes`, mask, ...); v1 B-tree keys are (size u32, mask,
// offsets).
void zero_entry_size(const std::string& path, const std::string& name, const std::vector<hsize_t>& origin,
                     bool v1_key, uint64_t new_size = 0) {
  const StoredChunk chunk = stored_chunk(path, name, origin);
  Bytes file = read_file_bytes(path);
  size_t at = 0;
  bool found = false;
  if (v1_key) {
    for (size_t i = 0; i + 8 + 8 * (origin.size() + 1) <= file.size() && !found; ++i) {
      if (!matches_le(file, i, chunk.size, 4) || !matches_le(file, i + 4, chunk.mask, 4)) continue;
      bool same = true;
      for (size_t d = 0; d < origin.size() && same; ++d) same = matches_le(file, i + 8 + 8 * d, origin[d], 8);
      if (same && matches_le(file, i + 8 + 8 * origin.size(), 0, 8)) {
        put_le(&file[i], new_size, 4);
        found = true;
      }
    }
    ASSERT_TRUE(found) << "v1 B-tree key of the chunk not found";
    write_file_bytes(path, file);
    return;
  }
  // Address then size: the size field is at least as wide as the chunk size needs.
  for (size_t i = 0; i + 12 <= file.size() && !found; ++i) {
    if (matches_le(file, i, chunk.offset, 8) && matches_le(file, i + 8, chunk.size, 2)) {
      at = i + 8;
      found = true;
    }
  }
  ASSERT_TRUE(found) << "index entry of the chunk not found";
  // The enclosing block: the nearest signature before the entry whose stored checksum matches.
  size_t sealed_start = 0, sealed_len = 0;
  for (size_t s = at; s-- > 0 && sealed_len == 0 && at - s < 1 << 16;) {
    if (std::memcmp(&file[s], "FADB", 4) && std::memcmp(&file[s], "EAIB", 4) && std::memcmp(&file[s], "EADB", 4) &&
        std::memcmp(&file[s], "BTLF", 4)) {
      continue;
    }
    for (size_t len = at + 1 - s; s + len + 4 <= file.size() && len < (1 << 16); ++len) {
      uint32_t stored;
      std::memcpy(&stored, &file[s + len], 4);
      if (stored == hdf5_checksum(&file[s], len)) {
        sealed_start = s;
        sealed_len = len;
        break;
      }
    }
  }
  ASSERT_GT(sealed_len, 0u) << "no checksummed block around the entry";
  put_le(&file[at], 0, 2);
  const uint32_t sum = hdf5_checksum(&file[sealed_start], sealed_len);
  std::memcpy(&file[sealed_start + sealed_len], &sum, 4);
  write_file_bytes(path, file);
}

struct IndexCase {
  const char* name;
  std::vector<hsize_t> maxdims;  // empty: fixed
  bool latest;
  bool v1_key;
};

class ZeroSizeEntry : public ::testing::TestWithParam<IndexCase> {};

TEST_P(ZeroSizeEntry, IsAnErrorNamingTheChunkNeverFillValues) {
  const IndexCase& c = GetParam();
  hubfs::testing::TempDir dir;
  const std::string path = (dir / "zero.h5").string();
  DatasetSpec spec;
  spec.shape = {12, 20};
  spec.chunk = {4, 5};
  spec.maxdims = c.maxdims;
  spec.codec = Codec::kDeflateShuffle;
  spec.dtype = int16_t_();
  FileSpec fs;
  fs.libver_latest = c.latest;
  const Bytes data = make_data(spec, 5);
  write_dataset(path, spec, data, fs);
  zero_entry_size(path, "/data", {4, 10}, c.v1_key);
  if (HasFatalFailure()) return;

  auto file = File::open(path, quiet_options());
  ASSERT_TRUE(file.ok()) << file.status().message();
  auto ds = file->dataset("/data");
  ASSERT_TRUE(ds.ok()) << ds.status().message();
  for (Route route : {Route::kAuto, Route::kFastPath, Route::kFastOnly}) {
    for (const char* sel : {":", "4:8, 10:15", "5"}) {
      auto got = ds->read(sel, via(route));
      ASSERT_FALSE(got.ok()) << c.name << " " << sel << ": read the damaged chunk as fill values";
      // The automatic route gives reads this small to H5Dread (the index parses, so nothing
      // stops it), which fails on the chunk in its own words.
      if (route == Route::kAuto) continue;
      EXPECT_EQ(got.status().code(), hubfs::Code::kCorrupt) << got.status().message();
      EXPECT_THAT(got.status().message(), HasSubstr("(4, 10)"));
      EXPECT_THAT(got.status().message(), HasSubstr("stored size of 0 bytes"));
    }
  }
  // The chunks the damage did not touch still read as written.
  auto first = ds->read("0:4, 0:5", via(Route::kFastOnly));
  ASSERT_TRUE(first.ok()) << first.status().message();
  auto ref = ds->read("0:4, 0:5", via(Route::kH5Dread));
  ASSERT_TRUE(ref.ok()) << ref.status().message();
  EXPECT_EQ(bytes_of(*first), bytes_of(*ref));
}

INSTANTIATE_TEST_SUITE_P(EveryFilteredIndex, ZeroSizeEntry,
                         ::testing::Values(IndexCase{"v1 B-tree", {}, false, true},
                                           IndexCase{"fixed array", {}, true, false},
                                           IndexCase{"extensible array", {H5S_UNLIMITED, 20}, true, false},
                                           IndexCase{"v2 B-tree", {H5S_UNLIMITED, H5S_UNLIMITED}, true, false}),
                         [](const auto& info) {
                           std::string n = info.param.name;
                           for (char& ch : n) ch = std::isalnum(static_cast<unsigned char>(ch)) ? ch : '_';
                           return n;
                         });

TEST(IndexDamage, UnfilteredChunkOfAnotherSizeIsRefusedBeforeH5Dread) {
  // Mutation fuzz seeds 2338 and 3001: a pipeline message damaged to "no filters" over
  // compressed chunks; H5Dread then returns uninitialised memory for small reads, which the
  // automatic route passed on. An unfiltered chunk is stored whole, so the parser refuses a v1
  // B-tree key of another size (here: a key patched, the same inconsistency).
  hubfs::testing::TempDir dir;
  const std::string path = (dir / "sizes.h5").string();
  DatasetSpec spec;
  spec.shape = {12, 20};
  spec.chunk = {4, 5};
  spec.dtype = int16_t_();
  write_dataset(path, spec, make_data(spec, 4));
  zero_entry_size(path, "/data", {4, 10}, /*v1_key=*/true, /*new_size=*/17);
  if (HasFatalFailure()) return;
  auto f = File::open(path, quiet_options());
  ASSERT_TRUE(f.ok());
  auto ds = f->dataset("/data");
  ASSERT_TRUE(ds.ok());
  for (Route route : {Route::kAuto, Route::kFastPath, Route::kFastOnly}) {
    auto got = ds->read("0", via(route));  // a chunk the damage did not touch: the index is refused
    ASSERT_FALSE(got.ok());
    EXPECT_EQ(got.status().code(), hubfs::Code::kCorrupt);
    EXPECT_THAT(got.status().message(), HasSubstr("chunk of 17 bytes for a dataset without filters"));
  }
}

TEST(IndexDamage, V1BtreeRootPointingToItselfIsRefusedOnTheDefaultRoute) {
  // Enough chunks for a two-level v1 B-tree; its root's first child pointer is then set to the
  // root itself. H5Dread segfaults on that file: the default route must refuse with the
  // parser's diagnosis before handing anything to it, small reads included.
  hubfs::testing::TempDir dir;
  const std::string path = (dir / "cycle.h5").string();
  DatasetSpec spec;
  spec.shape = {400};
  spec.chunk = {1};
  spec.dtype = uint8_();
  const Bytes data = make_data(spec, 2);
  write_dataset(path, spec, data);
  Bytes file = read_file_bytes(path);
  // The root is the one TREE node of level > 0.
  size_t root = 0;
  for (size_t i = 0; i + 8 <= file.size(); ++i) {
    if (std::memcmp(&file[i], "TREE", 4) == 0 && file[i + 4] == 1 && file[i + 5] > 0) root = i;
  }
  ASSERT_GT(root, 0u) << "no internal v1 B-tree node";
  // Node: signature, type, level, entries(2), left and right siblings (8 each), then key 0
  // (size u32, mask u32, 2 offsets u64) and child 0.
  const size_t child0 = root + 8 + 16 + 8 + 16;
  put_le(&file[child0], root, 8);
  write_file_bytes(path, file);

  auto f = File::open(path, quiet_options());
  ASSERT_TRUE(f.ok()) << f.status().message();
  auto ds = f->dataset("/data");
  ASSERT_TRUE(ds.ok()) << ds.status().message();
  for (Route route : {Route::kAuto, Route::kFastPath, Route::kFastOnly}) {
    for (const char* sel : {":", "3", "100:110"}) {
      auto got = ds->read(sel, via(route));
      ASSERT_FALSE(got.ok()) << sel;
      EXPECT_EQ(got.status().code(), hubfs::Code::kCorrupt) << got.status().message();
      EXPECT_THAT(got.status().message(), HasSubstr("v1 B-tree"));
      EXPECT_THAT(got.status().message(), HasSubstr("--route h5dread"));
    }
  }
}

TEST(IndexDamage, UnwrittenChunksStayUnwrittenAfterH5DreadCachedThem) {
  // libhdf5 1.10.8's chunk cache keeps entries for unwritten chunks an H5Dread touched, and its
  // lookup (H5Dget_chunk_storage_size) then reports the chunk size for them. The cross-check
  // called that a damaged index; reads after H5Dread must equal it instead, on every index.
  hubfs::testing::TempDir dir;
  for (const auto& [latest, maxdims] : std::vector<std::pair<bool, std::vector<hsize_t>>>{
           {false, {}}, {true, {}}, {true, {H5S_UNLIMITED}}, {false, {H5S_UNLIMITED}}}) {
    const std::string path = (dir / ("sparse" + std::to_string(latest) + std::to_string(maxdims.size()) + ".h5")).string();
    DatasetSpec spec;
    spec.shape = {20};
    spec.chunk = {6};
    spec.maxdims = maxdims;
    spec.dtype = int16_t_();
    spec.write = false;
    spec.fill = 7;
    FileSpec fs;
    fs.libver_latest = latest;
    write_dataset(path, spec, {}, fs);
    write_raw_chunk(path, "/data", {0}, 0, Bytes(12, 1));
    write_raw_chunk(path, "/data", {18}, 0, Bytes(12, 2));
    auto f = File::open(path, quiet_options());
    ASSERT_TRUE(f.ok());
    auto ds = f->dataset("/data");
    ASSERT_TRUE(ds.ok());
    auto ref = ds->read(":", via(Route::kH5Dread));  // fills libhdf5's chunk cache
    ASSERT_TRUE(ref.ok()) << ref.status().message();
    for (Route route : {Route::kFastOnly, Route::kAuto, Route::kFastPath}) {
      auto got = ds->read(":", via(route));
      ASSERT_TRUE(got.ok()) << path << ": " << got.status().message();
      EXPECT_EQ(bytes_of(*got), bytes_of(*ref)) << path;
    }
  }
}

TEST(IndexDamage, HugeSparseExtensibleArrayReadsOnlyItsWrittenBlocks) {
  // (2^40, 1) in chunks of (1024, 1): 2^30 chunks in the grid, three regions written. The fast
  // route used to ask libhdf5 chunk by chunk, whose walk of an extensible array visits every
  // entry up to the last written one (minutes); the parsed index reads the written blocks.
  hubfs::testing::TempDir dir;
  const std::string path = (dir / "huge.h5").string();
  DatasetSpec spec;
  spec.shape = {hsize_t{1} << 40, 1};
  spec.chunk = {1024, 1};
  spec.maxdims = {H5S_UNLIMITED, 1};
  spec.dtype = uint8_();
  spec.write = false;
  FileSpec fs;
  fs.libver_latest = true;
  write_dataset(path, spec, {}, fs);
  for (hsize_t origin : {hsize_t{0}, hsize_t{1024} * 5000, (hsize_t{1} << 40) - 1024}) {
    write_raw_chunk(path, "/data", {origin, 0}, 0, Bytes(1024, uint8_t(origin % 251 + 1)));
  }
  auto f = File::open(path, quiet_options());
  ASSERT_TRUE(f.ok());
  auto ds = f->dataset("/data");
  ASSERT_TRUE(ds.ok());
  for (const char* sel : {"0:2048, 0", "5120000:5121024, 0", "-3:, 0"}) {
    auto got = ds->read(sel, via(Route::kFastOnly));
    ASSERT_TRUE(got.ok()) << sel << ": " << got.status().message();
    EXPECT_TRUE(got->stats.fast_path);
    auto ref = ds->read(sel, via(Route::kH5Dread));
    ASSERT_TRUE(ref.ok()) << ref.status().message();
    EXPECT_EQ(bytes_of(*got), bytes_of(*ref)) << sel;
  }
  // Located from the parsed index: one cross-check per written chunk read, no walks.
  EXPECT_LE(ds->manifest_queries(), 3u);
}

}  // namespace
}  // namespace h5chunk::testing
