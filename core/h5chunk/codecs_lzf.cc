// LZF filter (32000), h5py's framing (h5py/lzf/lzf_filter.c): the stored chunk is one raw LZF
// stream with no header of its own. The plain size lives in the dataset's cd_values
// ([filter revision, LZF API version, chunk bytes]); the decoder does not need it, the chunk
// shape says the same. A chunk LZF could not shrink is stored raw with the filter's mask bit
// set (h5py registers the filter as optional), which decode_chunk handles before we get here.
#include <lzf.h>

#include <algorithm>
#include <cerrno>
#include <climits>
#include <string>

#include "h5chunk/codecs.h"

namespace h5chunk::codec {

Result<size_t> lzf_decode(const uint8_t* in, size_t in_size, Target out) {
  // liblzf counts in unsigned int; HDF5 chunks are below 4 GiB, so larger is not ours.
  if (in_size == 0) return hubfs::Corrupt("lzf: empty input");
  if (in_size > UINT_MAX || out.capacity > UINT_MAX) {
    return hubfs::Corrupt("lzf: " + std::to_string(std::max(in_size, out.capacity)) +
                          " bytes exceeds what LZF can address");
  }
  // liblzf reports failure as 0 bytes with errno set; errno is per thread, so this is safe on
  // the workers.
  errno = 0;
  unsigned got = lzf_decompress(in, static_cast<unsigned>(in_size), out.data, static_cast<unsigned>(out.capacity));
  if (got == 0) {
    if (errno == E2BIG) {
      return hubfs::Corrupt("lzf: decodes to more than the expected " + std::to_string(out.capacity) + " bytes");
    }
    return hubfs::Corrupt("lzf: not a valid LZF stream (" + std::to_string(in_size) + " bytes)");
  }
  if (out.exact && got != out.capacity) {
    return hubfs::Corrupt("lzf: decoded " + std::to_string(got) + " bytes, expected " +
                          std::to_string(out.capacity));
  }
  return size_t{got};
}

}  // namespace h5chunk::codec
