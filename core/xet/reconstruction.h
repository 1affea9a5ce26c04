// File reconstructions (docs/xet.md): the CAS service's answer to "which chunks of which xorbs
// make up this file (or this byte range of it), and where to fetch them".
//
//   GET {cas}/v1/reconstructions/{file hash}   terms + fetch_info: one signed URL and one byte
//                                              range per xorb chunk range (xet-core's cas.openapi.yaml)
//   GET {cas}/v2/reconstructions/{file hash}   terms + xorbs: one signed URL per xorb carrying
//                                              several byte ranges, which must be requested exactly
//                                              (huggingface.js XetBlob.ts; V1 is deprecated there)
// Both take a `Range: bytes=a-b` in file coordinates; the answer then starts at the chunk that
// holds byte a, offset_into_first_range bytes before it.
//
// The JSON is the network's, so it is validated before anything trusts it: hashes, ranges,
// lengths (a term cannot claim more than its chunks can hold), overflow, and that every term has
// a fetch range holding all its chunks. Pure functions: safe from any thread.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "common/status.h"
#include "xet/hash.h"

namespace hubfs::xet {

// Chunk indices within a xorb, end-exclusive: [start, end).
struct ChunkRange {
  uint32_t start = 0;
  uint32_t end = 0;
  uint32_t count() const { return end - start; }
  bool contains(const ChunkRange& o) const { return start <= o.start && o.end <= end; }
  bool operator==(const ChunkRange& o) const { return start == o.start && end == o.end; }
};

// Bytes of a xorb, end-INCLUSIVE as in an HTTP Range header: [start, end].
struct ByteRange {
  uint64_t start = 0;
  uint64_t end = 0;
  uint64_t length() const { return end - start + 1; }
  bool operator==(const ByteRange& o) const { return start == o.start && end == o.end; }
};

// One piece of the file: chunks [chunks.start, chunks.end) of a xorb, unpacked_length bytes once
// decoded. Terms follow each other in file order.
struct ReconstructionTerm {
  MerkleHash xorb;
  ChunkRange chunks;
  uint64_t unpacked_length = 0;
};

// A run of whole chunks of a xorb and the bytes that hold them.
struct XorbRange {
  ChunkRange chunks;
  ByteRange bytes;
};

// A signed URL and the ranges it may be asked for (V1: always one).
struct XorbFetch {
  std::string url;
  std::vector<XorbRange> ranges;
};

struct ReconstructionPlan {
  // Bytes of the first term's decoded content before the file range the plan was asked for.
  uint64_t offset_into_first_range = 0;
  std::vector<ReconstructionTerm> terms;
  std::map<MerkleHash, std::vector<XorbFetch>> fetches;

  // How many file bytes the terms deliver from the requested start (their total length less
  // offset_into_first_range).
  uint64_t content_length() const;
};

// Parse and validate a V1 or V2 response body.
Result<ReconstructionPlan> parse_reconstruction_v1(std::string_view json);
Result<ReconstructionPlan> parse_reconstruction_v2(std::string_view json);

// Where to fetch a term: the URL and the signed range whose chunks include the term's. The
// pointers point into plan and live as long as it does.
struct TermSource {
  const XorbFetch* fetch = nullptr;
  const XorbRange* range = nullptr;
};
Result<TermSource> find_term_source(const ReconstructionPlan& plan, size_t term_index);

// The part of one term a read needs.
struct TermRead {
  size_t term_index = 0;
  uint64_t file_offset = 0;  // file offset of the term's first byte
  uint64_t skip = 0;         // bytes of the term's decoded content before the wanted ones
  uint64_t take = 0;         // wanted bytes from there
  TermSource source;
};

// Maps the file bytes [offset, offset + length) to the terms that hold them, in order. plan_start
// is the first byte of the Range the plan was requested with (0 for a whole-file plan). Bytes the
// plan does not cover are kOutOfRange (ask for a plan that covers them).
Result<std::vector<TermRead>> map_read(const ReconstructionPlan& plan, uint64_t plan_start, uint64_t offset,
                                       uint64_t length);

// Within one term whose decoded chunk ends are known (from a decode or a xorb footer, relative to
// the term's first chunk), the chunks [first, end) that hold bytes [skip, skip + take) of the
// term, and where the wanted bytes begin within chunk `first`. This is what a chunk cache looks
// up: those chunks, and no others, are needed.
struct ChunkSpan {
  uint32_t first = 0;
  uint32_t end = 0;
  uint64_t offset_in_first = 0;
};
Result<ChunkSpan> chunks_for_bytes(const std::vector<uint32_t>& chunk_ends, uint64_t skip, uint64_t take);

}  // namespace hubfs::xet
