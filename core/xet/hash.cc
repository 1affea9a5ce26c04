#include "xet/hash.h"

#include <algorithm>
#include <cstring>

namespace hubfs::xet {

// xet_core_structures/src/merklehash/data_hash.rs DATA_KEY.
const Blake3Key kDataKey = {102, 151, 245, 119, 91,  149, 80,  222, 49,  53,  203, 172, 165, 151, 24, 28,
                            157, 228, 33,  16,  155, 235, 43,  88,  180, 208, 176, 75,  147, 173, 242, 41};
// data_hash.rs INTERNAL_NODE_HASH.
const Blake3Key kInternalNodeKey = {1,  126, 197, 199, 165, 71,  41,  150, 253, 148, 102, 102, 180, 138, 2,  230,
                                    93, 221, 83,  111, 55,  199, 109, 210, 248, 99,  82,  230, 74,  83,  113, 63};
// xet_core_structures/src/metadata_shard/chunk_verification.rs VERIFICATION_KEY.
const Blake3Key kVerificationKey = {127, 24,  87,  214, 206, 86,  237, 102, 18, 127, 249, 19,  231, 165, 195, 243,
                                    164, 205, 38,  213, 181, 219, 73,  230, 65, 36,  152, 127, 40,  251, 148, 195};

namespace {

constexpr char kHexDigits[] = "0123456789abcdef";

// aggregated_hashes.rs: the mean branching factor and the group bounds it implies.
constexpr uint64_t kMeanBranching = 4;
constexpr size_t kMaxGroup = 2 * kMeanBranching + 1;

int hex_value(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

MerkleHash from_digest(const Blake3Digest& d) {
  MerkleHash h;
  h.bytes = d;
  return h;
}

// next_merge_cut: how many of the nodes starting at `nodes` form the next group.
size_t next_group_size(const HashAndSize* nodes, size_t n) {
  if (n <= 2) return n;
  const size_t end = std::min(kMaxGroup, n);
  for (size_t i = 2; i < end; ++i) {
    if (nodes[i].hash.word(3) % kMeanBranching == 0) return i + 1;
  }
  return end;
}

}  // namespace

std::string MerkleHash::hex() const {
  std::string s(64, '0');
  for (int w = 0; w < 4; ++w) {
    for (int j = 0; j < 8; ++j) {
      // Word w's most significant byte (bytes[8w+7]) prints first.
      const uint8_t b = bytes[8 * w + 7 - j];
      s[16 * w + 2 * j] = kHexDigits[b >> 4];
      s[16 * w + 2 * j + 1] = kHexDigits[b & 15];
    }
  }
  return s;
}

std::optional<MerkleHash> MerkleHash::from_hex(std::string_view hex) {
  if (hex.size() != 64) return std::nullopt;
  MerkleHash h;
  for (int w = 0; w < 4; ++w) {
    for (int j = 0; j < 8; ++j) {
      const int hi = hex_value(hex[16 * w + 2 * j]);
      const int lo = hex_value(hex[16 * w + 2 * j + 1]);
      if (hi < 0 || lo < 0) return std::nullopt;
      h.bytes[8 * w + 7 - j] = static_cast<uint8_t>(hi << 4 | lo);
    }
  }
  return h;
}

uint64_t MerkleHash::word(int i) const {
  uint64_t v = 0;
  for (int j = 7; j >= 0; --j) v = v << 8 | bytes[8 * i + j];
  return v;
}

MerkleHash chunk_hash(const void* data, size_t len) { return from_digest(Blake3::keyed_hash(kDataKey, data, len)); }

MerkleHash ChunkHasher::finalize() const { return from_digest(b3_.finalize()); }

HashAndSize merge_nodes(const HashAndSize* children, size_t n) {
  // One line is at most 64 hex + " : " + 20 digits + "\n" = 88 bytes.
  std::string buf;
  buf.reserve(n * 88);
  uint64_t total = 0;
  for (size_t i = 0; i < n; ++i) {
    buf += children[i].hash.hex();
    buf += " : ";
    buf += std::to_string(children[i].size);
    buf += '\n';
    total += children[i].size;
  }
  HashAndSize out;
  out.hash = from_digest(Blake3::keyed_hash(kInternalNodeKey, buf.data(), buf.size()));
  out.size = total;
  return out;
}

MerkleHash aggregated_root(const std::vector<HashAndSize>& chunks) {
  if (chunks.empty()) return MerkleHash{};
  std::vector<HashAndSize> level = chunks;
  while (level.size() > 1) {
    size_t write = 0;
    size_t read = 0;
    while (read < level.size()) {
      const size_t group = next_group_size(level.data() + read, level.size() - read);
      level[write++] = merge_nodes(level.data() + read, group);
      read += group;
    }
    level.resize(write);
  }
  return level[0].hash;
}

MerkleHash xorb_hash(const std::vector<HashAndSize>& chunks) { return aggregated_root(chunks); }

MerkleHash file_hash_with_salt(const std::vector<HashAndSize>& chunks, const MerkleHash& salt) {
  if (chunks.empty()) return MerkleHash{};
  const MerkleHash root = aggregated_root(chunks);
  return from_digest(Blake3::keyed_hash(salt.bytes, root.bytes.data(), root.bytes.size()));
}

MerkleHash file_hash(const std::vector<HashAndSize>& chunks) { return file_hash_with_salt(chunks, MerkleHash{}); }

MerkleHash range_verification_hash(const MerkleHash* chunk_hashes, size_t n) {
  Blake3 b3(kVerificationKey);
  for (size_t i = 0; i < n; ++i) b3.update(chunk_hashes[i].bytes.data(), chunk_hashes[i].bytes.size());
  return from_digest(b3.finalize());
}

}  // namespace hubfs::xet
