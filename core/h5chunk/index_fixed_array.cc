// The fixed array chunk index (layout version 4, index type 3).
#include "h5chunk/index_parts.h"

namespace h5chunk::index_parts {

// ---------------------------------------------------------------------------------------------
// Fixed array: "FAHD" header, "FADB" data block (paged when large)

Status read_fixed_array(const IndexFileReader& file, const Geometry& g, const Layout& lay, Emitter& out) {
  const unsigned O = g.O, L = g.L;
  std::vector<uint8_t> buf;
  const uint64_t header_bytes = 4 + 1 + 1 + 1 + 1 + L + O + 4;
  if (Status s = file.read(lay.address, header_bytes, buf, "fixed array header"); !s.ok()) return s;
  Cursor c(buf);
  if (!c.signature("FAHD")) return corrupt("its fixed array header lacks its FAHD signature");
  if (!checksum_ok(buf.data(), header_bytes - 4)) return corrupt("its fixed array header fails its checksum");
  if (c.u(1) != 0) return Unsupported("the fixed array header has an unknown version");
  const unsigned client = static_cast<unsigned>(c.u(1));
  const unsigned elem_bytes = static_cast<unsigned>(c.u(1));
  const unsigned page_bits = static_cast<unsigned>(c.u(1));
  const uint64_t nelmts = c.u(L);
  const uint64_t dblock = c.addr(O);
  auto fmt = entry_format(client, elem_bytes, g);
  if (!fmt.ok()) return fmt.status();
  if (page_bits == 0 || page_bits > 32 || page_bits != lay.fa_page_bits) return corrupt("its fixed array header disagrees with the layout on its page size");
  // The array has one entry per chunk of the maximum extent, in C order.
  auto expected = checked_product(g.max_grid);
  if (!expected || nelmts != *expected) return corrupt("its fixed array holds " + std::to_string(nelmts) + " entries for a grid of " + (expected ? std::to_string(*expected) : std::string("too many")) + " chunks");
  if (nelmts > kMaxIndexEntries) return Unsupported("the fixed array holds " + std::to_string(nelmts) + " entries");
  if (dblock == kUndefined) return Status::Ok();  // no chunk written yet

  const uint64_t page_elems = 1ull << page_bits;
  const bool paged = nelmts > page_elems;
  const uint64_t npages = paged ? ceil_div(nelmts, page_elems) : 0;
  const uint64_t bitmap_bytes = paged ? (npages + 7) / 8 : 0;
  const uint64_t prefix = 4 + 1 + 1 + O + bitmap_bytes;
  const uint64_t block_bytes = prefix + (paged ? 0 : nelmts * fmt->bytes()) + 4;
  if (Status s = file.read(dblock, block_bytes, buf, "fixed array data block"); !s.ok()) return s;
  Cursor b(buf);
  if (!b.signature("FADB")) return corrupt("its fixed array data block lacks its FADB signature");
  if (!checksum_ok(buf.data(), block_bytes - 4)) return corrupt("its fixed array data block fails its checksum");
  if (b.u(1) != 0 || b.u(1) != client) return corrupt("its fixed array data block disagrees with its header");
  if (b.addr(O) != lay.address) return corrupt("its fixed array data block points to another header");
  if (!paged) {
    for (uint64_t i = 0; i < nelmts; ++i) {
      const Entry e = fmt->decode(b);
      unravel(i, g.max_grid, out.coords());
      if (Status s = out.emit(e.addr, e.size, e.mask); !s.ok()) return s;
    }
    return b.ok() ? Status::Ok() : corrupt("its fixed array data block is truncated");
  }
  const std::vector<uint8_t> bitmap(buf.begin() + static_cast<long>(prefix - bitmap_bytes), buf.begin() + static_cast<long>(prefix));
  std::vector<uint8_t> page;
  const uint64_t full_page_bytes = page_elems * fmt->bytes() + 4;
  for (uint64_t p = 0; p < npages; ++p) {
    // Pages never written are not initialised on disk: every entry in them is unallocated.
    if (!(bitmap[p / 8] & (0x80u >> (p % 8)))) continue;
    const uint64_t first = p * page_elems;
    const uint64_t n = std::min(page_elems, nelmts - first);
    const uint64_t page_bytes = n * fmt->bytes() + 4;
    if (Status s = file.read(dblock + block_bytes + p * full_page_bytes, page_bytes, page, "fixed array page"); !s.ok()) return s;
    if (!checksum_ok(page.data(), page_bytes - 4)) return corrupt("its fixed array page " + std::to_string(p) + " fails its checksum");
    Cursor pc(page);
    for (uint64_t i = 0; i < n; ++i) {
      const Entry e = fmt->decode(pc);
      unravel(first + i, g.max_grid, out.coords());
      if (Status s = out.emit(e.addr, e.size, e.mask); !s.ok()) return s;
    }
  }
  return Status::Ok();
}


}  // namespace h5chunk::index_parts
