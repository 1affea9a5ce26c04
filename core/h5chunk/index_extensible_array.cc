// The extensible array chunk index (layout version 4, index type 4).
#include "h5chunk/index_parts.h"

namespace h5chunk::index_parts {

namespace {

// ---------------------------------------------------------------------------------------------
// Extensible array: "EAHD" header, "EAIB" index block, "EASB" super blocks, "EADB" data blocks

class ExtensibleArray {
 public:
  ExtensibleArray(const IndexFileReader& file, const Geometry& g, const Layout& lay, Emitter& out)
      : file_(file), g_(g), lay_(lay), out_(out) {}

  Status read(size_t unlim_axis) {
    const unsigned O = g_.O, L = g_.L;
    // libhdf5 numbers entries with the unlimited axis moved first (the others keep their order),
    // over the maximum extent of the others: entry i is (unlimited, rest...) in C order.
    swizzled_dims_.push_back(0);
    for (size_t d = 0; d < g_.rank; ++d) {
      if (d != unlim_axis) swizzled_dims_.push_back(g_.max_grid[d]);
    }
    unlim_axis_ = unlim_axis;
    uint64_t per_row = 1;
    for (size_t d = 1; d < swizzled_dims_.size(); ++d) {
      auto next = checked_mul(per_row, swizzled_dims_[d]);
      if (!next) return corrupt("its extensible array spans too many chunks");
      per_row = *next;
    }
    // Entries past the current extent are never emitted. The walk reads only the blocks that
    // exist (a sparse array's unwritten data blocks and pages have no address or no init bit),
    // so its time follows the written chunks, not the extent; entries decoded are bounded.
    needed_ = checked_mul(per_row, g_.grid[unlim_axis]).value_or(UINT64_MAX);
    swizzled_.resize(g_.rank);

    std::vector<uint8_t> buf;
    const uint64_t header_bytes = 4 + 1 + 1 + 6 + 6 * L + O + 4;
    if (Status s = file_.read(lay_.address, header_bytes, buf, "extensible array header"); !s.ok()) return s;
    Cursor c(buf);
    if (!c.signature("EAHD")) return corrupt("its extensible array header lacks its EAHD signature");
    if (!checksum_ok(buf.data(), header_bytes - 4)) return corrupt("its extensible array header fails its checksum");
    if (c.u(1) != 0) return Unsupported("the extensible array header has an unknown version");
    client_ = static_cast<unsigned>(c.u(1));
    const unsigned elem_bytes = static_cast<unsigned>(c.u(1));
    max_bits_ = static_cast<unsigned>(c.u(1));
    index_elements_ = static_cast<unsigned>(c.u(1));
    min_elements_ = static_cast<unsigned>(c.u(1));
    min_pointers_ = static_cast<unsigned>(c.u(1));
    page_bits_ = static_cast<unsigned>(c.u(1));
    c.skip(6 * uint64_t(L));  // statistics
    const uint64_t iblock = c.addr(O);
    auto fmt = entry_format(client_, elem_bytes, g_);
    if (!fmt.ok()) return fmt.status();
    fmt_ = *fmt;
    if (max_bits_ != lay_.ea_max_bits || index_elements_ != lay_.ea_index_elements || min_pointers_ != lay_.ea_min_pointers ||
        min_elements_ != lay_.ea_min_elements || page_bits_ != lay_.ea_page_bits) {
      return corrupt("its extensible array header disagrees with the layout message");
    }
    // libhdf5 requires powers of two here (H5EA__hdr_init); anything else is not its file.
    auto pow2 = [](unsigned v) { return v != 0 && (v & (v - 1)) == 0; };
    if (max_bits_ == 0 || max_bits_ > 64 || !pow2(min_elements_) || !pow2(min_pointers_) || page_bits_ == 0 ||
        page_bits_ > 32 || log2_floor(min_elements_) > max_bits_) {
      return corrupt("its extensible array header has impossible parameters");
    }
    if (iblock == kUndefined) return Status::Ok();
    return read_index_block(iblock);
  }

 private:
  struct SuperBlockInfo {
    uint64_t ndblks, dblk_nelmts, start_idx, start_dblk;
  };

  Status read_index_block(uint64_t addr) {
    const unsigned O = g_.O;
    // Super block geometry (H5EA__hdr_init): super block u holds 2^(u/2) data blocks of
    // 2^((u+1)/2) * min_elements entries each.
    const uint64_t nsblks = 1 + (max_bits_ - log2_floor(min_elements_));
    uint64_t start_idx = 0, start_dblk = 0;
    for (uint64_t u = 0; u < nsblks; ++u) {
      SuperBlockInfo s;
      s.ndblks = 1ull << (u / 2);
      s.dblk_nelmts = (1ull << ((u + 1) / 2)) * min_elements_;
      s.start_idx = start_idx;
      s.start_dblk = start_dblk;
      sblk_.push_back(s);
      // Past the current extent (or 2^64 entries) no later super block is read.
      auto span = checked_mul(s.ndblks, s.dblk_nelmts);
      auto next = span ? checked_add(start_idx, *span) : std::nullopt;
      if (!next || *next >= needed_) break;
      start_idx = *next;
      start_dblk += s.ndblks;
    }
    const uint64_t iblock_sblks = 2ull * log2_floor(min_pointers_);
    const uint64_t ndblk_addrs = 2ull * (min_pointers_ - 1);
    const uint64_t nsblk_addrs = nsblks > iblock_sblks ? nsblks - iblock_sblks : 0;
    const uint64_t bytes = 4 + 1 + 1 + O + uint64_t(index_elements_) * fmt_.bytes() + (ndblk_addrs + nsblk_addrs) * O + 4;
    std::vector<uint8_t> buf;
    if (Status s = file_.read(addr, bytes, buf, "extensible array index block"); !s.ok()) return s;
    Cursor c(buf);
    if (!c.signature("EAIB")) return corrupt("its extensible array index block lacks its EAIB signature");
    if (!checksum_ok(buf.data(), bytes - 4)) return corrupt("its extensible array index block fails its checksum");
    if (c.u(1) != 0 || c.u(1) != client_) return corrupt("its extensible array index block disagrees with its header");
    if (c.addr(O) != lay_.address) return corrupt("its extensible array index block points to another header");
    for (uint64_t i = 0; i < index_elements_; ++i) {
      const Entry e = fmt_.decode(c);
      if (Status s = emit(i, e); !s.ok()) return s;
    }
    std::vector<uint64_t> dblk_addrs(ndblk_addrs), sblk_addrs(nsblk_addrs);
    for (auto& a : dblk_addrs) a = c.addr(O);
    for (auto& a : sblk_addrs) a = c.addr(O);
    if (!c.ok()) return corrupt("its extensible array index block is truncated");
    for (uint64_t u = 0; u < sblk_.size(); ++u) {
      const SuperBlockInfo& s = sblk_[u];
      if (index_elements_ + s.start_idx >= needed_) break;
      if (u < iblock_sblks) {
        for (uint64_t j = 0; j < s.ndblks; ++j) {
          const uint64_t k = s.start_dblk + j;
          if (k >= dblk_addrs.size()) return corrupt("its extensible array index block is short of data blocks");
          // The index block's own data blocks are never paged in libhdf5's lookup.
          if (s.dblk_nelmts > (1ull << page_bits_)) return Unsupported("the extensible array pages a data block of its index block");
          if (Status st = read_data_block(dblk_addrs[k], index_elements_ + s.start_idx + j * s.dblk_nelmts, s.dblk_nelmts, nullptr, 0);
              !st.ok()) {
            return st;
          }
        }
      } else {
        const uint64_t k = u - iblock_sblks;
        if (k >= sblk_addrs.size()) return corrupt("its extensible array index block is short of super blocks");
        if (Status st = read_super_block(sblk_addrs[k], s); !st.ok()) return st;
      }
    }
    return Status::Ok();
  }

  Status read_super_block(uint64_t addr, const SuperBlockInfo& s) {
    if (addr == kUndefined) return Status::Ok();
    const unsigned O = g_.O;
    const uint64_t page_elems = 1ull << page_bits_;
    const uint64_t npages = s.dblk_nelmts > page_elems ? s.dblk_nelmts / page_elems : 0;
    const uint64_t page_init_bytes = npages ? (npages + 7) / 8 : 0;
    const unsigned off_bytes = (max_bits_ + 7) / 8;
    const uint64_t bytes = 4 + 1 + 1 + O + off_bytes + s.ndblks * page_init_bytes + s.ndblks * O + 4;
    std::vector<uint8_t> buf;
    if (Status st = file_.read(addr, bytes, buf, "extensible array super block"); !st.ok()) return st;
    Cursor c(buf);
    if (!c.signature("EASB")) return corrupt("its extensible array super block lacks its EASB signature");
    if (!checksum_ok(buf.data(), bytes - 4)) return corrupt("its extensible array super block fails its checksum");
    if (c.u(1) != 0 || c.u(1) != client_) return corrupt("its extensible array super block disagrees with its header");
    if (c.addr(O) != lay_.address) return corrupt("its extensible array super block points to another header");
    if (c.u(off_bytes) != s.start_idx) return corrupt("its extensible array super block sits at the wrong offset");
    std::vector<uint8_t> page_init(c.pos(), c.pos() + std::min<uint64_t>(c.left(), s.ndblks * page_init_bytes));
    c.skip(s.ndblks * page_init_bytes);
    std::vector<uint64_t> dblk_addrs(s.ndblks);
    for (auto& a : dblk_addrs) a = c.addr(O);
    if (!c.ok()) return corrupt("its extensible array super block is truncated");
    for (uint64_t j = 0; j < s.ndblks; ++j) {
      const uint64_t first = index_elements_ + s.start_idx + j * s.dblk_nelmts;
      if (first >= needed_) break;
      // Page j's init bits: bit (j * npages + p), most significant bit first.
      if (Status st = read_data_block(dblk_addrs[j], first, s.dblk_nelmts, npages ? &page_init : nullptr, j * npages); !st.ok()) return st;
    }
    return Status::Ok();
  }

  Status read_data_block(uint64_t addr, uint64_t first, uint64_t nelmts, const std::vector<uint8_t>* page_init, uint64_t bit0) {
    if (addr == kUndefined) return Status::Ok();
    const unsigned O = g_.O;
    const unsigned off_bytes = (max_bits_ + 7) / 8;
    const uint64_t prefix = 4 + 1 + 1 + O + off_bytes;
    const bool paged = page_init != nullptr;
    const uint64_t bytes = prefix + (paged ? 0 : nelmts * fmt_.bytes()) + 4;
    std::vector<uint8_t> buf;
    if (Status st = file_.read(addr, bytes, buf, "extensible array data block"); !st.ok()) return st;
    Cursor c(buf);
    if (!c.signature("EADB")) return corrupt("its extensible array data block lacks its EADB signature");
    if (!checksum_ok(buf.data(), bytes - 4)) return corrupt("its extensible array data block fails its checksum");
    if (c.u(1) != 0 || c.u(1) != client_) return corrupt("its extensible array data block disagrees with its header");
    if (c.addr(O) != lay_.address) return corrupt("its extensible array data block points to another header");
    // The block's offset in the array is not checked: libhdf5 computes it for the index block's
    // data blocks from the global data block number (H5EA__lookup_elmt), not the one we would.
    c.u(off_bytes);
    if (!paged) {
      for (uint64_t i = 0; i < nelmts; ++i) {
        const Entry e = fmt_.decode(c);
        if (Status st = emit(first + i, e); !st.ok()) return st;
      }
      return c.ok() ? Status::Ok() : corrupt("its extensible array data block is truncated");
    }
    const uint64_t page_elems = 1ull << page_bits_;
    const uint64_t npages = nelmts / page_elems;
    const uint64_t page_bytes = page_elems * fmt_.bytes() + 4;
    std::vector<uint8_t> page;
    for (uint64_t p = 0; p < npages; ++p) {
      const uint64_t bit = bit0 + p;
      if (bit / 8 >= page_init->size()) return corrupt("its extensible array super block is short of page bits");
      if (!((*page_init)[bit / 8] & (0x80u >> (bit % 8)))) continue;
      const uint64_t at = first + p * page_elems;
      if (at >= needed_) break;
      if (Status st = file_.read(addr + bytes + p * page_bytes, page_bytes, page, "extensible array page"); !st.ok()) return st;
      if (!checksum_ok(page.data(), page_bytes - 4)) return corrupt("its extensible array page fails its checksum");
      Cursor pc(page);
      for (uint64_t i = 0; i < page_elems; ++i) {
        const Entry e = fmt_.decode(pc);
        if (Status st = emit(at + i, e); !st.ok()) return st;
      }
    }
    return Status::Ok();
  }

  Status emit(uint64_t idx, const Entry& e) {
    if (++decoded_ > kMaxIndexEntries) {
      return Unsupported("the extensible array holds more than " + std::to_string(kMaxIndexEntries) + " entries in its written blocks");
    }
    if (idx >= needed_) return Status::Ok();
    unravel(idx, swizzled_dims_, swizzled_.data());
    uint64_t* coords = out_.coords();
    coords[unlim_axis_] = swizzled_[0];
    for (size_t d = 0, s = 1; d < g_.rank; ++d) {
      if (d != unlim_axis_) coords[d] = swizzled_[s++];
    }
    return out_.emit(e.addr, e.size, e.mask);
  }

  const IndexFileReader& file_;
  const Geometry& g_;
  const Layout& lay_;
  Emitter& out_;
  EntryFormat fmt_;
  unsigned client_ = 0, max_bits_ = 0, index_elements_ = 0, min_elements_ = 0, min_pointers_ = 0, page_bits_ = 0;
  std::vector<SuperBlockInfo> sblk_;
  std::vector<uint64_t> swizzled_dims_, swizzled_;
  size_t unlim_axis_ = 0;
  uint64_t needed_ = 0;
  uint64_t decoded_ = 0;  // entries decoded so far (bounded by kMaxIndexEntries)
};


}  // namespace

Status read_extensible_array(const IndexFileReader& file, const Geometry& g, const Layout& lay,
                             size_t unlim_axis, Emitter& out) {
  ExtensibleArray ea(file, g, lay, out);
  return ea.read(unlim_axis);
}

}  // namespace h5chunk::index_parts
