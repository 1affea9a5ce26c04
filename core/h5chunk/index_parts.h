// The pieces the chunk-index readers share (internal to core/h5chunk, not an interface): the
// limits a hostile file is held to, a bounds-checked reader of the file and decoder of its
// blocks, the dataset's geometry and parsed layout, and the emitter that reports chunks to the
// caller's sink. One reader per index format, each in its own file (index_*.cc); chunk_index.cc
// finds the layout message and dispatches.
#pragma once

#include <endian.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <functional>
#include <string>
#include <vector>

#include "h5chunk/checked.h"
#include "h5chunk/chunk_index.h"

namespace h5chunk::index_parts {

using hubfs::Corrupt;
using hubfs::IoError;
using hubfs::Unsupported;

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
inline Status corrupt(const std::string& what) { return Corrupt("the dataset's chunk index is damaged: " + what); }

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
inline bool checksum_ok(const uint8_t* data, size_t len) {
  uint32_t stored = 0;
  std::memcpy(&stored, data + len, 4);  // callers guarantee len + 4 bytes
  return le32toh(stored) == hdf5_checksum(data, len);
}

inline unsigned log2_floor(uint64_t v) { return v == 0 ? 0 : 63u - static_cast<unsigned>(__builtin_clzll(v)); }

// Bytes libhdf5 uses to encode a filtered chunk's size in array and v2 B-tree entries: one more
// than the unfiltered chunk size needs, in case a filter grows the chunk (H5D_*_crt_context).
inline unsigned chunk_size_len(uint64_t chunk_bytes) {
  const unsigned len = 1 + (log2_floor(chunk_bytes) + 8) / 8;
  return len > 8 ? 8 : len;
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
inline void unravel(uint64_t idx, const std::vector<uint64_t>& dims, uint64_t* coords) {
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
inline Result<EntryFormat> entry_format(unsigned client, unsigned elem_bytes, const Geometry& g) {
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
// One reader per index format: each reports every allocated chunk inside the current extent to
// `out`, or the first damage it finds.

// v1 B-tree (index_btree1.cc).
Status read_btree1(const IndexFileReader& file, const Geometry& g, const std::vector<uint64_t>& chunk,
                   uint64_t total_chunks, uint64_t address, Emitter& out);
// Single chunk (index_single_chunk.cc).
Status read_single_chunk(const Geometry& g, const Layout& lay, Emitter& out);
// Implicit (index_implicit.cc): every chunk of the maximum extent in one contiguous block.
Status read_implicit(const Geometry& g, const Layout& lay, bool has_unlimited_axis, Emitter& out);
// Fixed array (index_fixed_array.cc).
Status read_fixed_array(const IndexFileReader& file, const Geometry& g, const Layout& lay, Emitter& out);
// Extensible array (index_extensible_array.cc), over the dataset's one unlimited axis.
Status read_extensible_array(const IndexFileReader& file, const Geometry& g, const Layout& lay,
                             size_t unlim_axis, Emitter& out);
// v2 B-tree (index_btree2.cc).
Status read_btree2(const IndexFileReader& file, const Geometry& g, uint64_t address, uint64_t total_chunks,
                   Emitter& out);

}  // namespace h5chunk::index_parts
