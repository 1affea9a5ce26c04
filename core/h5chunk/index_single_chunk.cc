// The single-chunk index (layout version 4, index type 1): the layout message holds the one chunk.
#include "h5chunk/index_parts.h"

namespace h5chunk::index_parts {

Status read_single_chunk(const Geometry& g, const Layout& lay, Emitter& out) {
  for (size_t d = 0; d < g.rank; ++d) {
    if (g.grid[d] > 1) return corrupt("it is a single chunk, but the dataset spans several");
    out.coords()[d] = 0;
  }
  const bool filtered = lay.flags & kLayoutFlagSingleFiltered;
  if (filtered != g.filtered) return corrupt("its single chunk disagrees with the dataset on filtering");
  return out.emit(lay.address, filtered ? lay.single_size : g.chunk_bytes, filtered ? lay.single_mask : 0);
}

}  // namespace h5chunk::index_parts
