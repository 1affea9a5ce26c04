// BLAKE3 from its specification: section numbers refer to the BLAKE3 paper (blake3.pdf).
#include "xet/blake3.h"

#include <algorithm>
#include <cstring>

namespace hubfs::xet {
namespace {

// §2.1: the IV is SHA-256's.
constexpr std::array<uint32_t, 8> kIv = {0x6A09E667, 0xBB67AE85, 0x3C6EF372, 0xA54FF53A,
                                         0x510E527F, 0x9B05688C, 0x1F83D9AB, 0x5BE0CD19};

// §2.1 domain flags.
constexpr uint32_t kChunkStart = 1u << 0;
constexpr uint32_t kChunkEnd = 1u << 1;
constexpr uint32_t kParent = 1u << 2;
constexpr uint32_t kRoot = 1u << 3;
constexpr uint32_t kKeyedHash = 1u << 4;

// §2.2: the message permutation applied between rounds. The schedule for round r is the
// permutation applied r times, precomputed so a round indexes the original block directly.
constexpr std::array<uint8_t, 16> kPermutation = {2, 6, 3, 10, 7, 0, 4, 13, 1, 11, 12, 5, 9, 14, 15, 8};
struct Schedule {
  uint8_t idx[7][16];
};
constexpr Schedule make_schedule() {
  Schedule s{};
  for (int i = 0; i < 16; ++i) s.idx[0][i] = static_cast<uint8_t>(i);
  for (int r = 1; r < 7; ++r)
    for (int i = 0; i < 16; ++i) s.idx[r][i] = s.idx[r - 1][kPermutation[i]];
  return s;
}
constexpr Schedule kSchedule = make_schedule();

inline uint32_t rotr(uint32_t x, int n) { return (x >> n) | (x << (32 - n)); }

inline uint32_t load_le32(const uint8_t* p) {
  return uint32_t(p[0]) | (uint32_t(p[1]) << 8) | (uint32_t(p[2]) << 16) | (uint32_t(p[3]) << 24);
}

inline void store_le32(uint8_t* p, uint32_t v) {
  p[0] = uint8_t(v);
  p[1] = uint8_t(v >> 8);
  p[2] = uint8_t(v >> 16);
  p[3] = uint8_t(v >> 24);
}

inline void load_block(const uint8_t* p, uint32_t m[16]) {
  for (int i = 0; i < 16; ++i) m[i] = load_le32(p + 4 * i);
}

#define HUBFS_B3_G(a, b, c, d, x, y) \
  do {                               \
    a = a + b + (x);                 \
    d = rotr(d ^ a, 16);             \
    c = c + d;                       \
    b = rotr(b ^ c, 12);             \
    a = a + b + (y);                 \
    d = rotr(d ^ a, 8);              \
    c = c + d;                       \
    b = rotr(b ^ c, 7);              \
  } while (0)

// One round (§2.2) with round R's message schedule resolved at compile time: indexing the block
// through a runtime schedule table made the whole hash about three times slower.
template <int R>
inline void round(uint32_t v[16], const uint32_t m[16]) {
  constexpr const uint8_t* s = kSchedule.idx[R];
  HUBFS_B3_G(v[0], v[4], v[8], v[12], m[s[0]], m[s[1]]);
  HUBFS_B3_G(v[1], v[5], v[9], v[13], m[s[2]], m[s[3]]);
  HUBFS_B3_G(v[2], v[6], v[10], v[14], m[s[4]], m[s[5]]);
  HUBFS_B3_G(v[3], v[7], v[11], v[15], m[s[6]], m[s[7]]);
  HUBFS_B3_G(v[0], v[5], v[10], v[15], m[s[8]], m[s[9]]);
  HUBFS_B3_G(v[1], v[6], v[11], v[12], m[s[10]], m[s[11]]);
  HUBFS_B3_G(v[2], v[7], v[8], v[13], m[s[12]], m[s[13]]);
  HUBFS_B3_G(v[3], v[4], v[9], v[14], m[s[14]], m[s[15]]);
}

// §2.2 the compression function; writes the full 16-word state (the first 8 words are the new
// chaining value; all 16 are extended output).
void compress(const uint32_t cv[8], const uint32_t m[16], uint64_t counter, uint32_t block_len, uint32_t flags,
              uint32_t out[16]) {
  uint32_t v[16] = {cv[0],  cv[1],  cv[2],  cv[3],  cv[4],           cv[5],                 cv[6],     cv[7],
                    kIv[0], kIv[1], kIv[2], kIv[3], uint32_t(counter), uint32_t(counter >> 32), block_len, flags};
  round<0>(v, m);
  round<1>(v, m);
  round<2>(v, m);
  round<3>(v, m);
  round<4>(v, m);
  round<5>(v, m);
  round<6>(v, m);
  for (int i = 0; i < 8; ++i) {
    out[i] = v[i] ^ v[i + 8];
    out[i + 8] = v[i + 8] ^ cv[i];
  }
}
#undef HUBFS_B3_G

// Only the chaining value (first 8 words) of a compression.
inline void compress_cv(uint32_t cv[8], const uint32_t m[16], uint64_t counter, uint32_t block_len,
                        uint32_t flags) {
  uint32_t out[16];
  compress(cv, m, counter, block_len, flags, out);
  std::memcpy(cv, out, 8 * sizeof(uint32_t));
}

}  // namespace

// The inputs of the compression that produces a node's output; the root node's output is
// expanded by counting the counter up (§2.6, extended output).
struct Blake3::Output {
  std::array<uint32_t, 8> input_cv;
  uint32_t block[16];
  uint64_t counter;
  uint32_t block_len;
  uint32_t flags;

  std::array<uint32_t, 8> chaining_value() const {
    uint32_t out[16];
    compress(input_cv.data(), block, counter, block_len, flags, out);
    std::array<uint32_t, 8> cv;
    std::memcpy(cv.data(), out, sizeof(cv));
    return cv;
  }

  void root_bytes(uint8_t* dst, size_t len) const {
    uint64_t output_block_counter = 0;
    while (len > 0) {
      uint32_t words[16];
      compress(input_cv.data(), block, output_block_counter, block_len, flags | kRoot, words);
      uint8_t bytes[64];
      for (int i = 0; i < 16; ++i) store_le32(bytes + 4 * i, words[i]);
      const size_t take = std::min(len, sizeof(bytes));
      std::memcpy(dst, bytes, take);
      dst += take;
      len -= take;
      ++output_block_counter;
    }
  }
};

Blake3::Blake3() : key_words_(kIv), flags_(0) { reset_chunk(0); }

Blake3::Blake3(const Blake3Key& key) : flags_(kKeyedHash) {
  for (int i = 0; i < 8; ++i) key_words_[i] = load_le32(key.data() + 4 * i);
  reset_chunk(0);
}

void Blake3::reset_chunk(uint64_t chunk_counter) {
  chunk_.cv = key_words_;
  chunk_.chunk_counter = chunk_counter;
  chunk_.block_len = 0;
  chunk_.blocks_compressed = 0;
}

void Blake3::chunk_update(const uint8_t* data, size_t len) {
  while (len > 0) {
    // A full buffered block is compressed only once more input shows it is not the chunk's last.
    if (chunk_.block_len == kBlockLen) {
      uint32_t m[16];
      load_block(chunk_.block.data(), m);
      const uint32_t start = chunk_.blocks_compressed == 0 ? kChunkStart : 0;
      compress_cv(chunk_.cv.data(), m, chunk_.chunk_counter, kBlockLen, flags_ | start);
      ++chunk_.blocks_compressed;
      chunk_.block_len = 0;
    }
    // Whole blocks with more input after them go straight from the caller's buffer.
    while (chunk_.block_len == 0 && len > kBlockLen) {
      uint32_t m[16];
      load_block(data, m);
      const uint32_t start = chunk_.blocks_compressed == 0 ? kChunkStart : 0;
      compress_cv(chunk_.cv.data(), m, chunk_.chunk_counter, kBlockLen, flags_ | start);
      ++chunk_.blocks_compressed;
      data += kBlockLen;
      len -= kBlockLen;
    }
    const size_t take = std::min(kBlockLen - chunk_.block_len, len);
    std::memcpy(chunk_.block.data() + chunk_.block_len, data, take);
    chunk_.block_len = static_cast<uint8_t>(chunk_.block_len + take);
    data += take;
    len -= take;
  }
}

Blake3::Output Blake3::chunk_output() const {
  Output o;
  o.input_cv = chunk_.cv;
  // The final block is zero-padded (§2.4); its real length goes in block_len.
  uint8_t padded[kBlockLen] = {};
  std::memcpy(padded, chunk_.block.data(), chunk_.block_len);
  load_block(padded, o.block);
  o.counter = chunk_.chunk_counter;
  o.block_len = chunk_.block_len;
  o.flags = flags_ | kChunkEnd | (chunk_.blocks_compressed == 0 ? kChunkStart : 0);
  return o;
}

std::array<uint32_t, 8> Blake3::whole_chunk_cv(const uint8_t* data, uint64_t chunk_counter) const {
  std::array<uint32_t, 8> cv = key_words_;
  constexpr size_t kBlocks = kChunkLen / kBlockLen;
  for (size_t b = 0; b < kBlocks; ++b) {
    uint32_t m[16];
    load_block(data + b * kBlockLen, m);
    uint32_t f = flags_;
    if (b == 0) f |= kChunkStart;
    if (b == kBlocks - 1) f |= kChunkEnd;
    compress_cv(cv.data(), m, chunk_counter, kBlockLen, f);
  }
  return cv;
}

void Blake3::add_chunk_cv(std::array<uint32_t, 8> cv, uint64_t total_chunks) {
  while ((total_chunks & 1) == 0) {
    cv = parent_output(cv_stack_[--cv_stack_len_], cv, key_words_, flags_).chaining_value();
    total_chunks >>= 1;
  }
  cv_stack_[cv_stack_len_++] = cv;
}

void Blake3::update(const void* data, size_t len) {
  const auto* p = static_cast<const uint8_t*>(data);
  while (len > 0) {
    // A full chunk is finished only once more input shows it is not the root's only chunk.
    if (chunk_.len() == kChunkLen) {
      const auto cv = chunk_output().chaining_value();
      const uint64_t total = chunk_.chunk_counter + 1;
      add_chunk_cv(cv, total);
      reset_chunk(total);
    }
    if (chunk_.len() == 0 && len > kChunkLen) {
      const auto cv = whole_chunk_cv(p, chunk_.chunk_counter);
      const uint64_t total = chunk_.chunk_counter + 1;
      add_chunk_cv(cv, total);
      reset_chunk(total);
      p += kChunkLen;
      len -= kChunkLen;
      continue;
    }
    const size_t take = std::min(kChunkLen - chunk_.len(), len);
    chunk_update(p, take);
    p += take;
    len -= take;
  }
}

void Blake3::finalize(uint8_t* out, size_t out_len) const {
  // Merge the right edge of the tree from the current chunk up to the root (§2.5).
  Output o = chunk_output();
  for (size_t i = cv_stack_len_; i > 0; --i) {
    o = parent_output(cv_stack_[i - 1], o.chaining_value(), key_words_, flags_);
  }
  o.root_bytes(out, out_len);
}

Blake3Digest Blake3::finalize() const {
  Blake3Digest d;
  finalize(d.data(), d.size());
  return d;
}

Blake3Digest Blake3::hash(const void* data, size_t len) {
  Blake3 h;
  h.update(data, len);
  return h.finalize();
}

Blake3Digest Blake3::keyed_hash(const Blake3Key& key, const void* data, size_t len) {
  Blake3 h(key);
  h.update(data, len);
  return h.finalize();
}

Blake3::Output Blake3::parent_output(const std::array<uint32_t, 8>& left, const std::array<uint32_t, 8>& right,
                                     const std::array<uint32_t, 8>& key, uint32_t flags) {
  Blake3::Output o;
  o.input_cv = key;
  std::memcpy(o.block, left.data(), 32);
  std::memcpy(o.block + 8, right.data(), 32);
  o.counter = 0;
  o.block_len = Blake3::kBlockLen;
  o.flags = flags | kParent;
  return o;
}

}  // namespace hubfs::xet
