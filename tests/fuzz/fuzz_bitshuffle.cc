// libFuzzer target: the bitshuffle filter (32008) decoder, uncompressed, LZ4 and zstd blocks.
//
// Input: a parameters byte (compression in bits 0-1: 0 none, 1 -> lz4, 2 -> zstd, 3 -> an
// unknown code), an element-size byte (cd_values[2]), a u16 LE block size in elements
// (cd_values[3]), then the common layout of fuzz_input.h.
#include <zstd.h>

#include <vector>

#include "fuzz_input.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace h5chunk;
  static ZSTD_DCtx* ctx = ZSTD_createDCtx();
  static std::vector<uint8_t> block_buffer;  // reused across inputs, as a worker's is
  if (size < 4) return 0;
  static const unsigned kCompression[] = {0, 2, 3, 7};
  const unsigned compression = kCompression[data[0] & 3];
  const unsigned elem = data[1];
  const unsigned block_elems = unsigned{data[2]} | unsigned{data[3]} << 8;
  const std::vector<unsigned> cd = {0, 3, elem, block_elems, compression};
  fuzz::Case c;
  if (!fuzz::parse(data + 4, size - 4, &c)) return 0;
  if (c.capacity_from_header) {
    if (compression != 0 && c.payload_size >= 8) {
      c.capacity = codec::load_be64(c.payload) % (fuzz::kMaxCapacity + 1);
    } else if (compression == 0) {
      c.capacity = c.payload_size;
    }
  }
  fuzz::decode_twice(c, [&](codec::Target t) {
    return codec::bitshuffle_decode(ctx, block_buffer, cd, /*elem_size=*/elem ? elem : 1, c.payload,
                                    c.payload_size, t);
  });
  return 0;
}
