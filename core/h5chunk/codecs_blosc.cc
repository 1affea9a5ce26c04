// Blosc filter (32001): the stored chunk is one blosc1 buffer, header included.
#include <blosc.h>

#include <string>

#include "h5chunk/codecs.h"

namespace h5chunk::codec {

Result<size_t> blosc_decode(const uint8_t* in, size_t in_size, Target out) {
  if (in_size < BLOSC_MIN_HEADER_LENGTH) {
    return hubfs::Corrupt("blosc: " + std::to_string(in_size) + " bytes is shorter than its " +
                          std::to_string(BLOSC_MIN_HEADER_LENGTH) + "-byte header");
  }
  // validate checks the version and that the header's cbytes fit in in_size, which
  // blosc_decompress_ctx (it takes no source size) relies on.
  size_t nbytes = 0;
  if (blosc_cbuffer_validate(in, in_size, &nbytes) != 0) {
    return hubfs::Corrupt("blosc: invalid header for a " + std::to_string(in_size) + "-byte buffer");
  }
  size_t header_nbytes = 0, cbytes = 0, blocksize = 0;
  blosc_cbuffer_sizes(in, &header_nbytes, &cbytes, &blocksize);
  if (cbytes != in_size) {
    // The HDF5 filter stores exactly the blosc buffer; extra bytes mean a wrong chunk size.
    return hubfs::Corrupt("blosc: buffer is " + std::to_string(cbytes) + " bytes, stored chunk " +
                          std::to_string(in_size));
  }
  if (Status st = check_announced_size("blosc", nbytes, out); !st.ok()) return st;
  if (nbytes == 0) return size_t{0};
  // One internal thread: the caller's thread pool is the parallelism, and the _ctx variant
  // touches no global state, so workers may call it concurrently.
  int got = blosc_decompress_ctx(in, out.data, nbytes, 1);
  if (got < 0) return hubfs::Corrupt("blosc: decompression failed (error " + std::to_string(got) + ")");
  if (static_cast<size_t>(got) != nbytes) {
    return hubfs::Corrupt("blosc: decoded " + std::to_string(got) + " bytes, expected " +
                          std::to_string(nbytes));
  }
  return nbytes;
}

}  // namespace h5chunk::codec
