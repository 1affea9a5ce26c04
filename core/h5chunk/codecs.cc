// The filter pipeline: which filters are understood, and undoing them on one chunk with as few
// copies as the pipeline allows. The single-filter decoders live in codecs_*.cc,
// bitshuffle.cc and fletcher32.cc.
#include "h5chunk/codecs.h"

#include <blosc.h>
#include <zlib.h>
#include <zstd.h>

#include <cstring>
#include <new>
#include <optional>
#include <string>

namespace h5chunk {
namespace {

// HDF5 keeps at most 32 filters in a pipeline (H5Z_MAX_NFILTERS), one mask bit each.
constexpr size_t kMaxFilters = 32;

// An intermediate stage whose size no header or chunk shape pins down (two size-changing
// filters stacked) may hold at most this much: compressors grow incompressible input by far
// less than a quarter, so anything beyond that is a lying header, not data.
size_t unknown_stage_bound(size_t out_size) { return out_size + out_size / 4 + 64 * 1024; }

// Bitshuffle's compression selector (cd_values[4]) as its HDF5 filter defines it.
constexpr unsigned kBitshuffleNone = 0, kBitshuffleLz4 = 2, kBitshuffleZstd = 3;

std::string describe(const FilterStep& f) {
  std::string name = f.name.empty() ? "filter" : f.name;
  return name + " (" + std::to_string(f.id) + ")";
}

// Empty if this blosc pipeline entry can be decoded by the linked c-blosc.
std::string unsupported_blosc(const FilterStep& f) {
  // cd_values[6] names the inner compressor the writer used; the blosc header repeats it per
  // buffer, but a compressor this c-blosc was built without can never decode, so say so now.
  if (f.cd_values.size() < 7) return "";
  const char* name = nullptr;
  if (blosc_compcode_to_compname(static_cast<int>(f.cd_values[6]), &name) < 0 || name == nullptr) {
    return describe(f) + " with unknown inner compressor " + std::to_string(f.cd_values[6]);
  }
  char* lib = nullptr;
  char* version = nullptr;
  int code = blosc_get_complib_info(name, &lib, &version);
  free(lib);
  free(version);
  if (code < 0) return describe(f) + " with inner compressor " + name + ", not built into c-blosc";
  return "";
}

std::string unsupported_bitshuffle(const FilterStep& f) {
  // cd_values: [filter major, filter minor, elem size, block size, compression, zstd level].
  unsigned compression = f.cd_values.size() > 4 ? f.cd_values[4] : kBitshuffleNone;
  if (compression != kBitshuffleNone && compression != kBitshuffleLz4 && compression != kBitshuffleZstd) {
    return describe(f) + " with unknown compression " + std::to_string(compression);
  }
  // The filter itself refuses to run without its element size (cd_values[2]).
  if (f.cd_values.size() < 3) return describe(f) + " without its element size";
  if (f.cd_values[2] == 0) return describe(f) + " with element size 0";
  return "";
}

bool preserves_size(unsigned id) { return id == kShuffle; }

}  // namespace

std::string unsupported_filter(const std::vector<FilterStep>& pipeline) {
  if (pipeline.size() > kMaxFilters) return std::to_string(pipeline.size()) + " filters";
  for (const FilterStep& f : pipeline) {
    switch (f.id) {
      case kDeflate:
        // HDF5's own filter refuses anything but one level of 0-9, on read too; decoding such
        // a chunk here would succeed where H5Dread fails (a damaged pipeline message).
        if (f.cd_values.size() != 1 || f.cd_values[0] > 9) {
          return describe(f) + " with parameters HDF5 rejects (" + std::to_string(f.cd_values.size()) + " values)";
        }
        break;
      case kShuffle:
        // Likewise: exactly one nonzero element size.
        if (f.cd_values.size() != 1 || f.cd_values[0] == 0) {
          return describe(f) + " with parameters HDF5 rejects (" + std::to_string(f.cd_values.size()) + " values)";
        }
        break;
      case kFletcher32:
      case kLz4:
      case kLzf:
      case kZstd:
        break;
      case kBlosc:
        if (std::string why = unsupported_blosc(f); !why.empty()) return why;
        break;
      case kBitshuffle:
        if (std::string why = unsupported_bitshuffle(f); !why.empty()) return why;
        break;
      default:
        return describe(f);
    }
  }
  return "";
}

// Two ping-pong buffers: a step reads from one (or the caller's input) and writes to the
// other. Grown on demand, never shrunk, so a worker stops allocating after its first chunks.
struct DecodeScratch::Impl {
  struct Buffer {
    std::unique_ptr<uint8_t[]> data;
    size_t capacity = 0;
  };
  Buffer buffers[2];
  std::vector<uint8_t> bitshuffle_block;  // one decompressed bitshuffle block
  ZSTD_DCtx* zstd = nullptr;
  z_stream zlib{};
  bool zlib_ready = false;

  ~Impl() {
    ZSTD_freeDCtx(zstd);
    if (zlib_ready) inflateEnd(&zlib);
  }

  // A buffer of at least n bytes that is not `avoid` (the current step's input).
  Result<uint8_t*> buffer_other_than(const uint8_t* avoid, size_t n) {
    Buffer& b = buffers[0].data.get() == avoid ? buffers[1] : buffers[0];
    if (b.capacity < n) {
      // Uninitialised on purpose: every byte is written by the decoder before it is read.
      b.data.reset(new (std::nothrow) uint8_t[n]);
      b.capacity = b.data ? n : 0;
      if (!b.data)
        return Status(hubfs::Code::kInternal,
                      "out of memory for a " + std::to_string(n) + "-byte decode buffer");
    }
    return b.data.get();
  }

  Result<ZSTD_DCtx*> zstd_context() {
    if (!zstd) zstd = ZSTD_createDCtx();
    if (!zstd) return Status(hubfs::Code::kInternal, "zstd: cannot create a decompression context");
    return zstd;
  }

  Result<z_stream*> zlib_stream() {
    if (!zlib_ready) {
      zlib = z_stream{};
      if (inflateInit(&zlib) != Z_OK) return Status(hubfs::Code::kInternal, "deflate: inflateInit failed");
      zlib_ready = true;
    }
    return &zlib;
  }
};

DecodeScratch::DecodeScratch() : impl_(std::make_unique<Impl>()) {}
DecodeScratch::~DecodeScratch() = default;

namespace {

// Runs one filter's decoder from `in` into `target`; returns the bytes written.
Result<size_t> run_step(const FilterStep& f, size_t elem_size, const uint8_t* in, size_t in_size,
                        codec::Target target, DecodeScratch::Impl& scratch) {
  switch (f.id) {
    case kBlosc:
      return codec::blosc_decode(in, in_size, target);
    case kLz4:
      return codec::lz4_hdf5_decode(in, in_size, target);
    case kLzf:
      return codec::lzf_decode(in, in_size, target);
    case kZstd: {
      auto ctx = scratch.zstd_context();
      if (!ctx) return ctx.status();
      return codec::zstd_decode(*ctx, in, in_size, target);
    }
    case kDeflate: {
      auto stream = scratch.zlib_stream();
      if (!stream) return stream.status();
      return codec::deflate_decode(*stream, in, in_size, target);
    }
    case kBitshuffle: {
      auto ctx = scratch.zstd_context();
      if (!ctx) return ctx.status();
      return codec::bitshuffle_decode(*ctx, scratch.bitshuffle_block, f.cd_values, elem_size, in, in_size,
                                      target);
    }
    case kShuffle: {
      if (target.exact ? in_size != target.capacity : in_size > target.capacity) {
        return hubfs::Corrupt("shuffle: input holds " + std::to_string(in_size) + " bytes, expected " +
                              std::to_string(target.capacity));
      }
      // cd_values[0] is the element size HDF5 recorded when the dataset was created.
      size_t size = f.cd_values.empty() ? elem_size : f.cd_values[0];
      codec::unshuffle(in, target.data, in_size, size);
      return in_size;
    }
    default:
      return hubfs::Unsupported("no decoder for " + describe(f));
  }
}

}  // namespace

namespace {

// decode_chunk's work: exact, the output is out_size bytes; otherwise at most out_size, whatever
// the last step makes (the input of a filter h5chunk does not decode). Returns the bytes made.
Result<size_t> decode_steps(const std::vector<FilterStep>& pipeline, uint32_t filter_mask, size_t elem_size,
                            const uint8_t* in, size_t in_size, uint8_t* out, size_t out_size, bool exact,
                            DecodeScratch& scratch) {
  if (pipeline.size() > kMaxFilters) {
    return hubfs::Unsupported("pipeline of " + std::to_string(pipeline.size()) + " filters");
  }
  // The filters to undo, in decode order (last applied first).
  const FilterStep* steps[kMaxFilters];
  size_t n_steps = 0;
  for (size_t i = pipeline.size(); i-- > 0;) {
    if (!(filter_mask & (uint32_t{1} << i))) steps[n_steps++] = &pipeline[i];
  }

  // The output size of each step, where it is known: the last step makes the chunk, and a step
  // followed only by size-preserving ones (shuffle; fletcher32 adds its 4 bytes) must make
  // exactly what they need. A compressor's input size is unknowable, hence nullopt above one.
  std::optional<size_t> expected[kMaxFilters];
  std::optional<size_t> size_after = exact ? std::optional<size_t>(out_size) : std::nullopt;
  for (size_t s = n_steps; s-- > 0;) {
    expected[s] = size_after;
    unsigned id = steps[s]->id;
    if (preserves_size(id)) {
      // unchanged
    } else if (id == kFletcher32) {
      if (size_after) size_after = *size_after + 4;
    } else {
      size_after = std::nullopt;
    }
  }

  const uint8_t* cur = in;
  size_t cur_size = in_size;
  DecodeScratch::Impl& impl = scratch.impl();
  for (size_t s = 0; s < n_steps; ++s) {
    const FilterStep& f = *steps[s];
    if (f.id == kFletcher32) {
      // Verifying needs no output: strip the trailer and move on.
      if (Status st = codec::fletcher32_verify(cur, cur_size); !st.ok()) return st;
      cur_size -= 4;
      continue;
    }
    codec::Target target;
    // Only the final step may write to out: the steps before it would be overwritten by a
    // later step reading its input from the same memory.
    bool last = s + 1 == n_steps;
    if (last) {
      target = {out, out_size, exact};
    } else {
      size_t capacity = expected[s] ? *expected[s] : unknown_stage_bound(out_size);
      auto buffer = impl.buffer_other_than(cur, capacity);
      if (!buffer) return buffer.status();
      target = {*buffer, capacity, expected[s].has_value()};
    }
    auto produced = run_step(f, elem_size, cur, cur_size, target, impl);
    if (!produced) return produced.status();
    cur = target.data;
    cur_size = *produced;
  }

  if (!exact) {
    if (cur_size > out_size) {
      return hubfs::Corrupt("stored chunk holds " + std::to_string(cur_size) + " bytes after its filters, more than " +
                            std::to_string(out_size));
    }
    if (cur != out && cur_size) std::memcpy(out, cur, cur_size);
    return cur_size;
  }
  if (cur == out) {
    // The last step wrote the chunk: it must have made all of it, or the rest of the output
    // would be whatever it held before.
    if (cur_size != out_size) {
      return hubfs::Corrupt("stored chunk decodes to " + std::to_string(cur_size) + " bytes, expected " +
                            std::to_string(out_size));
    }
    return cur_size;
  }
  // Every filter skipped, or fletcher32 the last one undone: the bytes are the chunk itself.
  if (cur_size != out_size) {
    return hubfs::Corrupt("stored chunk holds " + std::to_string(cur_size) +
                          " bytes after its filters, expected " + std::to_string(out_size));
  }
  if (out_size) std::memcpy(out, cur, out_size);
  return cur_size;
}

}  // namespace

Status decode_chunk(const std::vector<FilterStep>& pipeline, uint32_t filter_mask, size_t elem_size,
                    const uint8_t* in, size_t in_size, uint8_t* out, size_t out_size,
                    DecodeScratch& scratch) {
  auto made = decode_steps(pipeline, filter_mask, elem_size, in, in_size, out, out_size, true, scratch);
  return made.ok() ? Status::Ok() : made.status();
}

Result<size_t> decode_chunk_bounded(const std::vector<FilterStep>& pipeline, uint32_t filter_mask, size_t elem_size,
                                    const uint8_t* in, size_t in_size, uint8_t* out, size_t capacity,
                                    DecodeScratch& scratch) {
  return decode_steps(pipeline, filter_mask, elem_size, in, in_size, out, capacity, false, scratch);
}

}  // namespace h5chunk

namespace h5chunk::codec {

Status check_announced_size(const char* what, uint64_t size, Target target) {
  if (target.exact ? size == target.capacity : size <= target.capacity) return Status::Ok();
  return hubfs::Corrupt(std::string(what) + ": header says " + std::to_string(size) + " bytes, expected " +
                        (target.exact ? "" : "at most ") + std::to_string(target.capacity));
}

Result<size_t> next_framed_block(const uint8_t* in, size_t in_size, size_t& pos, const char* codec,
                                 size_t block) {
  constexpr size_t kBlockHeaderBytes = 4;  // u32 compressed size
  // Built only on failure: this runs once per block on the decode path.
  auto corrupt = [&](const std::string& what) {
    return hubfs::Corrupt(std::string(codec) + ": block " + std::to_string(block) + " " + what);
  };
  if (in_size - pos < kBlockHeaderBytes) return corrupt("header overruns the input");
  size_t compressed = load_be32(in + pos);
  pos += kBlockHeaderBytes;
  if (compressed > in_size - pos) {
    return corrupt("overruns the input (" + std::to_string(compressed) + " bytes, " +
                   std::to_string(in_size - pos) + " left)");
  }
  return compressed;
}

}  // namespace h5chunk::codec
