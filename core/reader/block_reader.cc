#include "reader/block_reader.h"

#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <charconv>
#include <cstring>
#include <unordered_set>

#include "common/log.h"

namespace hubfs {

// The deferred writer's nice value: well below the readers' threads, still above idle work.
constexpr int kDeferredWriteNice = 10;
// The deferred writer waits until nothing was read (nor asked of the shared tier) for this long.
// Its nice value alone did not keep it off the reader's CPU: it ran whenever the loaders waited
// on memcached (16% of the daemon's CPU during a cold 200 MiB read), and the other processes of
// the read (memcached, the reading application) are not ranked below it. Reads count, not only
// lookups: a stream's read-ahead has claimed its last blocks while the reader still consumes.
constexpr std::chrono::milliseconds kDeferredWriteQuiet{50};
// After a read of a block timed out, reads of it fail at once for this long. The kernel answers a
// failed read-ahead by reading the page again at once, which would otherwise wait a second
// read_timeout ("a read fails after twice --read-timeout"); a few seconds cover that retry, and
// a read that comes later tries the network afresh.
constexpr std::chrono::seconds kTimedOutMemory{5};
// Blocks remembered as timed out; past this the table is cleared (a bound, not an LRU: rare).
constexpr size_t kMaxTimedOut = 4096;

// A block someone is loading. Readers that need it wait on `cv` (under the reader's mutex);
// the loader fills in status/data and sets done.
struct BlockReader::Block {
  std::condition_variable cv;
  bool done = false;
  Status status;
  BlockBytes data;
};

// One file being hashed in order: blocks below next_block are in the hash. One thread hashes at a
// time (holding mu); a block arriving meanwhile raises `pending` instead of waiting, and the
// hashing thread looks again before it stops.
struct BlockReader::Verification {
  std::mutex mu;
  std::atomic<bool> pending{false};
  std::unique_ptr<ContentVerifier> verifier;
  uint64_t next_block = 0;
  std::atomic<uint64_t> hashed{0};  // next_block, for a look without the lock
  Status verdict;  // the outcome once the hash is finished (verifier reset)

  // Which blocks have arrived since the hash began (or sat in memory then): the arrival that
  // leaves none missing is the one whose waiters get the verdict. Kept sparse, as a prefix and
  // the arrivals past it, so memory follows the blocks that came (out of order), never the size
  // a listing claims (a bitmap of a file listed at 2^63 bytes was an abort).
  std::mutex arrival_mu;
  uint64_t nblocks = 0;
  uint64_t arrived_below = 0;                  // every block below this one has arrived
  std::unordered_set<uint64_t> arrived_above;  // arrivals past arrived_below

  void record_locked(uint64_t index) {
    if (index < arrived_below || index >= nblocks) return;
    arrived_above.insert(index);
    while (arrived_above.erase(arrived_below) != 0) ++arrived_below;
  }
  // Records block `index`; true when no block is missing any more (this one may finish the hash).
  bool mark_arrived(uint64_t index) {
    std::lock_guard<std::mutex> lock(arrival_mu);
    record_locked(index);
    return arrived_below == nblocks;
  }
};

BlockReader::BlockReader(BlockCache* cache, RangeFetcher& fetcher, ReaderOptions options, SharedBlocks* shared)
    : cache_(cache),
      fetcher_(fetcher),
      shared_(shared),
      options_(options),
      read_ahead_policy_(ReadAheadConfig{options.block_size, options.min_readahead_blocks,
                                         options.max_readahead_blocks, options.max_blocks_per_request}),
      deferred_writes_(1),
      disk_work_(std::max(1, options.disk_threads)) {
  // The deferred writer's one thread runs at a lower CPU priority for good (a thread's nice
  // value is its own on Linux): between the daemon's own threads, readers come first.
  deferred_writes_.post([] { (void)setpriority(PRIO_PROCESS, static_cast<id_t>(syscall(SYS_gettid)), kDeferredWriteNice); });
}

BlockReader::~BlockReader() { shutdown(); }

void BlockReader::shutdown() {
  stopping_.store(true);  // queued read-ahead is cancelled, not sent
  // A fetch callback posts disk work and a queued task may start a fetch: wait for fetches,
  // drain the queue, then wait for any fetch a draining task started (its callback, finding the
  // queue closed, runs its work inline).
  fetches_.wait_zero();
  disk_work_.drain();
  fetches_.wait_zero();
  // Last: disk tasks post to it, and nothing posts to it after them.
  deferred_writes_.drain();
}

void BlockReader::post(std::function<void()> task) {
  // Refused only after shutdown() drained the queue, which waits for every fetch first: by then
  // nothing posts. Running inline keeps a late task from being lost all the same.
  if (!disk_work_.post(task)) task();
}

uint64_t BlockReader::block_length(const RemoteFile& file, uint64_t index) const {
  uint64_t start = index * options_.block_size;
  if (start >= file.size) return 0;
  return std::min<uint64_t>(options_.block_size, file.size - start);
}

std::string BlockReader::cache_id(const std::string& content_id) const {
  // Block indices only mean something for one block size, so a non-default size gets its own
  // key space (in memory and on disk).
  std::string k = content_id;
  if (options_.block_size != (1u << 20)) k += ".bs" + std::to_string(options_.block_size);
  return k;
}

void BlockReader::lru_erase(std::unordered_map<std::string, LruList::iterator>::iterator it) {
  // Caller holds mu_. A buffer's bytes leave the account with the last block that pins it.
  const std::string* buffer = it->second->second.buffer.get();
  auto ref = buffer_refs_.find(buffer);
  if (ref != buffer_refs_.end() && --ref->second == 0) {
    lru_bytes_ -= buffer->size();
    buffer_refs_.erase(ref);
  }
  lru_.erase(it->second);
  lru_index_.erase(it);
}

void BlockReader::remember(const std::string& k, const BlockBytes& data) {
  // Caller holds mu_. Memory is accounted by the buffers pinned, not by block lengths: a block
  // cut from an 8 MiB coalesced response keeps all 8 MiB alive.
  if (auto it = lru_index_.find(k); it != lru_index_.end()) lru_erase(it);
  if (buffer_refs_[data.buffer.get()]++ == 0) lru_bytes_ += data.buffer->size();
  lru_.emplace_front(k, data);
  lru_index_[k] = lru_.begin();
  while (lru_bytes_ > options_.memory_cache_bytes && lru_.size() > 1) {
    lru_erase(lru_index_.find(lru_.back().first));
  }
}

std::optional<BlockBytes> BlockReader::recall(const std::string& k) {
  // Caller holds mu_.
  auto it = lru_index_.find(k);
  if (it == lru_index_.end()) return std::nullopt;
  lru_.splice(lru_.begin(), lru_, it->second);
  return it->second->second;
}

// How long after a range hint a file gets no speculative read-ahead, and how many such files are
// remembered.
constexpr std::chrono::seconds kHintQuietTime{30};
constexpr size_t kMaxHintedFiles = 4096;
// A read-ahead task that loaded blocks this far past the file's hash takes a turn at the hash
// before its worker loads more. The read that brings the last block waits for the whole hash, and
// loading competes with hashing for the CPU: from the shared tier (~1 ms of CPU per block to
// load, ~0.7 to hash, on 2 busy cores) the hash fell 60-130 blocks behind, and the last block's
// arrival spent 80-190 ms hashing them alone. 32 MiB: a few tens of ms left to hash at the end;
// from the Hub, where the network paces loading, the hash stays within it. After its load, not
// before: a task that waited on the hash first delivered its blocks late, and the hash then
// waited for them (64 MiB from the tier: medians 0.105 s before, 0.098 s after; 16 and 8 no
// better).
constexpr uint64_t kMaxHashLagBlocks = 32;

static std::string memory_key(const std::string& cache_id, uint64_t index) {
  return cache_id + "#" + std::to_string(index);
}

std::optional<BlockBytes> BlockReader::peek(const std::string& k) const {
  // Caller holds mu_. No LRU touch: hashing is not a use.
  auto it = lru_index_.find(k);
  if (it == lru_index_.end()) return std::nullopt;
  return it->second->second;
}

// Feeds the file's hash with every block from its next one on that sits in memory. Blocks are
// put in memory before this runs, so of two blocks completing at once one of the callers finds
// both. A block read out of order waits in memory for its predecessors; one evicted before
// its turn stalls the hash (the file simply goes unverified).
//
// wait=false (a block arrived, others are still missing): when another thread is hashing the
// file, the new block is left to it and this returns at once, so a completing response never
// queues behind the hash of a whole file. wait=true (the arrival that leaves no block missing,
// or a read of the file's last block): waits for the hashing thread, hashes what remains, and
// returns the file's verdict when the hash is finished.
std::shared_ptr<BlockReader::Verification> BlockReader::verification_for(const RemoteFile& file) {
  if (!options_.verify_whole_files) return nullptr;
  const std::string id = cache_id(file.content_id);
  const uint64_t nblocks = (file.size + options_.block_size - 1) / options_.block_size;
  std::lock_guard<std::mutex> lock(verify_mu_);
  if (auto it = verifying_.find(id); it != verifying_.end()) return it->second;
  auto v = std::make_shared<Verification>();
  {
    std::lock_guard<std::mutex> mem(mu_);
    if (!peek(memory_key(id, 0))) return nullptr;  // starts only with the first block
    // Blocks that came before the first one count as arrived while they are still in memory
    // (one pass over the memory cache, bounded by its budget, once per hash).
    v->nblocks = nblocks;
    const std::string prefix = id + "#";
    for (const auto& cached : lru_) {
      const std::string& key = cached.first;
      uint64_t b = 0;
      if (!key.starts_with(prefix)) continue;
      auto [end, ec] = std::from_chars(key.data() + prefix.size(), key.data() + key.size(), b);
      if (ec == std::errc() && end == key.data() + key.size()) v->record_locked(b);
    }
  }
  v->verifier = ContentVerifier::for_content(file.content_id, file.size);
  if (!v->verifier) return nullptr;
  verifying_.emplace(id, v);
  verify_order_.push_back(id);
  while (verifying_.size() > std::max<size_t>(1, options_.max_verifying_files)) {
    verifying_.erase(verify_order_.front());
    verify_order_.pop_front();
  }
  return v;
}

Status BlockReader::verify_in_order(const RemoteFile& file, bool wait) {
  std::shared_ptr<Verification> v = verification_for(file);
  if (!v) return Status::Ok();
  const std::string id = cache_id(file.content_id);
  const uint64_t nblocks = (file.size + options_.block_size - 1) / options_.block_size;
  v->pending.store(true);
  std::unique_lock<std::mutex> lock(v->mu, std::defer_lock);
  if (wait) {
    lock.lock();
  } else if (!lock.try_lock()) {
    return Status::Ok();  // the thread holding it sees `pending` and hashes this block too
  }
  for (;;) {
    if (!v->verifier) return v->verdict;  // another caller already finished it
    // exchange, not store: reading the arriving thread's `true` orders its block's insertion
    // into memory before the peeks below.
    while (v->next_block < nblocks && v->pending.exchange(false)) {
      while (v->next_block < nblocks) {
        std::optional<BlockBytes> next;
        {
          std::lock_guard<std::mutex> mem(mu_);
          next = peek(memory_key(id, v->next_block));
        }
        if (!next) break;
        v->verifier->update(std::string_view(next->data(), next->size()));
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
  if (!verdict.match) {
    // The next bytes fetched get a fresh hash. A match stays on record (until newer files push
    // it out) so that later calls of this pass, the last block's read among them, do not hash
    // the file again.
    std::lock_guard<std::mutex> order(verify_mu_);
    auto it = verifying_.find(id);
    if (it != verifying_.end() && it->second == v) {
      verifying_.erase(it);
      verify_order_.remove(id);
    }
  }
  if (verdict.match) {
    std::lock_guard<std::mutex> mem(mu_);
    ++stats_.files_verified;
    return Status::Ok();
  }
  {
    // The epoch first, then the cleanup: a write-back racing the cleanup checks the epoch after
    // its write, so either it or the cleanup removes its block (see complete()).
    std::lock_guard<std::mutex> mem(mu_);
    ++stats_.verify_failures;
    ++failed_epochs_[id];
  }
  forget_file(file);
  std::string message = "reading " + file.path + ": the " + std::to_string(file.size) +
                        " bytes received hash to " + verdict.computed + " but the Hub lists " +
                        verdict.expected + " (corrupted in transit?); its cached blocks were dropped and "
                        "the next read fetches them again";
  log_error(message);
  v->verdict = Corrupt(message);
  return v->verdict;
}

// Drops every block of the file from memory and disk.
void BlockReader::forget_file(const RemoteFile& file) {
  const std::string id = cache_id(file.content_id);
  const uint64_t nblocks = (file.size + options_.block_size - 1) / options_.block_size;
  {
    std::lock_guard<std::mutex> lock(mu_);
    for (uint64_t b = 0; b < nblocks; ++b) {
      auto it = lru_index_.find(memory_key(id, b));
      if (it != lru_index_.end()) lru_erase(it);
    }
  }
  if (cache_)
    for (uint64_t b = 0; b < nblocks; ++b) cache_->remove(id, b);
  if (shared_) {
    std::vector<std::pair<uint64_t, size_t>> blocks;
    for (uint64_t b = 0; b < nblocks; ++b) blocks.emplace_back(b, block_length(file, b));
    shared_->forget(id, blocks);
  }
}

BlockReader::BlockPtr BlockReader::claim_or_find(const RemoteFile& file, uint64_t index,
                                                 bool* claimed) {
  *claimed = false;
  std::string mk = memory_key(cache_id(file.content_id), index);
  std::lock_guard<std::mutex> lock(mu_);
  if (auto data = recall(mk)) {
    auto block = std::make_shared<Block>();
    block->done = true;
    block->data = std::move(*data);
    ++stats_.memory_hits;
    return block;
  }
  auto it = in_flight_.find(mk);
  if (it != in_flight_.end()) return it->second;
  auto block = std::make_shared<Block>();
  in_flight_.emplace(mk, block);
  *claimed = true;
  return block;
}

BlockReader::Published BlockReader::publish(const RemoteFile& file, uint64_t index, Result<BlockBytes> data) {
  std::string id = cache_id(file.content_id);
  std::string mk = memory_key(id, index);
  std::optional<BlockBytes> bytes;
  Status status = data.ok() ? Status::Ok() : data.status();
  if (data.ok()) bytes = std::move(data).value();
  Published published;
  if (bytes) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      remember(mk, *bytes);  // in memory before the hash may reach it
      auto e = failed_epochs_.find(id);
      published.epoch = e == failed_epochs_.end() ? 0 : e->second;
    }
    // The arrival that completes the file hashes before it releases its waiters, so they get the
    // verdict: a reader (or the kernel's read-ahead) that read the other blocks earlier is still
    // waiting on this one. Every other arrival releases its waiters first.
    if (std::shared_ptr<Verification> v = verification_for(file); v && v->mark_arrived(index)) {
      published.completed_file = true;
      status = verify_in_order(file, /*wait=*/true);
      if (!status.ok()) bytes.reset();
    }
  }
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = in_flight_.find(mk);
    if (it != in_flight_.end()) {
      BlockPtr block = it->second;
      in_flight_.erase(it);
      block->done = true;
      if (bytes) {
        block->data = *bytes;
      } else {
        block->status = status;
      }
      block->cv.notify_all();
    }
  }
  published.served = bytes.has_value();
  return published;
}

void BlockReader::write_back(const RemoteFile& file, uint64_t index, const BlockBytes& bytes, uint64_t epoch) {
  // A hash failure of the file since this block arrived means it may be one of the bad bytes, and
  // the failure's cleanup may have run before this write landed: take it back out. (A failure
  // bumps the epoch before it removes the file's blocks, so one of the two always removes it.)
  const std::string id = cache_id(file.content_id);
  cache_->put(id, index, std::string_view(bytes.data(), bytes.size()));
  if (content_epoch(file) != epoch) cache_->remove(id, index);
}

void BlockReader::complete(const RemoteFile& file, uint64_t index, Result<BlockBytes> data,
                           bool store) {
  if (!data.ok()) {
    publish(file, index, std::move(data));
    return;
  }
  complete_batch(file, {{index, std::move(data).value()}}, store, /*offer=*/false);
}

void BlockReader::complete_batch(const RemoteFile& file, const std::vector<std::pair<uint64_t, BlockBytes>>& arrivals,
                                 bool store, bool offer) {
  // Every block of the batch is in memory and its waiters released before any is written to
  // disk or hashed: completed one at a time, the last block of an 8-block response waited for
  // seven disk writes and for the hash passes the first seven set off (perf: one disk worker
  // hashing a third of the daemon's CPU while the reader waited on blocks it had in hand).
  std::vector<uint64_t> epochs(arrivals.size());
  std::vector<bool> served(arrivals.size());
  bool hash_after = false;
  for (size_t i = 0; i < arrivals.size(); ++i) {
    Published p = publish(file, arrivals[i].first, arrivals[i].second);
    served[i] = p.served;
    epochs[i] = p.epoch;
    if (p.served && !p.completed_file) hash_after = true;
  }
  // Offered to the shared tier next, before the disk writes and the hash: the sooner a block is
  // queued for the tier, the sooner other machines find it (and a read that ends now does not
  // leave a response's offers waiting behind eight block files).
  if (offer && shared_) {
    for (size_t i = 0; i < arrivals.size(); ++i)
      if (served[i]) offer_to_shared(file, arrivals[i].first, arrivals[i].second, epochs[i]);
  }
  // Write-back after the waiters are released: nobody waits on the disk but this thread.
  if (store && cache_) {
    for (size_t i = 0; i < arrivals.size(); ++i)
      if (served[i]) write_back(file, arrivals[i].first, arrivals[i].second, epochs[i]);
  }
  // Other arrivals hash after their waiters are released, off the readers' path. A mismatch
  // found later drops the file's blocks and fails every later read of handles that saw the old
  // bytes.
  if (hash_after) (void)verify_in_order(file, /*wait=*/false);
}

bool BlockReader::load_claimed(const RemoteFile& file, std::vector<uint64_t> claimed,
                               bool prefetch, size_t max_run, const Deadline& deadline) {
  std::vector<uint64_t> misses;
  std::string id = cache_id(file.content_id);
  for (uint64_t index : claimed) {
    if (cache_) {
      auto hit = cache_->get(id, index);
      // A block of the wrong length (a file cut short by a writer that crashed between
      // versions of this program, say) is not this block: fetch it again.
      if (hit && hit->size() == block_length(file, index)) {
        {
          std::lock_guard<std::mutex> lock(mu_);
          ++stats_.disk_hits;
        }
        auto buffer = std::make_shared<const std::string>(std::move(*hit));
        complete(file, index, BlockBytes{buffer, 0, buffer->size()}, /*store=*/false);
        continue;
      }
    }
    misses.push_back(index);
  }
  if (!misses.empty() && shared_) misses = load_from_shared(file, std::move(misses), deadline);
  if (misses.empty()) return true;
  fetch_runs(file, misses, prefetch, max_run, deadline);
  return false;
}

// --- The shared block tier (reader/shared_blocks.h) --------------------------------------------

std::vector<uint64_t> BlockReader::load_from_shared(const RemoteFile& file, std::vector<uint64_t> misses,
                                                    const Deadline& deadline) {
  std::vector<std::pair<uint64_t, size_t>> wanted;
  for (uint64_t index : misses) wanted.emplace_back(index, block_length(file, index));
  note_activity();
  // Within the read's deadline (the tier also keeps to a short budget of its own): a slow node
  // costs a Hub fetch, never the read.
  auto found = shared_->lookup(cache_id(file.content_id), wanted, deadline);
  std::vector<uint64_t> rest;
  std::vector<std::pair<uint64_t, BlockBytes>> arrivals;
  for (size_t i = 0; i < misses.size(); ++i) {
    if (!found[i]) {
      rest.push_back(misses[i]);
      continue;
    }
    arrivals.emplace_back(misses[i], BlockBytes{found[i]->value, found[i]->offset, found[i]->length});
  }
  // Like a Hub fetch, minus the offer back to the tier: into memory and the hash now, to the
  // local disk later (this may be a reader's thread). The epoch is read before the blocks are
  // served: a hash failure after that may have been theirs.
  const uint64_t epoch = content_epoch(file);
  complete_batch(file, arrivals, /*store=*/false, /*offer=*/false);
  if (cache_)
    for (const auto& [index, bytes] : arrivals) store_shared_block(file, index, bytes, epoch);
  return rest;
}

void BlockReader::note_activity() {
  last_activity_.store(std::chrono::steady_clock::now().time_since_epoch().count(), std::memory_order_relaxed);
}

void BlockReader::wait_for_quiet() {
  // Polls at most every kDeferredWriteQuiet: one thread, and only while a stream is under way.
  while (!stopping_.load()) {
    const auto since = std::chrono::steady_clock::now() -
                       std::chrono::steady_clock::time_point(std::chrono::steady_clock::duration(last_activity_.load()));
    if (since >= kDeferredWriteQuiet) return;
    std::this_thread::sleep_for(kDeferredWriteQuiet - since);
  }
}

void BlockReader::store_shared_block(const RemoteFile& file, uint64_t index, const BlockBytes& bytes,
                                     uint64_t epoch) {
  auto write = [this, file, index, bytes, epoch] {
    if (content_epoch(file) != epoch) return;  // the file failed its hash: maybe a bad block
    write_back(file, index, bytes, epoch);
  };
  // Memory bounded: a waiting write pins its value (most of them are in the memory cache too).
  // Past the bound, or once the writer stopped, the write goes to the disk threads at once.
  const uint64_t size = bytes.buffer->size();
  if (deferred_write_bytes_.fetch_add(size) + size <= options_.max_deferred_write_bytes) {
    const bool queued = deferred_writes_.post([this, write, size] {
      wait_for_quiet();
      write();
      deferred_write_bytes_ -= size;
    });
    if (queued) {
      std::lock_guard<std::mutex> lock(mu_);
      ++stats_.deferred_writes;
      return;
    }
  }
  deferred_write_bytes_ -= size;
  post(write);
}

void BlockReader::offer_to_shared(const RemoteFile& file, uint64_t index, const BlockBytes& bytes,
                                  uint64_t epoch) {
  // Not once the file failed its hash since this block arrived: it may be one of the bad bytes
  // (and the failure's forget may already be queued ahead of this store).
  if (content_epoch(file) != epoch) return;
  shared_->offer(cache_id(file.content_id), index, std::string_view(bytes.data(), bytes.size()));
}

void BlockReader::fetch_runs(const RemoteFile& file, const std::vector<uint64_t>& indices,
                             bool prefetch, size_t max_run, const Deadline& deadline) {
  // indices are ascending; neighbours go out together, up to max_run.
  size_t i = 0;
  while (i < indices.size()) {
    size_t j = i + 1;
    while (j < indices.size() && indices[j] == indices[j - 1] + 1 &&
           j - i < std::max<size_t>(1, max_run)) {
      ++j;
    }
    uint64_t first = indices[i];
    uint64_t count = j - i;
    ByteRange range{first * options_.block_size, 0};
    for (uint64_t b = first; b < first + count; ++b) range.length += block_length(file, b);
    if (prefetch) prefetch_bytes_ += range.length;
    {
      std::lock_guard<std::mutex> lock(mu_);
      ++stats_.requests;
    }
    if (log_enabled(LogLevel::kDebug)) {
      log_debug("fetch " + file.path + " blocks " + std::to_string(first) + "-" + std::to_string(first + count - 1) +
                (prefetch ? " (ahead)" : " (demand)"));
    }
    fetches_.add();
    fetch_file_range(
        fetcher_, file.source, file.locate, file.size, range,
        [this, file, first, count, range, prefetch](Result<std::string> body) {
          // Runs on the network thread: hand the splitting and the disk writes to a worker.
          auto shared = std::make_shared<Result<std::string>>(std::move(body));
          // Queued before the fetch counts as done, so shutdown's drain sees it.
          post([this, file, first, count, range, prefetch, shared] {
            if (prefetch) prefetch_bytes_ -= range.length;
            if (!shared->ok()) {
              {
                std::lock_guard<std::mutex> lock(mu_);
                ++stats_.fetch_errors;
              }
              Status error = shared->status().with_context("fetching " + file.path);
              for (uint64_t b = first; b < first + count; ++b) complete(file, b, error, false);
            } else {
              auto all = std::make_shared<const std::string>(std::move(*shared).value());
              {
                std::lock_guard<std::mutex> lock(mu_);
                stats_.bytes_fetched += all->size();
                stats_.blocks_fetched += count;
              }
              uint64_t pos = 0;
              std::vector<std::pair<uint64_t, BlockBytes>> arrivals;
              for (uint64_t b = first; b < first + count; ++b) {
                uint64_t len = block_length(file, b);
                arrivals.emplace_back(b, BlockBytes{all, pos, len});
                pos += len;
              }
              complete_batch(file, arrivals, /*store=*/true, /*offer=*/true);
            }
          });
          fetches_.done();
        },
        deadline);
    i = j;
  }
}

bool BlockReader::recently_hinted(const RemoteFile& file) {
  // A file whose reader hints its ranges gets no speculative read-ahead: it said what it needs
  // (its chunks are contiguous, so its reads look sequential, and guessing past the last one
  // fetched up to 50% more than the read).
  std::lock_guard<std::mutex> lock(mu_);
  auto it = hinted_at_.find(cache_id(file.content_id));
  return it != hinted_at_.end() && std::chrono::steady_clock::now() - it->second < kHintQuietTime;
}

void BlockReader::read_ahead(const RemoteFile& file, BlockRange range, uint64_t last_read_block,
                             ReadState* state) {
  std::vector<uint64_t> claimed;
  uint64_t claimed_bytes = 0;
  for (uint64_t b = range.first; b <= range.last; ++b) {
    // Bounded memory: past the global budget, read-ahead waits for the next read to try again.
    if (prefetch_bytes_.load() + claimed_bytes + block_length(file, b) > options_.max_prefetch_bytes) {
      break;
    }
    bool mine = false;
    claim_or_find(file, b, &mine);
    if (mine) {
      claimed.push_back(b);
      claimed_bytes += block_length(file, b);
    }
    state->ahead.prefetched_to = b + 1;
  }
  if (log_enabled(LogLevel::kDebug)) {
    log_debug("read-ahead " + file.path + ": reader at block " + std::to_string(last_read_block) + ", window " +
              std::to_string(state->ahead.window_blocks) + "; claimed " + std::to_string(claimed.size()) +
              " of blocks " + std::to_string(range.first) + "-" + std::to_string(range.last) +
              " (read-ahead in flight " + std::to_string(prefetch_bytes_.load() >> 20) + " MiB)");
  }
  if (claimed.empty()) return;
  {
    std::lock_guard<std::mutex> lock(mu_);
    stats_.read_ahead_bytes += claimed_bytes;
  }
  queue_load(file, std::move(claimed), options_.max_blocks_per_request, options_.max_blocks_per_request);
}

Result<size_t> BlockReader::read(const RemoteFile& file, uint64_t offset, size_t length,
                                 char* out, ReadState* state) {
  auto slices = read_slices(file, offset, length, state);
  if (!slices.ok()) return slices.status();
  size_t copied = 0;
  for (const auto& slice : *slices) {
    std::memcpy(out + copied, slice.data(), slice.size());
    copied += slice.size();
  }
  return copied;
}

Result<std::vector<BlockBytes>> BlockReader::read_slices(const RemoteFile& file, uint64_t offset,
                                                         size_t length, ReadState* state) {
  std::vector<BlockBytes> slices;
  if (shared_) note_activity();
  // A handle that may already have passed on bytes of a file whose hash then failed gets errors
  // from then on (reopening reads fresh bytes): a whole read never ends "successfully" with
  // corrupt bytes in it.
  if (Status st = check_epoch(file, state); !st.ok()) return st;
  if (offset >= file.size || length == 0) return slices;
  // One deadline for the whole read: the shared tier's lookup, the Hub's requests and their
  // retries, and the wait for blocks other reads are loading.
  const Deadline deadline = Deadline::after(options_.read_timeout);
  uint64_t end = std::min<uint64_t>(file.size, offset + length);
  uint64_t first = offset / options_.block_size;
  uint64_t last = (end - 1) / options_.block_size;
  if (Status st = recently_timed_out(file, first, last); !st.ok()) return st;

  std::vector<BlockPtr> blocks;
  std::vector<uint64_t> claimed;
  for (uint64_t b = first; b <= last; ++b) {
    bool mine = false;
    blocks.push_back(claim_or_find(file, b, &mine));
    if (mine) claimed.push_back(b);
  }
  // The blocks this read needs go out before any read-ahead.
  if (!claimed.empty()) load_claimed(file, claimed, /*prefetch=*/false, options_.max_blocks_per_request, deadline);

  if (state) {
    const bool hinted = recently_hinted(file);  // before state->mu: never mu_ inside it
    std::lock_guard<std::mutex> state_lock(state->mu);
    if (auto ahead = read_ahead_policy_.on_read(state->ahead, offset, end, file.size, hinted)) {
      read_ahead(file, *ahead, last, state);
    }
  }

  // Past the read's deadline, a read that may have been held up by a quota wait (one running,
  // or one that ended after the read started) gets that wait's end plus its own timeout, within
  // quota_max_wait (ReaderOptions::quota_wait_end): never less than the range request serving
  // it, whose deadline moved by its resolve's hold (RangeFetcher), may run.
  const auto read_started = std::chrono::steady_clock::now();
  auto wait_deadline = deadline.at();
  auto quota_deadline = [&]() -> std::optional<std::chrono::steady_clock::time_point> {
    if (!options_.quota_wait_end) return std::nullopt;
    auto until = options_.quota_wait_end();
    if (!until) return std::nullopt;
    auto extended = std::min(*until + options_.read_timeout,
                             read_started + options_.read_timeout + options_.quota_max_wait);
    if (extended <= wait_deadline) return std::nullopt;
    return extended;
  };
  for (uint64_t b = first; b <= last; ++b) {
    BlockPtr& block = blocks[b - first];
    BlockBytes data;
    {
      std::unique_lock<std::mutex> lock(mu_);
      bool served = false;
      while (!(served = block->cv.wait_until(lock, wait_deadline, [&] { return block->done; }))) {
        auto extended = quota_deadline();
        if (!extended) break;
        wait_deadline = *extended;
      }
      if (!served) {
        lock.unlock();
        note_timed_out(file, b);
        return Timeout("reading " + file.path + ": block " + std::to_string(b) + " not served within " +
                       std::to_string(options_.read_timeout.count() / 1000) +
                       " s (--read-timeout); the Hub or its CDN is not answering");
      }
      if (!block->status.ok()) {
        Status failed = block->status;
        lock.unlock();
        if (failed.code() == Code::kTimeout) note_timed_out(file, b);
        return failed;
      }
      data = block->data;
    }
    uint64_t block_start = b * options_.block_size;
    uint64_t from = std::max(offset, block_start) - block_start;
    uint64_t to = std::min(end, block_start + data.size()) - block_start;
    if (block_start + data.size() < std::min(end, block_start + options_.block_size)) {
      return Corrupt("reading " + file.path + ": block " + std::to_string(b) + " is short");
    }
    slices.push_back(BlockBytes{data.buffer, data.offset + from, to - from});
  }
  // The read that returns the file's end waits for the whole-file hash when every block is in
  // memory, so a front-to-back read of a corrupted file never ends successfully.
  if (last == (file.size - 1) / options_.block_size) {
    if (Status st = verify_in_order(file, /*wait=*/true); !st.ok()) return st;
  }
  if (Status st = check_epoch(file, state); !st.ok()) return st;
  return slices;
}

Result<uint64_t> BlockReader::prefetch(const RemoteFile& file, const std::vector<ByteRange>& ranges) {
  // Validate everything first: a malformed hint changes nothing.
  for (const ByteRange& r : ranges) {
    if (r.length == 0 || r.offset >= file.size || r.length > file.size - r.offset) {
      return InvalidArgument("range hint for " + file.path + ": offset " + std::to_string(r.offset) + " length " +
                             std::to_string(r.length) + " is empty or runs past the end of the " +
                             std::to_string(file.size) + "-byte file");
    }
  }
  std::vector<uint64_t> wanted;
  for (const ByteRange& r : ranges) {
    for (uint64_t b = r.offset / options_.block_size; b <= (r.offset + r.length - 1) / options_.block_size; ++b)
      wanted.push_back(b);
  }
  std::sort(wanted.begin(), wanted.end());
  wanted.erase(std::unique(wanted.begin(), wanted.end()), wanted.end());
  std::vector<uint64_t> claimed;
  uint64_t claimed_bytes = 0;
  for (uint64_t b : wanted) {
    // The same memory bound as read-ahead: hints cannot make the daemon buffer a whole dataset.
    if (prefetch_bytes_.load() + claimed_bytes + block_length(file, b) > options_.max_prefetch_bytes) break;
    bool mine = false;
    claim_or_find(file, b, &mine);
    if (mine) {
      claimed.push_back(b);
      claimed_bytes += block_length(file, b);
    }
  }
  {
    std::lock_guard<std::mutex> lock(mu_);
    ++stats_.hints;
    stats_.hinted_bytes += claimed_bytes;
    hinted_at_[cache_id(file.content_id)] = std::chrono::steady_clock::now();
    if (hinted_at_.size() > kMaxHintedFiles) hinted_at_.clear();  // a bound, not an LRU: rare
  }
  if (log_enabled(LogLevel::kDebug)) {
    log_debug("hint " + file.path + ": " + std::to_string(ranges.size()) + " ranges, " +
              std::to_string(wanted.size()) + " blocks, " + std::to_string(claimed.size()) + " to load");
  }
  // Spread over every request slot, in one wave: 48 blocks hinted at 16 requests in flight go
  // out as 16 requests of 3 blocks, not 6 of 8, and 160 blocks as 16 of 10, not 20 of 8 (a
  // second wave of 4 would cost another round trip plus 8 MiB at one connection's rate).
  const size_t slots = std::max<uint32_t>(1, options_.parallel_requests);
  if (!claimed.empty()) {
    queue_load(file, claimed, (claimed.size() + slots - 1) / slots, options_.max_blocks_per_hinted_request);
  }
  return claimed_bytes;
}

// Loads claimed blocks on the workers (disk cache first, then coalesced fetches), a request's
// worth per task so the disk checks of a large hint run on every worker, or cancels them when
// the reader is shutting down.
void BlockReader::queue_load(const RemoteFile& file, std::vector<uint64_t> claimed, size_t group,
                             size_t max_group) {
  group = std::clamp<size_t>(group, 1, std::max<size_t>(1, max_group));
  if (claimed.size() > group) {
    for (size_t i = 0; i < claimed.size(); i += group) {
      queue_load(file,
                 std::vector<uint64_t>(claimed.begin() + static_cast<long>(i),
                                       claimed.begin() + static_cast<long>(std::min(claimed.size(), i + group))),
                 group, group);
    }
    return;
  }
  post([this, file, claimed = std::move(claimed), group] {
    if (stopping_.load()) {
      Status cancelled = Unavailable("reading " + file.path + ": read-ahead cancelled (unmounting)");
      for (uint64_t b : claimed) complete(file, b, cancelled, false);
      return;
    }
    // Only blocks served here (disk, shared tier) count: a fetch from the Hub has only started.
    // A read-ahead task has a deadline of its own, as a read does, from when it starts.
    if (load_claimed(file, claimed, /*prefetch=*/true, group, Deadline::after(options_.read_timeout)))
      take_turn_at_hash(file, claimed.back());
  });
}

void BlockReader::take_turn_at_hash(const RemoteFile& file, uint64_t loaded_up_to) {
  std::shared_ptr<Verification> v = verification_for(file);
  if (!v || loaded_up_to < v->hashed.load(std::memory_order_relaxed) + kMaxHashLagBlocks) return;
  // Waits for the thread hashing now, then hashes what is in memory itself (or finds the hash
  // stalled on a missing block, and goes on).
  (void)verify_in_order(file, /*wait=*/true);
}

Status BlockReader::recently_timed_out(const RemoteFile& file, uint64_t first, uint64_t last) {
  const auto now = std::chrono::steady_clock::now();
  const std::string id = cache_id(file.content_id);
  std::lock_guard<std::mutex> lock(mu_);
  if (timed_out_.empty()) return Status::Ok();
  for (uint64_t b = first; b <= last; ++b) {
    const std::string mk = memory_key(id, b);
    auto it = timed_out_.find(mk);
    if (it == timed_out_.end()) continue;
    // Served since (a late answer), or long enough ago: try again.
    if (now - it->second >= kTimedOutMemory || peek(mk)) {
      timed_out_.erase(it);
      continue;
    }
    const auto ago = std::chrono::duration_cast<std::chrono::milliseconds>(now - it->second).count();
    return Timeout("reading " + file.path + ": block " + std::to_string(b) + " was not served within " +
                   std::to_string(options_.read_timeout.count() / 1000) + " s (--read-timeout) by a read " +
                   std::to_string(ago) + " ms ago; failing at once instead of waiting again (try again later)");
  }
  return Status::Ok();
}

void BlockReader::note_timed_out(const RemoteFile& file, uint64_t index) {
  std::lock_guard<std::mutex> lock(mu_);
  if (timed_out_.size() >= kMaxTimedOut) timed_out_.clear();
  timed_out_[memory_key(cache_id(file.content_id), index)] = std::chrono::steady_clock::now();
}

uint64_t BlockReader::content_epoch(const RemoteFile& file) const {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = failed_epochs_.find(cache_id(file.content_id));
  return it == failed_epochs_.end() ? 0 : it->second;
}

Status BlockReader::check_epoch(const RemoteFile& file, ReadState* state) const {
  if (!state) return Status::Ok();
  const uint64_t now = content_epoch(file);
  std::lock_guard<std::mutex> lock(state->mu);
  if (state->epoch == UINT64_MAX) state->epoch = now;
  if (state->epoch == now) return Status::Ok();
  return Corrupt("reading " + file.path + ": its content failed verification after this file was opened "
                 "(bytes corrupted in transit); reopen it to read fresh bytes");
}

ReaderStats BlockReader::stats() const {
  std::lock_guard<std::mutex> lock(mu_);
  ReaderStats s = stats_;
  s.memory_bytes = lru_bytes_;
  return s;
}

}  // namespace hubfs
