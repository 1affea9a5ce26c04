// A dataspace patched to absurd dimensions (as a bad disk or an attacker would leave it) must
// give a clear "array is too big" error, never a 0-byte success, a wrapped byte count that
// H5Dread overruns, nor an uncaught std::bad_alloc. Reads the patched file can serve (a few
// rows of a huge, mostly unwritten dataset) must still equal H5Dread.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>

#include "h5_fixture.h"
#include "hostile_util.h"
#include "support/temp_dir.h"

namespace h5chunk::testing {
namespace HUBFS_UNITY_ID {

using ::testing::HasSubstr;

// The case: a (20000, 64) int16 dataset whose dim 0 is then patched to `dim0`.
struct PatchedShape {
  hubfs::testing::TempDir dir;
  std::string path = (dir / "patched.h5").string();
  DatasetSpec spec;
  Bytes data;

  explicit PatchedShape(uint64_t dim0, Codec codec = Codec::kDeflateShuffle) {
    spec.shape = {20000, 64};
    spec.chunk = {1000, 64};
    spec.dtype = int16_t_();
    spec.codec = codec;
    data = make_data(spec, 3);
    write_dataset(path, spec, data);
    std::vector<uint8_t> file = read_file_bytes(path);
    auto hits = find_dims(file, {20000, 64});
    if (hits.empty()) throw std::runtime_error("dataspace dims not found in " + path);
    // The first hit is the current dimensions; a maximum-dimensions copy (if any) follows it,
    // and is patched too (a dimension over its maximum is refused as corrupt before any size
    // is computed, and these tests are about the sizes).
    put_le64(&file[hits[0]], dim0);
    if (hits.size() > 1 && hits[1] == hits[0] + 16) put_le64(&file[hits[1]], dim0);
    write_file_bytes(path, file);
  }
};

void expect_too_big(const Status& s, const std::string& path) {
  EXPECT_FALSE(s.ok());
  EXPECT_EQ(s.code(), hubfs::Code::kInvalidArgument) << s.message();
  EXPECT_THAT(s.message(), HasSubstr("too big"));
  EXPECT_THAT(s.message(), HasSubstr(path));
  EXPECT_THAT(s.message(), HasSubstr("'/data'"));
}

TEST(Hostile, DimsPatchedTo2Pow57AreTooBigNotAnEmptySuccess) {
  // 2^57 x 64 x 2 bytes = 2^64: wrapped, that was a 0-byte "success".
  PatchedShape p(uint64_t{1} << 57);
  auto file = File::open(p.path, quiet_options());
  ASSERT_TRUE(file.ok()) << file.status().message();
  auto dset = file->dataset("/data");
  ASSERT_TRUE(dset.ok()) << dset.status().message();
  EXPECT_EQ(dset->info().shape, (std::vector<uint64_t>{uint64_t{1} << 57, 64}));
  EXPECT_EQ(dset->info().nbytes, UINT64_MAX);  // saturated, not wrapped to 0
  for (Route route : {Route::kAuto, Route::kFastPath, Route::kH5Dread}) {
    auto got = dset->read(":", via(route));
    expect_too_big(got.status(), p.path);
  }
  // A buffer of the wrapped size (0 bytes) must not be accepted either.
  auto into = dset->read_into(Selection{}, nullptr, 0);
  expect_too_big(into.status(), p.path);
}

TEST(Hostile, DimsPatchedTo2Pow57Plus1AreTooBigNotAHeapOverflow) {
  // 2^64 + 128 bytes wraps to 128: H5Dread was asked to fill 2^63 elements into 128 bytes.
  PatchedShape p((uint64_t{1} << 57) + 1);
  auto file = File::open(p.path, quiet_options());
  auto dset = file->dataset("/data");
  ASSERT_TRUE(dset.ok()) << dset.status().message();
  for (Route route : {Route::kAuto, Route::kFastPath, Route::kH5Dread}) {
    expect_too_big(dset->read(":", via(route)).status(), p.path);
  }
  std::vector<uint8_t> wrapped(128);
  expect_too_big(dset->read_into(Selection{}, wrapped.data(), wrapped.size()).status(), p.path);
}

TEST(Hostile, DimsJustUnderTheWrapAreRefusedByMemoryNotBadAlloc) {
  // (2^57 - 1) x 64 x 2 = 2^64 - 128 bytes: no overflow, but no machine holds it. This used to
  // throw std::bad_alloc out of read().
  PatchedShape p((uint64_t{1} << 57) - 1);
  auto file = File::open(p.path, quiet_options());
  auto dset = file->dataset("/data");
  ASSERT_TRUE(dset.ok()) << dset.status().message();
  auto got = dset->read(":");
  expect_too_big(got.status(), p.path);
  EXPECT_THAT(got.status().message(), HasSubstr("18446744073709551488 bytes"));
  EXPECT_THAT(got.status().message(), HasSubstr("memory"));
  // Array::allocate says the same without a file; the constructor keeps throwing.
  auto array = Array::allocate({(uint64_t{1} << 57) - 1, 64}, h5chunk::DType::kInt16);
  EXPECT_THAT(array.status().message(), HasSubstr("too big"));
  EXPECT_THROW(Array({(uint64_t{1} << 57) - 1, 64}, h5chunk::DType::kInt16), std::bad_alloc);
}

TEST(Hostile, AxesBeyondInt64AreTooBig) {
  for (uint64_t dim0 : {uint64_t{1} << 63, UINT64_MAX - 1, UINT64_MAX}) {
    SCOPED_TRACE(dim0);
    PatchedShape p(dim0);
    auto file = File::open(p.path, quiet_options());
    if (!file.ok()) continue;  // HDF5 may refuse such a dataspace itself: a clear error too
    auto dset = file->dataset("/data");
    if (!dset.ok()) {
      EXPECT_FALSE(dset.status().message().empty());
      continue;
    }
    for (const char* sel : {":", "0", "0:10", "-1"}) {
      SCOPED_TRACE(sel);
      expect_too_big(dset->read(sel, via(Route::kFastPath)).status(), p.path);
    }
  }
}

TEST(Hostile, SmallReadsOfAHugePatchedDatasetEqualH5Dread) {
  // Rows the file really holds read as written; rows past them are unallocated chunks, which
  // read as the fill value on both routes.
  for (uint64_t dim0 : {uint64_t{1} << 57, (uint64_t{1} << 57) + 1, uint64_t{1} << 40}) {
    SCOPED_TRACE(dim0);
    PatchedShape p(dim0);
    auto file = File::open(p.path, quiet_options());
    auto dset = file->dataset("/data");
    ASSERT_TRUE(dset.ok()) << dset.status().message();
    for (const char* sel : {"0:1500", "19990:20010", "-3:", "123456789:123456795,5:9"}) {
      SCOPED_TRACE(sel);
      auto fast = dset->read(sel, via(Route::kFastPath));
      auto ref = dset->read(sel, via(Route::kH5Dread));
      ASSERT_EQ(fast.ok(), ref.ok()) << fast.status().message() << " / " << ref.status().message();
      if (!ref.ok()) continue;
      EXPECT_TRUE(fast->stats.fast_path);
      EXPECT_EQ(bytes_of(*fast), bytes_of(*ref));
    }
    // And the written rows are the original data.
    auto head = dset->read("0:1500", via(Route::kFastPath));
    ASSERT_TRUE(head.ok());
    EXPECT_EQ(bytes_of(*head), Bytes(p.data.begin(), p.data.begin() + 1500 * 64 * 2));
  }
}

TEST(Hostile, HugeChunkGridFallsBackInsteadOfWrappingChunkPositions) {
  // Chunk positions in the grid are the manifest's memo keys: a grid of more than 2^64 chunks
  // would make two chunks share a key (one chunk's bytes served for another's).
  hubfs::testing::TempDir dir;
  const std::string path = (dir / "grid.h5").string();
  DatasetSpec spec;
  spec.shape = {20000, 64};
  spec.chunk = {1, 1};
  spec.dtype = uint8_();
  spec.write = false;
  write_dataset(path, spec, {});
  std::vector<uint8_t> file = read_file_bytes(path);
  auto hits = find_dims(file, {20000, 64});
  ASSERT_FALSE(hits.empty());
  put_le64(&file[hits[0]], uint64_t{1} << 60);  // grid: 2^60 x 64 = 2^66 chunks
  if (hits.size() > 1 && hits[1] == hits[0] + 16) put_le64(&file[hits[1]], uint64_t{1} << 60);  // and its maximum
  write_file_bytes(path, file);
  auto f = File::open(path, quiet_options());
  auto dset = f->dataset("/data");
  ASSERT_TRUE(dset.ok()) << dset.status().message();
  EXPECT_THAT(dset->info().fast_path_blocker, HasSubstr("chunk grid"));
  auto got = dset->read("5,0:4", via(Route::kFastPath));
  auto ref = dset->read("5,0:4", via(Route::kH5Dread));
  ASSERT_EQ(got.ok(), ref.ok());
  if (got.ok()) {
    EXPECT_FALSE(got->stats.fast_path);
    EXPECT_EQ(bytes_of(*got), bytes_of(*ref));
  }
}

TEST(Hostile, ChunkIndexWhereWalkAndLookupDisagreeIsCorrupt) {
  // Mutation fuzz seed 34: a zeroed page cleared a v1 B-tree child pointer. Walking the index
  // (H5Dget_chunk_info_by_coord) then "found" the chunk at address 0, and h5chunk returned the
  // superblock as data; H5Dread's lookup failed on the same chunk.
  hubfs::testing::TempDir dir;
  const std::string path = (dir / "index.h5").string();
  DatasetSpec spec;
  spec.shape = {10, 12};
  spec.chunk = {4, 5};
  spec.dtype = int16_t_();
  write_dataset(path, spec, make_data(spec, 5));
  const StoredChunk victim = stored_chunk(path, "/data", {4, 10});
  std::vector<uint8_t> file = read_file_bytes(path);
  std::vector<uint8_t> address(8);
  put_le64(address.data(), victim.offset);
  const auto pointer = std::search(file.begin(), file.end(), address.begin(), address.end()) - file.begin();
  ASSERT_LT(size_t(pointer), file.size());

  // The pointer alone zeroed: walk and lookup agree on address 0, the superblock.
  // The pointer and the entries after it zeroed (seed 34's page): their keys now list chunk
  // (0, 0) again (with a stored size of 0), which the parser finds before any lookup, and the
  // whole index is refused.
  for (const auto& [zeroed, why] : {std::pair{size_t{8}, "inside the file's superblock"},
                                    std::pair{size_t{8 + 3 * 40}, "lists a chunk twice"}}) {
    const bool whole_index = zeroed > 8;
    SCOPED_TRACE(why);
    std::vector<uint8_t> damaged = file;
    std::fill(damaged.begin() + pointer, damaged.begin() + pointer + long(zeroed), 0);
    write_file_bytes(path, damaged);
    auto f = File::open(path, quiet_options());
    auto dset = f->dataset("/data");
    ASSERT_TRUE(dset.ok());
    for (const char* sel : {":", "4:8,10:12", "5"}) {
      SCOPED_TRACE(sel);
      auto got = dset->read(sel, via(Route::kFastPath));
      ASSERT_FALSE(got.ok());
      EXPECT_EQ(got.status().code(), hubfs::Code::kCorrupt);
      if (!whole_index) {
        EXPECT_THAT(got.status().message(), HasSubstr("chunk index is damaged at (4, 10)"));
      }
      EXPECT_THAT(got.status().message(), HasSubstr(why));
      EXPECT_THAT(got.status().message(), HasSubstr(path));
    }
    if (whole_index) {
      auto refused = dset->read("0:4,0:10", via(Route::kAuto));
      ASSERT_FALSE(refused.ok());
      EXPECT_THAT(refused.status().message(), HasSubstr("--route h5dread"));
      continue;
    }
    // Chunks the damage did not touch still read, and equal H5Dread.
    auto fine = dset->read("0:4,0:10", via(Route::kFastPath));
    auto ref = dset->read("0:4,0:10", via(Route::kH5Dread));
    ASSERT_TRUE(fine.ok()) << fine.status().message();
    ASSERT_TRUE(ref.ok());
    EXPECT_EQ(bytes_of(*fine), bytes_of(*ref));
  }
}

TEST(Hostile, ContiguousDatasetWhoseShapeOutgrowsItsStorageIsCorrupt) {
  // Mutation fuzz seed 10: dims patched on a contiguous dataset. HDF5 1.10.8 failed the first
  // H5Dread past the storage and returned stale bytes for the same read the next time.
  for (uint64_t dim0 : {uint64_t{665441777603363039}, uint64_t{11}, uint64_t{1} << 57}) {
    SCOPED_TRACE(dim0);
    hubfs::testing::TempDir dir;
    const std::string path = (dir / "contiguous.h5").string();
    DatasetSpec spec;
    spec.shape = {10, 10};
    spec.dtype = int16_t_();
    write_dataset(path, spec, make_data(spec, 6));
    std::vector<uint8_t> file = read_file_bytes(path);
    auto hits = find_dims(file, {10, 10});
    ASSERT_FALSE(hits.empty());
    put_le64(&file[hits[0]], dim0);
    // And its maximum: dims (10, 10) then maximum (10, 10) match at +0, +8 and +16.
    if (std::find(hits.begin(), hits.end(), hits[0] + 16) != hits.end()) put_le64(&file[hits[0] + 16], dim0);
    write_file_bytes(path, file);
    auto f = File::open(path, quiet_options());
    auto dset = f->dataset("/data");
    ASSERT_TRUE(dset.ok()) << dset.status().message();
    EXPECT_FALSE(dset->info().readable);
    for (int attempt = 0; attempt < 2; ++attempt) {
      for (Route route : {Route::kAuto, Route::kH5Dread}) {
        auto got = dset->read("-1", via(route));
        ASSERT_FALSE(got.ok());
        EXPECT_EQ(got.status().code(), hubfs::Code::kCorrupt);
        EXPECT_THAT(got.status().message(), HasSubstr("contiguous storage holds 200"));
      }
    }
  }
}

TEST(Hostile, ContiguousStoragePastTheEndOfTheFileIsCorrupt) {
  // Mutation fuzz seeds 3619, 4880: a damaged storage address; HDF5 failed the first read and
  // served 200 stale bytes to the next.
  hubfs::testing::TempDir dir;
  const std::string path = (dir / "contiguous.h5").string();
  DatasetSpec spec;
  spec.shape = {10, 10};
  spec.dtype = int16_t_();
  write_dataset(path, spec, make_data(spec, 8));
  hid_t f = H5Fopen(path.c_str(), H5F_ACC_RDONLY, H5P_DEFAULT);
  hid_t d = H5Dopen2(f, "/data", H5P_DEFAULT);
  const haddr_t at = H5Dget_offset(d);
  H5Dclose(d);
  H5Fclose(f);
  ASSERT_NE(at, HADDR_UNDEF);
  std::vector<uint8_t> file = read_file_bytes(path);
  std::vector<uint8_t> address(8);
  put_le64(address.data(), at);
  // In the dataset's object header, after its dataspace message.
  auto dims = find_dims(file, {10, 10});
  ASSERT_FALSE(dims.empty());
  auto layout = std::search(file.begin() + long(dims[0]), file.end(), address.begin(), address.end());
  ASSERT_NE(layout, file.end());
  put_le64(&*layout, at + 1000000);  // the layout message's storage address
  write_file_bytes(path, file);
  auto opened = File::open(path, quiet_options());
  ASSERT_TRUE(opened.ok()) << opened.status().message();
  auto dset = opened->dataset("/data");
  ASSERT_TRUE(dset.ok()) << dset.status().message();
  for (int attempt = 0; attempt < 2; ++attempt) {
    auto got = dset->read(":");
    ASSERT_FALSE(got.ok());
    EXPECT_EQ(got.status().code(), hubfs::Code::kCorrupt);
    EXPECT_THAT(got.status().message(), HasSubstr("lies past the end of the file"));
  }
}

TEST(Hostile, ChunkLongerThanAFixedAxisIsCorrupt) {
  // Mutation fuzz seed 61: a flipped bit turned chunk shape (6, 32) into (8198, 32) on a
  // (24, 32) dataset. H5Dread then returned a different mix of data and uninitialised memory on
  // every call (the stored chunks decode to far less than such a chunk holds).
  hubfs::testing::TempDir dir;
  const std::string path = (dir / "chunk.h5").string();
  DatasetSpec spec;
  spec.shape = {24, 32};
  spec.chunk = {6, 32};
  spec.codec = Codec::kDeflateShuffle;
  write_dataset(path, spec, make_data(spec, 7));
  std::vector<uint8_t> file = read_file_bytes(path);
  // The v3 layout message stores the chunk shape as u32 LE values, then the element size.
  const uint8_t layout[] = {6, 0, 0, 0, 32, 0, 0, 0, 4, 0, 0, 0};
  auto at = std::search(file.begin(), file.end(), std::begin(layout), std::end(layout));
  ASSERT_NE(at, file.end());
  at[1] = 0x20;  // 6 -> 8198
  write_file_bytes(path, file);
  auto f = File::open(path, quiet_options());
  auto dset = f->dataset("/data");
  ASSERT_TRUE(dset.ok()) << dset.status().message();
  EXPECT_EQ(dset->info().chunk, (std::vector<uint64_t>{8198, 32}));
  EXPECT_FALSE(dset->info().readable);
  for (Route route : {Route::kAuto, Route::kFastPath, Route::kH5Dread}) {
    auto got = dset->read(":", via(route));
    ASSERT_FALSE(got.ok());
    EXPECT_EQ(got.status().code(), hubfs::Code::kCorrupt);
    EXPECT_THAT(got.status().message(), HasSubstr("exceeds its fixed maximum shape on axis 0 (24)"));
  }
}

TEST(Hostile, HugeStepsDoNotOverflowTheSliceLength) {
  const std::vector<uint64_t> shape = {10};
  auto norm = normalize(*parse_selection("0:10:9223372036854775807"), shape);
  ASSERT_TRUE(norm.ok());
  EXPECT_EQ(norm->num_elements, 1u);
  norm = normalize(*parse_selection("3:10:9223372036854775806"), shape);
  ASSERT_TRUE(norm.ok());
  EXPECT_EQ(norm->num_elements, 1u);
  EXPECT_EQ(norm->axes[0].start, 3);
}

}  // namespace
}  // namespace h5chunk::testing
