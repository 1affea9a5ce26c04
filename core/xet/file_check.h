// The whole-file check of Xet reads (docs/xet.md, "What is verified"): the chunks the reads of a
// file served, by file offset (each hashed on the worker that decoded it), until they tile the
// file; then their Merkle root is compared with the file's Xet hash. That is all the service's
// data allows: a reconstruction carries no chunk hashes, and the signed URLs reach no footer, so
// a read of part of a file is not content-verified (its bytes are exactly what the service
// sent, decoded; the block cache's CRC only guards them on disk).
//
// A plan whose terms are reordered or repeated passes every per-chunk test; it fails here, and
// so does a chunk served at an offset where another read served a different one. The verdict
// goes to the reader through RangeSource::file_verdict, where FileVerifier takes it in place of a
// SHA-256 pass (reader/file_verifier.h): a mismatch there drops every block of the file.
//
// Chunks are offered to the chunk cache only once their file matched (`Verdict::verified_runs`):
// the cache holds nothing a hash did not check, so a corrupt byte of a partial read never
// outlives the whole read that finds it.
// Thread-safe; one mutex, a leaf.
#pragma once

#include <atomic>
#include <cstdint>
#include <map>
#include <mutex>
#include <string>
#include <vector>

#include "net/range_source.h"
#include "xet/hash.h"

namespace hubfs::xet {

// A chunk a read served: its hash (computed from its bytes) and size, and where it came from.
struct ServedChunk {
  HashAndSize chunk;
  MerkleHash xorb;
  uint32_t index = 0;
  bool from_cache = false;  // already in the chunk cache
};

// Consecutive chunks of one xorb, verified with their file, to keep in the chunk cache: bytes
// [file_offset, file_offset + their size) of the file.
struct VerifiedRun {
  MerkleHash xorb;
  uint32_t first = 0;
  std::vector<HashAndSize> chunks;
  uint64_t file_offset = 0;
};

class XetFileChecks {
 public:
  // max_files: files whose chunks are collected at once (each holds ~80 bytes per chunk); past
  // it the oldest goes unchecked.
  explicit XetFileChecks(size_t max_files) : max_files_(max_files ? max_files : 1) {}

  struct Recorded {
    hubfs::FileVerdict verdict = hubfs::FileVerdict::kUnknown;  // set when this call decided it
    std::vector<VerifiedRun> verified_runs;  // on a match: the fetched chunks, for the cache
    std::string block_key;                   // the file's block-cache key (given with its reads)
    std::string why;                         // on a mismatch: what differed
    // On a mismatch: `chunks` alone tiled the file (no other read served any of it), so the
    // record was dropped instead of kept as a verdict: nothing else was served, and the caller,
    // which has not answered yet, may fetch the file again and record that instead.
    bool dropped = false;
  };
  // Records `chunks`, served back to back from file byte `offset` on, and decides the file once
  // they tile it.
  Recorded record(const MerkleHash& file, uint64_t file_size, uint64_t offset, const std::vector<ServedChunk>& chunks,
                  const std::string& block_key);

  // The file's verdict (RangeSource::file_verdict); kMismatch is reported once, then the file's
  // record is forgotten so the reads after it start afresh.
  hubfs::FileVerdict verdict(const MerkleHash& file);

  uint64_t files_verified() const { return files_verified_.load(); }
  uint64_t mismatches() const { return mismatches_.load(); }
  // Bytes served of files that then matched (a file read twice counts twice).
  uint64_t verified_bytes() const { return verified_bytes_.load(); }

 private:
  struct File {
    uint64_t size = 0;
    uint64_t covered = 0;
    uint64_t served = 0;
    std::string block_key;
    hubfs::FileVerdict verdict = hubfs::FileVerdict::kUnknown;
    std::map<uint64_t, ServedChunk> chunks;  // by file offset
  };

  const size_t max_files_;
  std::mutex mu_;
  std::map<MerkleHash, File> files_;
  std::atomic<uint64_t> files_verified_{0}, mismatches_{0}, verified_bytes_{0};
};

}  // namespace hubfs::xet
