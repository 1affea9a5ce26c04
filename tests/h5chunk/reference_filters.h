// Test-only HDF5 decode filters for the two codecs Debian ships no HDF5 plugin for (zstd 32015,
// bitshuffle 32008), so H5Dread can be the reference for datasets that use them too. Written
// from the formats' definitions, slowly and independently of h5chunk's decoders (no shared
// code: a bug there cannot hide by appearing on both sides). Registered only in the processes
// that compute references: registering them where h5chunk runs would change its routing.
#pragma once

#include <hdf5.h>
#include <lz4.h>
#include <zstd.h>

#include <cstdint>
#include <cstring>
#include <vector>

namespace h5chunk::testing {

namespace reference_filters_detail {

// Chunks in these tests are small; a stated size beyond this is corruption.
constexpr uint64_t kMaxDecoded = uint64_t{1} << 28;

inline uint64_t be(const uint8_t* p, int n) {
  uint64_t v = 0;
  for (int i = 0; i < n; ++i) v = v << 8 | p[i];
  return v;
}

// Hands `out` to HDF5 as the filter's result (HDF5 frees the buffer it gave us).
inline size_t deliver(const std::vector<uint8_t>& out, size_t* buf_size, void** buf) {
  void* p = H5allocate_memory(out.size() ? out.size() : 1, false);
  if (!p) return 0;
  if (!out.empty()) std::memcpy(p, out.data(), out.size());
  H5free_memory(*buf);
  *buf = p;
  *buf_size = out.size() ? out.size() : 1;
  return out.size();
}

inline size_t zstd_filter(unsigned flags, size_t, const unsigned[], size_t nbytes, size_t* buf_size, void** buf) {
  if (!(flags & H5Z_FLAG_REVERSE)) return 0;
  // Streaming, so frames that do not record their size decode too.
  ZSTD_DStream* ds = ZSTD_createDStream();
  std::vector<uint8_t> out;
  ZSTD_inBuffer in{*buf, nbytes, 0};
  std::vector<uint8_t> piece(ZSTD_DStreamOutSize());
  bool ok = ds != nullptr;
  size_t rc = 1;
  while (ok && (in.pos < in.size || rc != 0)) {
    ZSTD_outBuffer ob{piece.data(), piece.size(), 0};
    rc = ZSTD_decompressStream(ds, &ob, &in);
    if (ZSTD_isError(rc) || out.size() + ob.pos > kMaxDecoded) ok = false;
    out.insert(out.end(), piece.begin(), piece.begin() + long(ob.pos));
    if (ok && ob.pos == 0 && in.pos == in.size && rc != 0) ok = false;  // truncated frame
  }
  ZSTD_freeDStream(ds);
  return ok ? deliver(out, buf_size, buf) : 0;
}

// Bit k of byte j of element i sits in bit row j*8+k, at bit i of that row (rows of n/8 bytes).
inline void untranspose(const uint8_t* in, uint8_t* out, size_t n, size_t elem) {
  const size_t row = n / 8;
  std::memset(out, 0, n * elem);
  for (size_t i = 0; i < n; ++i)
    for (size_t j = 0; j < elem; ++j)
      for (size_t k = 0; k < 8; ++k)
        if ((in[(j * 8 + k) * row + i / 8] >> (i % 8)) & 1) out[i * elem + j] |= uint8_t(1u << k);
}

inline size_t bitshuffle_filter(unsigned flags, size_t cd_nelmts, const unsigned cd[], size_t nbytes,
                                size_t* buf_size, void** buf) {
  if (!(flags & H5Z_FLAG_REVERSE) || cd_nelmts < 3 || cd[2] == 0) return 0;
  const uint8_t* in = static_cast<const uint8_t*>(*buf);
  const size_t elem = cd[2];
  const unsigned compression = cd_nelmts > 4 ? cd[4] : 0;
  uint64_t total = nbytes;
  size_t block_elems = cd_nelmts > 3 ? cd[3] : 0, pos = 0;
  if (compression != 0) {
    if (nbytes < 12) return 0;
    total = be(in, 8);
    block_elems = be(in + 8, 4) / elem;
    pos = 12;
  }
  if (total > kMaxDecoded || total % elem) return 0;
  if (block_elems == 0) block_elems = std::max<size_t>(8192 / elem / 8 * 8, 128);
  if (block_elems % 8) return 0;
  const size_t n = total / elem;
  std::vector<uint8_t> out(total), plain;
  size_t start = 0;
  while (start < n) {
    size_t count = std::min(n - start, block_elems);
    count -= count % 8;
    if (count == 0) break;
    const size_t bytes = count * elem;
    plain.assign(bytes, 0);
    if (compression == 0) {
      if (nbytes - pos < bytes) return 0;
      std::memcpy(plain.data(), in + pos, bytes);
      pos += bytes;
    } else {
      if (nbytes - pos < 4) return 0;
      const size_t c = be(in + pos, 4);
      pos += 4;
      if (nbytes - pos < c) return 0;
      if (compression == 2) {
        int got = LZ4_decompress_safe(reinterpret_cast<const char*>(in + pos), reinterpret_cast<char*>(plain.data()),
                                      int(c), int(bytes));
        if (got != int(bytes)) return 0;
      } else if (compression == 3) {
        size_t got = ZSTD_decompress(plain.data(), bytes, in + pos, c);
        if (ZSTD_isError(got) || got != bytes) return 0;
      } else {
        return 0;
      }
      pos += c;
    }
    untranspose(plain.data(), &out[start * elem], count, elem);
    start += count;
  }
  const size_t leftover = (n - start) * elem;
  if (nbytes - pos != leftover) return 0;
  if (leftover) std::memcpy(&out[start * elem], in + pos, leftover);
  return deliver(out, buf_size, buf);
}

}  // namespace reference_filters_detail

// Makes H5Dread able to read zstd and bitshuffle datasets in this process.
inline void register_reference_filters() {
  using namespace reference_filters_detail;
  static const H5Z_class2_t zstd = {H5Z_CLASS_T_VERS, H5Z_filter_t(32015), 0, 1, "reference zstd", nullptr,
                                    nullptr, zstd_filter};
  static const H5Z_class2_t bshuf = {H5Z_CLASS_T_VERS, H5Z_filter_t(32008), 0, 1, "reference bitshuffle",
                                     nullptr, nullptr, bitshuffle_filter};
  H5Zregister(&zstd);
  H5Zregister(&bshuf);
}

}  // namespace h5chunk::testing
