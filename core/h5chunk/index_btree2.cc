// The v2 B-tree chunk index (layout version 4, index type 5).
#include "h5chunk/index_parts.h"

namespace h5chunk::index_parts {

namespace {

// ---------------------------------------------------------------------------------------------
// v2 B-tree: "BTHD" header, "BTIN" internal and "BTLF" leaf nodes, records of type 10
// (unfiltered: address, scaled offsets) or 11 (filtered: address, size, mask, scaled offsets)

class Btree2 {
 public:
  Btree2(const IndexFileReader& file, const Geometry& g, Emitter& out) : file_(file), g_(g), out_(out) {}

  Status read(uint64_t addr, uint64_t total_chunks) {
    const unsigned O = g_.O, L = g_.L;
    std::vector<uint8_t> buf;
    const uint64_t header_bytes = 4 + 1 + 1 + 4 + 2 + 2 + 1 + 1 + O + 2 + L + 4;
    if (Status s = file_.read(addr, header_bytes, buf, "v2 B-tree header"); !s.ok()) return s;
    Cursor c(buf);
    if (!c.signature("BTHD")) return corrupt("its v2 B-tree header lacks its BTHD signature");
    if (!checksum_ok(buf.data(), header_bytes - 4)) return corrupt("its v2 B-tree header fails its checksum");
    if (c.u(1) != 0) return Unsupported("the v2 B-tree header has an unknown version");
    type_ = static_cast<unsigned>(c.u(1));
    node_size_ = c.u(4);
    record_bytes_ = c.u(2);
    const uint64_t depth = c.u(2);
    c.skip(2);  // split and merge percentages
    const uint64_t root = c.addr(O);
    const uint64_t root_records = c.u(2);
    const uint64_t total = c.u(L);
    if (type_ != 10 && type_ != 11) return corrupt("its v2 B-tree holds records of type " + std::to_string(type_));
    if ((type_ == 11) != g_.filtered) return corrupt("its v2 B-tree records disagree with the dataset on filtering");
    size_len_ = type_ == 11 ? chunk_size_len(g_.chunk_bytes) : 0;
    if (record_bytes_ != O + (type_ == 11 ? size_len_ + 4 : 0) + 8 * g_.rank) return corrupt("its v2 B-tree records have the wrong size");
    if (depth > kMaxTreeDepth) return corrupt("its v2 B-tree is deeper than " + std::to_string(kMaxTreeDepth));
    if (node_size_ < 64 || node_size_ > kMaxBlockBytes) return corrupt("its v2 B-tree declares nodes of " + std::to_string(node_size_) + " bytes");
    if (total > total_chunks) return corrupt("its v2 B-tree holds more records than the dataset has chunks");
    if (Status s = node_geometry(depth); !s.ok()) return s;
    if (root == kUndefined || total == 0) return Status::Ok();
    node_limit_ = total + 64;
    return walk(root, root_records, static_cast<unsigned>(depth));
  }

 private:
  static unsigned enc_size(uint64_t v) { return log2_floor(v) / 8 + 1; }  // H5VM_limit_enc_size

  // Records per node and the widths of the counts in child pointers (H5B2__hdr_init).
  Status node_geometry(uint64_t depth) {
    constexpr uint64_t kPrefix = 10;  // signature, version, type, checksum
    max_nrec_.assign(depth + 1, 0);
    cum_max_nrec_.assign(depth + 1, 0);
    cum_size_.assign(depth + 1, 0);
    max_nrec_[0] = (node_size_ - kPrefix) / record_bytes_;
    if (max_nrec_[0] == 0) return corrupt("its v2 B-tree nodes cannot hold a record");
    cum_max_nrec_[0] = max_nrec_[0];
    max_nrec_size_ = enc_size(max_nrec_[0]);
    for (uint64_t u = 1; u <= depth; ++u) {
      const uint64_t ptr = pointer_bytes(u);
      if (node_size_ < kPrefix + ptr) return corrupt("its v2 B-tree nodes are too small");
      max_nrec_[u] = (node_size_ - (kPrefix + ptr)) / (record_bytes_ + ptr);
      if (max_nrec_[u] == 0) return corrupt("its v2 B-tree internal nodes cannot hold a record");
      auto cum = checked_mul(max_nrec_[u] + 1, cum_max_nrec_[u - 1]);
      cum = cum ? checked_add(*cum, max_nrec_[u]) : std::nullopt;
      if (!cum) return corrupt("its v2 B-tree is too deep for its node size");
      cum_max_nrec_[u] = *cum;
      cum_size_[u] = enc_size(*cum);
    }
    return Status::Ok();
  }

  uint64_t pointer_bytes(uint64_t level) const {
    return g_.O + max_nrec_size_ + (level > 1 ? cum_size_[level - 1] : 0);
  }

  Status walk(uint64_t addr, uint64_t nrec, unsigned level) {
    if (++nodes_ > node_limit_) return corrupt("its v2 B-tree has more nodes than records (a cycle?)");
    if (nrec > max_nrec_[level]) return corrupt("its v2 B-tree node claims more records than fit");
    const bool leaf = level == 0;
    const uint64_t ptr = leaf ? 0 : pointer_bytes(level);
    const uint64_t bytes = 6 + nrec * record_bytes_ + (leaf ? 0 : (nrec + 1) * ptr) + 4;
    if (bytes > node_size_) return corrupt("its v2 B-tree node overflows its size");
    std::vector<uint8_t> buf;
    if (Status s = file_.read(addr, bytes, buf, "v2 B-tree node"); !s.ok()) return s;
    Cursor c(buf);
    if (!c.signature(leaf ? "BTLF" : "BTIN")) return corrupt(std::string("its v2 B-tree node lacks its ") + (leaf ? "BTLF" : "BTIN") + " signature");
    if (!checksum_ok(buf.data(), bytes - 4)) return corrupt("its v2 B-tree node fails its checksum");
    if (c.u(1) != 0 || c.u(1) != type_) return corrupt("its v2 B-tree node disagrees with its header");
    for (uint64_t i = 0; i < nrec; ++i) {
      const uint64_t chunk_addr = c.addr(g_.O);
      uint64_t size = g_.chunk_bytes;
      uint32_t mask = 0;
      if (type_ == 11) {
        size = c.u(size_len_);
        mask = static_cast<uint32_t>(c.u(4));
      }
      for (size_t d = 0; d < g_.rank; ++d) out_.coords()[d] = c.u(8);
      if (!c.ok()) return corrupt("its v2 B-tree node is truncated");
      if (Status s = out_.emit(chunk_addr, size, mask); !s.ok()) return s;
    }
    if (leaf) return Status::Ok();
    for (uint64_t i = 0; i <= nrec; ++i) {
      const uint64_t child = c.addr(g_.O);
      const uint64_t child_nrec = c.u(max_nrec_size_);
      if (level > 1) c.u(cum_size_[level - 1]);
      if (!c.ok()) return corrupt("its v2 B-tree node is truncated");
      if (Status s = walk(child, child_nrec, level - 1); !s.ok()) return s;
    }
    return Status::Ok();
  }

  const IndexFileReader& file_;
  const Geometry& g_;
  Emitter& out_;
  unsigned type_ = 0, size_len_ = 0, max_nrec_size_ = 0;
  uint64_t node_size_ = 0, record_bytes_ = 0, nodes_ = 0, node_limit_ = 0;
  std::vector<uint64_t> max_nrec_, cum_max_nrec_, cum_size_;
};

}  // namespace

Status read_btree2(const IndexFileReader& file, const Geometry& g, uint64_t address, uint64_t total_chunks,
                   Emitter& out) {
  Btree2 tree(file, g, out);
  return tree.read(address, total_chunks);
}

}  // namespace h5chunk::index_parts
