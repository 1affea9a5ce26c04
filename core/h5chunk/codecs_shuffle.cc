// HDF5 byte shuffle (filter 2): the writer stores byte j of every element together, so
// unshuffling gathers from elem_size streams of n / elem_size bytes each and interleaves them.
// The common element sizes (2, 4, 8) interleave 16 elements at a time with SSE2 unpacks, which
// every x86-64 CPU has; other sizes take a scalar loop.
#include <cstring>

#include "h5chunk/codecs.h"

#if defined(__SSE2__)
#include <emmintrin.h>
#endif

namespace h5chunk::codec {
namespace {

// Interleaves elements [begin, end) with a plain loop; writes are sequential, reads come
// from elem_size streams.
void unshuffle_scalar(const uint8_t* in, uint8_t* out, size_t n_elems, size_t elem_size, size_t begin,
                      size_t end) {
  for (size_t i = begin; i < end; ++i) {
    uint8_t* dst = out + i * elem_size;
    for (size_t j = 0; j < elem_size; ++j) dst[j] = in[j * n_elems + i];
  }
}

void shuffle_scalar(const uint8_t* in, uint8_t* out, size_t n_elems, size_t elem_size) {
  for (size_t i = 0; i < n_elems; ++i) {
    const uint8_t* src = in + i * elem_size;
    for (size_t j = 0; j < elem_size; ++j) out[j * n_elems + i] = src[j];
  }
}

#if defined(__SSE2__)
inline __m128i load(const uint8_t* p) { return _mm_loadu_si128(reinterpret_cast<const __m128i*>(p)); }
inline void store(uint8_t* p, __m128i v) { _mm_storeu_si128(reinterpret_cast<__m128i*>(p), v); }

// Each returns how many elements it handled (a multiple of 16); the caller finishes the rest.
size_t unshuffle2_sse2(const uint8_t* in, uint8_t* out, size_t n) {
  const uint8_t* s0 = in;
  const uint8_t* s1 = in + n;
  size_t i = 0;
  for (; i + 16 <= n; i += 16) {
    __m128i a = load(s0 + i), b = load(s1 + i);
    store(out + 2 * i, _mm_unpacklo_epi8(a, b));
    store(out + 2 * i + 16, _mm_unpackhi_epi8(a, b));
  }
  return i;
}

size_t unshuffle4_sse2(const uint8_t* in, uint8_t* out, size_t n) {
  size_t i = 0;
  for (; i + 16 <= n; i += 16) {
    __m128i b0 = load(in + i), b1 = load(in + n + i), b2 = load(in + 2 * n + i), b3 = load(in + 3 * n + i);
    // Pairs of bytes (0,1) and (2,3), then pairs of those pairs: whole 4-byte elements.
    __m128i lo01 = _mm_unpacklo_epi8(b0, b1), hi01 = _mm_unpackhi_epi8(b0, b1);
    __m128i lo23 = _mm_unpacklo_epi8(b2, b3), hi23 = _mm_unpackhi_epi8(b2, b3);
    uint8_t* dst = out + 4 * i;
    store(dst, _mm_unpacklo_epi16(lo01, lo23));
    store(dst + 16, _mm_unpackhi_epi16(lo01, lo23));
    store(dst + 32, _mm_unpacklo_epi16(hi01, hi23));
    store(dst + 48, _mm_unpackhi_epi16(hi01, hi23));
  }
  return i;
}

size_t unshuffle8_sse2(const uint8_t* in, uint8_t* out, size_t n) {
  size_t i = 0;
  for (; i + 16 <= n; i += 16) {
    __m128i b[8];
    for (int j = 0; j < 8; ++j) b[j] = load(in + j * n + i);
    // Three rounds of interleaving: byte pairs, 4-byte groups, then 8-byte elements.
    __m128i p[8], q[8];
    for (int j = 0; j < 4; ++j) {
      p[2 * j] = _mm_unpacklo_epi8(b[2 * j], b[2 * j + 1]);
      p[2 * j + 1] = _mm_unpackhi_epi8(b[2 * j], b[2 * j + 1]);
    }
    // p[0],p[1]: bytes 0-1 of elements 0-7, 8-15; p[2],p[3]: bytes 2-3; and so on.
    for (int h = 0; h < 2; ++h) {
      q[4 * h + 0] = _mm_unpacklo_epi16(p[h], p[2 + h]);  // bytes 0-3
      q[4 * h + 1] = _mm_unpackhi_epi16(p[h], p[2 + h]);
      q[4 * h + 2] = _mm_unpacklo_epi16(p[4 + h], p[6 + h]);  // bytes 4-7
      q[4 * h + 3] = _mm_unpackhi_epi16(p[4 + h], p[6 + h]);
    }
    uint8_t* dst = out + 8 * i;
    for (int h = 0; h < 2; ++h) {
      // q[4h]: elements 8h..8h+3 bytes 0-3; q[4h+1]: elements 8h+4..8h+7 bytes 0-3.
      store(dst + 64 * h + 0, _mm_unpacklo_epi32(q[4 * h], q[4 * h + 2]));
      store(dst + 64 * h + 16, _mm_unpackhi_epi32(q[4 * h], q[4 * h + 2]));
      store(dst + 64 * h + 32, _mm_unpacklo_epi32(q[4 * h + 1], q[4 * h + 3]));
      store(dst + 64 * h + 48, _mm_unpackhi_epi32(q[4 * h + 1], q[4 * h + 3]));
    }
  }
  return i;
}
#endif

}  // namespace

void unshuffle(const uint8_t* in, uint8_t* out, size_t n, size_t elem_size) {
  size_t n_elems = elem_size ? n / elem_size : 0;
  // Size 1, or a single element: the shuffled order is the plain order (HDF5 skips these too).
  if (elem_size <= 1 || n_elems <= 1) {
    if (n) std::memcpy(out, in, n);
    return;
  }
  size_t done = 0;
#if defined(__SSE2__)
  switch (elem_size) {
    case 2:
      done = unshuffle2_sse2(in, out, n_elems);
      break;
    case 4:
      done = unshuffle4_sse2(in, out, n_elems);
      break;
    case 8:
      done = unshuffle8_sse2(in, out, n_elems);
      break;
    default:
      break;
  }
#endif
  unshuffle_scalar(in, out, n_elems, elem_size, done, n_elems);
  size_t body = n_elems * elem_size;
  // HDF5 leaves the bytes of a trailing partial element where they are.
  if (n > body) std::memcpy(out + body, in + body, n - body);
}

void shuffle(const uint8_t* in, uint8_t* out, size_t n, size_t elem_size) {
  size_t n_elems = elem_size ? n / elem_size : 0;
  if (elem_size <= 1 || n_elems <= 1) {
    if (n) std::memcpy(out, in, n);
    return;
  }
  shuffle_scalar(in, out, n_elems, elem_size);
  size_t body = n_elems * elem_size;
  if (n > body) std::memcpy(out + body, in + body, n - body);
}

}  // namespace h5chunk::codec
