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
  size_t header_nbytes = 0, cbytes = 0, blocksize = 0;
  blosc_cbuffer_sizes(in, &header_nbytes, &cbytes, &blocksize);
  if (cbytes > in_size) {
    return hubfs::Corrupt("blosc: header says the buffer is " + std::to_string(cbytes) +
                          " bytes, but the stored chunk holds only " + std::to_string(in_size));
  }
  // Bytes after the buffer are ignored, as the HDF5 Blosc plugin (which trusts the header's
  // sizes) ignores them: writers that store their whole compression buffer rather than its
  // used part (H5Dwrite_chunk of nbytes + BLOSC_MAX_OVERHEAD bytes) leave them there, and
  // blosc_cbuffer_validate over the stored size rejected such chunks that h5py reads.
  // validate then checks the version and that the buffer fits its cbytes, which
  // blosc_decompress_ctx (it takes no source size) relies on.
  size_t nbytes = 0;
  if (blosc_cbuffer_validate(in, cbytes, &nbytes) != 0) {
    return hubfs::Corrupt("blosc: invalid header for a " + std::to_string(in_size) + "-byte buffer");
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
