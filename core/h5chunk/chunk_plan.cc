// Planning a chunked read (chunk_plan.h): per-axis pieces and runs, and chunk naming.
#include "h5chunk/chunk_plan.h"

#include <algorithm>

namespace h5chunk {

namespace {

// Pieces of a unit-step range (or an integer: a range of one on a dropped axis): one run each.
void plan_unit_range(const AxisSelection& ax, uint64_t c, std::vector<AxisPiece>* pieces,
                     std::vector<AxisRun>* runs) {
  const uint64_t start = ax.start, stop = ax.start + ax.count;
  for (uint64_t g = start / c; g * c < stop; ++g) {
    const uint64_t lo = std::max(start, g * c), hi = std::min(stop, (g + 1) * c);
    AxisPiece piece;
    piece.grid = g;
    piece.num_runs = 1;
    piece.full = lo == g * c && hi - lo == c;
    pieces->push_back(piece);
    runs->push_back({lo - g * c, ax.kept() ? lo - start : 0, hi - lo});
  }
}

// Pieces of any other selection: the output positions grouped by chunk (in increasing grid
// order, each group in output order), consecutive neighbours merged into runs.
void plan_general(const AxisSelection& ax, uint64_t c, std::vector<AxisPiece>* pieces,
                  std::vector<AxisRun>* runs) {
  const uint64_t n = static_cast<uint64_t>(ax.count);
  auto grid_of = [&](uint64_t k) { return static_cast<uint64_t>(ax.index(k)) / c; };
  // Increasing slices and sorted lists are grouped already; the rest are sorted by chunk
  // (stable: each chunk's positions stay in output order).
  bool grouped = true;
  for (uint64_t k = 1; k < n && grouped; ++k) grouped = grid_of(k - 1) <= grid_of(k);
  std::vector<uint64_t> order;  // output positions in chunk order; empty when already grouped
  if (!grouped) {
    order.resize(n);
    for (uint64_t k = 0; k < n; ++k) order[k] = k;
    std::stable_sort(order.begin(), order.end(),
                     [&](uint64_t a, uint64_t b) { return grid_of(a) < grid_of(b); });
  }
  auto position = [&](uint64_t i) { return grouped ? i : order[i]; };
  for (uint64_t lo = 0; lo < n;) {
    const uint64_t g = grid_of(position(lo));
    AxisPiece piece;
    piece.grid = g;
    const size_t first_run = runs->size();
    uint64_t hi = lo;
    for (; hi < n && grid_of(position(hi)) == g; ++hi) {
      const uint64_t k = position(hi);
      const uint64_t src = static_cast<uint64_t>(ax.index(k)) - g * c;
      const uint64_t dst = ax.kept() ? k : 0;
      if (runs->size() > first_run) {
        AxisRun& last = runs->back();
        if (last.src + last.len == src && last.dst + last.len == dst) {
          ++last.len;
          continue;
        }
      }
      runs->push_back({src, dst, 1});
    }
    piece.num_runs = runs->size() - first_run;
    const AxisRun& only = (*runs)[first_run];
    piece.full = piece.num_runs == 1 && only.src == 0 && only.len == c;
    pieces->push_back(piece);
    lo = hi;
  }
}

}  // namespace

std::vector<AxisPlan> plan_axes(const ChunkedLayout& layout, const NormalizedSelection& sel) {
  const size_t rank = layout.shape.size();
  std::vector<AxisPlan> plans(rank);
  uint64_t out_stride = layout.elem_size, chunk_stride = layout.elem_size;
  for (size_t d = rank; d-- > 0;) {
    const AxisSelection& ax = sel.axes[d];
    AxisPlan& p = plans[d];
    const uint64_t c = layout.chunk[d];
    p.extent = ax.kept() ? static_cast<uint64_t>(ax.count) : 1;
    p.out_stride = ax.kept() ? out_stride : 0;
    p.chunk_stride = chunk_stride;
    if (ax.kept()) out_stride *= p.extent;
    chunk_stride *= c;
    const bool unit_range = ax.kind == AxisSelection::Kind::kInt ||
                            (ax.kind == AxisSelection::Kind::kRange && ax.step == 1);
    if (unit_range) {
      plan_unit_range(ax, c, &p.pieces, &p.runs);
    } else {
      plan_general(ax, c, &p.pieces, &p.runs);
    }
    // The runs vector no longer grows: point each piece at its runs.
    size_t next = 0;
    for (AxisPiece& piece : p.pieces) {
      piece.runs = p.runs.data() + next;
      next += piece.num_runs;
    }
  }
  return plans;
}

bool is_direct(const std::vector<AxisPlan>& axes, const std::vector<const AxisPiece*>& pieces,
               const std::vector<uint64_t>& chunk) {
  size_t first_long = pieces.size();
  for (size_t d = 0; d < pieces.size(); ++d) {
    if (!pieces[d]->full) return false;
    if (first_long == pieces.size() && chunk[d] > 1) first_long = d;
  }
  for (size_t d = first_long + 1; d < pieces.size(); ++d) {
    if (chunk[d] != axes[d].extent) return false;
  }
  return true;
}

std::string chunk_name(const std::vector<const AxisPiece*>& pieces, const std::vector<uint64_t>& chunk) {
  std::string grid, origin;
  for (size_t d = 0; d < pieces.size(); ++d) {
    grid += (d ? ", " : "") + std::to_string(pieces[d]->grid);
    origin += (d ? ", " : "") + std::to_string(pieces[d]->grid * chunk[d]);
  }
  return "chunk [" + grid + "] (elements from (" + origin + "))";
}

bool next_chunk(const std::vector<AxisPlan>& axes, std::vector<size_t>& at) {
  for (size_t d = axes.size(); d-- > 0;) {
    if (++at[d] < axes[d].pieces.size()) return true;
    at[d] = 0;
  }
  return false;
}

}  // namespace h5chunk
