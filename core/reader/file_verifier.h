// Whole-file verification: a file read (or read ahead) from its first block to its last is hashed
// in order as its blocks arrive in memory and compared with its content id (sha256 or git blob
// id: cache/content_verifier.h). On a mismatch `on_corrupt` moves the file's epoch on (handles
// that may have passed on its bytes get errors from then on, later reads use a fresh memory
// namespace: reader/file_epochs.h) and drops its blocks from every tier, and the arrival or read
// that finished the hash gets kCorrupt, so corrupt bytes never stick. A hash covers one epoch's
// bytes: the memory namespace it is given (VerifiedFile::cache_id).
//
// A file with a source of its own that checks whole files (a Xet read: every chunk hashed where
// it is decoded, the file's Merkle root compared with its Xet hash; net/range_source.h) is not
// hashed while every block that arrives came from that source (BlockBytes::source_checked): the
// arrival that completes the file takes the source's verdict instead, a match as a match, a
// mismatch as a failed hash. The first block that came otherwise (a bridge fallback, the disk
// cache, the shared tier), or a verdict the source does not have, starts the hash from the first
// block, as for any file: a Xet file read natively costs no serial pass at its end.
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
// Lock order (also in docs/architecture.md): a file's Verification::mu (held while hashing, and
// while the source's verdict is taken) before FileVerifier::mu_ (the records) before MemoryTier's
// mutex (peeks); `on_corrupt` runs with the file's Verification::mu held and nothing else, and so
// does RangeSource::file_verdict (its own locks are leaves). Verification::arrival_mu is a leaf.
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
#include "net/range_source.h"
#include "reader/memory_tier.h"

namespace hubfs {

// The file being verified, as BlockReader knows it. Borrowed for the length of a call.
struct VerifiedFile {
  std::string_view path;        // for messages
  std::string_view content_id;  // the expected hash
  std::string_view cache_id;    // the memory tier's name for its blocks (of this epoch)
  uint64_t size = 0;
  uint64_t epoch = 0;           // whose bytes these are (reader/file_epochs.h)
  RangeSource* source = nullptr;  // the file's own source (RemoteFile::source), or null
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

  // Block `index` of the file went into memory; source_checked: it came from the file's own
  // source, which checks it (BlockBytes::source_checked). When it was the last block missing,
  // hashes the rest (waiting for a thread hashing now), or takes the source's verdict, and
  // returns the verdict with completed_file set; else returns at once (the caller calls
  // advance(wait=false) once its waiters are released).
  struct Arrival {
    bool completed_file = false;
    Status verdict;  // when completed_file: kCorrupt if the file failed its hash
  };
  Arrival on_arrival(const VerifiedFile& file, uint64_t index, bool source_checked = false);
  // Hashes what is in memory in order (see above); OK unless the hash finished and failed.
  Status advance(const VerifiedFile& file, bool wait);
  // A loader that got `loaded_up_to` far past the file's hash takes its turn at hashing (see
  // kMaxHashLagBlocks in the .cc); otherwise returns at once.
  void catch_up(const VerifiedFile& file, uint64_t loaded_up_to);

  uint64_t files_verified() const { return verified_.load(); }
  // Of those, the files whose source's own check stood for the hash.
  uint64_t files_verified_by_source() const { return verified_by_source_.load(); }
  uint64_t failures() const { return failures_.load(); }

 private:
  struct Verification;
  // The file's hash in progress (begun if its first block is in memory), or null.
  std::shared_ptr<Verification> verification_for(const VerifiedFile& file);
  uint64_t blocks_of(const VerifiedFile& file) const;
  // The completed file's verdict from its source, with v->mu held: a match or a mismatch, or,
  // when the source has none, the file's hash (after v->mu is let go).
  Status take_source_verdict(const VerifiedFile& file, const std::shared_ptr<Verification>& v);
  // The file failed (with v->mu held): drops its blocks, forgets the record, returns kCorrupt.
  Status fail_locked(const VerifiedFile& file, const std::shared_ptr<Verification>& v, const std::string& message);

  const MemoryTier& memory_;
  const FileVerifierOptions options_;
  const OnCorrupt on_corrupt_;
  std::atomic<uint64_t> verified_{0};
  std::atomic<uint64_t> verified_by_source_{0};
  std::atomic<uint64_t> failures_{0};

  // Taken after a Verification::mu, before the memory tier's; never held across a hash.
  mutable std::mutex mu_;
  std::unordered_map<std::string, std::shared_ptr<Verification>> verifying_;  // by cache id
  std::list<std::string> order_;                                              // oldest first
};

}  // namespace hubfs
