// Whole-file verification: a file read (or read ahead) from its first block to its last is hashed
// in order as its blocks arrive in memory and compared with its content id (sha256 or git blob
// id: cache/content_verifier.h). On a mismatch `on_corrupt` moves the file's epoch on (handles
// that may have passed on its bytes get errors from then on, later reads use a fresh memory
// namespace: reader/file_epochs.h) and drops its blocks from every tier, and the arrival or read
// that finished the hash gets kCorrupt, so corrupt bytes never stick. A hash covers one epoch's
// bytes: the memory namespace it is given (VerifiedFile::memory_id).
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
// A hash starts when the file's first block is in memory and a block past it arrives (or is in
// memory: its second block), or at once for a file of one block; blocks that came before count
// as arrived while they are still there. A file read at its first block alone (an HDF5 open reads
// its header there) is not hashed until more of it is read: most such files are never read
// whole, and their hash cost a block's worth of SHA-256 each. At most max_files hashes are kept,
// the oldest dropped.
//
// BlockReader tells the verifier what happened, as facts, and the verifier decides what to do
// about each (hash now, leave it to the thread hashing, wait for the verdict, catch up):
// - blocks_arrived: blocks of the file went into memory together (a response, a disk or
//   shared-tier hit). It releases their waiters through the caller's callback, in order; the
//   batch that leaves no block missing releases its other blocks first and its last one with the
//   file's verdict (hashing the rest, waiting for a thread hashing now, or taking the source's
//   verdict). Other batches are released at once, and then what memory holds in order is hashed by whichever
//   thread gets the file's lock: one that finds it taken raises the file's `pending` flag and
//   returns, and the hashing thread looks again before it lets go (try_lock hand-off), so a
//   completing response never queues behind the hash of a whole file.
// - read_reached_end: a read reached the file's last block. It waits for the thread hashing
//   now, hashes what memory holds in order and, when that is every block, returns the verdict,
//   so a front-to-back read of a corrupt file never ends successfully (the file may have been in
//   memory before its hash began, with no arrival left to complete it).
// - loaded_from_tiers: a loader put blocks up to N into memory from the tiers below: far past the
//   hash (kMaxHashLagBlocks in the .cc), it takes its turn at hashing, so the read that brings
//   the last block does not hash the whole file alone.
//
// Lock order (also in docs/architecture.md): a file's Verification::mu (held while hashing, and
// while the source's verdict is taken) before FileVerifier::mu_ (the records) before MemoryTier's
// mutex (peeks); `on_corrupt` runs with the file's Verification::mu held and nothing else, and so
// does RangeSource::file_verdict (its own locks are leaves). Verification::arrival_mu is a leaf.
// blocks_arrived calls its Release callback with none of these held.
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
#include <utility>
#include <vector>

#include "common/status.h"
#include "net/range_source.h"
#include "reader/memory_tier.h"

namespace hubfs {

// The file being verified, as BlockReader knows it. Borrowed for the length of a call.
struct VerifiedFile {
  std::string_view path;        // for messages
  std::string_view content_id;  // the expected hash
  std::string_view memory_id;   // the memory tier's name for its blocks (of this epoch)
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

  // Blocks that arrived together, (index, bytes) ascending, as TierStack serves them.
  using Batch = std::vector<std::pair<uint64_t, BlockBytes>>;
  // The caller's release of block batch[i]'s waiters with `verdict` (OK, or kCorrupt when the
  // file failed its hash). Called with no verifier lock held.
  using Release = std::function<void(size_t i, const Status& verdict)>;

  // The batch is in memory (the caller put it there). Releases every block, once and in order,
  // before it returns. When the batch leaves no block of the file missing, its last block is
  // released with the file's verdict (the others at once, before the hash); else all are released
  // at once, and only after the last release does this thread hash, if the file is free (see
  // above): the caller may do the batch's onward work (write-back) in the last release. A block's
  // BlockBytes::source_checked says it came from the file's own checking source.
  void blocks_arrived(const VerifiedFile& file, const Batch& batch, const Release& release);
  // A read reached the file's last block: the file's verdict (kCorrupt if its hash failed), once
  // the hash of what memory holds is done; OK while a block is missing or the file is unhashed.
  Status read_reached_end(const VerifiedFile& file);
  // A loader put the file's blocks up to `loaded_up_to` into memory from the tiers below memory.
  void loaded_from_tiers(const VerifiedFile& file, uint64_t loaded_up_to);

  uint64_t files_verified() const { return verified_.load(); }
  // Of those, the files whose source's own check stood for the hash.
  uint64_t files_verified_by_source() const { return verified_by_source_.load(); }
  uint64_t failures() const { return failures_.load(); }
  // Blocks fed to a hash (each once per hash).
  uint64_t blocks_hashed() const { return blocks_hashed_.load(); }

 private:
  struct Verification;
  // The file's hash in progress, or null. One begins when its first block is in memory and
  // either the file is that block, or its second block is in memory, or `past_first` (the caller
  // has a later block of it in hand).
  std::shared_ptr<Verification> verification_for(const VerifiedFile& file, bool past_first);
  uint64_t blocks_of(const VerifiedFile& file) const;
  // The verdict of a file no block of which is missing: its source's (under v->mu) or, when the
  // source has none or did not check every block, the file's hash.
  Status verdict_of_complete(const VerifiedFile& file, const std::shared_ptr<Verification>& v);
  // Whose turn it is to hash: kIfFree leaves it to the thread hashing now (try_lock hand-off),
  // kWait waits for that thread and goes on after it.
  enum class Turn { kIfFree, kWait };
  // Hashes what memory holds in order; OK unless the hash finished and failed (then kCorrupt).
  Status hash_in_order(const VerifiedFile& file, const std::shared_ptr<Verification>& v, Turn turn);
  // The file failed (with v->mu held): drops its blocks, forgets the record, returns kCorrupt.
  Status fail_locked(const VerifiedFile& file, const std::shared_ptr<Verification>& v, const std::string& message);

  const MemoryTier& memory_;
  const FileVerifierOptions options_;
  const OnCorrupt on_corrupt_;
  std::atomic<uint64_t> verified_{0};
  std::atomic<uint64_t> verified_by_source_{0};
  std::atomic<uint64_t> failures_{0};
  std::atomic<uint64_t> blocks_hashed_{0};

  // Taken after a Verification::mu, before the memory tier's; never held across a hash.
  mutable std::mutex mu_;
  std::unordered_map<std::string, std::shared_ptr<Verification>> verifying_;  // by memory id
  std::list<std::string> order_;                                              // oldest first
};

}  // namespace hubfs
