#include "h5chunk/chunk_index.h"

#include <endian.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "h5chunk/checked.h"

namespace h5chunk {

using hubfs::Corrupt;
using hubfs::IoError;
using hubfs::Unsupported;

namespace {

// ---------------------------------------------------------------------------------------------
// Limits. Each bounds what a hostile file can make us read, allocate or loop over; a real file
// stays far inside them (or falls back to libhdf5's per-chunk queries, which still works).

// One object header block (the first chunk or a continuation). libhdf5 writes them in KiB;
// 16 MiB leaves room for headers full of compact attributes.
constexpr uint64_t kMaxHeaderBlockBytes = 16ull << 20;
// Object header blocks per header: each continuation adds one; a cycle of continuations would
// otherwise loop forever.
constexpr unsigned kMaxHeaderBlocks = 4096;
// B-tree depth: a 64-deep tree of even 2-way nodes holds 2^64 chunks.
constexpr unsigned kMaxTreeDepth = 64;
// Array index entries visited (fixed/extensible array elements): 2^28 chunks is 2^28 entries in
// a dense table, beyond anything h5chunk is asked to index in one go.
constexpr uint64_t kMaxIndexEntries = 1ull << 28;
// Bytes read in one pread of index structure (a node, a data block page): far above any real
// node (v1 B-tree nodes are ~2 KiB; array pages hold 1024 entries, ~20 KiB).
constexpr uint64_t kMaxBlockBytes = 64ull << 20;

constexpr uint64_t kUndefined = ~0ull;  // HADDR_UNDEF: every address byte 0xff

// Object header message types (HDF5 format spec IV.A.2).
constexpr unsigned kMsgLayout = 0x08;
constexpr unsigned kMsgContinuation = 0x10;

// Data Layout message version 4 chunk index types (H5D_chunk_index_t).
enum IndexType : unsigned { kBtree1 = 0, kImplicit = 2, kSingle = 1, kFixedArray = 3, kExtensibleArray = 4, kBtree2 = 5 };
constexpr unsigned kLayoutFlagSingleFiltered = 0x02;
constexpr unsigned kLayoutFlagsKnown = 0x03;

// "the dataset's chunk index is damaged: its fixed array header fails its checksum".
Status corrupt(const std::string& what) { return Corrupt("the dataset's chunk index is damaged: " + what); }

// ---------------------------------------------------------------------------------------------
// Reading and decoding

class IndexFileReader {
 public:
  explicit IndexFileReader(const ChunkIndexSource& src) : src_(src) {}

  Status init() {
    if (src_.source) {
      file_size_ = src_.source->size();
      return Status::Ok();
    }
    const off_t end = ::lseek(src_.fd, 0, SEEK_END);
    if (end < 0) return IoError(std::string("cannot size the file: ") + std::strerror(errno));
    file_size_ = static_cast<uint64_t>(end);
    return Status::Ok();
  }

  // `n` bytes at relative address `addr`, all inside the file.
  Status read(uint64_t addr, uint64_t n, std::vector<uint8_t>& out, const char* what) const {
    if (addr == kUndefined) return corrupt(std::string("it points to an undefined ") + what);
    if (n > kMaxBlockBytes) return corrupt(std::string("it declares a ") + what + " of " + std::to_string(n) + " bytes");
    auto at = checked_add(addr, src_.base_address);
    auto stop = at ? checked_add(*at, n) : std::nullopt;
    if (!stop || *stop > file_size_) {
      return corrupt(std::string("it places a ") + what + " of " + std::to_string(n) + " bytes at " +
                     std::to_string(addr) + ", past the end of the file (" + std::to_string(file_size_) + " bytes)");
    }
    out.resize(n);
    size_t done = 0;
    while (done < n && src_.source) {
      auto r = src_.source->pread(out.data() + done, *at + done, n - done);
      if (!r.ok()) return r.status().with_context("cannot read the chunk index");
      if (*r == 0) return IoError("cannot read the chunk index: end of file");
      done += *r;
    }
    while (done < n) {
      ssize_t r = ::pread(src_.fd, out.data() + done, n - done, static_cast<off_t>(*at + done));
      if (r < 0 && errno == EINTR) continue;
      if (r <= 0) return IoError(std::string("cannot read the chunk index: ") + (r < 0 ? std::strerror(errno) : "end of file"));
      done += static_cast<size_t>(r);
    }
    return Status::Ok();
  }

  const ChunkIndexSource& src() const { return src_; }

 private:
  const ChunkIndexSource& src_;
  uint64_t file_size_ = 0;
};

// A bounds-checked little-endian decoder over one block. Reading past the end sets `bad` and
// yields zeros; callers check `ok()` before trusting what they decoded.
class Cursor {
 public:
  Cursor(const uint8_t* p, size_t n) : p_(p), end_(p + n) {}
  explicit Cursor(const std::vector<uint8_t>& v) : Cursor(v.data(), v.size()) {}

  uint64_t u(size_t n) {
    if (n > 8 || static_cast<size_t>(end_ - p_) < n) {
      bad_ = true;
      p_ = end_;
      return 0;
    }
    uint64_t v = 0;
    for (size_t i = 0; i < n; ++i) v |= uint64_t(p_[i]) << (8 * i);
    p_ += n;
    return v;
  }
  // An address of `n` bytes: all-ones is "undefined", whatever the width.
  uint64_t addr(size_t n) {
    const uint64_t v = u(n);
    return (n < 8 ? v == (1ull << (8 * n)) - 1 : v == kUndefined) ? kUndefined : v;
  }
  void skip(uint64_t n) {
    if (static_cast<uint64_t>(end_ - p_) < n) {
      bad_ = true;
      p_ = end_;
    } else {
      p_ += n;
    }
  }
  bool signature(const char* sig) {
    if (end_ - p_ < 4 || std::memcmp(p_, sig, 4) != 0) return false;
    p_ += 4;
    return true;
  }
  const uint8_t* pos() const { return p_; }
  size_t left() const { return static_cast<size_t>(end_ - p_); }
  bool ok() const { return !bad_; }

 private:
  const uint8_t* p_;
  const uint8_t* end_;
  bool bad_ = false;
};

// The checksum stored little-endian in the 4 bytes after data[0, len).
bool checksum_ok(const uint8_t* data, size_t len) {
  uint32_t stored = 0;
  std::memcpy(&stored, data + len, 4);  // callers guarantee len + 4 bytes
  return le32toh(stored) == hdf5_checksum(data, len);
}

unsigned log2_floor(uint64_t v) { return v == 0 ? 0 : 63u - static_cast<unsigned>(__builtin_clzll(v)); }

// Bytes libhdf5 uses to encode a filtered chunk's size in array and v2 B-tree entries: one more
// than the unfiltered chunk size needs, in case a filter grows the chunk (H5D_*_crt_context).
unsigned chunk_size_len(uint64_t chunk_bytes) {
  const unsigned len = 1 + (log2_floor(chunk_bytes) + 8) / 8;
  return len > 8 ? 8 : len;
}

// ---------------------------------------------------------------------------------------------
// Object header: find the Data Layout message.

struct HeaderFacts {
  std::vector<uint8_t> layout;  // the layout message's body
};

struct Block {
  uint64_t addr, size;
};

Status scan_messages(Cursor c, unsigned version, bool creation_order, unsigned O, unsigned L,
                     HeaderFacts& facts, std::vector<Block>& pending) {
  // v1 messages: type(2) size(2) flags(1) reserved(3), bodies padded to 8 bytes.
  // v2 messages: type(1) size(2) flags(1) [creation order(2)]; a gap shorter than a message
  // header may end a block.
  const size_t head = version == 1 ? 8 : (creation_order ? 6 : 4);
  while (c.left() >= head) {
    const unsigned type = static_cast<unsigned>(version == 1 ? c.u(2) : c.u(1));
    const uint64_t size = c.u(2);
    c.u(1);  // flags
    c.skip(version == 1 ? 3 : (creation_order ? 2 : 0));
    if (size > c.left()) return corrupt("the dataset's object header has a message running past its block");
    Cursor body(c.pos(), static_cast<size_t>(size));
    c.skip(size);
    if (type == kMsgLayout) {
      if (!facts.layout.empty()) return corrupt("the dataset's object header holds two layout messages");
      facts.layout.assign(body.pos(), body.pos() + size);
    } else if (type == kMsgContinuation) {
      Block b;
      b.addr = body.addr(O);
      b.size = body.u(L);
      if (!body.ok()) return corrupt("the dataset's object header has a truncated continuation message");
      pending.push_back(b);
    }
    // Every other message (dataspace, datatype, fill value, filters, attributes, null padding)
    // is libhdf5's business: it told the caller what they say.
  }
  return Status::Ok();
}

Result<HeaderFacts> read_object_header(const IndexFileReader& file) {
  const ChunkIndexSource& src = file.src();
  HeaderFacts facts;
  std::vector<uint8_t> buf;
  std::vector<Block> pending;  // continuation blocks still to read
  const unsigned O = src.sizeof_addr, L = src.sizeof_size;
  // First block: its prefix tells the version.
  const uint64_t addr = src.header_address;
  if (Status s = file.read(addr, 16, buf, "object header"); !s.ok()) return s;
  unsigned version;
  bool creation_order = false;
  if (std::memcmp(buf.data(), "OHDR", 4) == 0) {
    version = 2;
    if (buf[4] != 2) return Unsupported("the dataset's object header has version " + std::to_string(buf[4]));
    const unsigned flags = buf[5];
    creation_order = flags & 0x04;
    uint64_t prefix = 6 + ((flags & 0x20) ? 16 : 0) + ((flags & 0x10) ? 4 : 0);
    const unsigned size_bytes = 1u << (flags & 0x03);
    if (Status s = file.read(addr, prefix + size_bytes, buf, "object header"); !s.ok()) return s;
    Cursor c(buf.data() + prefix, size_bytes);
    const uint64_t chunk0 = c.u(size_bytes);
    if (chunk0 > kMaxHeaderBlockBytes) return corrupt("the dataset's object header is " + std::to_string(chunk0) + " bytes");
    prefix += size_bytes;
    if (Status s = file.read(addr, prefix + chunk0 + 4, buf, "object header"); !s.ok()) return s;
    if (!checksum_ok(buf.data(), prefix + chunk0)) return corrupt("the dataset's object header fails its checksum");
    if (Status s = scan_messages(Cursor(buf.data() + prefix, chunk0), 2, creation_order, O, L, facts, pending); !s.ok()) return s;
  } else {
    version = 1;
    if (buf[0] != 1) return Unsupported("the dataset's object header has version " + std::to_string(buf[0]));
    Cursor c(buf.data() + 8, 4);
    const uint64_t chunk0 = c.u(4);
    if (chunk0 > kMaxHeaderBlockBytes) return corrupt("the dataset's object header is " + std::to_string(chunk0) + " bytes");
    // The v1 prefix is 12 bytes, padded to 16 so that messages stay 8-byte aligned.
    if (Status s = file.read(addr + 16, chunk0, buf, "object header"); !s.ok()) return s;
    if (Status s = scan_messages(Cursor(buf), 1, false, O, L, facts, pending); !s.ok()) return s;
  }
  for (size_t i = 0; i < pending.size(); ++i) {
    if (i >= kMaxHeaderBlocks) return corrupt("the dataset's object header has more than " + std::to_string(kMaxHeaderBlocks) + " continuation blocks");
    const Block b = pending[i];
    if (b.size > kMaxHeaderBlockBytes) return corrupt("the dataset's object header has a continuation of " + std::to_string(b.size) + " bytes");
    if (Status s = file.read(b.addr, b.size, buf, "object header continuation"); !s.ok()) return s;
    if (version == 2) {
      if (b.size < 8 || std::memcmp(buf.data(), "OCHK", 4) != 0) return corrupt("the dataset's object header continuation lacks its OCHK signature");
      if (!checksum_ok(buf.data(), b.size - 4)) return corrupt("the dataset's object header continuation fails its checksum");
      if (Status s = scan_messages(Cursor(buf.data() + 4, b.size - 8), 2, creation_order, O, L, facts, pending); !s.ok()) return s;
    } else {
      if (Status s = scan_messages(Cursor(buf), 1, false, O, L, facts, pending); !s.ok()) return s;
    }
  }
  if (facts.layout.empty()) return corrupt("the dataset's object header has no layout message");
  return facts;
}

// ---------------------------------------------------------------------------------------------
// The dataset's geometry and the parsed layout

struct Geometry {
  size_t rank = 0;
  std::vector<uint64_t> grid;      // chunks per axis, current extent
  std::vector<uint64_t> max_grid;  // chunks per axis, maximum extent (UINT64_MAX: unlimited)
  uint64_t chunk_bytes = 0;        // unfiltered chunk size (libhdf5's layout "size")
  bool filtered = false;
  unsigned O = 8, L = 8;
};

struct Layout {
  unsigned index_type = kBtree1;
  unsigned flags = 0;
  uint64_t address = kUndefined;
  // single chunk, filtered
  uint64_t single_size = 0;
  uint32_t single_mask = 0;
  // fixed array
  unsigned fa_page_bits = 0;
  // extensible array
  unsigned ea_max_bits = 0, ea_index_elements = 0, ea_min_pointers = 0, ea_min_elements = 0, ea_page_bits = 0;
};

Result<Layout> parse_layout(const std::vector<uint8_t>& body, const ChunkIndexSource& src, Geometry& g) {
  Cursor c(body);
  Layout lay;
  const unsigned version = static_cast<unsigned>(c.u(1));
  if (version != 3 && version != 4) return Unsupported("the layout message has version " + std::to_string(version));
  if (c.u(1) != 2) return corrupt("its layout message does not describe chunked storage");
  std::vector<uint64_t> dims;
  if (version == 3) {
    const unsigned ndims = static_cast<unsigned>(c.u(1));
    lay.address = c.addr(g.O);
    for (unsigned i = 0; i < ndims && c.ok(); ++i) dims.push_back(c.u(4));
  } else {
    lay.flags = static_cast<unsigned>(c.u(1));
    if (lay.flags & ~kLayoutFlagsKnown) return Unsupported("the layout message has unknown flags " + std::to_string(lay.flags));
    const unsigned ndims = static_cast<unsigned>(c.u(1));
    const unsigned enc = static_cast<unsigned>(c.u(1));
    if (enc == 0 || enc > 8) return corrupt("its layout message encodes chunk dimensions in " + std::to_string(enc) + " bytes");
    for (unsigned i = 0; i < ndims && c.ok(); ++i) dims.push_back(c.u(enc));
    lay.index_type = static_cast<unsigned>(c.u(1));
    switch (lay.index_type) {
      case kSingle:
        if (lay.flags & kLayoutFlagSingleFiltered) {
          lay.single_size = c.u(g.L);
          lay.single_mask = static_cast<uint32_t>(c.u(4));
        }
        break;
      case kImplicit:
        break;
      case kFixedArray:
        lay.fa_page_bits = static_cast<unsigned>(c.u(1));
        break;
      case kExtensibleArray:
        lay.ea_max_bits = static_cast<unsigned>(c.u(1));
        lay.ea_index_elements = static_cast<unsigned>(c.u(1));
        lay.ea_min_pointers = static_cast<unsigned>(c.u(1));
        lay.ea_min_elements = static_cast<unsigned>(c.u(1));
        lay.ea_page_bits = static_cast<unsigned>(c.u(1));
        break;
      case kBtree2:
        c.skip(6);  // node size, split and merge percentages: the header repeats what we need
        break;
      default:
        return Unsupported("the layout message names chunk index type " + std::to_string(lay.index_type));
    }
    lay.address = c.addr(g.O);
  }
  if (!c.ok()) return corrupt("its layout message is truncated");
  // The chunk dimensions, then the element size: they must be what libhdf5 told the caller.
  if (dims.size() != src.chunk.size() + 1) return corrupt("its layout message has " + std::to_string(dims.size()) + " dimensions for a rank-" + std::to_string(src.chunk.size()) + " dataset");
  for (size_t d = 0; d < src.chunk.size(); ++d) {
    if (dims[d] != src.chunk[d]) return corrupt("its layout message disagrees with libhdf5 on the chunk shape");
  }
  if (dims.back() != src.elem_size) return corrupt("its layout message disagrees with libhdf5 on the element size");
  auto bytes = checked_product(dims);
  if (!bytes || *bytes == 0 || *bytes > UINT32_MAX) return corrupt("its layout message declares chunks of more than 4 GiB");
  g.chunk_bytes = *bytes;
  return lay;
}

// ---------------------------------------------------------------------------------------------
// Emitting chunks

class Emitter {
 public:
  Emitter(const Geometry& g, const std::function<Status(const IndexedChunk&)>& sink) : g_(g), sink_(sink), coords_(g.rank) {}

  uint64_t* coords() { return coords_.data(); }

  // The chunk at coords(): reported when inside the current extent (a chunk beyond it can only
  // be left over from a larger extent and no read asks for it).
  Status emit(uint64_t addr, uint64_t size, uint32_t mask) {
    for (size_t d = 0; d < g_.rank; ++d) {
      if (coords_[d] >= g_.grid[d]) return Status::Ok();
    }
    // An undefined address is an unallocated chunk. A defined one with a size of 0 is passed
    // on: no writer stores an empty chunk, and the caller reports it as damage naming the chunk
    // (read as unallocated, it would turn into fill values where H5Dread fails).
    if (addr == kUndefined) return Status::Ok();
    IndexedChunk c;
    c.grid = coords_.data();
    c.address = addr;
    c.size = size;
    c.filter_mask = mask;
    ++emitted_;
    return sink_(c);
  }
  uint64_t emitted() const { return emitted_; }

 private:
  const Geometry& g_;
  const std::function<Status(const IndexedChunk&)>& sink_;
  std::vector<uint64_t> coords_;
  uint64_t emitted_ = 0;
};

// Sets `coords` to the grid position of array entry `idx` over `dims` in C order (the first
// axis absorbs whatever is left, as libhdf5's unlimited axis does).
void unravel(uint64_t idx, const std::vector<uint64_t>& dims, uint64_t* coords) {
  for (size_t d = dims.size(); d-- > 1;) {
    coords[d] = idx % dims[d];
    idx /= dims[d];
  }
  if (!dims.empty()) coords[0] = idx;
}

// An array entry (fixed or extensible array element).
struct Entry {
  uint64_t addr = kUndefined, size = 0;
  uint32_t mask = 0;
};

struct EntryFormat {
  unsigned O = 8;
  bool filtered = false;
  unsigned size_len = 0;
  uint64_t chunk_bytes = 0;
  unsigned bytes() const { return filtered ? O + size_len + 4 : O; }
  Entry decode(Cursor& c) const {
    Entry e;
    e.addr = c.addr(O);
    if (filtered) {
      e.size = c.u(size_len);
      e.mask = static_cast<uint32_t>(c.u(4));
    } else {
      e.size = chunk_bytes;
    }
    return e;
  }
};

// The entry format an array header declares (client id 0: addresses; 1: filtered entries with
// size and mask), checked against the dataset.
Result<EntryFormat> entry_format(unsigned client, unsigned elem_bytes, const Geometry& g) {
  EntryFormat f;
  f.O = g.O;
  f.chunk_bytes = g.chunk_bytes;
  if (client > 1) return corrupt("its array names client " + std::to_string(client));
  f.filtered = client == 1;
  if (f.filtered != g.filtered) return corrupt(std::string("its array entries are ") + (f.filtered ? "filtered" : "unfiltered") + " but the dataset's are not");
  f.size_len = f.filtered ? chunk_size_len(g.chunk_bytes) : 0;
  if (elem_bytes != f.bytes()) return corrupt("its array entries are " + std::to_string(elem_bytes) + " bytes, expected " + std::to_string(f.bytes()));
  return f;
}

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

// ---------------------------------------------------------------------------------------------

uint32_t hdf5_checksum(const uint8_t* k, size_t length) {
  // Bob Jenkins' lookup3 hashlittle() on bytes, initial value 0 (H5_checksum_lookup3).
  auto rot = [](uint32_t x, int r) { return (x << r) | (x >> (32 - r)); };
  uint32_t a, b, c;
  a = b = c = 0xdeadbeef + static_cast<uint32_t>(length);
  while (length > 12) {
    a += k[0] + (uint32_t(k[1]) << 8) + (uint32_t(k[2]) << 16) + (uint32_t(k[3]) << 24);
    b += k[4] + (uint32_t(k[5]) << 8) + (uint32_t(k[6]) << 16) + (uint32_t(k[7]) << 24);
    c += k[8] + (uint32_t(k[9]) << 8) + (uint32_t(k[10]) << 16) + (uint32_t(k[11]) << 24);
    a -= c; a ^= rot(c, 4);  c += b;
    b -= a; b ^= rot(a, 6);  a += c;
    c -= b; c ^= rot(b, 8);  b += a;
    a -= c; a ^= rot(c, 16); c += b;
    b -= a; b ^= rot(a, 19); a += c;
    c -= b; c ^= rot(b, 4);  b += a;
    length -= 12;
    k += 12;
  }
  switch (length) {
    case 12: c += uint32_t(k[11]) << 24; [[fallthrough]];
    case 11: c += uint32_t(k[10]) << 16; [[fallthrough]];
    case 10: c += uint32_t(k[9]) << 8; [[fallthrough]];
    case 9: c += k[8]; [[fallthrough]];
    case 8: b += uint32_t(k[7]) << 24; [[fallthrough]];
    case 7: b += uint32_t(k[6]) << 16; [[fallthrough]];
    case 6: b += uint32_t(k[5]) << 8; [[fallthrough]];
    case 5: b += k[4]; [[fallthrough]];
    case 4: a += uint32_t(k[3]) << 24; [[fallthrough]];
    case 3: a += uint32_t(k[2]) << 16; [[fallthrough]];
    case 2: a += uint32_t(k[1]) << 8; [[fallthrough]];
    case 1: a += k[0]; break;
    case 0: return c;
  }
  c ^= b; c -= rot(b, 14);
  a ^= c; a -= rot(c, 11);
  b ^= a; b -= rot(a, 25);
  c ^= b; c -= rot(b, 16);
  a ^= c; a -= rot(c, 4);
  b ^= a; b -= rot(a, 14);
  c ^= b; c -= rot(b, 24);
  return c;
}

Result<std::string> read_chunk_index(const ChunkIndexSource& src,
                                     const std::function<Status(const IndexedChunk&)>& sink) {
  if (src.sizeof_addr < 2 || src.sizeof_addr > 8 || src.sizeof_size < 2 || src.sizeof_size > 8) {
    return Unsupported("the file uses " + std::to_string(src.sizeof_addr) + "-byte addresses");
  }
  if (src.shape.size() != src.chunk.size() || src.maxdims.size() != src.chunk.size() || src.chunk.empty()) {
    return hubfs::InvalidArgument("read_chunk_index: shape, maximum shape and chunk shape differ in rank");
  }
  IndexFileReader file(src);
  if (Status s = file.init(); !s.ok()) return s;
  auto header = read_object_header(file);
  if (!header.ok()) return header.status();

  Geometry g;
  g.rank = src.chunk.size();
  g.O = src.sizeof_addr;
  g.L = src.sizeof_size;
  // Whether entries carry sizes and masks follows libhdf5's view of the pipeline (a pipeline
  // message with no filters would not count).
  g.filtered = src.filtered;
  size_t unlimited = 0, unlim_axis = 0;
  for (size_t d = 0; d < g.rank; ++d) {
    if (src.chunk[d] == 0) return corrupt("its chunk shape has a zero dimension");
    g.grid.push_back(ceil_div(src.shape[d], src.chunk[d]));
    const bool unlim = src.maxdims[d] == UINT64_MAX;
    g.max_grid.push_back(unlim ? UINT64_MAX : ceil_div(src.maxdims[d], src.chunk[d]));
    if (unlim) {
      ++unlimited;
      unlim_axis = d;
    }
  }
  auto total = checked_product(g.grid);
  if (!total) return Unsupported("the dataset has more than 2^64 chunks");
  auto layout = parse_layout(header->layout, src, g);
  if (!layout.ok()) return layout.status();
  Emitter out(g, sink);

  switch (layout->index_type) {
    case kBtree1: {
      if (layout->address == kUndefined) return std::string("v1 B-tree");
      Btree1 tree(file, g, out);
      tree.chunk_ = src.chunk;
      tree.offsets_.resize(g.rank + 1);
      tree.total_chunks_ = *total;
      if (Status s = tree.walk(layout->address, -1, 0); !s.ok()) return s;
      return std::string("v1 B-tree");
    }
    case kSingle: {
      for (size_t d = 0; d < g.rank; ++d) {
        if (g.grid[d] > 1) return corrupt("it is a single chunk, but the dataset spans several");
        out.coords()[d] = 0;
      }
      const bool filtered = layout->flags & kLayoutFlagSingleFiltered;
      if (filtered != g.filtered) return corrupt("its single chunk disagrees with the dataset on filtering");
      if (Status s = out.emit(layout->address, filtered ? layout->single_size : g.chunk_bytes, filtered ? layout->single_mask : 0); !s.ok()) return s;
      return std::string("single chunk");
    }
    case kImplicit: {
      // Every chunk of the maximum extent has its place in one contiguous block, C order.
      if (g.filtered) return corrupt("it is implicit, but the dataset is filtered");
      if (unlimited) return corrupt("it is implicit, but the dataset has an unlimited axis");
      if (layout->address == kUndefined) return std::string("implicit");
      auto n = checked_product(g.max_grid);
      if (!n || *n > kMaxIndexEntries) return Unsupported("the implicit index spans too many chunks");
      if (!checked_mul(*n, g.chunk_bytes)) return corrupt("it is implicit and larger than 2^64 bytes");
      for (uint64_t i = 0; i < *n; ++i) {
        unravel(i, g.max_grid, out.coords());
        if (Status s = out.emit(layout->address + i * g.chunk_bytes, g.chunk_bytes, 0); !s.ok()) return s;
      }
      return std::string("implicit");
    }
    case kFixedArray: {
      if (unlimited) return corrupt("it is a fixed array, but the dataset has an unlimited axis");
      if (layout->address == kUndefined) return std::string("fixed array");
      if (Status s = read_fixed_array(file, g, *layout, out); !s.ok()) return s;
      return std::string("fixed array");
    }
    case kExtensibleArray: {
      if (unlimited != 1) return corrupt("it is an extensible array, but the dataset has " + std::to_string(unlimited) + " unlimited axes");
      if (layout->address == kUndefined) return std::string("extensible array");
      ExtensibleArray ea(file, g, *layout, out);
      if (Status s = ea.read(unlim_axis); !s.ok()) return s;
      return std::string("extensible array");
    }
    case kBtree2: {
      if (layout->address == kUndefined) return std::string("v2 B-tree");
      Btree2 tree(file, g, out);
      if (Status s = tree.read(layout->address, *total); !s.ok()) return s;
      return std::string("v2 B-tree");
    }
  }
  return Unsupported("unknown chunk index type");
}

}  // namespace h5chunk
