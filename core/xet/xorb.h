// Xorbs, Xet's storage objects (docs/xet.md; xet-core xet_core_structures/src/xorb_object/):
// a run of chunks, each an 8-byte header and its (maybe compressed) bytes, then, in a whole
// xorb, a footer listing every chunk's hash and boundaries.
//
//   chunk header  version u8 (0) | compressed size u24 LE | scheme u8 | uncompressed size u24 LE
//   schemes       0 none, 1 LZ4 frame, 2 byte grouping by 4 then LZ4 frame
//   footer        "XETBLOB" v1, xorb hash, "XBLBHSH" chunk hashes, "XBLBBND" packed and unpacked
//                 chunk end offsets, fixed tail, then the footer's length as a trailing u32 LE
//
// The reconstruction API hands out byte ranges holding whole chunks; decode_chunks() decodes
// such a range. Input is hostile until checked: every length is bounds-checked before it is
// used, an allocation never exceeds what the caller allows, and an error names the chunk.
// Pure functions: safe from any thread.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "common/status.h"
#include "xet/chunker.h"
#include "xet/hash.h"

namespace hubfs::xet {

enum class CompressionScheme : uint8_t { kNone = 0, kLz4 = 1, kByteGrouping4Lz4 = 2 };

inline constexpr size_t kChunkHeaderSize = 8;
inline constexpr uint8_t kChunkHeaderVersion = 0;
// xet-core's header check (XorbChunkHeader::validate): a stored chunk is never more than twice
// the largest chunk, whatever the scheme.
inline constexpr size_t kMaxStoredChunkSize = 2 * kMaxChunkSize;

struct ChunkHeader {
  uint8_t version = kChunkHeaderVersion;
  uint32_t compressed_size = 0;
  CompressionScheme scheme = CompressionScheme::kNone;
  uint32_t uncompressed_size = 0;
};

// How errors name a chunk ("xorb chunk N", N its index in the xorb).
std::string chunk_name(uint64_t index);

// Parses and checks the 8 header bytes at p (len bytes available from p). chunk_index names the
// chunk in errors. Refuses a newer version, an unknown scheme, sizes past the limits above, a
// "none" chunk whose two sizes differ, and the footer's "XETBLOB" (the chunks have ended).
Result<ChunkHeader> parse_chunk_header(const uint8_t* p, size_t len, uint64_t chunk_index);
void write_chunk_header(const ChunkHeader& h, uint8_t out[kChunkHeaderSize]);

// Decodes one chunk's stored bytes (exactly h.compressed_size of them) into exactly
// h.uncompressed_size bytes appended to *out; anything else is kCorrupt.
Status decode_chunk_payload(const ChunkHeader& h, const uint8_t* payload, uint64_t chunk_index, std::string* out);

// Byte grouping by 4 (bg4.rs): byte i goes to group i % 4; groups are concatenated, the first
// len % 4 groups one byte longer. bg4_regroup inverts bg4_split.
std::string bg4_split(const uint8_t* data, size_t len);
std::string bg4_regroup(const uint8_t* data, size_t len);

// Stores one chunk: header then bytes compressed with `scheme`, or stored as-is when that is not
// smaller (as xet-core does). len must be at most kMaxChunkSize.
Status append_chunk(CompressionScheme scheme, const void* data, size_t len, std::string* xorb);

// The chunks decoded from a byte range of a xorb.
struct DecodedChunks {
  std::string data;                 // their content, concatenated (from byte `dropped` on)
  uint64_t sunk = 0;                // of it, bytes given to DecodeExtras::sink instead of `data`
  std::vector<uint32_t> ends;       // end offset of each chunk in the whole decoded content
  std::vector<uint32_t> packed_ends;  // end offset in the input of each chunk (headers included)
  std::vector<MerkleHash> hashes;   // each chunk's hash, when DecodeExtras::hash asked for them
  uint64_t dropped = 0;             // decoded bytes left out before data[0] (DecodeExtras::keep_from_chunk)
  size_t count() const { return ends.size(); }
};

// Where a ChunkStreamDecoder puts the bytes it keeps, instead of DecodedChunks::data: the
// reader's block slots, so the blocks of a range can be served while its later bytes are still
// on the wire (docs/xet.md, "Blocks served as they arrive"). Called on the decoder's thread.
class DecodeSink {
 public:
  virtual ~DecodeSink() = default;
  // Kept bytes [offset, offset + n), in order from 0 (a retried body starts at 0 again). A
  // non-OK Status fails the decoder with it.
  virtual Status put(uint64_t offset, const char* data, size_t n) = 0;
  // Kept bytes [0, bytes) are in, every chunk they come from decoded and hashed, and the answer
  // they come from is the range asked for (its status and Content-Range checked:
  // ChunkStreamDecoder::head_checked). Called after each chunk, `bytes` never smaller than before
  // in one body.
  virtual void ready(uint64_t bytes) = 0;
};

// What decode_chunks does in the same pass as decoding: the read path touches each byte once
// while it is in the CPU's cache, instead of decoding, then hashing, then trimming the whole
// range in three passes over memory (docs/xet.md, "What the measurements taught").
struct DecodeExtras {
  // Hash each chunk (chunk_hash) as it is decoded: DecodedChunks::hashes.
  bool hash = false;
  // Keep in `data` only the content from `keep_skip` bytes into chunk `keep_from_chunk` (counted
  // from the range's first chunk) on; what comes before is decoded (and hashed) but not written:
  // DecodedChunks::dropped says how much. A read's bytes start there, so no copy trims them.
  uint32_t keep_from_chunk = 0;
  uint64_t keep_skip = 0;
  // ChunkStreamDecoder only: the kept bytes go here instead (may be null). Must outlive the decoder.
  std::shared_ptr<DecodeSink> sink;
};

// Decodes a byte range that starts at a chunk header: exactly `expected_chunks` chunks filling
// the range when given (as the reconstruction API promises for a fetch range), else every chunk
// up to the end of the range or the start of a footer. first_chunk is the index of the first
// chunk (for errors only). max_output bounds the decoded size (the reconstruction term's length
// is the natural bound); exceeding it is an error before anything is allocated for it.
Result<DecodedChunks> decode_chunks(const uint8_t* data, size_t len, uint64_t first_chunk,
                                    std::optional<size_t> expected_chunks, size_t max_output,
                                    const DecodeExtras& extras = {});
// The same, taking the range's buffer: where its capacity leaves room for the output to run
// ahead of the input (chunks stored as-is shrink by their headers; LZ4-compressed ones grow),
// the chunks are decoded inside it, with no second buffer; otherwise as above.
Result<DecodedChunks> decode_chunks(std::string&& range, uint64_t first_chunk, std::optional<size_t> expected_chunks,
                                    size_t max_output, const DecodeExtras& extras = {});
// Capacity beyond a range's `stored` bytes that lets decode_chunks(std::string&&) decode its
// `chunks` chunks, `decoded` bytes in all, inside the range's buffer: the output runs ahead of
// the input by at most what it outgrows it by in the end plus a header per chunk (a chunk stored
// as-is shrinks by its header, a compressed one only grows).
inline size_t in_place_headroom(uint64_t decoded, uint64_t stored, uint64_t chunks) {
  return static_cast<size_t>((decoded > stored ? decoded - stored : 0) + chunks * kChunkHeaderSize);
}

// Decodes a range's chunks as its bytes arrive, in pieces of any size (a response body as the
// network hands it over, HttpRequest::body_sink): each chunk is checked, decoded and hashed as
// soon as its last byte is in, from the piece that holds it or, when it spans pieces, from a
// chunk-sized buffer reused for every chunk, so its bytes are read while they are in the CPU's
// cache and no range-sized buffer is filled first. The result, checks and errors are those of
// decode_chunks with expected_chunks (the output holds only the kept bytes: DecodeExtras). After
// the first failure nothing more is decoded; finish() reports it. Not thread-safe: one feeder.
class ChunkStreamDecoder {
 public:
  // `length`: the range's size in bytes (a count of chunks it cannot hold is refused);
  // output_capacity: reserved for the kept output up front (in huge pages when large; only what
  // is written is ever touched), so it grows without a copy when the caller knows its size.
  ChunkStreamDecoder(uint64_t first_chunk, size_t expected_chunks, uint64_t length, size_t max_output,
                     size_t output_capacity, const DecodeExtras& extras = {});
  // Starts again from the range's first byte (a retried body): what was fed is forgotten.
  void reset();
  void feed(const uint8_t* data, size_t n);
  uint64_t fed() const { return fed_; }
  // Maps the first `bytes` of the output's reserved memory (at most output_capacity) into the
  // process now, as if written, without touching their contents. Fresh memory costs a fault and
  // a zeroed page per page on first write; done here, on the thread that waits for the range,
  // while the request waits for its first byte, that cost leaves the transport's one thread,
  // which otherwise pays it inside feed() for every byte it copies (docs/xet.md, "What the
  // measurements taught"). Safe from any thread at any time, beside feed(), reset() and
  // finish(): it reads no member that they change and writes no byte. Returns false when the
  // kernel cannot (before Linux 5.14: MADV_POPULATE_WRITE), which changes nothing else.
  bool prefault_output(size_t bytes) const;
  // The answer whose body is fed next is the range asked for (its status and Content-Range were
  // checked before its first byte): only then does the sink hear of ready bytes. Reset by reset().
  void head_checked() { head_ok_ = true; }
  // Where the output's reserved memory starts (the data of finish()'s result, while the
  // output stays within output_capacity): for tests.
  const char* output_base() const { return output_base_; }
  // Once the range's bytes are all fed: its chunks, or the first failure (kCorrupt, as
  // decode_chunks). Ends this decoder's use until reset().
  Result<DecodedChunks> finish();

 private:
  // Consumes what the current step (a header, then its payload) needs from [p, p + n); returns
  // how many bytes it took.
  size_t step(const uint8_t* p, size_t n);
  void header_done(const uint8_t* h);
  void chunk_done(const uint8_t* payload);
  // Keeps [p, p + n): into the sink when there is one, else into the output.
  void keep(const char* p, size_t n);

  const uint64_t first_chunk_;
  const size_t expected_chunks_;
  const uint64_t length_;
  const size_t max_output_;
  const size_t output_capacity_;
  const DecodeExtras extras_;
  DecodedChunks out_;
  // out_.data's reserved memory, fixed once the constructor reserved it (read by
  // prefault_output from another thread, so never out_.data itself there).
  const char* output_base_ = nullptr;
  size_t output_reserved_ = 0;
  Status failed_ = Status::Ok();
  uint64_t fed_ = 0;
  uint64_t produced_ = 0;        // decoded bytes so far, kept or not
  uint64_t chunk_start_ = 0;     // where the current chunk's header starts in the range
  std::optional<uint64_t> keep_from_;
  std::optional<ChunkHeader> header_;  // the current chunk's, once its 8 bytes are in
  bool direct_ = false;          // the current chunk's payload goes straight to the output
  size_t direct_got_ = 0;        // how much of it has
  std::string stage_;            // the current step's bytes when they span pieces
  std::string scratch_;          // one compressed chunk's decoded content
  uint64_t kept_ = 0;            // bytes kept so far (in the sink, or out_.data)
  bool head_ok_ = false;         // head_checked() since the last reset()
  ChunkHasher direct_hash_;      // a chunk kept as-is into the sink, hashed as it arrives
};

// A xorb's footer (XorbObjectInfoV1 in xorb_object_format.rs).
struct XorbFooter {
  MerkleHash xorb_hash;
  std::vector<MerkleHash> chunk_hashes;
  // End offset of each chunk from the start of the xorb, headers included.
  std::vector<uint32_t> chunk_ends;
  // End offset of each chunk in the concatenated decoded content.
  std::vector<uint32_t> unpacked_ends;
};

// The footer as xet-core writes it, followed by its length (u32 LE): append to the chunks.
std::string serialize_footer(const XorbFooter& f);

// Parses the footer at the end of `tail`, which must end where the xorb ends (a whole xorb, or
// a suffix read of it). *footer_bytes gets the footer's size including the trailing length, so
// the chunks of a whole xorb of n bytes end at n - *footer_bytes. Checks the three copies of the
// chunk count, the section offsets, and that both offset lists increase.
Result<XorbFooter> parse_footer(const uint8_t* tail, size_t len, size_t* footer_bytes = nullptr);

// Checks decoded chunks [first_chunk, first_chunk + n) against the footer's hashes and
// boundaries; kCorrupt names the first chunk that differs.
Status verify_chunks(const DecodedChunks& chunks, uint64_t first_chunk, const XorbFooter& footer);

// Builds a whole xorb: chunks appended in order, then the footer with their hashes.
class XorbBuilder {
 public:
  explicit XorbBuilder(CompressionScheme scheme) : scheme_(scheme) {}
  // Appends a chunk (at most kMaxChunkSize bytes); returns its index.
  Result<uint32_t> add_chunk(const void* data, size_t len);
  size_t chunk_count() const { return chunks_.size(); }
  const std::vector<HashAndSize>& chunks() const { return chunks_; }
  // The xorb's hash (of the chunks so far).
  MerkleHash hash() const { return xorb_hash(chunks_); }
  // The serialized chunks and, when with_footer, the footer.
  std::string finish(bool with_footer = true) const;

 private:
  CompressionScheme scheme_;
  std::string bytes_;
  std::vector<HashAndSize> chunks_;
  std::vector<uint32_t> chunk_ends_;
  std::vector<uint32_t> unpacked_ends_;
};

}  // namespace hubfs::xet
