#include "h5chunk/selection.h"

#include <algorithm>
#include <cctype>
#include <charconv>
#include <limits>

#include "h5chunk/checked.h"

namespace h5chunk {

using hubfs::InvalidArgument;

Index Index::Int(int64_t v) {
  Index i;
  i.kind = Kind::kInt;
  i.value = v;
  return i;
}

Index Index::Slice(std::optional<int64_t> start, std::optional<int64_t> stop,
                   std::optional<int64_t> step) {
  Index i;
  i.kind = Kind::kSlice;
  i.start = start;
  i.stop = stop;
  i.step = step;
  return i;
}

Index Index::Ellipsis() {
  Index i;
  i.kind = Kind::kEllipsis;
  return i;
}

Index Index::List(std::vector<int64_t> values) {
  Index i;
  i.kind = Kind::kList;
  i.list = std::move(values);
  return i;
}

Index Index::BoolMask(std::vector<bool> values) {
  Index i;
  i.kind = Kind::kBoolMask;
  i.mask = std::move(values);
  return i;
}

namespace {

std::string_view trim(std::string_view s) {
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.front()))) s.remove_prefix(1);
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.back()))) s.remove_suffix(1);
  return s;
}

// Splits on commas outside brackets.
Result<std::vector<std::string_view>> split_top_level(std::string_view s) {
  std::vector<std::string_view> parts;
  int depth = 0;
  size_t begin = 0;
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i] == '[') {
      if (++depth > 1) return InvalidArgument("nested lists are not a valid selection");
    } else if (s[i] == ']') {
      if (--depth < 0) return InvalidArgument("unbalanced ']' in selection");
    } else if (s[i] == ',' && depth == 0) {
      parts.push_back(s.substr(begin, i - begin));
      begin = i + 1;
    }
  }
  if (depth != 0) return InvalidArgument("unbalanced '[' in selection");
  parts.push_back(s.substr(begin));
  return parts;
}

Result<int64_t> parse_int(std::string_view s, std::string_view whole) {
  s = trim(s);
  if (!s.empty() && s.front() == '+') s.remove_prefix(1);
  int64_t v = 0;
  auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (s.empty() || ec != std::errc() || p != s.data() + s.size()) {
    return InvalidArgument("'" + std::string(s) + "' in selection '" + std::string(whole) +
                           "' is not an integer (use numpy syntax: 3, -1, 0:4, ..., [0,2,5])");
  }
  return v;
}

Result<std::optional<int64_t>> parse_bound(std::string_view s, std::string_view whole) {
  s = trim(s);
  if (s.empty()) return std::optional<int64_t>();
  auto v = parse_int(s, whole);
  if (!v.ok()) return v.status();
  return std::optional<int64_t>(*v);
}

Result<Index> parse_item(std::string_view item, std::string_view whole) {
  item = trim(item);
  if (item == "...") return Index::Ellipsis();
  if (!item.empty() && item.front() == '[') {
    if (item.back() != ']') return InvalidArgument("unterminated list in selection");
    std::string_view body = trim(item.substr(1, item.size() - 2));
    std::vector<int64_t> values;
    std::vector<bool> mask;
    if (!body.empty()) {
      auto parts = split_top_level(body);
      if (!parts.ok()) return parts.status();
      for (auto p : *parts) {
        p = trim(p);
        if (p == "True" || p == "False") {
          mask.push_back(p == "True");
          continue;
        }
        auto v = parse_int(p, whole);
        if (!v.ok()) return v.status();
        values.push_back(*v);
      }
    }
    if (!mask.empty() && !values.empty()) {
      return InvalidArgument("a list in selection '" + std::string(whole) +
                             "' mixes booleans and integers");
    }
    if (!mask.empty()) return Index::BoolMask(std::move(mask));
    return Index::List(std::move(values));
  }
  size_t colon = item.find(':');
  if (colon == std::string_view::npos) {
    auto v = parse_int(item, whole);
    if (!v.ok()) return v.status();
    return Index::Int(*v);
  }
  std::string_view rest = item.substr(colon + 1);
  size_t colon2 = rest.find(':');
  std::string_view stop_text = colon2 == std::string_view::npos ? rest : rest.substr(0, colon2);
  std::string_view step_text =
      colon2 == std::string_view::npos ? std::string_view() : rest.substr(colon2 + 1);
  if (step_text.find(':') != std::string_view::npos) {
    return InvalidArgument("too many ':' in '" + std::string(item) + "'");
  }
  auto start = parse_bound(item.substr(0, colon), whole);
  if (!start.ok()) return start.status();
  auto stop = parse_bound(stop_text, whole);
  if (!stop.ok()) return stop.status();
  auto step = parse_bound(step_text, whole);
  if (!step.ok()) return step.status();
  return Index::Slice(*start, *stop, *step);
}

std::string range_text(int64_t size) {
  return "(0-" + std::to_string(size - 1) + ")";
}

}  // namespace

Result<Selection> parse_selection(std::string_view text) {
  std::string_view s = trim(text);
  // A parenthesised tuple reads the same as a bare one.
  if (s.size() >= 2 && s.front() == '(' && s.back() == ')') s = trim(s.substr(1, s.size() - 2));
  Selection sel;
  if (s.empty()) return sel;
  auto parts = split_top_level(s);
  if (!parts.ok()) return parts.status();
  // A trailing comma ("0,") makes a one-element tuple, as in Python.
  if (parts->size() > 1 && trim(parts->back()).empty()) parts->pop_back();
  for (auto part : *parts) {
    if (trim(part).empty()) return InvalidArgument("empty item in selection '" + std::string(s) + "'");
    auto item = parse_item(part, s);
    if (!item.ok()) return item.status();
    sel.items.push_back(std::move(*item));
  }
  return sel;
}

std::string to_string(const Selection& selection) {
  std::string out;
  for (size_t i = 0; i < selection.items.size(); ++i) {
    const Index& ix = selection.items[i];
    if (i) out += ",";
    switch (ix.kind) {
      case Index::Kind::kInt: out += std::to_string(ix.value); break;
      case Index::Kind::kEllipsis: out += "..."; break;
      case Index::Kind::kSlice:
        if (ix.start) out += std::to_string(*ix.start);
        out += ":";
        if (ix.stop) out += std::to_string(*ix.stop);
        if (ix.step) out += ":" + std::to_string(*ix.step);
        break;
      case Index::Kind::kList:
      case Index::Kind::kBoolMask: {
        out += "[";
        size_t n = ix.kind == Index::Kind::kList ? ix.list.size() : ix.mask.size();
        for (size_t k = 0; k < n; ++k) {
          if (k) out += ",";
          if (ix.kind == Index::Kind::kList) {
            out += std::to_string(ix.list[k]);
          } else {
            out += ix.mask[k] ? "True" : "False";
          }
        }
        out += "]";
        break;
      }
    }
  }
  return out.empty() ? std::string(":") : out;
}

bool AxisSelection::increasing() const {
  switch (kind) {
    case Kind::kInt: return true;
    case Kind::kRange: return step > 0 || count <= 1;
    case Kind::kList:
      return std::adjacent_find(indices.begin(), indices.end(),
                                [](int64_t a, int64_t b) { return a >= b; }) == indices.end();
  }
  return false;
}

namespace {

// Python's slice.indices(size) and len(range(...)): the first index and how many, for any
// non-zero step. `size` <= 2^63 - 1 (checked by the caller), so no bound below overflows.
void resolve_slice(const Index& ix, int64_t size, int64_t step, AxisSelection* ax) {
  int64_t start, stop;
  if (step > 0) {
    // Clamp into [0, size].
    auto clamp = [size](std::optional<int64_t> v, int64_t dflt) {
      if (!v) return dflt;
      int64_t x = *v < 0 ? *v + size : *v;
      return std::clamp<int64_t>(x, 0, size);
    };
    start = clamp(ix.start, 0);
    stop = clamp(ix.stop, size);
  } else {
    // Clamp into [-1, size - 1]; -1 is "before the first element", not "the last" (a
    // default stop, or an explicit one so negative that it lands before 0).
    auto clamp = [size](std::optional<int64_t> v, int64_t dflt) {
      if (!v) return dflt;
      int64_t x = *v < 0 ? *v + size : *v;
      return std::clamp<int64_t>(x, -1, size - 1);
    };
    start = clamp(ix.start, size - 1);
    stop = clamp(ix.stop, -1);
  }
  // The step's magnitude as unsigned: -INT64_MIN does not fit an int64. Not
  // (span + step - 1) / step: that overflows for a step near 2^63.
  const uint64_t magnitude = step > 0 ? uint64_t(step) : uint64_t(-(step + 1)) + 1;
  const int64_t span = step > 0 ? stop - start : start - stop;
  ax->kind = AxisSelection::Kind::kRange;
  ax->start = start;
  ax->step = step;
  ax->count = span > 0 ? int64_t((uint64_t(span) - 1) / magnitude + 1) : 0;
}

}  // namespace

Result<NormalizedSelection> normalize(const Selection& selection,
                                      const std::vector<uint64_t>& shape) {
  const size_t rank = shape.size();
  size_t ellipses = 0, explicit_axes = 0;
  for (const Index& ix : selection.items) {
    if (ix.kind == Index::Kind::kEllipsis) {
      ++ellipses;
    } else {
      ++explicit_axes;
    }
  }
  if (ellipses > 1) return InvalidArgument("an index can only have a single ellipsis ('...')");
  if (explicit_axes > rank) {
    return InvalidArgument("too many indices for a dataset of rank " + std::to_string(rank) +
                           ": " + std::to_string(explicit_axes) + " given");
  }

  // Expand the ellipsis (or pad at the end) with full slices.
  std::vector<Index> items;
  for (const Index& ix : selection.items) {
    if (ix.kind == Index::Kind::kEllipsis) {
      for (size_t k = 0; k < rank - explicit_axes; ++k) items.push_back(Index::Slice());
    } else {
      items.push_back(ix);
    }
  }
  while (items.size() < rank) items.push_back(Index::Slice());

  NormalizedSelection out;
  out.num_elements = 1;
  for (size_t d = 0; d < rank; ++d) {
    const Index& ix = items[d];
    // Indices are int64 (numpy's intp): an axis longer than that cannot be indexed, and only a
    // corrupt or hostile file declares one.
    if (shape[d] > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) {
      return InvalidArgument("array is too big: axis " + std::to_string(d) + " has " +
                             std::to_string(shape[d]) +
                             " elements, more than an index can address (2^63 - 1); the "
                             "file's dataspace is probably corrupt");
    }
    const int64_t size = static_cast<int64_t>(shape[d]);
    AxisSelection ax;
    switch (ix.kind) {
      case Index::Kind::kInt: {
        int64_t v = ix.value < 0 ? ix.value + size : ix.value;
        if (v < 0 || v >= size) {
          return InvalidArgument("Index (" + std::to_string(ix.value) + ") out of range for " +
                                 range_text(size) + " on axis " + std::to_string(d));
        }
        ax.kind = AxisSelection::Kind::kInt;
        ax.start = v;
        ax.count = 1;
        break;
      }
      case Index::Kind::kSlice: {
        const int64_t step = ix.step.value_or(1);
        if (step == 0) return InvalidArgument("slice step cannot be zero");
        resolve_slice(ix, size, step, &ax);
        break;
      }
      case Index::Kind::kBoolMask: {
        if (static_cast<int64_t>(ix.mask.size()) != size) {
          return InvalidArgument("boolean mask of length " + std::to_string(ix.mask.size()) +
                                 " does not match axis " + std::to_string(d) + " of size " +
                                 std::to_string(size));
        }
        ax.kind = AxisSelection::Kind::kList;
        ax.from_mask = true;
        for (int64_t k = 0; k < size; ++k) {
          if (ix.mask[k]) ax.indices.push_back(k);
        }
        ax.count = static_cast<int64_t>(ax.indices.size());
        break;
      }
      case Index::Kind::kList: {
        ax.kind = AxisSelection::Kind::kList;
        ax.indices.reserve(ix.list.size());
        for (int64_t v : ix.list) {
          int64_t x = v < 0 ? v + size : v;
          if (x < 0 || x >= size) {
            return InvalidArgument("Index (" + std::to_string(v) + ") out of range for " +
                                   range_text(size) + " on axis " + std::to_string(d));
          }
          ax.indices.push_back(x);
        }
        ax.count = static_cast<int64_t>(ax.indices.size());
        break;
      }
      case Index::Kind::kEllipsis: break;  // expanded above
    }
    if (ax.kept()) out.out_shape.push_back(static_cast<uint64_t>(ax.count));
    out.axes.push_back(std::move(ax));
  }
  // The element count of the output, checked: a wrapped product would make a 2^64-element
  // selection look like a small one.
  std::vector<uint64_t> counts;
  for (const AxisSelection& ax : out.axes) counts.push_back(static_cast<uint64_t>(ax.count));
  auto elements = checked_product(counts);
  if (!elements) {
    std::string shape_text;
    for (size_t k = 0; k < out.out_shape.size(); ++k) {
      shape_text += (k ? ", " : "") + std::to_string(out.out_shape[k]);
    }
    return InvalidArgument("array is too big: the selection's shape (" + shape_text +
                           ") holds more than 2^64 - 1 elements");
  }
  out.num_elements = *elements;
  return out;
}

}  // namespace h5chunk
