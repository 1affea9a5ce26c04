// Parsing numpy selection text and normalising it against a shape, with numpy's and h5py's rules.
#include <gtest/gtest.h>

#include "h5chunk/selection.h"

namespace h5chunk {
namespace {

NormalizedSelection norm(const std::string& text, std::vector<uint64_t> shape) {
  auto sel = parse_selection(text);
  EXPECT_TRUE(sel.ok()) << text << ": " << sel.status().message();
  auto n = normalize(*sel, shape);
  EXPECT_TRUE(n.ok()) << text << ": " << n.status().message();
  return n.ok() ? *n : NormalizedSelection{};
}

Status error(const std::string& text, std::vector<uint64_t> shape) {
  auto sel = parse_selection(text);
  if (!sel.ok()) return sel.status();
  auto n = normalize(*sel, shape);
  return n.ok() ? Status::Ok() : n.status();
}

TEST(Selection, ShapesFollowNumpy) {
  const std::vector<uint64_t> s = {8, 5, 30};
  struct Case { const char* text; std::vector<uint64_t> shape; };
  for (const Case& c : std::vector<Case>{
           {"", {8, 5, 30}}, {":", {8, 5, 30}}, {"...", {8, 5, 30}}, {"()", {8, 5, 30}},
           {"0", {5, 30}}, {"-1", {5, 30}}, {"3", {5, 30}}, {"0:4", {4, 5, 30}}, {"2:5", {3, 5, 30}},
           {"0,0", {30}}, {"0:3,1:3", {3, 2, 30}}, {"[0,2,5]", {3, 5, 30}}, {"0,...", {5, 30}},
           {":,0", {8, 30}}, {"2,3,10:20", {10}}, {"0:3,:,5:9", {3, 5, 4}}, {"::2", {4, 5, 30}},
           {"...,5:9", {8, 5, 4}}, {"1,...,2", {5}}, {"-3:", {3, 5, 30}}, {":-6", {2, 5, 30}},
           {"6:2", {0, 5, 30}}, {"100:", {0, 5, 30}}, {"-100:2", {2, 5, 30}}, {"1:8:3", {3, 5, 30}},
           {"[]", {0, 5, 30}}, {"0, 1, 2", {}}, {"0,", {5, 30}}, {":,[True,False,True,False,True]", {8, 3, 30}},
           {"[-1,-2]", {2, 5, 30}}, {" 1 : 3 , : ", {2, 5, 30}}}) {
    SCOPED_TRACE(c.text);
    EXPECT_EQ(norm(c.text, s).out_shape, c.shape);
  }
}

TEST(Selection, NegativeIndicesCountFromTheEnd) {
  auto n = norm("-1,-2,-30", {8, 5, 30});
  EXPECT_EQ(n.axes[0].start, 7);
  EXPECT_EQ(n.axes[1].start, 3);
  EXPECT_EQ(n.axes[2].start, 0);
  EXPECT_EQ(n.num_elements, 1u);
  EXPECT_EQ(norm("[-1,0]", {8}).axes[0].indices, (std::vector<int64_t>{7, 0}));
}

TEST(Selection, FastPathBlockers) {
  const std::vector<uint64_t> s = {8, 6};
  for (const char* fast : {":", "0", "-1", "1:3", "...,2", "[0,2,5]", "[1],2:4", "[]"}) {
    EXPECT_EQ(norm(fast, s).fast_path_blocker, "") << fast;
  }
  EXPECT_EQ(norm("::2", s).fast_path_blocker, "a strided slice");
  EXPECT_EQ(norm("[2,1]", s).fast_path_blocker, "an unsorted or repeated index list");
  EXPECT_EQ(norm("[1,1]", s).fast_path_blocker, "an unsorted or repeated index list");
  EXPECT_EQ(norm(":,[True,False,True,False,True,True]", s).fast_path_blocker, "a boolean mask");
}

TEST(Selection, ErrorsMatchH5py) {
  const std::vector<uint64_t> s = {8, 6};
  EXPECT_EQ(error("[0,1],[0,1]", s).message(),
            "Only one indexing vector or array is currently allowed for fancy indexing");
  EXPECT_EQ(error("8", s).message(), "Index (8) out of range for (0-7) on axis 0");
  EXPECT_EQ(error("0,-7", s).message(), "Index (-7) out of range for (0-5) on axis 1");
  EXPECT_EQ(error("::-1", s).message(), "Step must be >= 1 (got -1)");
  EXPECT_EQ(error("::0", s).code(), hubfs::Code::kInvalidArgument);
  EXPECT_EQ(error("0,0,0", s).code(), hubfs::Code::kInvalidArgument);
  EXPECT_EQ(error("...,...", s).code(), hubfs::Code::kInvalidArgument);
  EXPECT_EQ(error("[True]", s).code(), hubfs::Code::kInvalidArgument);
  for (const char* bad : {"a", "1.5", "[1,", "0:1:2:3", "[[1]]", "1,,2", "[1,True]", "]"}) {
    EXPECT_EQ(error(bad, s).code(), hubfs::Code::kInvalidArgument) << bad;
  }
}

TEST(Selection, PrintsBackToParseableText) {
  for (const char* text : {"0", "-1", ":", "1:3", "::2", "1:9:3", "...,5:9", "[0,2,5]", "[True,False]", "0,...,2"}) {
    auto sel = parse_selection(text);
    ASSERT_TRUE(sel.ok());
    auto again = parse_selection(to_string(*sel));
    ASSERT_TRUE(again.ok()) << to_string(*sel);
    EXPECT_EQ(to_string(*again), to_string(*sel));
  }
  EXPECT_EQ(to_string(Selection{}), ":");
}

}  // namespace
}  // namespace h5chunk
