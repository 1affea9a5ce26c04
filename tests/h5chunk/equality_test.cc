// h5chunk's result equals H5Dread's over codecs x layouts x dtypes x selections.
#include <gtest/gtest.h>

#include <tuple>
#include <vector>

#include "h5_fixture.h"
#include "support/sanitized.h"
#include "support/temp_dir.h"

namespace h5chunk::testing {
namespace HUBFS_UNITY_ID {

enum class Layout { kChunkPerFrame, kChunkPerTransmit, kContiguous, kPartialEdges };

const char* layout_name(Layout l) {
  switch (l) {
    case Layout::kChunkPerFrame: return "frame";
    case Layout::kChunkPerTransmit: return "transmit";
    case Layout::kContiguous: return "contiguous";
    case Layout::kPartialEdges: return "edges";
  }
  return "?";
}

// A small zea-like (frames, transmits, samples, channels) dataset.
const std::vector<hsize_t> kShape = {7, 5, 40, 6};

std::vector<hsize_t> chunk_for(Layout l) {
  switch (l) {
    case Layout::kChunkPerFrame: return {1, 5, 40, 6};
    case Layout::kChunkPerTransmit: return {1, 1, 40, 6};
    case Layout::kContiguous: return {};
    case Layout::kPartialEdges: return {3, 2, 16, 4};  // every axis has a partial edge chunk
  }
  return {};
}

// The selections, then every kind the fast path now serves: steps of either sign,
// empty slices, ellipses anywhere, unsorted and repeated lists, lists on several axes
// (orthogonal: numpy's a[np.ix_(...)]), masks. Each is read through the fast path (forced,
// whatever its size), through Route::kAuto and through H5Dread, and compared with numpy's
// answer worked out from the whole array.
const char* kSelections[] = {
    "0", "3", "-1", ":", "0:4", "2:5", "1:2", "0,0", "0:3,1:3", "[0,2,5]", "...", "0,...",
    ":,0", "2,3,10:20", "0:3,:,5:9", "::2", "[5,0,2]", "[1,1,3]", "1:3,[True,False,True,False,True]",
    "...,5:9", "-1,-1,-1,-1", "6:2", ":,:,[3,4,5,20,21,39]", "1:6,1:4,3:37,1:5",
    // steps
    "::3", "1:6:2", ":,::2,1:40:7", "...,::5", "::-1", "::-3,:,::-1", "-2::-2,1,::-5,::-1",
    "5:1:-2,...,3", ":,:,39:0:-13,:", "...,::-1",
    // empty selections
    "6:2,::-1", ":,:,[]", "...,5:5", ":,3:1:1",
    // ellipsis anywhere
    "...,2,1", "1,...,2", "[3,1],...", "...,[5,0]",
    // unsorted, repeated, on several axes
    "[3,1],:,[2,0,2]", "[6,0,6,0],[4,4],[39,0,17,18,19],[5,0]", "[0,1],[0,1]", "[2],[1,1,1],::-1",
    ":,[4,0],:,[True,False,True,True,False,True]", "[-1,-7],...,[-1]", "::-2,[3,1],5:35:3,[0,5,1]",
    ":,:,[16,15,14,13,12,11,10,9,8,7,6,5,4,3,2,1,0]"};

using Param = std::tuple<Codec, Layout, int>;

DType dtype_at(int i) {
  switch (i) {
    case 0: return int16_t_();
    case 1: return float32_();
    case 2: return uint8_();
    default: return float64_();
  }
}

class Equality : public ::testing::TestWithParam<Param> {};

TEST_P(Equality, MatchesH5DreadForEverySelection) {
  auto [codec, layout, dtype_index] = GetParam();
  hubfs::testing::TempDir dir;
  const std::string path = (dir / "f.h5").string();
  DatasetSpec spec;
  spec.shape = kShape;
  spec.chunk = chunk_for(layout);
  spec.codec = layout == Layout::kContiguous ? Codec::kNone : codec;
  spec.dtype = dtype_at(dtype_index);
  const Bytes data = make_data(spec);
  write_dataset(path, spec, data);

  const bool h5dread_ok = h5dread_can_decode(spec.codec);
  const Bytes full = h5dread_ok ? h5dread_all(path, spec.name, spec.dtype.type, spec.dtype.size) : data;
  ASSERT_EQ(full, data);  // the fixture wrote what it meant to

  auto file = File::open(path, quiet_options());
  ASSERT_TRUE(file.ok()) << file.status().message();
  auto dset = file->dataset(spec.name);
  ASSERT_TRUE(dset.ok()) << dset.status().message();
  EXPECT_EQ(dset->info().type_text, spec.dtype.name);
  const std::vector<uint64_t> shape(kShape.begin(), kShape.end());

  for (const char* text : kSelections) {
    SCOPED_TRACE(text);
    auto sel = parse_selection(text);
    ASSERT_TRUE(sel.ok()) << sel.status().message();
    std::vector<uint64_t> want_shape;
    const auto want = orthogonal_reference(full, shape, spec.dtype.size, *sel, &want_shape);
    ASSERT_TRUE(want.has_value());

    auto fast = dset->read(*sel, via(Route::kFastPath));
    ASSERT_TRUE(fast.ok()) << fast.status().message();
    EXPECT_EQ(fast->shape(), want_shape);
    EXPECT_EQ(bytes_of(*fast), *want);
    // Contiguous datasets take the fast path too (parallel preads of the selection's runs).
    const bool expect_fast = !want->empty();
    EXPECT_EQ(fast->stats.fast_path, expect_fast) << fast->stats.fallback_cause;

    auto automatic = dset->read(*sel);
    ASSERT_TRUE(automatic.ok()) << automatic.status().message();
    EXPECT_EQ(bytes_of(*automatic), *want);

    if (h5dread_ok) {
      auto ref = dset->read(*sel, via(Route::kH5Dread));
      ASSERT_TRUE(ref.ok()) << ref.status().message();
      EXPECT_EQ(bytes_of(*ref), *want);
    }
  }

  // Out of range on the second list axis: the same IndexError-like message whichever route.
  auto fast = dset->read("[0,1],[0,5]", via(Route::kFastPath));
  auto ref = dset->read("[0,1],[0,5]", via(Route::kH5Dread));
  ASSERT_FALSE(fast.ok());
  ASSERT_FALSE(ref.ok());
  EXPECT_EQ(fast.status().code(), hubfs::Code::kInvalidArgument);
  EXPECT_EQ(fast.status().message(), ref.status().message());
  EXPECT_NE(fast.status().message().find("Index (5) out of range for (0-4) on axis 1"), std::string::npos)
      << fast.status().message();
}

// Chunks never written read as the fill value, whatever the selection: a dataset written in
// one region only (frames 2-3, samples 8-23), the rest unallocated.
TEST(EqualityUnallocated, SparseChunksReadAsFillForEverySelection) {
  for (Codec codec : {Codec::kNone, Codec::kBloscLz4, Codec::kDeflateShuffle}) {
    SCOPED_TRACE(codec_name(codec));
    hubfs::testing::TempDir dir;
    const std::string path = (dir / "sparse.h5").string();
    DatasetSpec spec;
    spec.shape = kShape;
    spec.chunk = {2, 2, 8, 6};
    spec.codec = codec;
    spec.dtype = int16_t_();
    spec.fill = -3;
    spec.write = false;
    write_dataset(path, spec, {});
    {
      hid_t f = H5Fopen(path.c_str(), H5F_ACC_RDWR, H5P_DEFAULT);
      hid_t d = H5Dopen2(f, spec.name.c_str(), H5P_DEFAULT);
      hid_t fs = H5Dget_space(d);
      const hsize_t start[] = {2, 0, 8, 0}, count[] = {2, 5, 16, 6};
      H5Sselect_hyperslab(fs, H5S_SELECT_SET, start, nullptr, count, nullptr);
      hid_t ms = H5Screate_simple(4, count, nullptr);
      std::vector<int16_t> part(2 * 5 * 16 * 6);
      for (size_t i = 0; i < part.size(); ++i) part[i] = int16_t(i * 7 + 1);
      ASSERT_GE(H5Dwrite(d, H5T_NATIVE_INT16, ms, fs, H5P_DEFAULT, part.data()), 0);
      H5Sclose(ms);
      H5Sclose(fs);
      H5Dclose(d);
      H5Fclose(f);
    }
    const Bytes full = h5dread_all(path, spec.name, spec.dtype.type, spec.dtype.size);
    auto file = File::open(path, quiet_options());
    ASSERT_TRUE(file.ok());
    auto dset = file->dataset(spec.name);
    ASSERT_TRUE(dset.ok());
    const std::vector<uint64_t> shape(kShape.begin(), kShape.end());
    for (const char* text : kSelections) {
      SCOPED_TRACE(text);
      auto sel = parse_selection(text);
      ASSERT_TRUE(sel.ok());
      std::vector<uint64_t> want_shape;
      const auto want = orthogonal_reference(full, shape, spec.dtype.size, *sel, &want_shape);
      ASSERT_TRUE(want.has_value());
      auto fast = dset->read(*sel, via(Route::kFastOnly));
      ASSERT_TRUE(fast.ok()) << fast.status().message();
      EXPECT_EQ(bytes_of(*fast), *want);
      EXPECT_EQ(fast->stats.fast_path, !want->empty());
    }
  }
}

// H5Dread of lists scattered on several axes: 90 x 90 one-element runs would be 8,100
// hyperslabs, past the fallback's bound, so it reads covering ranges and picks from them.
TEST(EqualityFallback, ScatteredListsOnSeveralAxesThroughH5Dread) {
  hubfs::testing::TempDir dir;
  const std::string path = (dir / "flat.h5").string();
  DatasetSpec spec;
  spec.shape = {200, 190, 3};
  spec.dtype = int16_t_();
  const Bytes data = make_data(spec, 5);
  write_dataset(path, spec, data);
  auto file = File::open(path, quiet_options());
  ASSERT_TRUE(file.ok());
  auto dset = file->dataset(spec.name);
  ASSERT_TRUE(dset.ok());
  std::string a = "[", b = "[";
  for (int i = 0; i < 90; ++i) {
    a += (i ? "," : "") + std::to_string((i * 37) % 199);      // scattered, unsorted
    b += (i ? "," : "") + std::to_string(188 - 2 * (i % 45));  // descending, each twice
  }
  const std::vector<uint64_t> shape(spec.shape.begin(), spec.shape.end());
  for (const std::string& text : {a + "]," + b + "]", a + "]," + b + "],::-1", "::-3," + b + "],[2,0]"}) {
    auto sel = parse_selection(text);
    ASSERT_TRUE(sel.ok());
    std::vector<uint64_t> want_shape;
    const auto want = orthogonal_reference(data, shape, 2, *sel, &want_shape);
    ASSERT_TRUE(want.has_value());
    for (Route route : {Route::kH5Dread, Route::kAuto}) {
      auto got = dset->read(*sel, via(route));
      ASSERT_TRUE(got.ok()) << got.status().message();
      EXPECT_EQ(got->shape(), want_shape);
      EXPECT_EQ(bytes_of(*got), *want);
    }
  }
}

// A 0-d dataset: (), ... and "" read its one element on every route; Route::kFastOnly reads it
// or names why it cannot; an index is out of place.
TEST(EqualityScalar, ZeroDimensionalDataset) {
  hubfs::testing::TempDir dir;
  const std::string path = (dir / "scalar.h5").string();
  {
    hid_t f = H5Fcreate(path.c_str(), H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT);
    hid_t space = H5Screate(H5S_SCALAR);
    hid_t d = H5Dcreate2(f, "/s", H5T_NATIVE_DOUBLE, space, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
    const double v = 2.5;
    ASSERT_GE(H5Dwrite(d, H5T_NATIVE_DOUBLE, H5S_ALL, H5S_ALL, H5P_DEFAULT, &v), 0);
    H5Dclose(d);
    H5Sclose(space);
    H5Fclose(f);
  }
  auto file = File::open(path, quiet_options());
  ASSERT_TRUE(file.ok());
  auto dset = file->dataset("/s");
  ASSERT_TRUE(dset.ok());
  for (const char* text : {"", "()", "..."}) {
    for (Route route : {Route::kAuto, Route::kFastPath, Route::kH5Dread}) {
      auto got = dset->read(text, via(route));
      ASSERT_TRUE(got.ok()) << text << ": " << got.status().message();
      EXPECT_TRUE(got->shape().empty());
      ASSERT_EQ(got->nbytes(), 8u);
      EXPECT_EQ(got->as<double>()[0], 2.5);
    }
    // The fast path reads it, or says why it cannot (today: it is not chunked).
    auto only = dset->read(text, via(Route::kFastOnly));
    if (only.ok()) {
      EXPECT_EQ(only->as<double>()[0], 2.5);
    } else {
      EXPECT_EQ(only.status().code(), hubfs::Code::kUnsupported);
      EXPECT_NE(only.status().message().find("the fast path cannot read it: the dataset is stored"),
                std::string::npos)
          << only.status().message();
    }
  }
  EXPECT_EQ(dset->read("0").status().code(), hubfs::Code::kInvalidArgument);
}

std::string name_of(const ::testing::TestParamInfo<Param>& info) {
  return std::string(codec_name(std::get<0>(info.param))) + "_" + layout_name(std::get<1>(info.param)) +
         "_" + dtype_at(std::get<2>(info.param)).name;
}

// Under ThreadSanitizer what is checked is the decode pool's concurrency (chunks decoded on its
// threads into one output), not every codec's and selection's arithmetic again: the Release and
// ASan+UBSan passes run the whole sweep. Every codec, on the layout with the most chunks per read
// and partial edges, in two dtypes: the whole sweep was the TSan pass's longest test (42 s) and
// the last to finish.
#if HUBFS_UNDER_TSAN
constexpr bool kUnderThreadSanitizer = true;
#else
constexpr bool kUnderThreadSanitizer = false;
#endif
std::vector<Layout> swept_layouts() {
  if (kUnderThreadSanitizer) return {Layout::kPartialEdges};
  return {Layout::kChunkPerFrame, Layout::kChunkPerTransmit, Layout::kPartialEdges};
}

INSTANTIATE_TEST_SUITE_P(
    Chunked, Equality,
    ::testing::Combine(::testing::Values(Codec::kNone, Codec::kDeflateShuffle, Codec::kBloscLz4,
                                         Codec::kBloscZstdBit, Codec::kLz4, Codec::kFletcherDeflate,
                                         Codec::kZstdDirect, Codec::kBitshuffleDirect),
                       ::testing::ValuesIn(swept_layouts()),
                       ::testing::Range(0, kUnderThreadSanitizer ? 2 : 4)),
    name_of);

INSTANTIATE_TEST_SUITE_P(Contiguous, Equality,
                         ::testing::Combine(::testing::Values(Codec::kNone),
                                            ::testing::Values(Layout::kContiguous),
                                            ::testing::Range(0, 4)),
                         name_of);

}  // namespace
}  // namespace h5chunk::testing
