// In-process decoders for the HDF5 filter pipelines h5chunk understands. Thread-safe: every
// call brings its own scratch (per-thread zstd/blosc contexts live in DecodeScratch).
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "common/status.h"
#include "h5chunk/filters.h"

// Forward declarations of the codec libraries' context types, so this header pulls in neither
// zstd.h nor zlib.h.
struct ZSTD_DCtx_s;
struct z_stream_s;

namespace h5chunk {

using hubfs::Result;
using hubfs::Status;

// Empty if every filter of the pipeline can be decoded here; else why not ("bzip2 (307)").
std::string unsupported_filter(const std::vector<FilterStep>& pipeline);

// Per-thread state reused across chunks: temporaries and codec contexts. Not thread-safe:
// one per worker.
class DecodeScratch {
 public:
  DecodeScratch();
  ~DecodeScratch();
  DecodeScratch(const DecodeScratch&) = delete;
  DecodeScratch& operator=(const DecodeScratch&) = delete;
  struct Impl;
  Impl& impl() { return *impl_; }

 private:
  std::unique_ptr<Impl> impl_;
};

// Undoes the pipeline on one stored chunk, last filter first, skipping filter i where bit i of
// filter_mask is set. Writes exactly out_size bytes to out (the full chunk), or returns an error
// (kCorrupt: decoder failure, wrong decoded size, fletcher32 mismatch). Never writes past out_size.
// elem_size is the dataset's element size (for shuffle).
Status decode_chunk(const std::vector<FilterStep>& pipeline, uint32_t filter_mask, size_t elem_size,
                    const uint8_t* in, size_t in_size, uint8_t* out, size_t out_size, DecodeScratch& scratch);

// decode_chunk for a pipeline whose output size is not the chunk's: the filters h5chunk undoes
// before handing the rest to a filter it does not decode (scale-offset, n-bit: filter_checks.h).
// Writes at most `capacity` bytes to out and returns how many; kCorrupt beyond that.
Result<size_t> decode_chunk_bounded(const std::vector<FilterStep>& pipeline, uint32_t filter_mask, size_t elem_size,
                                    const uint8_t* in, size_t in_size, uint8_t* out, size_t capacity,
                                    DecodeScratch& scratch);

// The single-filter building blocks decode_chunk is made of. Exposed for tests and benchmarks;
// the reader needs only decode_chunk.
namespace codec {

// Where one decode step writes. When exact, the step must produce exactly `capacity` bytes
// (its size is known from the chunk shape); otherwise any size up to capacity is accepted
// (an intermediate stage of a pipeline with two size-changing filters).
struct Target {
  uint8_t* data = nullptr;
  size_t capacity = 0;
  bool exact = true;
};

// Whether a decoder may produce `size` bytes into target (the size a header announces), and if
// not a kCorrupt status naming `what` ("blosc: header says 100 bytes, expected 4000").
Status check_announced_size(const char* what, uint64_t size, Target target);

inline uint32_t load_be32(const uint8_t* p) {
  return uint32_t{p[0]} << 24 | uint32_t{p[1]} << 16 | uint32_t{p[2]} << 8 | uint32_t{p[3]};
}
inline uint64_t load_be64(const uint8_t* p) { return uint64_t{load_be32(p)} << 32 | load_be32(p + 4); }

// The framing the lz4 (32004) and bitshuffle (32008) filters share: each block is a u32
// big-endian compressed size, then that many bytes. Reads the size at `pos`, checks that the
// header and the block both fit in the input, and advances pos past the header. `codec` and
// `block` only name the culprit in the error.
Result<size_t> next_framed_block(const uint8_t* in, size_t in_size, size_t& pos, const char* codec,
                                 size_t block);

// Each decoder returns the number of bytes it wrote to the target, or kCorrupt naming what
// failed. None reads past in + in_size nor writes past target.data + target.capacity.
Result<size_t> blosc_decode(const uint8_t* in, size_t in_size, Target out);
Result<size_t> zstd_decode(ZSTD_DCtx_s* ctx, const uint8_t* in, size_t in_size, Target out);
Result<size_t> lz4_hdf5_decode(const uint8_t* in, size_t in_size, Target out);
// h5py's LZF filter (32000): the chunk is one raw LZF stream.
Result<size_t> lzf_decode(const uint8_t* in, size_t in_size, Target out);
// stream: a z_stream on which inflateInit succeeded; it is reset here before use.
Result<size_t> deflate_decode(z_stream_s* stream, const uint8_t* in, size_t in_size, Target out);
// Bitshuffle filter (32008) payload; cd_values as the filter stores them, elem_size the
// dataset's element size (used when cd_values lacks it). block_buffer holds one decompressed
// block at a time; it is grown as needed and worth reusing.
Result<size_t> bitshuffle_decode(ZSTD_DCtx_s* ctx, std::vector<uint8_t>& block_buffer,
                                 const std::vector<unsigned>& cd_values, size_t elem_size, const uint8_t* in,
                                 size_t in_size, Target out);

// HDF5 byte unshuffle of n bytes of elem_size-byte elements: byte j of element i is read from
// j * (n / elem_size) + i; the n % elem_size tail bytes are copied as they are. in and out must
// not overlap.
void unshuffle(const uint8_t* in, uint8_t* out, size_t n, size_t elem_size);
// The inverse (what the shuffle filter does on write); for tests and benchmarks.
void shuffle(const uint8_t* in, uint8_t* out, size_t n, size_t elem_size);

// Bit-untranspose one bitshuffle block of n_elems elements (a multiple of 8) into out, using
// tmp (n_elems * elem_size bytes, overlapping neither) as a temporary. bit_transpose is the
// writer's side, for tests and benchmarks.
void bit_untranspose(const uint8_t* in, uint8_t* out, size_t n_elems, size_t elem_size, uint8_t* tmp);
void bit_transpose(const uint8_t* in, uint8_t* out, size_t n_elems, size_t elem_size);

// H5_checksum_fletcher32: the sum HDF5 stores (little-endian) after the data it covers.
uint32_t fletcher32(const uint8_t* data, size_t n);
// Ok if the last 4 bytes of in are the fletcher32 trailer of the bytes before them, as HDF5's
// filter accepts them (it also accepts the half-swapped sum that HDF5 < 1.6.3 wrote).
Status fletcher32_verify(const uint8_t* in, size_t in_size);

}  // namespace codec
}  // namespace h5chunk
