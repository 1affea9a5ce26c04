// Seeded random selections, 250 per layout, of every kind (ints, slices with steps of either
// sign, empty slices, ellipses anywhere, index lists unsorted, repeated and on several axes,
// boolean masks, now and then an index out of range), each read through the fast path (forced),
// the automatic route and H5Dread, and compared with numpy's answer worked out independently
// from the whole array (orthogonal_reference, not normalize()).
#include <gtest/gtest.h>

#include <random>

#include "h5_fixture.h"
#include "support/temp_dir.h"

namespace h5chunk::testing {
namespace HUBFS_UNITY_ID {

Selection random_selection(std::mt19937& rng, const std::vector<uint64_t>& shape) {
  auto pick = [&](int n) { return int(rng() % unsigned(n)); };
  // Slice bounds from well outside the axis to well past it, or absent.
  auto bound = [&](int64_t size) -> std::optional<int64_t> {
    if (pick(4) == 0) return std::nullopt;
    return int64_t(rng() % uint64_t(2 * size + 5)) - size - 2;
  };
  auto step = [&]() -> std::optional<int64_t> {
    switch (pick(8)) {
      case 0: return std::nullopt;
      case 1: return -1;
      case 2: return -int64_t(2 + pick(4));
      case 3: return int64_t(2 + pick(4));
      default: return 1;
    }
  };
  Selection sel;
  const size_t rank = shape.size();
  const size_t axes = size_t(pick(int(rank) + 1));
  bool ellipsis_used = false;
  for (size_t d = 0; d < axes; ++d) {
    const int64_t size = int64_t(shape[d]);
    if (!ellipsis_used && pick(6) == 0) {
      sel.items.push_back(Index::Ellipsis());
      ellipsis_used = true;
      continue;
    }
    switch (pick(8)) {
      case 0: {
        int64_t v = pick(2) ? int64_t(rng() % uint64_t(size)) : -1 - int64_t(rng() % uint64_t(size));
        if (pick(60) == 0) v = pick(2) ? size : -size - 1;  // out of range: an error either way
        sel.items.push_back(Index::Int(v));
        break;
      }
      case 1:
      case 2: {
        // Drawn one by one, in the order gcc evaluates the three arguments (last first): C++
        // leaves that order open, clang takes them first to last, and the counts the test
        // expects below hold for this stream.
        const std::optional<int64_t> by = step();
        const std::optional<int64_t> stop = bound(size);
        const std::optional<int64_t> start = bound(size);
        sel.items.push_back(Index::Slice(start, stop, by));
        break;
      }
      case 3: {  // increasing, as h5py accepts it
        std::vector<int64_t> v;
        for (int64_t i = 0; i < size; ++i) {
          if (pick(3) == 0) v.push_back(pick(4) == 0 ? i - size : i);  // sometimes negative
        }
        sel.items.push_back(Index::List(v));
        break;
      }
      case 4: {  // any order, with repeats
        std::vector<int64_t> v(size_t(pick(6)));
        for (int64_t& x : v) x = int64_t(rng() % uint64_t(2 * size)) - size;
        if (!v.empty() && pick(60) == 0) v[0] = size;  // out of range
        sel.items.push_back(Index::List(v));
        break;
      }
      case 5: {
        std::vector<bool> m(static_cast<size_t>(size));
        for (size_t i = 0; i < m.size(); ++i) m[i] = pick(2);
        sel.items.push_back(Index::BoolMask(m));
        break;
      }
      default:
        sel.items.push_back(Index::Slice());
    }
  }
  return sel;
}

class Fuzz : public ::testing::TestWithParam<int> {};

TEST_P(Fuzz, RandomSelectionsMatchNumpy) {
  const std::vector<std::vector<hsize_t>> chunks = {{1, 5, 33, 6}, {1, 1, 33, 6}, {}, {3, 2, 8, 4}};
  const char* names[] = {"chunk per frame", "chunk per transmit", "contiguous", "partial edges"};
  const int layout = GetParam();
  SCOPED_TRACE(names[layout]);
  hubfs::testing::TempDir dir;
  const std::string path = (dir / "fuzz.h5").string();
  DatasetSpec spec;
  spec.shape = {7, 5, 33, 6};
  spec.chunk = chunks[layout];
  spec.codec = spec.chunk.empty() ? Codec::kNone : Codec::kBloscLz4;
  spec.dtype = int16_t_();
  const Bytes data = make_data(spec, 11);
  write_dataset(path, spec, data);
  ASSERT_EQ(h5dread_all(path, spec.name, spec.dtype.type, 2), data);

  // 1 to 4 workers across the layouts: 1 is the caller alone, no helper threads.
  auto file = File::open(path, quiet_options(unsigned(layout) + 1));
  auto dset = file->dataset("/data");
  ASSERT_TRUE(dset.ok());
  const std::vector<uint64_t> shape(spec.shape.begin(), spec.shape.end());
  std::mt19937 rng(1234 + layout);
  int valid = 0, fast_reads = 0, refused = 0;
  for (int i = 0; i < 250; ++i) {
    Selection sel = random_selection(rng, shape);
    SCOPED_TRACE(to_string(sel));
    std::vector<uint64_t> want_shape;
    const auto want = orthogonal_reference(data, shape, 2, sel, &want_shape);
    auto fast = dset->read(sel, via(Route::kFastPath));
    auto ref = dset->read(sel, via(Route::kH5Dread));
    auto only = dset->read(sel, via(Route::kFastOnly));
    if (!want) {  // every route must refuse it, with the same IndexError-like message
      ++refused;
      ASSERT_FALSE(fast.ok());
      ASSERT_FALSE(ref.ok());
      ASSERT_FALSE(only.ok());
      EXPECT_EQ(fast.status().code(), hubfs::Code::kInvalidArgument);
      EXPECT_EQ(fast.status().message(), ref.status().message());
      continue;
    }
    ++valid;
    ASSERT_TRUE(fast.ok()) << fast.status().message();
    ASSERT_TRUE(ref.ok()) << ref.status().message();
    EXPECT_EQ(fast->shape(), want_shape);
    EXPECT_EQ(ref->shape(), want_shape);
    EXPECT_EQ(bytes_of(*fast), *want);
    EXPECT_EQ(bytes_of(*ref), *want);
    if (spec.chunk.empty()) {
      // Contiguous: read (nothing to read, or a fast path for the layout), or refused by name.
      if (only.ok()) {
        EXPECT_EQ(bytes_of(*only), *want);
      } else {
        EXPECT_EQ(only.status().code(), hubfs::Code::kUnsupported) << only.status().message();
      }
      continue;
    }
    // Chunked: every valid selection takes the fast path when forced.
    ASSERT_TRUE(only.ok()) << only.status().message();
    EXPECT_EQ(bytes_of(*only), *want);
    fast_reads += only->stats.fast_path;
    EXPECT_EQ(only->stats.fast_path, !want->empty()) << only->stats.fallback_cause;
  }
  EXPECT_GT(valid, 200);   // the fuzz is mostly reads...
  EXPECT_GT(refused, 3);   // ...with some errors
  if (!spec.chunk.empty()) {
    EXPECT_GT(fast_reads, 150);
  }
}

INSTANTIATE_TEST_SUITE_P(Layouts, Fuzz, ::testing::Range(0, 4));

}  // namespace
}  // namespace h5chunk::testing
