#include "h5chunk/fallback.h"

#include <algorithm>
#include <cstring>
#include <memory>
#include <new>
#include <vector>

#include "h5chunk/checked.h"
#include "h5chunk/hdf5_handle.h"

namespace h5chunk {

namespace {

Status hdf5_failure(const std::string& what) {
  return hubfs::IoError(what + " failed: " + hdf5_error_text());
}

// What H5Dread reads on one axis: indices in increasing order, which a hyperslab can express,
// and where each output position finds its element among them. Unsorted, repeated and
// reversed selections read each index once, in order, and are permuted in memory afterwards.
struct AxisRead {
  // Runs of the increasing indices read: (first index, stride, count, block) hyperslab terms.
  struct Term {
    hsize_t start, stride, count, block;
  };
  std::vector<Term> terms;     // one for a range, one per run of consecutive indices for a list
  uint64_t count = 0;          // indices read on this axis
  std::vector<uint64_t> map;   // output position -> position among those read; empty = identity
};

AxisRead plan_axis(const AxisSelection& ax) {
  AxisRead r;
  const uint64_t n = static_cast<uint64_t>(ax.count);
  if (ax.kind != AxisSelection::Kind::kList) {
    // A unit-stride axis is one block of `count` elements, not `count` blocks of one: HDF5
    // 1.10 iterates blocks, so single-element blocks cost it far more (docs/benchmarks.md,
    // "The fallback's selections").
    const bool unit = ax.kind == AxisSelection::Kind::kInt || ax.step == 1 || ax.step == -1 || n == 1;
    // A reversed slice reads the same indices forwards: from its last index, with |step|.
    const int64_t first = ax.step < 0 ? ax.index(static_cast<int64_t>(n) - 1) : ax.start;
    const hsize_t stride = unit ? 1 : static_cast<hsize_t>(ax.step < 0 ? -ax.step : ax.step);
    r.terms.push_back({static_cast<hsize_t>(first), stride, unit ? 1 : n, unit ? n : 1});
    r.count = n;
    if (ax.kind == AxisSelection::Kind::kRange && ax.step < 0 && n > 1) {
      r.map.resize(n);
      for (uint64_t k = 0; k < n; ++k) r.map[k] = n - 1 - k;
    }
    return r;
  }
  std::vector<int64_t> uniq = ax.indices;
  const bool increasing = ax.increasing();
  if (!increasing) {
    std::sort(uniq.begin(), uniq.end());
    uniq.erase(std::unique(uniq.begin(), uniq.end()), uniq.end());
    r.map.resize(n);
    for (uint64_t k = 0; k < n; ++k) {
      r.map[k] = std::lower_bound(uniq.begin(), uniq.end(), ax.indices[k]) - uniq.begin();
    }
  }
  for (size_t lo = 0; lo < uniq.size();) {
    size_t hi = lo + 1;
    while (hi < uniq.size() && uniq[hi] == uniq[hi - 1] + 1) ++hi;
    r.terms.push_back({static_cast<hsize_t>(uniq[lo]), 1, 1, static_cast<hsize_t>(hi - lo)});
    lo = hi;
  }
  r.count = uniq.size();
  return r;
}

// HDF5 1.10 ORs hyperslabs in time growing with those already selected, so past this many, list
// axes are read as their covering range instead: more bytes, bounded time (docs/constants.md,
// kMaxHyperslabs).
constexpr uint64_t kMaxHyperslabs = 4096;

// Reads list axis `a` as the single range covering its indices: positions shift by the first.
void widen(AxisRead* a) {
  const AxisRead::Term& first = a->terms.front();
  const AxisRead::Term& last = a->terms.back();
  const hsize_t lo = first.start, hi = last.start + last.block;  // list terms are unit-stride blocks
  std::vector<uint64_t> read_pos(a->count);  // position among the indices read -> index - lo
  uint64_t at = 0;
  for (const AxisRead::Term& t : a->terms) {
    for (hsize_t i = 0; i < t.block; ++i) read_pos[at++] = t.start + i - lo;
  }
  if (a->map.empty()) {
    a->map = std::move(read_pos);
  } else {
    for (uint64_t& m : a->map) m = read_pos[m];
  }
  a->terms = {{lo, 1, 1, hi - lo}};
  a->count = hi - lo;
}

// Widens the list axes that cost least to widen (covering range / indices read) until the
// hyperslab count is within kMaxHyperslabs.
void bound_hyperslabs(std::vector<AxisRead>* axes) {
  for (;;) {
    uint64_t product = 1;
    for (const AxisRead& a : *axes) product = std::min<uint64_t>(product * a.terms.size(), kMaxHyperslabs + 1);
    if (product <= kMaxHyperslabs) return;
    AxisRead* cheapest = nullptr;
    double best = 0;
    for (AxisRead& a : *axes) {
      if (a.terms.size() < 2) continue;
      const double span = double(a.terms.back().start + a.terms.back().block - a.terms.front().start);
      const double ratio = span / double(a.count);
      if (!cheapest || ratio < best) {
        cheapest = &a;
        best = ratio;
      }
    }
    widen(cheapest);  // product > 1 means some axis has several terms
  }
}

// Selects the product of every axis's terms in `space`: one hyperslab per combination of
// terms (one in all unless index lists are scattered into several runs).
Status select(hid_t space, const std::vector<AxisRead>& axes) {
  const size_t rank = axes.size();
  std::vector<hsize_t> start(rank), stride(rank), count(rank), block(rank);
  std::vector<size_t> at(rank, 0);
  bool first = true;
  for (;;) {
    for (size_t d = 0; d < rank; ++d) {
      const AxisRead::Term& t = axes[d].terms[at[d]];
      start[d] = t.start;
      stride[d] = t.stride;
      count[d] = t.count;
      block[d] = t.block;
    }
    if (H5Sselect_hyperslab(space, first ? H5S_SELECT_SET : H5S_SELECT_OR, start.data(),
                            stride.data(), count.data(), block.data()) < 0) {
      return hdf5_failure("H5Sselect_hyperslab");
    }
    first = false;
    size_t d = rank;
    while (d-- > 0) {
      if (++at[d] < axes[d].terms.size()) break;
      at[d] = 0;
    }
    if (d == static_cast<size_t>(-1)) break;
  }
  return Status::Ok();
}

// H5Dread of the increasing selection `axes` into `out`, C order of the read counts (axes
// indexed by an integer included, with a count of 1).
Status read_increasing(hid_t dataset, hid_t mem_type, const std::vector<AxisRead>& axes, void* out) {
  QuietHdf5Errors quiet;
  if (axes.empty()) {  // a scalar dataset
    if (H5Dread(dataset, mem_type, H5S_ALL, H5S_ALL, H5P_DEFAULT, out) < 0) {
      return hdf5_failure("H5Dread");
    }
    return Status::Ok();
  }
  Hid file_space(H5Dget_space(dataset));
  if (!file_space.valid()) return hdf5_failure("H5Dget_space");
  if (Status s = select(file_space.get(), axes); !s.ok()) return s;
  std::vector<hsize_t> dims;
  for (const AxisRead& a : axes) dims.push_back(a.count);
  Hid mem_space(H5Screate_simple(static_cast<int>(dims.size()), dims.data(), nullptr));
  if (!mem_space.valid()) return hdf5_failure("H5Screate_simple");
  if (H5Dread(dataset, mem_type, mem_space.get(), file_space.get(), H5P_DEFAULT, out) < 0) {
    return hdf5_failure("H5Dread");
  }
  return Status::Ok();
}

// Gathers the output from what was read: output position k on axis d comes from position
// map[k] (or k) of the read. Trailing axes read in output order move as one block.
class Permuter {
 public:
  Permuter(const std::vector<AxisRead>& axes, size_t elem) : axes_(axes) {
    const size_t rank = axes.size();
    split_ = rank;
    block_ = elem;
    while (split_ > 0 && axes[split_ - 1].map.empty()) block_ *= axes[--split_].count;
    read_stride_.assign(rank, 0);
    out_stride_.assign(rank, 0);
    uint64_t rs = elem, os = elem;
    for (size_t d = rank; d-- > 0;) {
      read_stride_[d] = rs;
      out_stride_[d] = os;
      rs *= axes[d].count;
      os *= axes[d].map.empty() ? axes[d].count : axes[d].map.size();
    }
  }

  void run(const uint8_t* read, uint8_t* out) const { gather(0, read, out); }

 private:
  void gather(size_t d, const uint8_t* src, uint8_t* dst) const {
    if (d == split_) {
      std::memcpy(dst, src, block_);
      return;
    }
    const AxisRead& a = axes_[d];
    const uint64_t n = a.map.empty() ? a.count : a.map.size();
    for (uint64_t k = 0; k < n; ++k) {
      const uint64_t from = a.map.empty() ? k : a.map[k];
      gather(d + 1, src + from * read_stride_[d], dst + k * out_stride_[d]);
    }
  }

  const std::vector<AxisRead>& axes_;
  size_t split_ = 0;
  uint64_t block_ = 0;
  std::vector<uint64_t> read_stride_, out_stride_;
};

}  // namespace

Status h5dread_selection(hid_t dataset, hid_t mem_type, size_t elem_size,
                         const NormalizedSelection& sel, void* out) {
  if (sel.num_elements == 0) return Status::Ok();
  std::vector<AxisRead> axes;
  bool permute = false;
  std::vector<uint64_t> read_counts;
  for (const AxisSelection& ax : sel.axes) axes.push_back(plan_axis(ax));
  bound_hyperslabs(&axes);
  for (const AxisRead& a : axes) {
    permute |= !a.map.empty();
    read_counts.push_back(a.count);
  }
  if (!permute) return read_increasing(dataset, mem_type, axes, out);

  // Read each selected index once, in increasing order (or a covering range), then gather
  // into the caller's order. A covering range can make that more than the selection, and a
  // corrupt dataspace's axes can be absurd: the size is checked, the allocation may fail.
  const auto tmp_bytes = checked_product(read_counts, elem_size);
  if (!tmp_bytes) {
    return hubfs::InvalidArgument("array is too big: reordering the selection needs more than 2^64 - 1 bytes");
  }
  std::unique_ptr<uint8_t[]> tmp(new (std::nothrow) uint8_t[*tmp_bytes]);
  if (!tmp) {
    return hubfs::Unavailable("out of memory: cannot allocate " + std::to_string(*tmp_bytes) +
                              " bytes to reorder the selection; read a smaller selection");
  }
  if (Status s = read_increasing(dataset, mem_type, axes, tmp.get()); !s.ok()) return s;
  Permuter(axes, elem_size).run(tmp.get(), static_cast<uint8_t*>(out));
  return Status::Ok();
}

}  // namespace h5chunk
