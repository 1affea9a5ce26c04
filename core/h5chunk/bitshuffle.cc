// Bitshuffle filter (32008). Work in progress.
#include "h5chunk/codecs.h"

namespace h5chunk::codec {

Result<size_t> bitshuffle_decode(ZSTD_DCtx_s*, const std::vector<unsigned>&, size_t, const uint8_t*, size_t,
                                 Target) {
  return hubfs::Unsupported("bitshuffle: not implemented yet");
}
void bit_untranspose(const uint8_t*, uint8_t*, size_t, size_t) {}
void bit_transpose(const uint8_t*, uint8_t*, size_t, size_t) {}

}  // namespace h5chunk::codec
