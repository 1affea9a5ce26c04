#include "h5chunk/fallback.h"

#include <algorithm>
#include <cstring>
#include <memory>
#include <new>
#include <vector>

#include "h5chunk/hdf5_handle.h"

namespace h5chunk {

namespace {

Status hdf5_failure(const std::string& what) {
  return hubfs::IoError(what + " failed: " + hdf5_error_text());
}

// Selects the (sorted, distinct) selection in `space`: one hyperslab, or for an index list the
// union of one hyperslab per run of consecutive indices.
Status select(hid_t space, const NormalizedSelection& sel) {
  const size_t rank = sel.axes.size();
  // A unit-stride axis is one block of `count` elements, not `count` blocks of one: HDF5 1.10
  // iterates blocks, and a 5-D selection of single-element blocks took 18 s instead of 0.2 s.
  std::vector<hsize_t> start(rank), stride(rank), count(rank), block(rank);
  int list_axis = -1;
  for (size_t d = 0; d < rank; ++d) {
    const AxisSelection& ax = sel.axes[d];
    const bool strided = ax.kind == AxisSelection::Kind::kRange && ax.step != 1;
    start[d] = static_cast<hsize_t>(ax.start);
    stride[d] = static_cast<hsize_t>(strided ? ax.step : 1);
    count[d] = static_cast<hsize_t>(strided ? ax.count : 1);
    block[d] = static_cast<hsize_t>(strided ? 1 : ax.count);
    if (ax.kind == AxisSelection::Kind::kList) list_axis = static_cast<int>(d);
  }
  if (list_axis < 0) {
    if (H5Sselect_hyperslab(space, H5S_SELECT_SET, start.data(), stride.data(), count.data(),
                            block.data()) < 0) {
      return hdf5_failure("H5Sselect_hyperslab");
    }
    return Status::Ok();
  }
  const auto& ix = sel.axes[list_axis].indices;
  if (H5Sselect_none(space) < 0) return hdf5_failure("H5Sselect_none");
  for (size_t lo = 0; lo < ix.size();) {
    size_t hi = lo + 1;
    while (hi < ix.size() && ix[hi] == ix[hi - 1] + 1) ++hi;
    start[list_axis] = static_cast<hsize_t>(ix[lo]);
    count[list_axis] = 1;
    block[list_axis] = hi - lo;
    if (H5Sselect_hyperslab(space, H5S_SELECT_OR, start.data(), stride.data(), count.data(),
                            block.data()) < 0) {
      return hdf5_failure("H5Sselect_hyperslab");
    }
    lo = hi;
  }
  return Status::Ok();
}

Status read_sorted(hid_t dataset, hid_t mem_type, const NormalizedSelection& sel, void* out) {
  QuietHdf5Errors quiet;
  if (sel.axes.empty()) {  // a scalar dataset
    if (H5Dread(dataset, mem_type, H5S_ALL, H5S_ALL, H5P_DEFAULT, out) < 0) {
      return hdf5_failure("H5Dread");
    }
    return Status::Ok();
  }
  Hid file_space(H5Dget_space(dataset));
  if (!file_space.valid()) return hdf5_failure("H5Dget_space");
  if (Status s = select(file_space.get(), sel); !s.ok()) return s;
  std::vector<hsize_t> dims(sel.out_shape.begin(), sel.out_shape.end());
  if (dims.empty()) dims.push_back(1);  // every axis indexed by an integer: one element
  Hid mem_space(H5Screate_simple(static_cast<int>(dims.size()), dims.data(), nullptr));
  if (!mem_space.valid()) return hdf5_failure("H5Screate_simple");
  if (H5Dread(dataset, mem_type, mem_space.get(), file_space.get(), H5P_DEFAULT, out) < 0) {
    return hdf5_failure("H5Dread");
  }
  return Status::Ok();
}

}  // namespace

Status h5dread_selection(hid_t dataset, hid_t mem_type, size_t elem_size,
                         const NormalizedSelection& sel, void* out) {
  if (sel.num_elements == 0) return Status::Ok();
  // Find an index list that is not strictly increasing.
  size_t list_axis = sel.axes.size(), out_axis = 0;
  for (size_t d = 0, o = 0; d < sel.axes.size(); ++d) {
    const auto& ax = sel.axes[d];
    if (ax.kind == AxisSelection::Kind::kList &&
        std::adjacent_find(ax.indices.begin(), ax.indices.end(),
                           [](int64_t a, int64_t b) { return a >= b; }) != ax.indices.end()) {
      list_axis = d;
      out_axis = o;
    }
    if (ax.kept()) ++o;
  }
  if (list_axis == sel.axes.size()) return read_sorted(dataset, mem_type, sel, out);

  // Read the distinct indices in order, then gather them into the caller's order.
  NormalizedSelection sorted = sel;
  auto& ix = sorted.axes[list_axis].indices;
  std::sort(ix.begin(), ix.end());
  ix.erase(std::unique(ix.begin(), ix.end()), ix.end());
  sorted.axes[list_axis].count = static_cast<int64_t>(ix.size());
  sorted.out_shape[out_axis] = ix.size();
  sorted.num_elements = sel.num_elements / sel.axes[list_axis].count * ix.size();
  // No larger than the caller's buffer, which read_into checked against the selection.
  const uint64_t tmp_bytes = sorted.num_elements * elem_size;
  std::unique_ptr<uint8_t[]> tmp(new (std::nothrow) uint8_t[tmp_bytes]);
  if (!tmp) {
    return hubfs::Unavailable("out of memory: cannot allocate " + std::to_string(tmp_bytes) +
                              " bytes to reorder an index list");
  }
  if (Status s = read_sorted(dataset, mem_type, sorted, tmp.get()); !s.ok()) return s;

  uint64_t outer = 1, inner = elem_size;
  for (size_t o = 0; o < sel.out_shape.size(); ++o) {
    if (o < out_axis) outer *= sel.out_shape[o];
    if (o > out_axis) inner *= sel.out_shape[o];
  }
  const auto& wanted = sel.axes[list_axis].indices;
  auto* dst = static_cast<uint8_t*>(out);
  for (uint64_t a = 0; a < outer; ++a) {
    for (size_t i = 0; i < wanted.size(); ++i) {
      size_t pos = std::lower_bound(ix.begin(), ix.end(), wanted[i]) - ix.begin();
      std::memcpy(dst + (a * wanted.size() + i) * inner, tmp.get() + (a * ix.size() + pos) * inner,
                  inner);
    }
  }
  return Status::Ok();
}

}  // namespace h5chunk
