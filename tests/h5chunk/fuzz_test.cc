// Seeded random selections, >= 200 per layout, each read through the fast path (forced), the
// automatic route and H5Dread, and compared with numpy indexing of the whole array.
#include <gtest/gtest.h>

#include <random>

#include "h5_fixture.h"
#include "support/temp_dir.h"

namespace h5chunk::testing {
namespace {

// A random numpy selection for `shape`: mostly fast-path material, sometimes not.
Selection random_selection(std::mt19937& rng, const std::vector<uint64_t>& shape) {
  auto pick = [&](int n) { return int(rng() % unsigned(n)); };
  auto bound = [&](int64_t size) -> std::optional<int64_t> {
    switch (pick(4)) {
      case 0: return std::nullopt;
      case 1: return -int64_t(rng() % uint64_t(size + 2));
      default: return int64_t(rng() % uint64_t(size + 2));
    }
  };
  Selection sel;
  const size_t rank = shape.size();
  size_t axes = size_t(pick(int(rank) + 1));
  bool list_used = false, ellipsis_used = false;
  for (size_t d = 0; d < axes; ++d) {
    const int64_t size = int64_t(shape[d]);
    if (!ellipsis_used && pick(8) == 0) {
      sel.items.push_back(Index::Ellipsis());
      ellipsis_used = true;
      continue;
    }
    switch (pick(6)) {
      case 0:
        sel.items.push_back(Index::Int(pick(2) ? int64_t(rng() % uint64_t(size)) : -1 - int64_t(rng() % uint64_t(size))));
        break;
      case 1:
      case 2:
        sel.items.push_back(Index::Slice(bound(size), bound(size), pick(10) == 0 ? std::optional<int64_t>(2 + pick(2)) : std::nullopt));
        break;
      case 3: {
        if (list_used) {
          sel.items.push_back(Index::Slice());
          break;
        }
        list_used = true;
        std::vector<int64_t> v;
        for (int64_t i = 0; i < size; ++i) {
          if (pick(3) == 0) v.push_back(pick(4) == 0 ? i - size : i);  // sometimes negative
        }
        if (pick(10) == 0 && v.size() > 1) std::swap(v.front(), v.back());  // unsorted
        sel.items.push_back(Index::List(v));
        break;
      }
      default:
        sel.items.push_back(Index::Slice());
    }
  }
  return sel;
}

class Fuzz : public ::testing::TestWithParam<int> {};

TEST_P(Fuzz, RandomSelectionsMatchH5Dread) {
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
  int fast_reads = 0;
  for (int i = 0; i < 250; ++i) {
    Selection sel = random_selection(rng, shape);
    SCOPED_TRACE(to_string(sel));
    auto norm = normalize(sel, shape);
    auto fast = dset->read(sel, via(Route::kFastPath));
    auto ref = dset->read(sel, via(Route::kH5Dread));
    if (!norm.ok()) {  // both routes must refuse it the same way
      ASSERT_FALSE(fast.ok());
      ASSERT_FALSE(ref.ok());
      EXPECT_EQ(fast.status().message(), ref.status().message());
      continue;
    }
    const Bytes want = index_reference(data, shape, 2, *norm);
    ASSERT_TRUE(fast.ok()) << fast.status().message();
    ASSERT_TRUE(ref.ok()) << ref.status().message();
    EXPECT_EQ(bytes_of(*fast), want);
    EXPECT_EQ(bytes_of(*ref), want);
    EXPECT_EQ(fast->shape(), norm->out_shape);
    fast_reads += fast->stats.fast_path;
  }
  if (!spec.chunk.empty()) {
    EXPECT_GT(fast_reads, 150);  // the fuzz mostly exercises the fast path
  }
}

INSTANTIATE_TEST_SUITE_P(Layouts, Fuzz, ::testing::Range(0, 4));

}  // namespace
}  // namespace h5chunk::testing
