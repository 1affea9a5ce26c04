// libFuzzer target: the LZ4 filter (32004) decoder with HDF5's block framing.
#include "fuzz_input.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace h5chunk;
  fuzz::Case c;
  if (!fuzz::parse(data, size, &c)) return 0;
  // The framing's u64 big-endian plain size.
  if (c.capacity_from_header && c.payload_size >= 8) {
    c.capacity = codec::load_be64(c.payload) % (fuzz::kMaxCapacity + 1);
  }
  fuzz::decode_twice(c, [&](codec::Target t) { return codec::lz4_hdf5_decode(c.payload, c.payload_size, t); });
  return 0;
}
