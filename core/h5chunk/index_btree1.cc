// The v1 B-tree chunk index (layout message version 3, and version 4 index type 0).
#include "h5chunk/index_parts.h"

namespace h5chunk::index_parts {

namespace {

// ---------------------------------------------------------------------------------------------
// v1 B-tree (layout version 3): "TREE" nodes of type 1, keys (size, mask, element offsets)

class Btree1 {
 public:
  Btree1(const IndexFileReader& file, const Geometry& g, Emitter& out) : file_(file), g_(g), out_(out) {}

  Status walk(uint64_t addr, int expected_level, unsigned depth) {
    if (depth > kMaxTreeDepth) return corrupt("its v1 B-tree is deeper than " + std::to_string(kMaxTreeDepth));
    if (++nodes_ > node_limit()) return corrupt("its v1 B-tree has more nodes than chunks (a cycle?)");
    const unsigned O = g_.O;
    const uint64_t key_bytes = 8 + 8 * (g_.rank + 1);
    std::vector<uint8_t> buf;
    if (Status s = file_.read(addr, 8, buf, "v1 B-tree node"); !s.ok()) return s;
    if (std::memcmp(buf.data(), "TREE", 4) != 0) return corrupt("its v1 B-tree node lacks its TREE signature");
    if (buf[4] != 1) return corrupt("its v1 B-tree node has type " + std::to_string(buf[4]) + ", not 1 (chunks)");
    const int level = buf[5];
    const uint64_t entries = buf[6] | (uint64_t(buf[7]) << 8);
    if (expected_level >= 0 && level != expected_level) return corrupt("its v1 B-tree has a node at the wrong level");
    const uint64_t size = 8 + 2 * O + entries * (key_bytes + O) + key_bytes;
    if (Status s = file_.read(addr, size, buf, "v1 B-tree node"); !s.ok()) return s;
    Cursor c(buf);
    c.skip(8 + 2 * O);
    for (uint64_t i = 0; i < entries; ++i) {
      const uint64_t nbytes = c.u(4);
      const uint32_t mask = static_cast<uint32_t>(c.u(4));
      for (size_t d = 0; d <= g_.rank; ++d) offsets_[d] = c.u(8);
      const uint64_t child = c.addr(O);
      if (!c.ok()) return corrupt("its v1 B-tree node is truncated");
      if (level > 0) {
        if (Status s = walk(child, level - 1, depth + 1); !s.ok()) return s;
        continue;
      }
      if (offsets_[g_.rank] != 0) return corrupt("its v1 B-tree key has a nonzero element offset");
      // An unfiltered chunk is stored whole, edge chunks included. Another size means the
      // pipeline message or the key is damaged (a pipeline patched to "no filters" over
      // compressed chunks makes H5Dread return uninitialised memory): never a chunk to read.
      if (!g_.filtered && nbytes != g_.chunk_bytes && nbytes != 0) {
        return corrupt("its v1 B-tree stores a chunk of " + std::to_string(nbytes) + " bytes for a dataset without filters, whose chunks are " +
                       std::to_string(g_.chunk_bytes) + " bytes");
      }
      for (size_t d = 0; d < g_.rank; ++d) {
        if (offsets_[d] % chunk_[d] != 0) return corrupt("its v1 B-tree key holds an offset off the chunk grid");
        out_.coords()[d] = offsets_[d] / chunk_[d];
      }
      if (Status s = out_.emit(child, nbytes, mask); !s.ok()) return s;
    }
    return Status::Ok();
  }

  std::vector<uint64_t> chunk_;
  std::vector<uint64_t> offsets_;
  uint64_t total_chunks_ = 0;

 private:
  // A sound tree has fewer nodes than chunks (every node holds at least one entry).
  uint64_t node_limit() const { return total_chunks_ + 64; }
  const IndexFileReader& file_;
  const Geometry& g_;
  Emitter& out_;
  uint64_t nodes_ = 0;
};


}  // namespace

Status read_btree1(const IndexFileReader& file, const Geometry& g, const std::vector<uint64_t>& chunk,
                   uint64_t total_chunks, uint64_t address, Emitter& out) {
  Btree1 tree(file, g, out);
  tree.chunk_ = chunk;
  tree.offsets_.resize(g.rank + 1);
  tree.total_chunks_ = total_chunks;
  return tree.walk(address, -1, 0);
}

}  // namespace h5chunk::index_parts
