// libFuzzer target: fletcher32 (filter 3) verification, and the checksum itself against its
// definition (sums of big-endian 16-bit words mod 65535).
#include "fuzz_input.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace h5chunk;
  Status st = codec::fletcher32_verify(data, size);
  FUZZ_CHECK(st.ok() || !st.message().empty());
  uint64_t s1 = 0, s2 = 0;
  bool any = false;
  for (size_t i = 0; i < size; i += 2) {
    uint32_t word = uint32_t{data[i]} << 8 | (i + 1 < size ? data[i + 1] : 0);
    any = any || word != 0;
    s1 = (s1 + word) % 65535;
    s2 = (s2 + s1) % 65535;
  }
  // HDF5's folding keeps a nonzero sum in 1..65535: a multiple of 65535 reads 0xffff.
  auto represent = [&](uint64_t s) { return any && s == 0 ? 0xffffu : uint32_t(s); };
  FUZZ_CHECK(codec::fletcher32(data, size) == (represent(s2) << 16 | represent(s1)));
  if (size >= 4) {
    // A trailer equal to the checksum of what precedes it must verify.
    const uint32_t sum = codec::fletcher32(data, size - 4);
    const uint32_t stored = fuzz::le32(data + size - 4);
    const uint32_t swapped = (sum & 0x00ff00ffu) << 8 | (sum & 0xff00ff00u) >> 8;
    FUZZ_CHECK(st.ok() == (stored == sum || stored == swapped));
  }
  return 0;
}
