#include "xet/xorb.h"

#include <lz4frame.h>

#include <algorithm>
#include <cstring>
#include <limits>
#include <memory>

#include "common/big_buffer.h"

namespace hubfs::xet {
namespace {

constexpr char kFooterIdent[7] = {'X', 'E', 'T', 'B', 'L', 'O', 'B'};
constexpr char kHashesIdent[7] = {'X', 'B', 'L', 'B', 'H', 'S', 'H'};
constexpr char kBoundariesIdent[7] = {'X', 'B', 'L', 'B', 'B', 'N', 'D'};
constexpr uint8_t kFooterVersion = 1;  // V1: with unpacked offsets (V0 footers predate them)
constexpr uint8_t kHashesVersion = 0;
constexpr uint8_t kBoundariesVersion = 1;
// The footer's trailing reserved bytes (the upload nonce lives in its first 4).
constexpr size_t kFooterBufferLen = 16;
// Fixed part of the footer: 3 idents, 3 versions, 5 u32 (counts and offsets), the buffer, the hash.
constexpr size_t kFooterFixed = 3 * 7 + 3 + 5 * 4 + kFooterBufferLen + 32;


uint32_t load_u24(const uint8_t* p) { return uint32_t(p[0]) | uint32_t(p[1]) << 8 | uint32_t(p[2]) << 16; }
void store_u24(uint8_t* p, uint32_t v) {
  p[0] = uint8_t(v);
  p[1] = uint8_t(v >> 8);
  p[2] = uint8_t(v >> 16);
}
uint32_t load_u32(const uint8_t* p) { return load_u24(p) | uint32_t(p[3]) << 24; }
void put_u32(std::string* s, uint32_t v) {
  const char b[4] = {char(v), char(v >> 8), char(v >> 16), char(v >> 24)};
  s->append(b, 4);
}

struct DctxDeleter {
  void operator()(LZ4F_dctx* c) const { LZ4F_freeDecompressionContext(c); }
};

// Decodes LZ4 frames (one or more, concatenated) into exactly out_len bytes at out.
Status lz4_frame_decode(const uint8_t* src, size_t src_len, uint8_t* out, size_t out_len, uint64_t chunk_index) {
  LZ4F_dctx* raw = nullptr;
  if (LZ4F_isError(LZ4F_createDecompressionContext(&raw, LZ4F_VERSION))) {
    return Internal("LZ4 decompression context could not be created (out of memory?)");
  }
  std::unique_ptr<LZ4F_dctx, DctxDeleter> ctx(raw);
  size_t consumed = 0;
  size_t produced = 0;
  bool frame_done = false;
  while (consumed < src_len) {
    size_t dst_size = out_len - produced;
    size_t src_size = src_len - consumed;
    const size_t r = LZ4F_decompress(ctx.get(), out + produced, &dst_size, src + consumed, &src_size, nullptr);
    if (LZ4F_isError(r)) {
      return Corrupt(chunk_name(chunk_index) + ": LZ4 frame does not decode (" + LZ4F_getErrorName(r) +
                     "): the xorb bytes are damaged; fetch them again");
    }
    consumed += src_size;
    produced += dst_size;
    frame_done = r == 0;
    if (src_size == 0 && dst_size == 0) {
      // No progress with input left: the frame wants to write past the header's length.
      return Corrupt(chunk_name(chunk_index) + ": LZ4 frame decodes to more than the header's " +
                     std::to_string(out_len) + " bytes: the xorb bytes are damaged; fetch them again");
    }
  }
  if (!frame_done) {
    return Corrupt(chunk_name(chunk_index) + ": LZ4 frame is truncated: the xorb bytes are damaged; fetch them again");
  }
  if (produced != out_len) {
    return Corrupt(chunk_name(chunk_index) + ": LZ4 frame decodes to " + std::to_string(produced) +
                   " bytes, the header says " + std::to_string(out_len) + ": the xorb bytes are damaged");
  }
  return Status::Ok();
}

Result<std::string> lz4_frame_encode(const uint8_t* data, size_t len) {
  LZ4F_preferences_t prefs{};
  prefs.frameInfo.contentSize = len;  // lets a decoder size its output up front
  std::string out(LZ4F_compressFrameBound(len, &prefs), '\0');
  const size_t n = LZ4F_compressFrame(out.data(), out.size(), data, len, &prefs);
  if (LZ4F_isError(n)) return Internal(std::string("LZ4 frame compression failed: ") + LZ4F_getErrorName(n));
  out.resize(n);
  return out;
}

// Group g's length and start for a buffer of len bytes.
size_t bg4_group_len(size_t len, int g) { return len / 4 + (static_cast<size_t>(g) < len % 4 ? 1 : 0); }

}  // namespace

std::string chunk_name(uint64_t index) { return "xorb chunk " + std::to_string(index); }

Result<ChunkHeader> parse_chunk_header(const uint8_t* p, size_t len, uint64_t chunk_index) {
  if (len < kChunkHeaderSize) {
    return Corrupt(chunk_name(chunk_index) + ": only " + std::to_string(len) +
                   " bytes left for its 8-byte header: the xorb range is truncated");
  }
  if (std::memcmp(p, kFooterIdent, sizeof(kFooterIdent)) == 0) {
    return Corrupt(chunk_name(chunk_index) + ": the xorb's footer begins where this chunk should: the range holds fewer chunks than expected");
  }
  ChunkHeader h;
  h.version = p[0];
  h.compressed_size = load_u24(p + 1);
  h.uncompressed_size = load_u24(p + 5);
  if (h.version > kChunkHeaderVersion) {
    return Corrupt(chunk_name(chunk_index) + ": header version " + std::to_string(h.version) +
                   " is newer than this reader's " + std::to_string(kChunkHeaderVersion) +
                   " (or the bytes are damaged): update hubfs or read through the bridge");
  }
  switch (p[4]) {
    case 0: h.scheme = CompressionScheme::kNone; break;
    case 1: h.scheme = CompressionScheme::kLz4; break;
    case 2: h.scheme = CompressionScheme::kByteGrouping4Lz4; break;
    default:
      return Corrupt(chunk_name(chunk_index) + ": unknown compression scheme " + std::to_string(p[4]) +
                     " (known: 0 none, 1 LZ4, 2 byte grouping + LZ4): damaged bytes or a newer format");
  }
  if (h.uncompressed_size > kMaxChunkSize) {
    return Corrupt(chunk_name(chunk_index) + ": header says " + std::to_string(h.uncompressed_size) +
                   " bytes, more than the largest chunk (" + std::to_string(kMaxChunkSize) + "): damaged bytes");
  }
  if (h.compressed_size > kMaxStoredChunkSize) {
    return Corrupt(chunk_name(chunk_index) + ": header says " + std::to_string(h.compressed_size) +
                   " stored bytes, more than " + std::to_string(kMaxStoredChunkSize) + ": damaged bytes");
  }
  if (h.scheme == CompressionScheme::kNone && h.compressed_size != h.uncompressed_size) {
    return Corrupt(chunk_name(chunk_index) + ": an uncompressed chunk whose stored size (" +
                   std::to_string(h.compressed_size) + ") differs from its size (" +
                   std::to_string(h.uncompressed_size) + "): damaged bytes");
  }
  return h;
}

void write_chunk_header(const ChunkHeader& h, uint8_t out[kChunkHeaderSize]) {
  out[0] = h.version;
  store_u24(out + 1, h.compressed_size);
  out[4] = static_cast<uint8_t>(h.scheme);
  store_u24(out + 5, h.uncompressed_size);
}

std::string bg4_split(const uint8_t* data, size_t len) {
  std::string out(len, '\0');
  size_t start = 0;
  for (int g = 0; g < 4; ++g) {
    const size_t n = bg4_group_len(len, g);
    for (size_t i = 0; i < n; ++i) out[start + i] = static_cast<char>(data[4 * i + g]);
    start += n;
  }
  return out;
}

std::string bg4_regroup(const uint8_t* data, size_t len) {
  std::string out(len, '\0');
  size_t start = 0;
  for (int g = 0; g < 4; ++g) {
    const size_t n = bg4_group_len(len, g);
    for (size_t i = 0; i < n; ++i) out[4 * i + g] = static_cast<char>(data[start + i]);
    start += n;
  }
  return out;
}

Status decode_chunk_payload(const ChunkHeader& h, const uint8_t* payload, uint64_t chunk_index, std::string* out) {
  const size_t base = out->size();
  switch (h.scheme) {
    case CompressionScheme::kNone:
      if (h.compressed_size != h.uncompressed_size) {
        return Corrupt(chunk_name(chunk_index) + ": uncompressed chunk with differing sizes");
      }
      out->append(reinterpret_cast<const char*>(payload), h.compressed_size);
      return Status::Ok();
    case CompressionScheme::kLz4: {
      out->resize(base + h.uncompressed_size);
      Status s = lz4_frame_decode(payload, h.compressed_size, reinterpret_cast<uint8_t*>(out->data()) + base,
                                  h.uncompressed_size, chunk_index);
      if (!s.ok()) out->resize(base);
      return s;
    }
    case CompressionScheme::kByteGrouping4Lz4: {
      std::string grouped(h.uncompressed_size, '\0');
      Status s = lz4_frame_decode(payload, h.compressed_size, reinterpret_cast<uint8_t*>(grouped.data()),
                                  grouped.size(), chunk_index);
      if (!s.ok()) return s;
      out->append(bg4_regroup(reinterpret_cast<const uint8_t*>(grouped.data()), grouped.size()));
      return Status::Ok();
    }
  }
  return Internal("unhandled compression scheme");
}

Status append_chunk(CompressionScheme scheme, const void* data, size_t len, std::string* xorb) {
  if (len > kMaxChunkSize) {
    return InvalidArgument("a " + std::to_string(len) + "-byte chunk is larger than Xet's largest (" +
                           std::to_string(kMaxChunkSize) + "): cut it with the Chunker");
  }
  const auto* p = static_cast<const uint8_t*>(data);
  std::string stored;
  if (scheme == CompressionScheme::kLz4) {
    auto r = lz4_frame_encode(p, len);
    if (!r.ok()) return r.status();
    stored = std::move(r.value());
  } else if (scheme == CompressionScheme::kByteGrouping4Lz4) {
    const std::string grouped = bg4_split(p, len);
    auto r = lz4_frame_encode(reinterpret_cast<const uint8_t*>(grouped.data()), grouped.size());
    if (!r.ok()) return r.status();
    stored = std::move(r.value());
  }
  ChunkHeader h;
  h.uncompressed_size = static_cast<uint32_t>(len);
  if (scheme == CompressionScheme::kNone || stored.size() >= len) {
    h.scheme = CompressionScheme::kNone;
    stored.assign(reinterpret_cast<const char*>(p), len);
  } else {
    h.scheme = scheme;
  }
  h.compressed_size = static_cast<uint32_t>(stored.size());
  uint8_t hdr[kChunkHeaderSize];
  write_chunk_header(h, hdr);
  xorb->append(reinterpret_cast<const char*>(hdr), sizeof(hdr));
  xorb->append(stored);
  return Status::Ok();
}

namespace {
// What decoding [data, data + len) will produce, as far as its headers parse (at most
// max_output), and whether every chunk is stored as-is: a capacity and a choice of method, not
// a check.
struct Scan {
  size_t total = 0;
  bool all_stored_as_is = true;
  bool well_formed = true;  // every header parsed and fits; the decoder would not fail on sizes
  // The most the decoded output ever runs ahead of the input read so far (output end minus
  // input end, after each chunk; at least 0): how far the input must be moved up for an
  // in-place decode whose output never overwrites input not yet read.
  size_t growth = 0;
};
Scan scan_chunks(const uint8_t* data, size_t len, uint64_t first_chunk, std::optional<size_t> expected_chunks,
                 size_t max_output) {
  Scan scan;
  size_t pos = 0, count = 0;
  while (expected_chunks ? count < *expected_chunks : pos < len) {
    auto h = parse_chunk_header(data + pos, len - pos, first_chunk + count);
    if (!h.ok() || h->compressed_size > len - pos - kChunkHeaderSize) {
      scan.all_stored_as_is = false;  // the decoder reports it
      scan.well_formed = false;
      break;
    }
    if (h->scheme != CompressionScheme::kNone) scan.all_stored_as_is = false;
    if (h->uncompressed_size > max_output - scan.total) {
      scan.total = max_output;
      scan.well_formed = false;
      break;
    }
    scan.total += h->uncompressed_size;
    pos += kChunkHeaderSize + h->compressed_size;
    if (scan.total > pos) scan.growth = std::max(scan.growth, scan.total - pos);
    ++count;
  }
  if (expected_chunks ? pos != len : false) scan.well_formed = false;
  return scan;
}

// decode_chunks; with `in_place` (holding data[0, len) at some offset, moved up enough that the
// output, written from its start, never reaches input not yet read: Scan::growth) each chunk is
// decoded inside it (stored as-is: moved down over its header; compressed: decoded into a
// chunk-sized scratch, then copied down), and it becomes the result's data.
Result<DecodedChunks> decode(const uint8_t* data, size_t len, uint64_t first_chunk,
                             std::optional<size_t> expected_chunks, size_t max_output, std::string* in_place,
                             const DecodeExtras& extras) {
  // Offsets are kept as u32: a xorb is at most 64 MiB, and no caller asks for 4 GiB at once.
  max_output = std::min<size_t>(max_output, std::numeric_limits<uint32_t>::max());
  if (len > std::numeric_limits<uint32_t>::max()) {
    return InvalidArgument("a xorb range of " + std::to_string(len) + " bytes: xorbs are at most 64 MiB");
  }
  DecodedChunks out;
  // The output is sized once, from the headers, before anything is decoded: appending chunk by
  // chunk to a growing string copied every byte again at each doubling (with a page fault per
  // 4 KiB of each new copy), which profiling showed as the largest cost of a native Xet read.
  // Only a size; the loop below checks every header again.
  if (!in_place) {
    if (const size_t total = scan_chunks(data, len, first_chunk, expected_chunks, max_output).total; total > 0) {
      out.data.reserve(total);
      advise_huge_pages(out.data.data(), total);
    }
  }
  if (expected_chunks) {
    // Every chunk has at least its header: a count the bytes cannot hold is refused before any
    // vector is sized by it.
    if (*expected_chunks > len / kChunkHeaderSize) {
      return Corrupt("xorb range of " + std::to_string(len) + " bytes cannot hold the " +
                     std::to_string(*expected_chunks) + " chunks it should (from chunk " +
                     std::to_string(first_chunk) + "): truncated response or wrong range");
    }
    out.ends.reserve(*expected_chunks);
    out.packed_ends.reserve(*expected_chunks);
    if (extras.hash) out.hashes.reserve(*expected_chunks);
  }
  size_t pos = 0, produced = 0;
  uint64_t index = first_chunk;
  std::string scratch;  // one compressed chunk's output, for an in-place decode
  // Where the kept content starts in the decoded content: known once chunk keep_from_chunk is
  // reached (every byte before it is dropped); until then nothing is written.
  std::optional<uint64_t> keep_from;
  // Writes the part of a chunk's content [chunk_start, chunk_start + n) from `src` that is kept,
  // at its place in the output (in place: never past the input not yet read, checked below).
  auto place = [&](const uint8_t* src, uint64_t chunk_start, size_t n) {
    if (!keep_from || chunk_start + n <= *keep_from) return;
    const uint64_t from = std::max<uint64_t>(chunk_start, *keep_from);
    std::memmove(in_place->data() + (from - *keep_from), src + (from - chunk_start), chunk_start + n - from);
  };
  while (expected_chunks ? out.count() < *expected_chunks : pos < len) {
    if (!expected_chunks && len - pos >= sizeof(kFooterIdent) &&
        std::memcmp(data + pos, kFooterIdent, sizeof(kFooterIdent)) == 0) {
      break;  // the footer of a whole xorb
    }
    auto h = parse_chunk_header(data + pos, len - pos, index);
    if (!h.ok()) return h.status();
    const size_t payload = pos + kChunkHeaderSize;
    if (h->compressed_size > len - payload) {
      return Corrupt(chunk_name(index) + ": header says " + std::to_string(h->compressed_size) +
                     " stored bytes, only " + std::to_string(len - payload) +
                     " remain in the range: truncated response or damaged header");
    }
    if (h->uncompressed_size > max_output - produced) {
      return Corrupt(chunk_name(index) + ": decoding it would exceed the " + std::to_string(max_output) +
                     " bytes expected for this range: damaged header or a wrong reconstruction term");
    }
    if (!keep_from && index - first_chunk == extras.keep_from_chunk) keep_from = produced + extras.keep_skip;
    if (in_place) {
      // The input this chunk's output may cover ends where the next chunk's header starts (the
      // output is written at or below `produced`: dropped bytes only move it down).
      const size_t input_end = static_cast<size_t>(data - reinterpret_cast<const uint8_t*>(in_place->data())) +
                               payload + h->compressed_size;
      if (produced + h->uncompressed_size > input_end) {
        return Internal("an in-place decode would overwrite its own input at " + chunk_name(index));
      }
      if (h->scheme == CompressionScheme::kNone) {
        // parse_chunk_header checked that its two sizes agree. Hashed before it moves: the same
        // bytes, in cache for the move.
        if (extras.hash) out.hashes.push_back(chunk_hash(data + payload, h->uncompressed_size));
        place(data + payload, produced, h->uncompressed_size);
      } else {
        scratch.clear();
        Status s = decode_chunk_payload(*h, data + payload, index, &scratch);
        if (!s.ok()) return s;
        if (scratch.size() != h->uncompressed_size) return Corrupt(chunk_name(index) + ": decoded to the wrong size");
        if (extras.hash) out.hashes.push_back(chunk_hash(scratch.data(), scratch.size()));
        place(reinterpret_cast<const uint8_t*>(scratch.data()), produced, scratch.size());
      }
      produced += h->uncompressed_size;
    } else {
      const size_t base = out.data.size();
      Status s = decode_chunk_payload(*h, data + payload, index, &out.data);
      if (!s.ok()) return s;
      if (extras.hash) out.hashes.push_back(chunk_hash(out.data.data() + base, out.data.size() - base));
      produced = out.data.size();
    }
    pos = payload + h->compressed_size;
    out.ends.push_back(static_cast<uint32_t>(produced));
    out.packed_ends.push_back(static_cast<uint32_t>(pos));
    ++index;
  }
  if (expected_chunks && pos != len) {
    return Corrupt("xorb range holds " + std::to_string(len - pos) + " bytes after its " +
                   std::to_string(*expected_chunks) + " chunks (from chunk " + std::to_string(first_chunk) +
                   "): the range and the chunk count disagree");
  }
  // Past the end (a chunk index past the last, or bytes past the content): everything dropped.
  out.dropped = std::min<uint64_t>(keep_from.value_or(produced), produced);
  if (in_place) {
    in_place->resize(produced - out.dropped);
    out.data = std::move(*in_place);
  } else if (out.dropped > 0) {
    out.data.erase(0, out.dropped);  // a range too tight to decode in place (rare): trimmed after
  }
  return out;
}
}  // namespace

Result<DecodedChunks> decode_chunks(const uint8_t* data, size_t len, uint64_t first_chunk,
                                    std::optional<size_t> expected_chunks, size_t max_output,
                                    const DecodeExtras& extras) {
  return decode(data, len, first_chunk, expected_chunks, max_output, nullptr, extras);
}

Result<DecodedChunks> decode_chunks(std::string&& range, uint64_t first_chunk, std::optional<size_t> expected_chunks,
                                    size_t max_output, const DecodeExtras& extras) {
  const auto* data = reinterpret_cast<const uint8_t*>(range.data());
  const size_t len = range.size();
  const Scan scan = scan_chunks(data, len, first_chunk, expected_chunks, max_output);
  // In place when the buffer has room for the output to grow past the input (chunks that LZ4
  // compressed decode larger than they are stored): a second buffer as large as the range is a
  // range's worth of fresh pages, which on a VM cost the reading application as well (docs/xet.md).
  if (!scan.well_formed || range.capacity() - len < scan.growth) {
    return decode(data, len, first_chunk, expected_chunks, max_output, nullptr, extras);
  }
  std::string bytes = std::move(range);
  if (scan.growth > 0) {
    bytes.resize(len + scan.growth);  // within its capacity: no reallocation
    std::memmove(bytes.data() + scan.growth, bytes.data(), len);
  }
  return decode(reinterpret_cast<const uint8_t*>(bytes.data()) + scan.growth, len, first_chunk, expected_chunks,
                max_output, &bytes, extras);
}

std::string serialize_footer(const XorbFooter& f) {
  const uint32_t n = static_cast<uint32_t>(f.chunk_hashes.size());
  std::string s;
  s.append(kFooterIdent, 7);
  s.push_back(static_cast<char>(kFooterVersion));
  s.append(reinterpret_cast<const char*>(f.xorb_hash.bytes.data()), 32);
  const size_t hashes_start = s.size();
  s.append(kHashesIdent, 7);
  s.push_back(static_cast<char>(kHashesVersion));
  put_u32(&s, n);
  for (const auto& h : f.chunk_hashes) s.append(reinterpret_cast<const char*>(h.bytes.data()), 32);
  const size_t boundaries_start = s.size();
  s.append(kBoundariesIdent, 7);
  s.push_back(static_cast<char>(kBoundariesVersion));
  put_u32(&s, n);
  for (uint32_t v : f.chunk_ends) put_u32(&s, v);
  for (uint32_t v : f.unpacked_ends) put_u32(&s, v);
  put_u32(&s, n);
  // Both section offsets count to the end of the footer: the two offsets and the buffer remain.
  const size_t end = s.size() + 2 * 4 + kFooterBufferLen;
  put_u32(&s, static_cast<uint32_t>(end - hashes_start));
  put_u32(&s, static_cast<uint32_t>(end - boundaries_start));
  s.append(kFooterBufferLen, '\0');
  put_u32(&s, static_cast<uint32_t>(s.size()));
  return s;
}

Result<XorbFooter> parse_footer(const uint8_t* tail, size_t len, size_t* footer_bytes) {
  auto bad = [](const std::string& what) {
    return Corrupt("xorb footer: " + what + ": the xorb is damaged or not a xorb");
  };
  if (len < 4) return bad("fewer than 4 bytes");
  const uint32_t info_len = load_u32(tail + len - 4);
  if (info_len < kFooterFixed || info_len > len - 4) {
    return bad("its length field says " + std::to_string(info_len) + " bytes, " + std::to_string(len - 4) +
               " are available and at least " + std::to_string(kFooterFixed) + " are needed");
  }
  const uint8_t* p = tail + (len - 4 - info_len);
  const uint8_t* end = p + info_len;
  const uint8_t* footer_start = p;
  if (std::memcmp(p, kFooterIdent, 7) != 0) return bad("no XETBLOB ident");
  if (p[7] != kFooterVersion) {
    return Unsupported("xorb footer version " + std::to_string(p[7]) + " (this reader knows version " +
                       std::to_string(kFooterVersion) + "): chunks cannot be checked against it");
  }
  p += 8;
  XorbFooter f;
  std::memcpy(f.xorb_hash.bytes.data(), p, 32);
  p += 32;
  const uint8_t* hashes_start = p;
  if (std::memcmp(p, kHashesIdent, 7) != 0 || p[7] != kHashesVersion) return bad("no XBLBHSH v0 section");
  const uint32_t n = load_u32(p + 8);
  p += 12;
  // The count is checked against the bytes present before anything is sized by it.
  const uint64_t need = uint64_t(n) * (32 + 4 + 4);
  if (need > uint64_t(info_len - kFooterFixed)) {
    return bad(std::to_string(n) + " chunks cannot fit in a " + std::to_string(info_len) + "-byte footer");
  }
  if (uint64_t(info_len) != kFooterFixed + need) {
    return bad("length " + std::to_string(info_len) + " does not match " + std::to_string(n) + " chunks");
  }
  f.chunk_hashes.resize(n);
  for (auto& h : f.chunk_hashes) {
    std::memcpy(h.bytes.data(), p, 32);
    p += 32;
  }
  const uint8_t* boundaries_start = p;
  if (std::memcmp(p, kBoundariesIdent, 7) != 0 || p[7] != kBoundariesVersion) return bad("no XBLBBND v1 section");
  if (load_u32(p + 8) != n) return bad("the boundaries section's chunk count differs from the hashes section's");
  p += 12;
  f.chunk_ends.resize(n);
  f.unpacked_ends.resize(n);
  for (auto& v : f.chunk_ends) {
    v = load_u32(p);
    p += 4;
  }
  for (auto& v : f.unpacked_ends) {
    v = load_u32(p);
    p += 4;
  }
  if (load_u32(p) != n) return bad("the trailing chunk count differs from the sections'");
  const uint32_t hashes_off = load_u32(p + 4);
  const uint32_t boundaries_off = load_u32(p + 8);
  p += 12 + kFooterBufferLen;
  if (p != end) return bad("sections do not fill the footer");
  if (hashes_off != uint64_t(end - hashes_start) || boundaries_off != uint64_t(end - boundaries_start)) {
    return bad("section offsets do not point at the sections");
  }
  uint64_t prev_packed = 0;  // 64-bit: a hostile end near 2^32 must not wrap the check
  uint32_t prev_unpacked = 0;
  for (uint32_t i = 0; i < n; ++i) {
    if (f.chunk_ends[i] < prev_packed + kChunkHeaderSize) return bad("chunk " + std::to_string(i) + " ends before it begins");
    if (f.unpacked_ends[i] < prev_unpacked || f.unpacked_ends[i] - prev_unpacked > kMaxChunkSize) {
      return bad("chunk " + std::to_string(i) + " has an impossible decoded size");
    }
    prev_packed = f.chunk_ends[i];
    prev_unpacked = f.unpacked_ends[i];
  }
  if (footer_bytes) *footer_bytes = size_t(end - footer_start) + 4;
  return f;
}

Status verify_chunks(const DecodedChunks& chunks, uint64_t first_chunk, const XorbFooter& footer) {
  if (footer.unpacked_ends.size() != footer.chunk_hashes.size()) {
    return InvalidArgument("xorb footer with " + std::to_string(footer.chunk_hashes.size()) + " hashes but " +
                           std::to_string(footer.unpacked_ends.size()) + " chunk sizes");
  }
  if (first_chunk > footer.chunk_hashes.size() || chunks.count() > footer.chunk_hashes.size() - first_chunk) {
    return Corrupt("chunks " + std::to_string(first_chunk) + ".." + std::to_string(first_chunk + chunks.count()) +
                   " are past the xorb's " + std::to_string(footer.chunk_hashes.size()) + " chunks");
  }
  uint32_t start = 0;
  for (size_t i = 0; i < chunks.count(); ++i) {
    const uint64_t index = first_chunk + i;
    const uint32_t len = chunks.ends[i] - start;
    const uint32_t want_len = footer.unpacked_ends[index] - (index ? footer.unpacked_ends[index - 1] : 0);
    if (len != want_len) {
      return Corrupt(chunk_name(index) + ": decoded to " + std::to_string(len) + " bytes, the footer says " +
                     std::to_string(want_len) + ": the xorb bytes are damaged; fetch them again");
    }
    if (chunk_hash(chunks.data.data() + start, len) != footer.chunk_hashes[index]) {
      return Corrupt(chunk_name(index) + ": content does not match its hash " + footer.chunk_hashes[index].hex() +
                     ": the xorb bytes are damaged; fetch them again");
    }
    start = chunks.ends[i];
  }
  return Status::Ok();
}

Result<uint32_t> XorbBuilder::add_chunk(const void* data, size_t len) {
  Status s = append_chunk(scheme_, data, len, &bytes_);
  if (!s.ok()) return s;
  chunks_.push_back({chunk_hash(data, len), len});
  chunk_ends_.push_back(static_cast<uint32_t>(bytes_.size()));
  unpacked_ends_.push_back(static_cast<uint32_t>((unpacked_ends_.empty() ? 0 : unpacked_ends_.back()) + len));
  return static_cast<uint32_t>(chunks_.size() - 1);
}

std::string XorbBuilder::finish(bool with_footer) const {
  std::string out = bytes_;
  if (with_footer) {
    XorbFooter f;
    f.xorb_hash = hash();
    for (const auto& c : chunks_) f.chunk_hashes.push_back(c.hash);
    f.chunk_ends = chunk_ends_;
    f.unpacked_ends = unpacked_ends_;
    out += serialize_footer(f);
  }
  return out;
}

}  // namespace hubfs::xet
