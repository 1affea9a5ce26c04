// libFuzzer target: HDF5 byte unshuffle (filter 2), SSE2 and scalar paths, checked against a
// byte-by-byte reference and against its inverse.
#include <vector>

#include "fuzz_input.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace h5chunk;
  if (size < 1) return 0;
  // Element sizes 0-32 (the filter's cd_values[0] is any u32; 0 and 1 are copies).
  const size_t elem = data[0] % 33;
  const uint8_t* in = data + 1;
  const size_t n = size - 1;
  auto out = fuzz::output(n, 0xa5);
  codec::unshuffle(in, out.get(), n, elem);
  // Reference: byte j of element i comes from j * n_elems + i; a partial tail stays put.
  const size_t n_elems = elem ? n / elem : 0;
  std::vector<uint8_t> want(in, in + n);
  if (elem > 1 && n_elems > 1) {
    for (size_t i = 0; i < n_elems; ++i)
      for (size_t j = 0; j < elem; ++j) want[i * elem + j] = in[j * n_elems + i];
  }
  FUZZ_CHECK(n == 0 || std::memcmp(out.get(), want.data(), n) == 0);
  auto back = fuzz::output(n, 0x5a);
  codec::shuffle(out.get(), back.get(), n, elem);
  FUZZ_CHECK(n == 0 || std::memcmp(back.get(), in, n) == 0);
  return 0;
}
