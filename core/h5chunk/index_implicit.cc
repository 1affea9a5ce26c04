// The implicit chunk index (layout version 4, index type 2): no index structure at all.
#include "h5chunk/index_parts.h"

namespace h5chunk::index_parts {

Status read_implicit(const Geometry& g, const Layout& lay, bool has_unlimited_axis, Emitter& out) {
  // Every chunk of the maximum extent has its place in one contiguous block, C order.
  if (g.filtered) return corrupt("it is implicit, but the dataset is filtered");
  if (has_unlimited_axis) return corrupt("it is implicit, but the dataset has an unlimited axis");
  if (lay.address == kUndefined) return Status::Ok();
  auto n = checked_product(g.max_grid);
  if (!n || *n > kMaxIndexEntries) return Unsupported("the implicit index spans too many chunks");
  if (!checked_mul(*n, g.chunk_bytes)) return corrupt("it is implicit and larger than 2^64 bytes");
  for (uint64_t i = 0; i < *n; ++i) {
    unravel(i, g.max_grid, out.coords());
    if (Status s = out.emit(lay.address + i * g.chunk_bytes, g.chunk_bytes, 0); !s.ok()) return s;
  }
  return Status::Ok();
}

}  // namespace h5chunk::index_parts
