// libFuzzer target: the deflate filter (1) decoder. One z_stream for the whole run, reset per
// chunk as a worker's is.
#include <zlib.h>

#include "fuzz_input.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace h5chunk;
  static z_stream* stream = [] {
    auto* s = new z_stream{};
    if (inflateInit(s) != Z_OK) std::abort();
    return s;
  }();
  fuzz::Case c;
  if (!fuzz::parse(data, size, &c)) return 0;
  fuzz::decode_twice(c, [&](codec::Target t) { return codec::deflate_decode(stream, c.payload, c.payload_size, t); });
  return 0;
}
