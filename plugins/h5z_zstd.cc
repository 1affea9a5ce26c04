// HDF5 filter plugin for Zstandard, filter id 32015, in the framing of the HDF Group's
// registered filter (hdf5_plugins ZSTD/H5Zzstd.c) that h5py/hdf5plugin also write: each chunk is
// stored as one zstd frame. cd_values[0] is the compression level on write (3 when absent,
// clamped to 1..ZSTD_maxCLevel() as the HDF Group's filter does); reading needs no cd_values.
// Frames written here also carry zstd's content checksum, which every zstd reader verifies.
// Decoding goes through h5chunk's zstd decoder, the one its fast path uses.
#include <H5PLextern.h>
#include <hdf5.h>
#include <zstd.h>

#include <algorithm>
#include <memory>
#include <new>
#include <string>

#include "filter_util.h"
#include "h5chunk/codecs.h"

namespace hubfs_plugins {
namespace {

constexpr H5Z_filter_t kZstdFilter = 32015;
constexpr int kDefaultLevel = 3;

struct FreeDCtx {
  void operator()(ZSTD_DCtx* ctx) const { ZSTD_freeDCtx(ctx); }
};
using DCtx = std::unique_ptr<ZSTD_DCtx, FreeDCtx>;
struct FreeCCtx {
  void operator()(ZSTD_CCtx* ctx) const { ZSTD_freeCCtx(ctx); }
};
using CCtx = std::unique_ptr<ZSTD_CCtx, FreeCCtx>;

// A frame without its content size (streaming writers) or several frames: decode in pieces
// into a buffer that doubles until the input is consumed, up to the largest possible chunk.
size_t decode_streamed(ZSTD_DCtx* ctx, const void* in, size_t in_size, size_t* buf_size, void** buf) {
  H5Buffer out(std::min<size_t>(std::max<size_t>(in_size * 4, 64 << 10), kMaxChunkBytes));
  if (!out.data()) return fail(__func__, "zstd: out of memory for the decoded chunk");
  ZSTD_inBuffer input{in, in_size, 0};
  size_t produced = 0;
  for (;;) {
    const size_t in_before = input.pos, out_before = produced;
    ZSTD_outBuffer output{out.data(), out.capacity(), produced};
    size_t rc = ZSTD_decompressStream(ctx, &output, &input);
    produced = output.pos;
    if (ZSTD_isError(rc)) return fail(__func__, std::string("zstd: corrupt chunk: ") + ZSTD_getErrorName(rc));
    if (rc == 0 && input.pos == input.size) {
      if (produced == 0) return fail(__func__, "zstd: chunk decodes to 0 bytes (corrupt)");
      return out.hand_over(produced, buf_size, buf);
    }
    if (produced == out.capacity()) {
      if (out.capacity() >= kMaxChunkBytes) {
        return fail(__func__, "zstd: chunk decodes to more than 4 GiB, larger than any HDF5 chunk (corrupt)");
      }
      if (!out.grow(std::min<size_t>(out.capacity() * 2, kMaxChunkBytes))) {
        return fail(__func__, "zstd: out of memory for the decoded chunk");
      }
      continue;
    }
    // Room left in the output, so zstd stopped for want of input.
    if (input.pos == input.size) return fail(__func__, "zstd: chunk ends inside a frame (truncated)");
    if (input.pos == in_before && produced == out_before) {
      return fail(__func__, "zstd: decoder makes no progress on this chunk (corrupt)");
    }
  }
}

size_t decode(size_t nbytes, size_t* buf_size, void** buf) {
  const void* in = *buf;
  DCtx ctx(ZSTD_createDCtx());
  if (!ctx) return fail(__func__, "zstd: cannot create a decompression context (out of memory)");
  unsigned long long content = ZSTD_getFrameContentSize(in, nbytes);
  if (content == ZSTD_CONTENTSIZE_ERROR) {
    return fail(__func__, "zstd: chunk of " + std::to_string(nbytes) +
                              " bytes is not a zstd frame (corrupt, or written by another filter with id 32015)");
  }
  if (content == ZSTD_CONTENTSIZE_UNKNOWN || ZSTD_findFrameCompressedSize(in, nbytes) != nbytes) {
    return decode_streamed(ctx.get(), in, nbytes, buf_size, buf);
  }
  // One frame that states its size, as the HDF Group's filter writes it.
  if (content == 0) return fail(__func__, "zstd: frame says 0 bytes, but no HDF5 chunk is empty (corrupt)");
  if (content > kMaxChunkBytes) {
    return fail(__func__, "zstd: frame says " + std::to_string(content) +
                              " bytes, larger than any HDF5 chunk (corrupt)");
  }
  H5Buffer out(static_cast<size_t>(content));
  if (!out.data()) return fail(__func__, "zstd: out of memory for a " + std::to_string(content) + "-byte chunk");
  auto got = h5chunk::codec::zstd_decode(ctx.get(), static_cast<const uint8_t*>(in), nbytes,
                                         {out.data(), static_cast<size_t>(content), true});
  if (!got.ok()) return fail(__func__, got.status().message());
  return out.hand_over(*got, buf_size, buf);
}

size_t encode(size_t cd_nelmts, const unsigned cd_values[], size_t nbytes, size_t* buf_size, void** buf) {
  int level = cd_nelmts > 0 ? static_cast<int>(std::min<unsigned>(cd_values[0], 1000)) : kDefaultLevel;
  level = std::clamp(level, 1, ZSTD_maxCLevel());
  CCtx ctx(ZSTD_createCCtx());
  if (!ctx) return fail(__func__, "zstd: cannot create a compression context (out of memory)");
  // The frame carries its content size (so readers size the output exactly) and a checksum:
  // zstd alone does not notice most flipped bits, and any zstd decoder verifies it.
  size_t rc = ZSTD_CCtx_setParameter(ctx.get(), ZSTD_c_compressionLevel, level);
  if (!ZSTD_isError(rc)) rc = ZSTD_CCtx_setParameter(ctx.get(), ZSTD_c_checksumFlag, 1);
  if (ZSTD_isError(rc)) return fail(__func__, std::string("zstd: bad parameters: ") + ZSTD_getErrorName(rc));
  H5Buffer out(ZSTD_compressBound(nbytes));
  if (!out.data()) return fail(__func__, "zstd: out of memory for the compressed chunk");
  size_t n = ZSTD_compress2(ctx.get(), out.data(), out.capacity(), *buf, nbytes);
  if (ZSTD_isError(n)) return fail(__func__, std::string("zstd: compression failed: ") + ZSTD_getErrorName(n));
  return out.hand_over(n, buf_size, buf);
}

size_t filter(unsigned flags, size_t cd_nelmts, const unsigned cd_values[], size_t nbytes, size_t* buf_size,
              void** buf) {
  // HDF5 is C: nothing may be thrown through it (the messages allocate).
  try {
    if (flags & H5Z_FLAG_REVERSE) return decode(nbytes, buf_size, buf);
    return encode(cd_nelmts, cd_values, nbytes, buf_size, buf);
  } catch (const std::bad_alloc&) {
    return fail(__func__, "zstd: out of memory");
  }
}

const H5Z_class2_t kZstdClass = {
    H5Z_CLASS_T_VERS,
    kZstdFilter,
    1,  // encoder present
    1,  // decoder present
    "Zstandard compression: http://www.zstd.net",  // the HDF Group filter's name, stored in files
    nullptr,                                       // can_apply: any type, any chunk
    nullptr,                                       // set_local: the level is all it needs
    filter,
};

}  // namespace
}  // namespace hubfs_plugins

extern "C" {
H5PLUGIN_DLL H5PL_type_t H5PLget_plugin_type(void) { return H5PL_TYPE_FILTER; }
H5PLUGIN_DLL const void* H5PLget_plugin_info(void) { return &hubfs_plugins::kZstdClass; }
}
