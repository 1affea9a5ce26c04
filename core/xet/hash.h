// Xet's hashes (docs/xet.md; xet-core xet_core_structures/src/merklehash/): every chunk, xorb and
// file is named by a 32-byte keyed BLAKE3 hash.
//   chunk hash   BLAKE3 keyed with kDataKey over the chunk's bytes
//   node hash    BLAKE3 keyed with kInternalNodeKey over its children's "{hex} : {size}\n" lines
//   xorb hash    the root of the aggregated Merkle tree over the xorb's (chunk hash, size) list
//   file hash    that root once more keyed-hashed, with a 32-byte salt (all zeros on the Hub)
//   range hash   BLAKE3 keyed with kVerificationKey over a run of raw chunk hashes (shards)
// Everything here is a pure function: safe from any thread.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "xet/blake3.h"

namespace hubfs::xet {

// A 32-byte Xet hash in the byte order BLAKE3 produced it.
//
// Its text form is NOT the plain hex of those bytes: xet-core keeps the hash as four
// little-endian u64 words and prints each word as 16 hex digits, so each 8-byte group appears
// byte-reversed (DataHash::hex in data_hash.rs). The Hub's xetHash, the reconstruction API's
// hashes and every URL use this form.
struct MerkleHash {
  std::array<uint8_t, 32> bytes{};

  // The Xet text form: 64 lowercase hex digits.
  std::string hex() const;
  // Parses the Xet text form (either case); nullopt unless exactly 64 hex digits.
  static std::optional<MerkleHash> from_hex(std::string_view hex);
  // Word i (0..3) as xet-core reads it: little-endian from bytes [8i, 8i+8).
  uint64_t word(int i) const;

  bool operator==(const MerkleHash& o) const { return bytes == o.bytes; }
  bool operator!=(const MerkleHash& o) const { return bytes != o.bytes; }
  bool operator<(const MerkleHash& o) const { return bytes < o.bytes; }
};

// A chunk (or subtree) in a Merkle tree: its hash and how many bytes of content it covers.
struct HashAndSize {
  MerkleHash hash;
  uint64_t size = 0;
};

// The keys (data_hash.rs, chunk_verification.rs): random constants chosen by xet-core.
extern const Blake3Key kDataKey;
extern const Blake3Key kInternalNodeKey;
extern const Blake3Key kVerificationKey;

// The hash of one chunk's content.
MerkleHash chunk_hash(const void* data, size_t len);

// An incremental chunk hash, for bytes that arrive in pieces.
class ChunkHasher {
 public:
  ChunkHasher() : b3_(kDataKey) {}
  void update(const void* data, size_t len) { b3_.update(data, len); }
  MerkleHash finalize() const;

 private:
  Blake3 b3_;
};

// One internal node over its children, in order: the hash of the lines "{hex} : {size}\n".
// Returns the node's hash and size (the sum of the children's sizes).
HashAndSize merge_nodes(const HashAndSize* children, size_t n);

// The aggregated ("mean branching factor 4") Merkle tree root over a list of chunks
// (aggregated_hashes.rs): each level is cut into groups of 2..9 nodes, a group ending after a
// node whose hash word 3 is divisible by 4 (from its third node on), or at 9 nodes, or at the
// end; levels repeat until one node is left. Zero hash for an empty list; one chunk is its
// own root.
MerkleHash aggregated_root(const std::vector<HashAndSize>& chunks);

// A xorb's hash: aggregated_root of its chunks.
MerkleHash xorb_hash(const std::vector<HashAndSize>& chunks);

// A file's hash (the Hub's xetHash): aggregated_root keyed-hashed once more with the salt (the
// Hub uses the all-zero salt). Zero hash for an empty chunk list (an empty file).
MerkleHash file_hash(const std::vector<HashAndSize>& chunks);
MerkleHash file_hash_with_salt(const std::vector<HashAndSize>& chunks, const MerkleHash& salt);

// The verification hash of a run of chunk hashes (hashing.md, "term verification hashes").
MerkleHash range_verification_hash(const MerkleHash* chunk_hashes, size_t n);

}  // namespace hubfs::xet
