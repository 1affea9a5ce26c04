// One signed xorb range on the wire and decoded (docs/xet.md, "The read path", steps 3 and 4):
// exactly the range the plan lists (V2: one of the URL's listed ranges; V1: a term's
// url_range), never a footer, a suffix or a narrower range inside it, since the service signs
// each URL for those ranges only. Chunk boundaries come from the chunk headers in the bytes.
// What the service sends that does not fit (a status, a Content-Range, a body length, a header
// that lies, a frame that does not decode or decodes past its bound) is a service error
// (kUnavailable: the read may go to the bridge), not corrupt data: only a failed hash is that.
// Pure functions and a transport call: safe from any thread.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>

#include "common/deadline.h"
#include "common/http.h"
#include "common/single_flight.h"
#include "common/status.h"
#include "xet/reconstruction.h"
#include "xet/xorb.h"

namespace hubfs::xet {

struct XorbFetchCounters {
  std::atomic<uint64_t> requests{0};
  std::atomic<uint64_t> bytes{0};  // received (compressed, headers included)
};

// A listed range's chunks, decoded, given once by the transport's callback (OneShot: its waiter
// takes them).
using XorbDecoded = std::shared_ptr<OneShot<Result<DecodedChunks>>>;

// Starts the GET of one listed range from its signed URL (no Authorization header; on a
// connection of its own) and decodes its chunks as the bytes arrive (ChunkStreamDecoder, on the
// transport's thread, with `extras`; a retried body starts again from zero): the answer is
// exactly listed.chunks.count() chunks filling exactly the range's bytes, or a service error
// naming the xorb (kUnavailable; kPermissionDenied for a refused URL). output_capacity: reserved
// for the decoded output up front. companion: a further range of a read whose first one just
// went out (HttpRequest::companion). transport and counters must outlive the answer.
// decoder, when given, gets the range's decoder (kept alive by it), whose prefault_output the
// waiting thread may call while the request waits for its first byte.
XorbDecoded fetch_xorb_range(HttpTransport& transport, const std::string& url, const MerkleHash& xorb,
                             const XorbRange& listed, const Deadline& deadline, size_t output_capacity,
                             const DecodeExtras& extras, bool companion, XorbFetchCounters& counters,
                             std::shared_ptr<const ChunkStreamDecoder>* decoder = nullptr);

// The most a listed range decodes to, when `known_unpacked` bytes of it are known (terms) and
// `unknown_chunks` chunks are not: a capacity to reserve for its output.
size_t listed_range_output_bound(uint64_t known_unpacked, uint32_t unknown_chunks);

// The capacity decode_listed_range needs beyond a listed range's bytes to decode it in place,
// when `known_unpacked` bytes of it are known (terms) and `unknown_chunks` chunks are not.
size_t listed_range_headroom(const XorbRange& listed, uint64_t known_unpacked, uint32_t unknown_chunks);

// Decodes a listed range's bytes: exactly listed.chunks.count() chunks filling them, at most
// kMaxChunkSize bytes each, with `extras` done in the same pass (hashes, the bytes before the read's
// own left out). Any failure is kUnavailable naming the xorb.
Result<DecodedChunks> decode_listed_range(std::string body, const MerkleHash& xorb, const XorbRange& listed,
                                          const DecodeExtras& extras = {});

}  // namespace hubfs::xet
