// h5chunk's result equals H5Dread's over codecs x layouts x dtypes x selections.
#include <gtest/gtest.h>

#include <tuple>

#include "h5_fixture.h"
#include "support/temp_dir.h"

namespace h5chunk::testing {
namespace {

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

// The selections, plus fallbacks. Each is read through the fast path (forced, whatever
// its size), through Route::kAuto and through H5Dread, and compared with numpy indexing of
// the whole array.
const char* kSelections[] = {
    "0", "3", "-1", ":", "0:4", "2:5", "1:2", "0,0", "0:3,1:3", "[0,2,5]", "...", "0,...",
    ":,0", "2,3,10:20", "0:3,:,5:9", "::2", "[5,0,2]", "[1,1,3]", "1:3,[True,False,True,False,True]",
    "...,5:9", "-1,-1,-1,-1", "6:2", ":,:,[3,4,5,20,21,39]", "1:6,1:4,3:37,1:5"};

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
    auto norm = normalize(*sel, shape);
    ASSERT_TRUE(norm.ok()) << norm.status().message();
    const Bytes want = index_reference(full, shape, spec.dtype.size, *norm);

    auto fast = dset->read(*sel, via(Route::kFastPath));
    if (!h5dread_ok && !norm->fast_path_blocker.empty()) {
      EXPECT_FALSE(fast.ok());  // these go to H5Dread, which has no plugin for this codec
      continue;
    }
    ASSERT_TRUE(fast.ok()) << fast.status().message();
    EXPECT_EQ(fast->shape(), norm->out_shape);
    EXPECT_EQ(bytes_of(*fast), want);
    // Contiguous datasets take the fast path too (parallel preads of the selection's runs).
    const bool expect_fast = norm->fast_path_blocker.empty() && norm->num_elements > 0;
    EXPECT_EQ(fast->stats.fast_path, expect_fast) << fast->stats.fallback_cause;

    auto automatic = dset->read(*sel);
    ASSERT_TRUE(automatic.ok()) << automatic.status().message();
    EXPECT_EQ(bytes_of(*automatic), want);

    if (h5dread_ok) {
      auto ref = dset->read(*sel, via(Route::kH5Dread));
      ASSERT_TRUE(ref.ok()) << ref.status().message();
      EXPECT_EQ(bytes_of(*ref), want);
    }
  }

  // Two index lists: the same error whichever route, as h5py gives it.
  auto fast = dset->read("[0,1],[0,1]", via(Route::kFastPath));
  auto ref = dset->read("[0,1],[0,1]", via(Route::kH5Dread));
  ASSERT_FALSE(fast.ok());
  ASSERT_FALSE(ref.ok());
  EXPECT_EQ(fast.status().code(), hubfs::Code::kInvalidArgument);
  EXPECT_EQ(fast.status().message(), ref.status().message());
}

std::string name_of(const ::testing::TestParamInfo<Param>& info) {
  return std::string(codec_name(std::get<0>(info.param))) + "_" + layout_name(std::get<1>(info.param)) +
         "_" + dtype_at(std::get<2>(info.param)).name;
}

INSTANTIATE_TEST_SUITE_P(
    Chunked, Equality,
    ::testing::Combine(::testing::Values(Codec::kNone, Codec::kDeflateShuffle, Codec::kBloscLz4,
                                         Codec::kBloscZstdBit, Codec::kLz4, Codec::kFletcherDeflate,
                                         Codec::kZstdDirect, Codec::kBitshuffleDirect),
                       ::testing::Values(Layout::kChunkPerFrame, Layout::kChunkPerTransmit,
                                         Layout::kPartialEdges),
                       ::testing::Range(0, 4)),
    name_of);

INSTANTIATE_TEST_SUITE_P(Contiguous, Equality,
                         ::testing::Combine(::testing::Values(Codec::kNone),
                                            ::testing::Values(Layout::kContiguous),
                                            ::testing::Range(0, 4)),
                         name_of);

}  // namespace
}  // namespace h5chunk::testing
