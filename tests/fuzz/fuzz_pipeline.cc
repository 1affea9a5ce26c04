// libFuzzer target: decode_chunk over whole filter pipelines (stacked filters, skipped
// filters, intermediate buffers), as the reader calls it for a stored chunk.
//
// Input: a filter-count byte (1-4), per filter an id byte (indexes the known ids, plus one
// unknown) and a cd_values count byte (0-7) followed by that many u32 LE values; then a
// filter-mask byte, an element-size byte, and the common layout of fuzz_input.h (only its
// capacity is used: the chunk's size, always an exact target).
#include <vector>

#include "fuzz_input.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace h5chunk;
  static DecodeScratch scratch;  // reused across inputs, as a worker's is
  static const unsigned kIds[] = {kDeflate, kShuffle, kFletcher32, kBlosc, kLz4, kBitshuffle, kZstd, 307};
  size_t pos = 0;
  auto take = [&](size_t n) -> const uint8_t* {
    if (size - pos < n) return nullptr;
    const uint8_t* p = data + pos;
    pos += n;
    return p;
  };
  const uint8_t* count = take(1);
  if (!count) return 0;
  std::vector<FilterStep> pipeline(1 + *count % 4);
  for (FilterStep& f : pipeline) {
    const uint8_t* head = take(2);
    if (!head) return 0;
    f.id = kIds[head[0] % 8];
    for (unsigned k = 0; k < head[1] % 8u; ++k) {
      const uint8_t* v = take(4);
      if (!v) return 0;
      f.cd_values.push_back(fuzz::le32(v));
    }
  }
  const uint8_t* tail = take(2);
  if (!tail) return 0;
  const uint32_t mask = tail[0];
  const size_t elem = 1 + tail[1] % 16;
  fuzz::Case c;
  if (!fuzz::parse(data + pos, size - pos, &c)) return 0;
  (void)unsupported_filter(pipeline);  // must not crash on any pipeline either
  auto a = fuzz::output(c.capacity, 0x00), b = fuzz::output(c.capacity, 0xff);
  Status sa = decode_chunk(pipeline, mask, elem, c.payload, c.payload_size, a.get(), c.capacity, scratch);
  Status sb = decode_chunk(pipeline, mask, elem, c.payload, c.payload_size, b.get(), c.capacity, scratch);
  FUZZ_CHECK(sa.ok() == sb.ok());
  FUZZ_CHECK(sa.ok() || !sa.message().empty());
  // A success wrote the whole chunk: both prefills are gone.
  if (sa.ok()) FUZZ_CHECK(c.capacity == 0 || std::memcmp(a.get(), b.get(), c.capacity) == 0);
  return 0;
}
