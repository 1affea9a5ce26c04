// Whole-file verification: a file read (or read ahead) from its first block to its last is hashed
// in order as its blocks arrive in memory and compared with its content id (sha256 or git blob
// id: cache/content_verifier.h). On a mismatch `on_corrupt` moves the file's epoch on (handles
// that may have passed on its bytes get errors from then on, later reads use a fresh memory
// namespace: reader/file_epochs.h) and drops its blocks from every tier, and the arrival or read
// that finished the hash gets kCorrupt, so corrupt bytes never stick. A hash covers one epoch's
// bytes: the memory namespace it is given (VerifiedFile::cache_id).
//
// The hash reads blocks from the memory tier: a block read out of order waits there for its
// predecessors; one evicted before its turn stalls the hash (the file simply goes unverified).
// A hash starts when the file's first block is in memory (blocks that came before it count as
// arrived while they are still there); at most max_files hashes are kept, the oldest dropped.
//
// One thread hashes a file at a time. advance(wait=false) (a block arrived, others are still
// missing) leaves its block to the thread hashing now and returns at once: it raises the file's
// `pending` flag, and the hashing thread looks again before it lets go (try_lock hand-off), so a
// completing response never queues behind the hash of a whole file. advance(wait=true) (the
// arrival that leaves no block missing, or a read of the file's last block) waits for the
// hashing thread, hashes what remains and returns the file's verdict once the hash is finished.
//
// Lock order (also in docs/architecture.md): a file's Verification::mu (held while hashing) before
// FileVerifier::mu_ (the records) before MemoryTier's mutex (peeks); `on_corrupt` runs with the
// file's Verification::mu held and nothing else. Verification::arrival_mu is a leaf.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <list>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <unordered_map>

#include "common/status.h"
#include "reader/memory_tier.h"

namespace hubfs {

// The file being verified, as BlockReader knows it. Borrowed for the length of a call.
struct VerifiedFile {
  std::string_view path;        // for messages
  std::string_view content_id;  // the expected hash
  std::string_view cache_id;    // the memory tier's name for its blocks (of this epoch)
  uint64_t size = 0;
  uint64_t epoch = 0;           // whose bytes these are (reader/file_epochs.h)
};

struct FileVerifierOptions {
  uint32_t block_size = 1u << 20;
  size_t max_files = 64;  // hashes in progress at once (ReaderOptions::max_verifying_files)
  bool enabled = true;    // false: nothing is hashed, epochs never move
};

class FileVerifier {
 public:
  // The file's bytes of `epoch` failed their hash: moves its epoch on and drops its blocks from
  // every tier (memory, disk, shared).
  using OnCorrupt = std::function<void(const VerifiedFile&)>;
  // memory must outlive this verifier.
  FileVerifier(const MemoryTier& memory, FileVerifierOptions options, OnCorrupt on_corrupt);

  // Block `index` of the file went into memory. When it was the last block missing, hashes the
  // rest (waiting for a thread hashing now) and returns the verdict with completed_file set; else
  // returns at once (the caller calls advance(wait=false) once its waiters are released).
  struct Arrival {
    bool completed_file = false;
    Status verdict;  // when completed_file: kCorrupt if the file failed its hash
  };
  Arrival on_arrival(const VerifiedFile& file, uint64_t index);
  // Hashes what is in memory in order (see above); OK unless the hash finished and failed.
  Status advance(const VerifiedFile& file, bool wait);
  // A loader that got `loaded_up_to` far past the file's hash takes its turn at hashing (see
  // kMaxHashLagBlocks in the .cc); otherwise returns at once.
  void catch_up(const VerifiedFile& file, uint64_t loaded_up_to);

  uint64_t files_verified() const { return verified_.load(); }
  uint64_t failures() const { return failures_.load(); }

 private:
  struct Verification;
  // The file's hash in progress (begun if its first block is in memory), or null.
  std::shared_ptr<Verification> verification_for(const VerifiedFile& file);
  uint64_t blocks_of(const VerifiedFile& file) const;

  const MemoryTier& memory_;
  const FileVerifierOptions options_;
  const OnCorrupt on_corrupt_;
  std::atomic<uint64_t> verified_{0};
  std::atomic<uint64_t> failures_{0};

  // Taken after a Verification::mu, before the memory tier's; never held across a hash.
  mutable std::mutex mu_;
  std::unordered_map<std::string, std::shared_ptr<Verification>> verifying_;  // by cache id
  std::list<std::string> order_;                                              // oldest first
};

}  // namespace hubfs
