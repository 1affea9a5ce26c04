// Parsing numpy selection text and normalising it against a shape, with numpy's and h5py's rules.
#include <gtest/gtest.h>

#include "h5chunk/selection.h"

namespace h5chunk {
namespace HUBFS_UNITY_ID {

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
           {"[-1,-2]", {2, 5, 30}}, {" 1 : 3 , : ", {2, 5, 30}}, {"::-1", {8, 5, 30}},
           {"::-3,[4,0,4],...", {3, 3, 30}}, {"...,[1,1]", {8, 5, 2}}, {"[],[0]", {0, 1, 30}},
           {"5:2,::-1", {0, 5, 30}}, {"[3,1],[2,0,2],[29]", {2, 3, 1}}, {"...,0:0", {8, 5, 0}}}) {
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

// The indices each axis selects, in output order.
std::vector<std::vector<int64_t>> indices(const NormalizedSelection& n) {
  std::vector<std::vector<int64_t>> out;
  for (const AxisSelection& ax : n.axes) {
    std::vector<int64_t> v;
    for (int64_t k = 0; k < ax.count; ++k) v.push_back(ax.index(k));
    out.push_back(v);
  }
  return out;
}

using Axes = std::vector<std::vector<int64_t>>;

TEST(Selection, StepsOfEitherSignFollowPythonSlices) {
  // Expected values are Python's list(range(n))[slice] for each case.
  struct Case { const char* text; std::vector<int64_t> want; };
  for (const Case& c : std::vector<Case>{
           {"::3", {0, 3, 6}}, {"1:8:2", {1, 3, 5, 7}}, {"::-1", {7, 6, 5, 4, 3, 2, 1, 0}},
           {"::-3", {7, 4, 1}}, {"-2::-2", {6, 4, 2, 0}}, {"5:1:-2", {5, 3}}, {"1:5:-1", {}},
           {"100:-100:-3", {7, 4, 1}}, {"-100::-1", {}}, {":-100:-1", {7, 6, 5, 4, 3, 2, 1, 0}}, {"3:3:-1", {}},
           {"::9223372036854775807", {0}}, {"::-9223372036854775808", {7}},
           {"6:0:-9223372036854775808", {6}}, {"::-8", {7}}, {"::-7", {7, 0}}}) {
    SCOPED_TRACE(c.text);
    const auto n = norm(c.text, {8});
    EXPECT_EQ(indices(n), Axes{c.want});
    EXPECT_EQ(n.out_shape, std::vector<uint64_t>{c.want.size()});
  }
}

TEST(Selection, IndexListsKeepTheirOrderRepeatsAndAxes) {
  // Orthogonal: each list selects along its own axis (numpy's a[np.ix_(...)]).
  auto n = norm("[3,1],[2,0,2]", {5, 4});
  EXPECT_EQ(indices(n), (Axes{{3, 1}, {2, 0, 2}}));
  EXPECT_EQ(n.out_shape, (std::vector<uint64_t>{2, 3}));
  EXPECT_EQ(n.num_elements, 6u);
  n = norm("[1,1],...,[-1,0]", {5, 4, 6});
  EXPECT_EQ(indices(n), (Axes{{1, 1}, {0, 1, 2, 3}, {5, 0}}));
  n = norm("[True,False,True],0,[2,2]", {3, 4, 5});
  EXPECT_EQ(indices(n), (Axes{{0, 2}, {0}, {2, 2}}));
  EXPECT_EQ(n.out_shape, (std::vector<uint64_t>{2, 2}));
  EXPECT_TRUE(norm("[0,2,5]", {8}).axes[0].increasing());
  EXPECT_FALSE(norm("[2,1]", {8}).axes[0].increasing());
  EXPECT_FALSE(norm("[1,1]", {8}).axes[0].increasing());
  EXPECT_FALSE(norm("::-1", {8}).axes[0].increasing());
  EXPECT_TRUE(norm("::-1", {1}).axes[0].increasing());  // one index is in order either way
}

TEST(Selection, ScalarDatasetsTakeOnlyEmptySelections) {
  for (const char* text : {"", "()", "..."}) {
    auto n = norm(text, {});
    EXPECT_TRUE(n.axes.empty()) << text;
    EXPECT_TRUE(n.out_shape.empty()) << text;
    EXPECT_EQ(n.num_elements, 1u) << text;
  }
  EXPECT_EQ(error("0", {}).code(), hubfs::Code::kInvalidArgument);
  EXPECT_EQ(error(":", {}).code(), hubfs::Code::kInvalidArgument);
}

TEST(Selection, ErrorsMatchH5py) {
  const std::vector<uint64_t> s = {8, 6};
  EXPECT_EQ(error("8", s).message(), "Index (8) out of range for (0-7) on axis 0");
  EXPECT_EQ(error("0,-7", s).message(), "Index (-7) out of range for (0-5) on axis 1");
  EXPECT_EQ(error("[0,1],[5,6]", s).message(), "Index (6) out of range for (0-5) on axis 1");
  EXPECT_EQ(error("[3,-9]", s).message(), "Index (-9) out of range for (0-7) on axis 0");
  EXPECT_EQ(error("::0", s).message(), "slice step cannot be zero");
  EXPECT_EQ(error("0,0,0", s).code(), hubfs::Code::kInvalidArgument);
  EXPECT_EQ(error("...,...", s).code(), hubfs::Code::kInvalidArgument);
  EXPECT_EQ(error("[True]", s).code(), hubfs::Code::kInvalidArgument);
  for (const char* bad : {"a", "1.5", "[1,", "0:1:2:3", "[[1]]", "1,,2", "[1,True]", "]"}) {
    EXPECT_EQ(error(bad, s).code(), hubfs::Code::kInvalidArgument) << bad;
  }
  // Lifted h5py restrictions: accepted, with their per-axis meaning.
  for (const char* fine : {"[0,1],[0,1]", "::-1", "[2,1]", "[1,1]", "[3,0],::-2"}) {
    EXPECT_TRUE(error(fine, s).ok()) << fine;
  }
}

TEST(Selection, PrintsBackToParseableText) {
  for (const char* text : {"0", "-1", ":", "1:3", "::2", "1:9:3", "...,5:9", "[0,2,5]", "[True,False]", "0,...,2",
                           "::-1", "5:1:-2", "[3,1],[2,0,2]"}) {
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
