// Test-side encoders for the codec tests: each writes a chunk the way the HDF5 filter does on
// write, using the codec libraries' own compressors and slow, obviously-correct reference
// transposes (never the decoder's code).
#pragma once

#include <blosc.h>
#include <lz4.h>
#include <zlib.h>
#include <zstd.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <random>
#include <stdexcept>
#include <string>
#include <vector>

namespace h5chunk::codec_test {

using Bytes = std::vector<uint8_t>;

// n float32 values of a smooth signal with a little noise: compressible like real data.
inline Bytes floats(size_t n, uint32_t seed = 1) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> noise(0.f, 0.01f);
  Bytes out(n * 4);
  for (size_t i = 0; i < n; ++i) {
    float v = std::sin(float(i) * 0.001f) * 100.f + noise(rng);
    std::memcpy(&out[i * 4], &v, 4);
  }
  return out;
}

inline Bytes bytes_random(size_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  Bytes out(n);
  for (auto& b : out) b = uint8_t(rng());
  return out;
}

// Mostly small repeating values: compressible, but not trivially.
inline Bytes bytes_pattern(size_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  Bytes out(n);
  for (size_t i = 0; i < n; ++i) out[i] = uint8_t((i / 7) % 13 + (rng() % 16 == 0 ? rng() : 0));
  return out;
}

inline void put_be32(uint8_t* p, uint32_t v) {
  p[0] = uint8_t(v >> 24), p[1] = uint8_t(v >> 16), p[2] = uint8_t(v >> 8), p[3] = uint8_t(v);
}
inline void put_be64(uint8_t* p, uint64_t v) {
  put_be32(p, uint32_t(v >> 32));
  put_be32(p + 4, uint32_t(v));
}

inline Bytes blosc_encode(const Bytes& data, size_t typesize, const char* compressor, int doshuffle,
                          int clevel) {
  Bytes out(data.size() + BLOSC_MAX_OVERHEAD);
  int n = blosc_compress_ctx(clevel, doshuffle, typesize, data.size(), data.data(), out.data(), out.size(),
                             compressor, 0, 1);
  if (n <= 0) throw std::runtime_error(std::string("blosc_compress_ctx failed for ") + compressor);
  out.resize(size_t(n));
  return out;
}

inline Bytes zstd_encode(const Bytes& data, int level) {
  Bytes out(ZSTD_compressBound(data.size()));
  size_t n = ZSTD_compress(out.data(), out.size(), data.data(), data.size(), level);
  if (ZSTD_isError(n)) throw std::runtime_error("ZSTD_compress failed");
  out.resize(n);
  return out;
}

// A frame that does not record its content size, as streaming writers produce.
inline Bytes zstd_encode_streamed(const Bytes& data) {
  ZSTD_CCtx* cctx = ZSTD_createCCtx();
  ZSTD_CCtx_setParameter(cctx, ZSTD_c_contentSizeFlag, 0);
  Bytes out(ZSTD_compressBound(data.size()));
  size_t n = ZSTD_compress2(cctx, out.data(), out.size(), data.data(), data.size());
  ZSTD_freeCCtx(cctx);
  if (ZSTD_isError(n)) throw std::runtime_error("ZSTD_compress2 failed");
  out.resize(n);
  return out;
}

inline Bytes deflate_encode(const Bytes& data, int level) {
  uLongf n = compressBound(data.size());
  Bytes out(n);
  if (compress2(out.data(), &n, data.data(), data.size(), level) != Z_OK)
    throw std::runtime_error("compress2");
  out.resize(n);
  return out;
}

// The HDF5 lz4 filter's framing; a block LZ4 cannot shrink is stored raw, its compressed
// size then equal to its plain size. block_size 0 writes 0 in the header (one block).
inline Bytes lz4_hdf5_encode(const Bytes& data, uint32_t block_size) {
  size_t block = block_size == 0 || block_size > data.size() ? data.size() : block_size;
  Bytes out(12);
  put_be64(out.data(), data.size());
  put_be32(out.data() + 8, uint32_t(block));  // the plugin stores the block size capped at the chunk
  for (size_t pos = 0; pos < data.size(); pos += block) {
    size_t plain = std::min(block, data.size() - pos);
    std::vector<char> tmp(static_cast<size_t>(LZ4_compressBound(static_cast<int>(plain))));
    int c = LZ4_compress_default(reinterpret_cast<const char*>(&data[pos]), tmp.data(), int(plain),
                                 int(tmp.size()));
    if (c <= 0) throw std::runtime_error("LZ4_compress_default");
    size_t at = out.size();
    if (size_t(c) >= plain) {
      out.resize(at + 4 + plain);
      put_be32(&out[at], uint32_t(plain));
      std::memcpy(&out[at + 4], &data[pos], plain);
    } else {
      out.resize(at + 4 + size_t(c));
      put_be32(&out[at], uint32_t(c));
      std::memcpy(&out[at + 4], tmp.data(), size_t(c));
    }
  }
  return out;
}

inline size_t count_raw_lz4_blocks(const Bytes& stored) {
  auto be32 = [&](size_t at) {
    return uint32_t(stored[at]) << 24 | uint32_t(stored[at + 1]) << 16 | uint32_t(stored[at + 2]) << 8 |
           stored[at + 3];
  };
  uint64_t total = uint64_t(be32(0)) << 32 | be32(4);
  uint64_t block = be32(8);
  if (block == 0 || block > total) block = total;
  size_t pos = 12, raw = 0;
  for (uint64_t done = 0; done < total; done += block) {
    uint64_t plain = std::min<uint64_t>(block, total - done);
    uint32_t c = be32(pos);
    raw += c == plain;
    pos += 4 + c;
  }
  return raw;
}

// HDF5 shuffle on write: byte j of element i goes to j * n_elems + i; the tail stays put.
inline Bytes reference_shuffle(const Bytes& data, size_t elem) {
  Bytes out = data;
  size_t n = elem ? data.size() / elem : 0;
  if (elem <= 1 || n <= 1) return out;
  for (size_t i = 0; i < n; ++i)
    for (size_t j = 0; j < elem; ++j) out[j * n + i] = data[i * elem + j];
  return out;
}

// H5_checksum_fletcher32 from its definition rather than its loop: 16-bit big-endian words
// (an odd last byte as a high half), both sums taken mod 65535. HDF5's folding keeps a
// nonzero sum in 1..65535, so a multiple of 65535 reads 0xffff unless the true sum is 0.
inline uint32_t reference_fletcher32(const Bytes& data) {
  uint64_t s1 = 0, s2 = 0;
  bool any = false;
  for (size_t i = 0; i < data.size(); i += 2) {
    uint32_t word = uint32_t(data[i]) << 8 | (i + 1 < data.size() ? data[i + 1] : 0);
    any = any || word != 0;
    s1 = (s1 + word) % 65535;
    s2 = (s2 + s1) % 65535;
  }
  auto represent = [&](uint64_t s) { return any && s == 0 ? 0xffffu : uint32_t(s); };
  return represent(s2) << 16 | represent(s1);
}

// Bitshuffle's bit transpose of one block, bit by bit: bit k of byte j of element i goes to
// bit row j*8+k, at bit position i of that row (rows of n/8 bytes, LSB first).
inline Bytes reference_bit_transpose(const uint8_t* in, size_t n, size_t elem) {
  Bytes out(n * elem, 0);
  size_t row_bytes = n / 8;
  for (size_t i = 0; i < n; ++i)
    for (size_t j = 0; j < elem; ++j)
      for (size_t k = 0; k < 8; ++k) {
        if ((in[i * elem + j] >> k) & 1) out[(j * 8 + k) * row_bytes + i / 8] |= uint8_t(1u << (i % 8));
      }
  return out;
}

// Bitshuffle filter payload as bshuf_h5filter writes it. compression 0: the bit-transposed
// blocks alone (no header); 2: LZ4 blocks; 3: zstd frames; each compressed block preceded by
// its u32 BE size, after a u64 BE total and u32 BE block size in bytes. block_elems is the
// block size in elements (a multiple of 8); the last partial block is rounded down to a
// multiple of 8 and the (n mod 8) leftover elements are copied raw.
inline Bytes bitshuffle_encode(const Bytes& data, size_t elem, size_t block_elems, int compression) {
  size_t n = data.size() / elem;
  Bytes out;
  if (compression != 0) {
    out.resize(12);
    put_be64(out.data(), data.size());
    put_be32(out.data() + 8, uint32_t(block_elems * elem));
  }
  size_t pos = 0;
  auto emit_block = [&](size_t count) {
    Bytes t = reference_bit_transpose(&data[pos * elem], count, elem);
    if (compression == 0) {
      out.insert(out.end(), t.begin(), t.end());
    } else {
      Bytes c;
      if (compression == 2) {
        c.resize(size_t(LZ4_compressBound(int(t.size()))));
        int k = LZ4_compress_default(reinterpret_cast<const char*>(t.data()),
                                     reinterpret_cast<char*>(c.data()), int(t.size()), int(c.size()));
        c.resize(size_t(k));
      } else {
        c = zstd_encode(t, 3);
      }
      size_t at = out.size();
      out.resize(at + 4);
      put_be32(&out[at], uint32_t(c.size()));
      out.insert(out.end(), c.begin(), c.end());
    }
    pos += count;
  };
  for (size_t b = 0; b < n / block_elems; ++b) emit_block(block_elems);
  size_t last = (n % block_elems) / 8 * 8;
  if (last) emit_block(last);
  out.insert(out.end(), data.begin() + long(pos * elem), data.end());
  return out;
}

inline Bytes fletcher_append(Bytes data) {
  uint32_t sum = reference_fletcher32(data);
  for (int i = 0; i < 4; ++i) data.push_back(uint8_t(sum >> (8 * i)));
  return data;
}

}  // namespace h5chunk::codec_test
