// libFuzzer target: the Blosc filter (32001) decoder on one stored chunk.
#include "fuzz_input.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace h5chunk;
  fuzz::Case c;
  if (!fuzz::parse(data, size, &c)) return 0;
  // The blosc1 header's nbytes (bytes 4-7, little-endian): the size a real chunk would have.
  if (c.capacity_from_header && c.payload_size >= 8) c.capacity = fuzz::le32(c.payload + 4) % (fuzz::kMaxCapacity + 1);
  fuzz::decode_twice(c, [&](codec::Target t) { return codec::blosc_decode(c.payload, c.payload_size, t); });
  return 0;
}
