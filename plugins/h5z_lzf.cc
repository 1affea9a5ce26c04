// HDF5 filter plugin for LZF, filter id 32000, byte-compatible with the filter h5py builds in
// (h5py/lzf/lzf_filter.c): the chunk is one raw LZF stream; set_local records cd_values
// [filter revision 4, LZF API version, chunk bytes]. h5py registers the filter as optional, so a
// chunk LZF cannot shrink fails the filter and HDF5 stores it raw with the mask bit set; a
// mandatory pipeline (h5repack -f UD=32000,0,...) gets a slightly larger LZF stream instead,
// which h5py's decoder reads as well. Decoding goes through h5chunk's LZF decoder.
#include <H5PLextern.h>
#include <hdf5.h>
#include <lzf.h>

#include <algorithm>
#include <cerrno>
#include <new>
#include <string>

#include "filter_util.h"
#include "h5chunk/codecs.h"

namespace hubfs_plugins {
namespace {

constexpr H5Z_filter_t kLzfFilter = 32000;
constexpr unsigned kH5pyFilterRevision = 4;  // h5py's H5PY_FILTER_LZF_VERSION
constexpr size_t kCdSlots = 3;               // revision, LZF API version, chunk bytes
// lzf.h: output "less than 104% of the original size" when it cannot compress.
size_t lzf_worst_case(size_t n) { return n + n / 16 + 64; }

herr_t set_local(hid_t dcpl, hid_t type, hid_t /*space*/) {
  unsigned flags = 0;
  unsigned values[8] = {};
  size_t count = 8;
  if (H5Pget_filter_by_id2(dcpl, kLzfFilter, &flags, &count, values, 0, nullptr, nullptr) < 0) {
    fail(__func__, "lzf: the dataset's filter pipeline has no LZF filter to configure");
    return -1;
  }
  // Keep slots a writer set beyond ours (at most the 8 read), as h5py does.
  count = std::clamp(count, kCdSlots, size_t{8});
  if (values[0] == 0) values[0] = kH5pyFilterRevision;
  if (values[1] == 0) values[1] = LZF_VERSION;

  hsize_t chunk[H5S_MAX_RANK];
  int rank = H5Pget_chunk(dcpl, H5S_MAX_RANK, chunk);
  size_t bytes = H5Tget_size(type);
  if (rank < 0 || bytes == 0) {
    fail(__func__, "lzf: cannot read the dataset's chunk shape or element size");
    return -1;
  }
  for (int i = 0; i < rank; ++i) {
    if (chunk[i] != 0 && bytes > kMaxChunkBytes / chunk[i]) {
      fail(__func__, "lzf: chunks above 4 GiB cannot be LZF-compressed; choose smaller chunks");
      return -1;
    }
    bytes *= chunk[i];
  }
  values[2] = static_cast<unsigned>(bytes);
  return H5Pmodify_filter(dcpl, kLzfFilter, flags, count, values) < 0 ? -1 : 1;
}

size_t decode(size_t cd_nelmts, const unsigned cd_values[], size_t nbytes, size_t* buf_size, void** buf) {
  const auto* in = static_cast<const uint8_t*>(*buf);
  const size_t chunk_bytes = cd_nelmts >= kCdSlots ? cd_values[2] : 0;
  if (chunk_bytes != 0) {
    // The usual case: set_local recorded the chunk size, which the stream must decode to.
    H5Buffer out(chunk_bytes);
    if (!out.data()) return fail(__func__, "lzf: out of memory for a " + std::to_string(chunk_bytes) + "-byte chunk");
    auto got = h5chunk::codec::lzf_decode(in, nbytes, {out.data(), chunk_bytes, true});
    if (!got.ok()) return fail(__func__, got.status().message());
    return out.hand_over(*got, buf_size, buf);
  }
  // No recorded size (a writer that skipped set_local): grow the output while LZF reports
  // running out of room (E2BIG), as h5py's filter does, up to the largest possible chunk.
  H5Buffer out(std::min(std::max<size_t>(nbytes * 4, 64 << 10), kMaxChunkBytes));
  for (;;) {
    if (!out.data()) return fail(__func__, "lzf: out of memory for the decoded chunk");
    errno = 0;  // lzf_decode may fail before liblzf runs: no stale E2BIG may then read as "grow"
    auto got = h5chunk::codec::lzf_decode(in, nbytes, {out.data(), out.capacity(), false});
    if (got.ok()) return out.hand_over(*got, buf_size, buf);
    // lzf_decode leaves liblzf's errno in place: E2BIG means "output too small".
    if (errno != E2BIG || out.capacity() >= kMaxChunkBytes) return fail(__func__, got.status().message());
    if (!out.grow(std::min(out.capacity() * 2, kMaxChunkBytes))) {
      return fail(__func__, "lzf: out of memory for the decoded chunk");
    }
  }
}

size_t encode(unsigned flags, size_t nbytes, size_t* buf_size, void** buf) {
  if (nbytes == 0 || nbytes > kMaxChunkBytes) {
    return fail(__func__, "lzf: cannot compress a chunk of " + std::to_string(nbytes) + " bytes");
  }
  // Room for no more than the input: output that does not shrink is not worth storing.
  H5Buffer out(nbytes);
  if (!out.data()) return fail(__func__, "lzf: out of memory for the compressed chunk");
  unsigned n = lzf_compress(*buf, static_cast<unsigned>(nbytes), out.data(), static_cast<unsigned>(nbytes));
  if (n != 0) return out.hand_over(n, buf_size, buf);
  // Optional filter: failing makes HDF5 store the chunk raw and set its mask bit (h5py's way).
  // HDF5 clears the error stack for optional filters, so there is no message to leave.
  if (flags & H5Z_FLAG_OPTIONAL) return 0;
  if (!out.grow(lzf_worst_case(nbytes))) return fail(__func__, "lzf: out of memory for the compressed chunk");
  n = lzf_compress(*buf, static_cast<unsigned>(nbytes), out.data(), static_cast<unsigned>(out.capacity()));
  if (n == 0) return fail(__func__, "lzf: compression failed on a " + std::to_string(nbytes) + "-byte chunk");
  return out.hand_over(n, buf_size, buf);
}

size_t filter(unsigned flags, size_t cd_nelmts, const unsigned cd_values[], size_t nbytes, size_t* buf_size,
              void** buf) {
  // HDF5 is C: nothing may be thrown through it (the messages allocate).
  try {
    if (flags & H5Z_FLAG_REVERSE) return decode(cd_nelmts, cd_values, nbytes, buf_size, buf);
    return encode(flags, nbytes, buf_size, buf);
  } catch (const std::bad_alloc&) {
    return fail(__func__, "lzf: out of memory");
  }
}

const H5Z_class2_t kLzfClass = {
    H5Z_CLASS_T_VERS,
    kLzfFilter,
    1,      // encoder present
    1,      // decoder present
    "lzf",  // h5py's name, stored in files
    nullptr,
    set_local,
    filter,
};

}  // namespace
}  // namespace hubfs_plugins

extern "C" {
H5PLUGIN_DLL H5PL_type_t H5PLget_plugin_type(void) { return H5PL_TYPE_FILTER; }
H5PLUGIN_DLL const void* H5PLget_plugin_info(void) { return &hubfs_plugins::kLzfClass; }
}
