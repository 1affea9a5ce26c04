// Zstd filter (32015): the stored chunk is a zstd frame (or several, concatenated).
#include <zstd.h>

#include <string>

#include "h5chunk/codecs.h"

namespace h5chunk::codec {

Result<size_t> zstd_decode(ZSTD_DCtx_s* ctx, const uint8_t* in, size_t in_size, Target out) {
  unsigned long long content = ZSTD_getFrameContentSize(in, in_size);
  if (content == ZSTD_CONTENTSIZE_ERROR) {
    return hubfs::Corrupt("zstd: not a zstd frame (" + std::to_string(in_size) + " bytes)");
  }
  // A frame that records its size can be refused before any work if it cannot fit (several
  // frames may be concatenated, so a smaller first frame is not yet an error). A frame without
  // a size (streamed writers) is decoded into the bounded target, which zstd never overruns.
  if (content != ZSTD_CONTENTSIZE_UNKNOWN && content > out.capacity) {
    return hubfs::Corrupt("zstd: frame says " + std::to_string(content) + " bytes, expected " +
                          std::to_string(out.capacity));
  }
  size_t got = ZSTD_decompressDCtx(ctx, out.data, out.capacity, in, in_size);
  if (ZSTD_isError(got)) return hubfs::Corrupt(std::string("zstd: ") + ZSTD_getErrorName(got));
  if (out.exact && got != out.capacity) {
    return hubfs::Corrupt("zstd: decoded " + std::to_string(got) + " bytes, expected " +
                          std::to_string(out.capacity));
  }
  return got;
}

}  // namespace h5chunk::codec
