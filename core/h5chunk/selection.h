// Numpy-style selections: parsed from text ("0:4", "...,5:9", "[0,2,5]") or built in code, then
// normalised against a dataset's shape into per-axis index sets. Normalisation is where numpy's
// and h5py's rules live (negative indices count from the end, slices clamp), so the fast path
// and the H5Dread fallback share one answer for shape and errors.
//
// Indexing is orthogonal, as h5py's: each index applies to its own axis and an integer drops
// its axis. h5py's restrictions are lifted with the same per-axis meaning: negative steps,
// unsorted and repeated index lists, and lists on several axes ("[3,1],[2,0,2]" is numpy's
// a[[3,1]][:, [2,0,2]], i.e. a[np.ix_([3,1],[2,0,2])], not numpy's paired fancy indexing).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "common/status.h"

namespace h5chunk {

using hubfs::Result;
using hubfs::Status;

// One entry of a selection tuple, as the caller wrote it.
struct Index {
  enum class Kind { kInt, kSlice, kEllipsis, kList, kBoolMask };
  Kind kind = Kind::kSlice;
  int64_t value = 0;                               // kInt
  std::optional<int64_t> start, stop, step;        // kSlice (absent = numpy default)
  std::vector<int64_t> list;                       // kList
  std::vector<bool> mask;                          // kBoolMask

  static Index Int(int64_t v);
  static Index Slice(std::optional<int64_t> start = {}, std::optional<int64_t> stop = {},
                     std::optional<int64_t> step = {});
  static Index Ellipsis();
  static Index List(std::vector<int64_t> values);
  static Index BoolMask(std::vector<bool> values);
};

// A selection tuple; empty means everything.
struct Selection {
  std::vector<Index> items;
};

// Parses numpy index syntax: comma-separated ints, slices (a:b, a:b:c), '...', and bracketed
// lists of ints or of True/False. "" and ":" select everything. kInvalidArgument on bad text.
Result<Selection> parse_selection(std::string_view text);

// Numpy text for a selection (round-trips through parse_selection), for messages.
std::string to_string(const Selection& selection);

// What one dataset axis contributes.
struct AxisSelection {
  enum class Kind { kInt, kRange, kList };
  Kind kind = Kind::kRange;
  int64_t start = 0;              // kInt: the index; kRange: first index (the largest if step < 0)
  int64_t count = 0;              // number of indices selected on this axis
  int64_t step = 1;               // kRange only; never 0, negative for a reversed slice
  std::vector<int64_t> indices;   // kList, non-negative, in the caller's order (repeats allowed)
  bool from_mask = false;         // kList that came from a boolean mask

  // Whether the axis survives into the output (an integer index drops it, as in numpy).
  bool kept() const { return kind != Kind::kInt; }
  // The k-th selected index (0 <= k < count), in output order.
  int64_t index(int64_t k) const { return kind == Kind::kList ? indices[k] : start + k * step; }
  // Whether the indices strictly increase (a hyperslab can express the axis in output order).
  bool increasing() const;
};

struct NormalizedSelection {
  std::vector<AxisSelection> axes;   // one per dataset axis
  std::vector<uint64_t> out_shape;   // kept axes only
  uint64_t num_elements = 0;
};

// Resolves `selection` against `shape`. Errors (kInvalidArgument) follow h5py's: index out of
// range ("Index (8) out of range for (0-7) on axis 0", numpy's IndexError), too many indices,
// more than one ellipsis, a zero step, a boolean mask of the wrong length; and, as numpy's
// "array is too big", an axis longer than 2^63 - 1 or a selection of more than 2^64 - 1
// elements (only a corrupt dataspace declares such shapes). Negative steps, unsorted or
// repeated lists and lists on several axes are accepted (see the top of this file).
Result<NormalizedSelection> normalize(const Selection& selection,
                                      const std::vector<uint64_t>& shape);

}  // namespace h5chunk
