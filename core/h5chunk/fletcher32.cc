// Fletcher32 filter (3): HDF5's H5_checksum_fletcher32 over the chunk, stored little-endian in
// a 4-byte trailer. Verifying only; the filter changes no data.
#include <cstring>
#include <string>

#include "h5chunk/codecs.h"

namespace h5chunk::codec {
namespace {

// HDF5 folds the sums every 360 16-bit words: the most that keeps sum2 from overflowing 32 bits.
constexpr size_t kWordsPerFold = 360;
constexpr size_t kTrailerBytes = 4;

inline uint32_t fold(uint32_t sum) { return (sum & 0xffff) + (sum >> 16); }

}  // namespace

uint32_t fletcher32(const uint8_t* data, size_t n) {
  uint32_t sum1 = 0, sum2 = 0;
  size_t words = n / 2;
  while (words) {
    size_t run = words < kWordsPerFold ? words : kWordsPerFold;
    words -= run;
    for (size_t i = 0; i < run; ++i, data += 2) {
      // Words are big-endian whatever the host: HDF5 fixed that in 1.6.3.
      sum1 += uint32_t{data[0]} << 8 | data[1];
      sum2 += sum1;
    }
    sum1 = fold(sum1);
    sum2 = fold(sum2);
  }
  if (n % 2) {
    // An odd last byte counts as the high half of a word padded with zero.
    sum1 += uint32_t{data[0]} << 8;
    sum2 += sum1;
    sum1 = fold(sum1);
    sum2 = fold(sum2);
  }
  sum1 = fold(sum1);
  sum2 = fold(sum2);
  return sum2 << 16 | sum1;
}

Status fletcher32_verify(const uint8_t* in, size_t in_size) {
  if (in_size < kTrailerBytes) {
    return hubfs::Corrupt("fletcher32: " + std::to_string(in_size) +
                          " bytes cannot hold the 4-byte checksum");
  }
  size_t n = in_size - kTrailerBytes;
  const uint8_t* t = in + n;
  uint32_t stored = uint32_t{t[0]} | uint32_t{t[1]} << 8 | uint32_t{t[2]} << 16 | uint32_t{t[3]} << 24;
  uint32_t sum = fletcher32(in, n);
  // HDF5 before 1.6.3 stored the sum with the bytes of each 16-bit half swapped on
  // little-endian hosts; HDF5's reader still accepts that form, so must we.
  uint32_t swapped = (sum & 0x00ff00ffu) << 8 | (sum & 0xff00ff00u) >> 8;
  if (stored != sum && stored != swapped) return hubfs::Corrupt("fletcher32 checksum mismatch");
  return Status::Ok();
}

}  // namespace h5chunk::codec
