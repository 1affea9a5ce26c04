// libFuzzer target: the Zstd filter (32015) decoder. One context for the whole run, as a
// worker reuses its own across chunks.
#include <zstd.h>

#include "fuzz_input.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace h5chunk;
  static ZSTD_DCtx* ctx = ZSTD_createDCtx();
  fuzz::Case c;
  if (!fuzz::parse(data, size, &c)) return 0;
  if (c.capacity_from_header) {
    unsigned long long content = ZSTD_getFrameContentSize(c.payload, c.payload_size);
    if (content != ZSTD_CONTENTSIZE_ERROR && content != ZSTD_CONTENTSIZE_UNKNOWN) {
      c.capacity = static_cast<size_t>(content % (fuzz::kMaxCapacity + 1));
    }
  }
  fuzz::decode_twice(c, [&](codec::Target t) { return codec::zstd_decode(ctx, c.payload, c.payload_size, t); });
  return 0;
}
