// Files whose layout trips naive chunk readers: user blocks, unallocated chunks, partial edge
// chunks stored unfiltered, chunks stored raw with a non-zero filter mask, and many chunks.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <chrono>

#include "h5_fixture.h"
#include "support/temp_dir.h"

namespace h5chunk::testing {
namespace HUBFS_UNITY_ID {

// Reads `selection` through the fast path, and expects the bytes numpy indexing of `full` gives.
void expect_fast_read(const Dataset& dset, const Bytes& full, size_t elem, const std::string& text) {
  SCOPED_TRACE(text);
  auto sel = parse_selection(text);
  ASSERT_TRUE(sel.ok());
  auto norm = normalize(*sel, dset.info().shape);
  ASSERT_TRUE(norm.ok());
  auto got = dset.read(*sel, via(Route::kFastPath));
  ASSERT_TRUE(got.ok()) << got.status().message();
  EXPECT_TRUE(got->stats.fast_path) << got->stats.fallback_cause;
  EXPECT_EQ(bytes_of(*got), index_reference(full, dset.info().shape, elem, *norm));
}

TEST(Layout, OneDimensionalDatasets) {
  hubfs::testing::TempDir dir;
  const std::string path = (dir / "1d.h5").string();
  DatasetSpec spec;
  spec.shape = {1000};
  spec.chunk = {64};  // the last chunk is partial
  spec.codec = Codec::kLz4;
  spec.dtype = float64_();
  const Bytes data = make_data(spec);
  write_dataset(path, spec, data);
  auto file = File::open(path, quiet_options());
  auto dset = file->dataset("/data");
  ASSERT_TRUE(dset.ok());
  for (const char* s : {":", "5:900", "[3,70,999]", "-1", "64:128", "...", "990:"}) {
    expect_fast_read(*dset, data, 8, s);
  }
}

TEST(Layout, UserBlockOffsetsAreRelativeToTheBaseAddress) {
  hubfs::testing::TempDir dir;
  const std::string path = (dir / "ub.h5").string();
  DatasetSpec spec;
  spec.shape = {8, 64};
  spec.chunk = {2, 64};
  spec.codec = Codec::kBloscLz4;
  const Bytes data = make_data(spec);
  write_dataset(path, spec, data, FileSpec{.userblock = 4096});
  auto file = File::open(path, quiet_options());
  ASSERT_TRUE(file.ok()) << file.status().message();
  auto dset = file->dataset("data");
  ASSERT_TRUE(dset.ok());
  expect_fast_read(*dset, data, 4, ":");
  expect_fast_read(*dset, data, 4, "3:7,5:60");
}

TEST(Layout, UnallocatedChunksReadAsTheFillValue) {
  hubfs::testing::TempDir dir;
  const std::string path = (dir / "fill.h5").string();
  for (bool user_fill : {false, true}) {
    DatasetSpec spec;
    spec.name = user_fill ? "/filled" : "/zeros";
    spec.shape = {6, 10};
    spec.chunk = {2, 4};
    spec.codec = Codec::kDeflateShuffle;
    spec.dtype = int16_t_();
    if (user_fill) spec.fill = -7;
    spec.write = false;
    write_dataset(path, spec, {});
    // Write one chunk so the dataset has both kinds.
    Bytes chunk(2 * 4 * 2);
    for (size_t i = 0; i < chunk.size(); ++i) chunk[i] = uint8_t(i + 1);
    write_raw_chunk(path, spec.name, {2, 4}, /*filter_mask=*/0b11, chunk);

    auto file = File::open(path, quiet_options());
    ASSERT_TRUE(file.ok());
    auto dset = file->dataset(spec.name);
    ASSERT_TRUE(dset.ok());
    const Bytes full = h5dread_all(path, spec.name, H5T_NATIVE_INT16, 2);
    int16_t first;
    std::memcpy(&first, full.data(), 2);
    EXPECT_EQ(first, user_fill ? -7 : 0);
    for (const char* s : {":", "1:5,2:9", "0", "[1,3,4],3:5", "2:4,4:8"}) expect_fast_read(*dset, full, 2, s);
  }
}

TEST(Layout, PartialEdgeChunksUnderDontFilterPartialChunks) {
  hubfs::testing::TempDir dir;
  const std::string path = (dir / "edge.h5").string();
  DatasetSpec spec;
  spec.shape = {7, 9, 5};
  spec.chunk = {3, 4, 5};
  spec.codec = Codec::kBloscZstdBit;
  spec.dont_filter_partial = true;
  const Bytes data = make_data(spec);
  write_dataset(path, spec, data);
  ASSERT_EQ(h5dread_all(path, spec.name, H5T_NATIVE_FLOAT, 4), data);
  // The edge chunk is stored unfiltered (full size) yet reports a zero filter mask.
  StoredChunk edge = stored_chunk(path, spec.name, {6, 8, 0});
  EXPECT_EQ(edge.mask, 0u);
  EXPECT_EQ(edge.size, 3u * 4 * 5 * 4);
  auto file = File::open(path, quiet_options());
  auto dset = file->dataset("/data");
  ASSERT_TRUE(dset.ok());
  for (const char* s : {":", "6", "-1,-1", "5:7,7:9,1:4", "[0,6],:,2"}) expect_fast_read(*dset, data, 4, s);
}

TEST(Layout, IncompressibleChunksStoredRawWithNonZeroFilterMask) {
  hubfs::testing::TempDir dir;
  const std::string path = (dir / "raw.h5").string();
  DatasetSpec spec;
  spec.shape = {4, 4096};
  spec.chunk = {1, 4096};
  spec.codec = Codec::kBloscLz4;
  spec.dtype = uint8_();
  // Random bytes do not compress: the Blosc filter fails (its output may not exceed the input),
  // HDF5 skips the optional filter and sets its mask bit.
  Bytes data = codec_test::bytes_random(4 * 4096, 3);
  // Make one row compressible so the file mixes filtered and raw chunks.
  std::fill(data.begin() + 4096, data.begin() + 8192, uint8_t(9));
  write_dataset(path, spec, data);
  EXPECT_NE(stored_chunk(path, spec.name, {0, 0}).mask, 0u);
  EXPECT_EQ(stored_chunk(path, spec.name, {1, 0}).mask, 0u);
  // And one written by hand with every filter skipped.
  Bytes row(4096);
  for (size_t i = 0; i < row.size(); ++i) row[i] = uint8_t(i * 7);
  write_raw_chunk(path, spec.name, {3, 0}, 0b1, row);
  std::copy(row.begin(), row.end(), data.begin() + 3 * 4096);
  ASSERT_EQ(h5dread_all(path, spec.name, H5T_NATIVE_UINT8, 1), data);

  auto file = File::open(path, quiet_options());
  auto dset = file->dataset("/data");
  ASSERT_TRUE(dset.ok());
  for (const char* s : {":", "0", "3", "1:4,100:200", "[0,3],5:9"}) expect_fast_read(*dset, data, 1, s);
}

// Slow (78 s in a Release run on a loaded 2-core machine, far more under a sanitizer):
// runs once, in the Release pass.
TEST(Layout, SlowTwentyThousandChunksAskOnlyForTheChunksARead) {
  hubfs::testing::TempDir dir;
  for (bool latest : {false, true}) {  // v1 B-tree index, and the fixed-array index
    SCOPED_TRACE(latest ? "libver latest" : "libver earliest");
    const std::string path = (dir / (latest ? "many_latest.h5" : "many.h5")).string();
    DatasetSpec spec;
    spec.shape = {20000, 4};
    spec.chunk = {1, 4};  // tiny chunks: 20,000 of them
    spec.dtype = int16_t_();
    spec.codec = Codec::kDeflateShuffle;
    const Bytes data = make_data(spec);
    write_dataset(path, spec, data, FileSpec{.libver_latest = latest});
    auto file = File::open(path, quiet_options());
    auto dset = file->dataset("/data");
    ASSERT_TRUE(dset.ok());
    // A read near the end of the index touches 10 chunks and asks HDF5 about those 10 only.
    expect_fast_read(*dset, data, 2, "19990:20000");
    EXPECT_EQ(dset->manifest_queries(), 10u);
    // Asked again, the memo answers.
    expect_fast_read(*dset, data, 2, "19992:19995,1:3");
    EXPECT_EQ(dset->manifest_queries(), 10u);
    expect_fast_read(*dset, data, 2, "[5,19000,19999]");
    EXPECT_EQ(dset->manifest_queries(), 12u);
    // The whole dataset, whichever route the reader picks, equals H5Dread.
    auto all = dset->read(":");
    ASSERT_TRUE(all.ok()) << all.status().message();
    EXPECT_EQ(bytes_of(*all), data);
    // Even with no size threshold, the automatic route does not walk into the quadratic trap:
    // locating 20,000 chunks one by one through libhdf5 would cost seconds, but the chunk index
    // is read from the file in one pass, so the whole read takes the fast path, asking libhdf5
    // only for each chunk's cross-check (a lookup, not a walk).
    Options eager = quiet_options();
    eager.min_fast_path_bytes = 0;
    auto file2 = File::open(path, eager);
    auto dset2 = file2->dataset("/data");
    auto whole = dset2->read(":");
    ASSERT_TRUE(whole.ok()) << whole.status().message();
    EXPECT_EQ(bytes_of(*whole), data);
    EXPECT_TRUE(whole->stats.fast_path) << whole->stats.fallback_cause;
    EXPECT_EQ(dset2->manifest_queries(), 20000u);
    // A read of a few chunks near the start of the index is cheap to locate: fast path.
    auto few = dset2->read("0:8");
    ASSERT_TRUE(few.ok());
    EXPECT_TRUE(few->stats.fast_path) << few->stats.fallback_cause;
  }
}

TEST(Layout, LargeReadsAboveTheThresholdTakeTheFastPathByDefault) {
  hubfs::testing::TempDir dir;
  const std::string path = (dir / "big.h5").string();
  DatasetSpec spec;
  spec.shape = {3, 1024, 1024};  // 12 MiB of float32: above the threshold, into huge pages
  spec.chunk = {1, 1024, 1024};
  spec.codec = Codec::kBloscLz4;
  const Bytes data = make_data(spec);
  write_dataset(path, spec, data);
  auto file = File::open(path, quiet_options());
  auto dset = file->dataset("/data");
  ASSERT_TRUE(dset.ok());
  auto got = dset->read(":");
  ASSERT_TRUE(got.ok()) << got.status().message();
  EXPECT_TRUE(got->stats.fast_path) << got->stats.fallback_cause;
  EXPECT_EQ(bytes_of(*got), data);
  auto small = dset->read("0,0:4");
  ASSERT_TRUE(small.ok());
  EXPECT_FALSE(small->stats.fast_path);
  EXPECT_THAT(small->stats.fallback_cause, ::testing::HasSubstr("small read"));
}

// Layouts the fast path leaves to H5Dread: the result is still H5Dread's, and a note says why.
TEST(Layout, UnsupportedCodecsAndTypeConversionsFallBackWithANote) {
  hubfs::testing::TempDir dir;
  const std::string path = (dir / "fb.h5").string();
  const hsize_t shape[2] = {40, 300}, chunk[2] = {4, 300};
  std::vector<int32_t> values(40 * 300);
  for (size_t i = 0; i < values.size(); ++i) values[i] = int32_t(i * 37 % 1001) - 500;
  hid_t f = open_for_write(path);
  hid_t space = H5Screate_simple(2, shape, nullptr);
  struct Case { const char* name; unsigned filter; hid_t type; const char* cause; };
  // Big-endian data takes the fast path now (swapped as it is decoded, dtype_test.cc); an
  // integer of unusual precision still needs HDF5's conversion.
  hid_t int24 = H5Tcopy(H5T_STD_I32LE);
  H5Tset_precision(int24, 24);
  const Case cases[] = {{"/bzip2", 307, H5T_NATIVE_INT32, "bzip2"},
                        {"/int24", 0, int24, "precision"}};
  std::vector<std::string> written;
  for (const Case& c : cases) {
    hid_t dcpl = H5Pcreate(H5P_DATASET_CREATE);
    H5Pset_chunk(dcpl, 2, chunk);
    if (c.filter && (H5Zfilter_avail(c.filter) <= 0 ||
                     H5Pset_filter(dcpl, c.filter, H5Z_FLAG_OPTIONAL, 0, nullptr) < 0)) {
      H5Pclose(dcpl);
      continue;  // no plugin for it here
    }
    hid_t d = H5Dcreate2(f, c.name, c.type, space, H5P_DEFAULT, dcpl, H5P_DEFAULT);
    if (d >= 0 && H5Dwrite(d, H5T_NATIVE_INT32, H5S_ALL, H5S_ALL, H5P_DEFAULT, values.data()) >= 0) {
      written.push_back(c.name);
    }
    if (d >= 0) H5Dclose(d);
    H5Pclose(dcpl);
  }
  H5Sclose(space);
  H5Tclose(int24);
  H5Fclose(f);
  ASSERT_FALSE(written.empty());

  std::vector<std::string> notes;
  Options options = quiet_options();
  options.log = [&](const std::string& line) { notes.push_back(line); };
  auto file = File::open(path, options);
  ASSERT_TRUE(file.ok());
  for (const Case& c : cases) {
    if (std::find(written.begin(), written.end(), c.name) == written.end()) continue;
    SCOPED_TRACE(c.name);
    auto dset = file->dataset(c.name);
    ASSERT_TRUE(dset.ok());
    EXPECT_EQ(dset->info().type_text, "int32");
    EXPECT_THAT(dset->info().fast_path_blocker, ::testing::HasSubstr(c.cause));
    auto got = dset->read("2:30,7:250", via(Route::kFastPath));
    ASSERT_TRUE(got.ok()) << got.status().message();
    EXPECT_FALSE(got->stats.fast_path);
    for (size_t r = 0; r < 28; ++r) {
      for (size_t k = 0; k < 243; ++k) {
        ASSERT_EQ(got->as<int32_t>()[r * 243 + k], values[(r + 2) * 300 + k + 7]);
      }
    }
    ASSERT_FALSE(notes.empty());
    EXPECT_THAT(notes.back(), ::testing::HasSubstr(c.name));
    EXPECT_THAT(notes.back(), ::testing::HasSubstr(c.cause));
    EXPECT_THAT(notes.back(), ::testing::HasSubstr("re-save"));
  }
}

}  // namespace
}  // namespace h5chunk::testing
