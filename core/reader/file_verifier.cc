#include "reader/file_verifier.h"

#include <algorithm>
#include <optional>
#include <unordered_set>

#include "cache/content_verifier.h"
#include "common/log.h"
#include "reader/block_ranges.h"

namespace hubfs {

// A loader that brought blocks this far past the file's hash takes a turn at the hash before its
// worker loads more. The read that brings the last block waits for the whole hash, and loading
// competes with hashing for the CPU: from the shared tier the hash fell far behind, and the last
// block's arrival spent long hashing alone. 32 MiB leaves little to hash at the end; from the Hub,
// where the network paces loading, the hash stays within it. After its load, not before: a task
// that waited on the hash first delivered its blocks late, and the hash then waited for them
// (docs/constants.md, kMaxHashLagBlocks).
constexpr uint64_t kMaxHashLagBlocks = 32;

// One file being hashed in order: blocks below next_block are in the hash. One thread hashes at a
// time (holding mu); a block arriving meanwhile raises `pending` instead of waiting, and the
// hashing thread looks again before it stops.
struct FileVerifier::Verification {
  // Held by the thread hashing the file; taken before FileVerifier::mu_ and the memory tier's
  // mutex (and the tiers' removals a failure makes), never while holding either.
  std::mutex mu;
  std::atomic<bool> pending{false};
  // Whether this file is hashed here: set from the start for a file without a source of its own,
  // else by the first block that came from elsewhere or a verdict the source did not have. Until
  // then, nothing is hashed (the source's check stands for it) and next_block stays 0.
  std::atomic<bool> hashing{false};
  std::unique_ptr<ContentVerifier> verifier;  // null once finished
  uint64_t next_block = 0;
  std::atomic<uint64_t> hashed{0};  // next_block, for a look without the lock
  Status verdict;                   // the outcome once the hash is finished (verifier reset)

  // Which blocks have arrived since the hash began (or sat in memory then): the arrival that
  // leaves none missing is the one whose waiters get the verdict. Kept sparse, as a prefix and
  // the arrivals past it, so memory follows the blocks that came (out of order), never the size
  // a listing claims (a bitmap of a file listed at 2^63 bytes was an abort).
  std::mutex arrival_mu;  // a leaf
  uint64_t nblocks = 0;
  uint64_t arrived_below = 0;                  // every block below this one has arrived
  std::unordered_set<uint64_t> arrived_above;  // arrivals past arrived_below

  void record_locked(uint64_t index) {
    if (index < arrived_below || index >= nblocks) return;
    arrived_above.insert(index);
    while (arrived_above.erase(arrived_below) != 0) ++arrived_below;
  }
  // Records the batch's blocks; true when no block is missing any more (this batch may finish
  // the hash).
  bool mark_arrived(const FileVerifier::Batch& batch) {
    std::lock_guard<std::mutex> lock(arrival_mu);
    for (const auto& [index, bytes] : batch) record_locked(index);
    return arrived_below == nblocks;
  }
};

FileVerifier::FileVerifier(const MemoryTier& memory, FileVerifierOptions options, OnCorrupt on_corrupt)
    : memory_(memory), options_(options), on_corrupt_(std::move(on_corrupt)) {}

uint64_t FileVerifier::blocks_of(const VerifiedFile& file) const {
  return blocks_in(file.size, options_.block_size);
}

std::shared_ptr<FileVerifier::Verification> FileVerifier::verification_for(const VerifiedFile& file,
                                                                             bool past_first) {
  if (!options_.enabled) return nullptr;
  const std::string id(file.memory_id);
  std::lock_guard<std::mutex> lock(mu_);
  if (auto it = verifying_.find(id); it != verifying_.end()) return it->second;
  // Starts only with the first block, and only once a block past it is in play (or the file is
  // that one block): a file read at its first block alone (an HDF5 open reads its header there)
  // is most often never read whole, and hashing that block cost 0.7 ms of CPU per MiB here.
  if (!memory_.peek(BlockId{file.memory_id, 0, 0})) return nullptr;
  if (!past_first && blocks_of(file) > 1 && !memory_.peek(BlockId{file.memory_id, 1, 0})) return nullptr;
  auto v = std::make_shared<Verification>();
  v->nblocks = blocks_of(file);
  v->hashing.store(file.source == nullptr);
  // Blocks that came before the first one count as arrived while they are still in memory (one
  // pass over the memory tier, bounded by its budget, once per hash).
  for (const MemoryTier::Held& held : memory_.blocks_of(file.memory_id)) {
    v->record_locked(held.index);
    if (!held.source_checked) v->hashing.store(true);
  }
  v->verifier = ContentVerifier::for_content(std::string(file.content_id), file.size);
  if (!v->verifier) return nullptr;
  verifying_.emplace(id, v);
  order_.push_back(id);
  while (verifying_.size() > std::max<size_t>(1, options_.max_files)) {
    verifying_.erase(order_.front());
    order_.pop_front();
  }
  return v;
}

void FileVerifier::blocks_arrived(const VerifiedFile& file, const Batch& batch, const Release& release) {
  if (batch.empty()) return;
  std::shared_ptr<Verification> v = verification_for(file, batch.back().first > 0);  // ascending
  if (!v) {
    for (size_t i = 0; i < batch.size(); ++i) release(i, Status::Ok());
    return;
  }
  // Before the arrivals are recorded: the arrival that completes the file (recorded after these,
  // under arrival_mu) then sees that the file must be hashed.
  for (const auto& [index, bytes] : batch)
    if (!bytes.source_checked) v->hashing.store(true);
  if (!v->mark_arrived(batch)) {
    // Blocks are still missing: the waiters go first, the hash after, off their path (a mismatch
    // found later drops the file's blocks and fails later reads of handles that saw them).
    for (size_t i = 0; i < batch.size(); ++i) release(i, Status::Ok());
    (void)hash_in_order(file, v, Turn::kIfFree);
    return;
  }
  // The batch completes the file: its last block's waiters get the verdict, since a reader (or
  // the kernel's read-ahead) that read the other blocks earlier is still waiting on this one.
  for (size_t i = 0; i + 1 < batch.size(); ++i) release(i, Status::Ok());
  release(batch.size() - 1, verdict_of_complete(file, v));
}

Status FileVerifier::read_reached_end(const VerifiedFile& file) {
  std::shared_ptr<Verification> v = verification_for(file, /*past_first=*/true);  // at the last block
  return v ? hash_in_order(file, v, Turn::kWait) : Status::Ok();
}

void FileVerifier::loaded_from_tiers(const VerifiedFile& file, uint64_t loaded_up_to) {
  std::shared_ptr<Verification> v = verification_for(file, loaded_up_to > 0);
  if (!v || !v->hashing.load() || loaded_up_to < v->hashed.load(std::memory_order_relaxed) + kMaxHashLagBlocks)
    return;
  // Waits for the thread hashing now, then hashes what is in memory itself (or finds the hash
  // stalled on a missing block, and goes on).
  (void)hash_in_order(file, v, Turn::kWait);
}

Status FileVerifier::verdict_of_complete(const VerifiedFile& file, const std::shared_ptr<Verification>& v) {
  if (!v->hashing.load()) {
    std::unique_lock<std::mutex> lock(v->mu);
    if (!v->verifier) return v->verdict;  // finished by an earlier call
    if (!v->hashing.load()) {             // still no block from elsewhere
      switch (file.source ? file.source->file_verdict() : FileVerdict::kUnknown) {
        case FileVerdict::kMatch:
          v->verifier.reset();
          ++verified_;
          ++verified_by_source_;
          return Status::Ok();
        case FileVerdict::kMismatch:
          v->verifier.reset();
          return fail_locked(file, v,
                             "reading " + std::string(file.path) + ": the " + std::to_string(file.size) +
                                 " bytes received are not the file's, by its Xet hash (a reconstruction described "
                                 "other bytes); its cached blocks were dropped and the next read fetches them again");
        case FileVerdict::kUnknown:
          break;
      }
      // The source did not check the whole file (records of it dropped, reads that overlapped
      // unevenly): hashed here, from what memory holds.
      v->hashing.store(true);
    }
  }
  return hash_in_order(file, v, Turn::kWait);
}

Status FileVerifier::hash_in_order(const VerifiedFile& file, const std::shared_ptr<Verification>& v, Turn turn) {
  if (!v->hashing.load()) {
    // Nothing to hash: the source's check stands for it. A read that waits gets the verdict the
    // completing arrival took (under v->mu), if the file is complete.
    if (turn == Turn::kIfFree) return Status::Ok();
    std::lock_guard<std::mutex> lock(v->mu);
    return v->verifier ? Status::Ok() : v->verdict;
  }
  const uint64_t nblocks = blocks_of(file);
  v->pending.store(true);
  std::unique_lock<std::mutex> lock(v->mu, std::defer_lock);
  if (turn == Turn::kWait) {
    lock.lock();
  } else if (!lock.try_lock()) {
    return Status::Ok();  // the thread holding it sees `pending` and hashes these blocks too
  }
  for (;;) {
    if (!v->verifier) return v->verdict;  // another caller already finished it
    // exchange, not store: reading the arriving thread's `true` orders its block's insertion
    // into memory before the peeks below.
    while (v->next_block < nblocks && v->pending.exchange(false)) {
      while (v->next_block < nblocks) {
        std::optional<BlockBytes> next = memory_.peek(BlockId{file.memory_id, v->next_block, 0});
        if (!next) break;
        v->verifier->update(next->view());
        blocks_hashed_.fetch_add(1, std::memory_order_relaxed);
        v->hashed.store(++v->next_block, std::memory_order_relaxed);
      }
    }
    if (v->next_block == nblocks) break;
    lock.unlock();
    // A block is missing. One that arrived between the last look and the unlock found the lock
    // taken and left itself to us: look again if so (or leave it to whoever holds the lock now).
    if (!v->pending.load() || !lock.try_lock()) return Status::Ok();
  }
  ContentVerifier::Verdict verdict = v->verifier->finish();
  v->verifier.reset();
  if (verdict.match) {
    // Stays on record (until newer files push it out) so that later calls of this pass, the last
    // block's read among them, do not hash the file again.
    ++verified_;
    return Status::Ok();
  }
  return fail_locked(file, v,
                     "reading " + std::string(file.path) + ": the " + std::to_string(file.size) +
                         " bytes received hash to " + verdict.computed + " but the Hub lists " + verdict.expected +
                         " (corrupted in transit?); its cached blocks were dropped and the next read fetches them "
                         "again");
}

Status FileVerifier::fail_locked(const VerifiedFile& file, const std::shared_ptr<Verification>& v,
                                 const std::string& message) {
  ++failures_;
  on_corrupt_(file);  // moves the epoch first (reader/file_epochs.h), then cleans
  {
    // The next bytes fetched get a fresh hash, but only once the bad blocks are gone: a record
    // dropped before the cleanup let an arrival in between start a new hash from the memory
    // tier, bad blocks included, and fail the next whole read of good bytes too (the stress
    // test's flipped byte, under ASan and load). Until here verification_for() returns this
    // finished record, whose verdict (under v->mu, held) is the corruption.
    std::lock_guard<std::mutex> order(mu_);
    auto it = verifying_.find(std::string(file.memory_id));
    if (it != verifying_.end() && it->second == v) {
      verifying_.erase(it);
      order_.remove(std::string(file.memory_id));
    }
  }
  log_error(message);
  v->verdict = Corrupt(message);
  return v->verdict;
}


}  // namespace hubfs
