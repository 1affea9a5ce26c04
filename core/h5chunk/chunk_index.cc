// The chunk index's entry point: finds the dataset's Data Layout message in its object header,
// parses it, and hands the index to the reader of its format (index_*.cc, over the shared pieces
// of index_parts.h).
#include "h5chunk/chunk_index.h"

#include "h5chunk/index_parts.h"

namespace h5chunk {

using namespace index_parts;  // NOLINT: this file is the formats' dispatcher

namespace {

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

  // Each format's name, reported to the caller; an index not allocated yet (no chunk written)
  // holds no chunk.
  const bool unallocated = layout->address == kUndefined;
  switch (layout->index_type) {
    case kBtree1:
      if (unallocated) return std::string("v1 B-tree");
      if (Status s = read_btree1(file, g, src.chunk, *total, layout->address, out); !s.ok()) return s;
      return std::string("v1 B-tree");
    case kSingle:
      if (Status s = read_single_chunk(g, *layout, out); !s.ok()) return s;
      return std::string("single chunk");
    case kImplicit:
      if (Status s = read_implicit(g, *layout, unlimited > 0, out); !s.ok()) return s;
      return std::string("implicit");
    case kFixedArray:
      if (unlimited) return corrupt("it is a fixed array, but the dataset has an unlimited axis");
      if (unallocated) return std::string("fixed array");
      if (Status s = read_fixed_array(file, g, *layout, out); !s.ok()) return s;
      return std::string("fixed array");
    case kExtensibleArray:
      if (unlimited != 1) return corrupt("it is an extensible array, but the dataset has " + std::to_string(unlimited) + " unlimited axes");
      if (unallocated) return std::string("extensible array");
      if (Status s = read_extensible_array(file, g, *layout, unlim_axis, out); !s.ok()) return s;
      return std::string("extensible array");
    case kBtree2:
      if (unallocated) return std::string("v2 B-tree");
      if (Status s = read_btree2(file, g, layout->address, *total, out); !s.ok()) return s;
      return std::string("v2 B-tree");
  }
  return Unsupported("unknown chunk index type");
}

}  // namespace h5chunk
