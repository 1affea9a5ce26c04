// Serves byte ranges of remote, immutable files block by block: from a small memory cache, then
// the on-disk BlockCache, then the network, fetching each missing block exactly once however many
// readers wait for it (single-flight), coalescing neighbouring missing blocks into one request,
// and reading ahead for handles that read sequentially.
//
// This is the whole read path of the mount, kept free of FUSE so it can be tested with a fake
// transport and a temporary cache directory.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <list>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <unordered_map>
#include <vector>

#include "cache/block_cache.h"
#include "common/deadline.h"
#include "common/status.h"
#include "common/task_queue.h"
#include "net/range_fetcher.h"
#include "net/range_source.h"
#include "cache/content_verifier.h"
#include "reader/read_ahead.h"
#include "reader/shared_blocks.h"

namespace hubfs {

// One remote file as the reader needs it: immutable content of a known size under a key.
struct RemoteFile {
  std::string path;        // for messages only
  std::string content_id;  // "sha256:<hex>" or "oid:<hex>": the cache key
  uint64_t size = 0;
  Locator locate;          // where to fetch it from (resolved lazily, only on a miss)
  // When set, the file's ranges come from here instead of `locate` and the fetcher (a Xet-stored
  // file read from the storage service; chosen in core/fs). Must outlive the reader's fetches.
  std::shared_ptr<RangeSource> source;
};

struct ReaderOptions {
  // 1 MiB: the largest read the kernel sends a FUSE filesystem (max_pages 256), so one request is
  // one block. Measured by bench/block_size.cc at 20 ms per request: a cold random 4 KiB read
  // (HDF5 metadata) fetches 1 MiB in 22-31 ms against 4 MiB in 27-65 ms with 4 MiB blocks, while
  // sequential streams are carried by coalescing and read-ahead (through the mount they reach the
  // parallel-range limit with 1 MiB blocks; bench/mount.cc).
  uint32_t block_size = 1u << 20;
  // Up to 8 neighbouring missing blocks share one request: fewer round trips for a large read,
  // while 8 MiB keeps one slow request from holding back the blocks behind it for long.
  uint32_t max_blocks_per_request = 8;
  // A range hint names blocks its reader needs now: they are split over parallel_requests
  // requests of equal size, so they arrive in one wave, up to this many blocks each (beyond it,
  // a hint of hundreds of MiB goes out in several waves rather than one slow request holding
  // 50+ MiB back).
  uint32_t max_blocks_per_hinted_request = 32;
  // Requests the transport runs at once (--max-requests): hinted ranges are split over this many
  // requests, since each connection brings its own bandwidth.
  uint32_t parallel_requests = 16;
  // Read-ahead window for a sequential handle: starts small so one stray sequential pair costs
  // little, doubles per sequential read, and caps at 16 requests of 8 blocks: with a bandwidth
  // cap per connection, a stream needs every request slot busy (at 64 blocks it kept 8 in
  // flight and read 300 MB at 154 MB/s against 50 ms / 400 Mbit/s per connection).
  uint32_t min_readahead_blocks = 4;
  uint32_t max_readahead_blocks = 128;
  // Global bound on read-ahead bytes fetched but not yet consumed: memory in flight stays bounded
  // however many handles stream at once.
  uint64_t max_prefetch_bytes = 256ull << 20;
  // Recently used blocks kept in memory: the kernel reads in pieces smaller than a block, and each
  // piece must not re-read and re-verify a whole block file. As large as the read-ahead budget:
  // a hint brings up to that much at once, and with 128 MiB a 169 MB hinted read (16 zea frames)
  // lost its first responses to eviction before the reader got to them, and read them back from
  // the disk cache (perf on the daemon: ext4 reads and block CRCs during a cold read).
  uint64_t memory_cache_bytes = 256ull << 20;
  // A read that cannot be served ends in an error after this, never a hang: one deadline per read
  // (and per read-ahead task), covering its shared-tier lookup, its Hub requests and their
  // retries. A block whose read timed out fails at once for kTimedOutMemory after, so the
  // kernel's immediate retry of a failed read does not wait a second read_timeout.
  std::chrono::milliseconds read_timeout{120'000};
  // The Hub's quota (net/quota_gate.h): when set and it says a quota wait ends or ended at T
  // (QuotaGate::last_wait_end), a read still waiting at its read_timeout is given until
  // T + read_timeout, but at most quota_max_wait more in all: --read-timeout bounds network
  // faults, --rate-limit-wait bounds quota waits. A range request whose resolve was held N gets
  // its read's deadline + N (RangeFetcher); the hold ended at T >= the read's start + N, so the
  // read waits at least as long as that request may run. Called with the reader's lock held: must
  // not block or take the reader's locks (QuotaGate takes only its own leaf lock).
  std::function<std::optional<std::chrono::steady_clock::time_point>()> quota_wait_end;
  std::chrono::milliseconds quota_max_wait{0};
  // Threads that check the disk cache for read-ahead blocks and write fetched blocks to it, so
  // neither the network thread nor a reader waits on the disk for someone else. Four: a finished
  // 8 MiB response is 8 block files to write, and read-ahead tasks queue behind those writes
  // (with two, bench/peer_bench.py saw 3-4 requests in flight of 16 allowed).
  int disk_threads = 4;
  // Blocks served by the shared tier are written to the local disk cache later, by one thread of
  // low CPU priority once reading pauses for a moment, so a stream from the tier does not share
  // the CPU with its own write-backs (perf on a cold 200 MiB read from memcached: ~20% of the
  // daemon's CPU went to encoding and writing block files while the reader waited). Up to this
  // many bytes wait for it; past that the write goes to the disk threads as for a Hub fetch. As
  // large as the memory cache: a stream's blocks sit there anyway while their writes wait.
  // 0: no deferral.
  uint64_t max_deferred_write_bytes = 256ull << 20;
  // A file read (or read ahead) from its first block to its last is hashed as its blocks arrive
  // and compared with its content id; on a mismatch its blocks leave both caches and the read
  // that completed the hash fails (EIO), so corrupt bytes never stick. SHA-256 runs at ~1.4 GB/s
  // here (openssl speed), a fraction of a core at network rates.
  bool verify_whole_files = true;
  // Files being hashed at once (each holds a hash state; a file read out of order stalls and is
  // dropped when newer ones need the room).
  size_t max_verifying_files = 64;
};

struct ReaderStats {
  uint64_t memory_hits = 0;
  uint64_t disk_hits = 0;
  uint64_t blocks_fetched = 0;
  uint64_t requests = 0;
  uint64_t bytes_fetched = 0;
  uint64_t fetch_errors = 0;
  uint64_t memory_bytes = 0;        // bytes the memory cache pins (whole response buffers)
  uint64_t hints = 0;               // prefetch() calls (range hints)
  uint64_t hinted_bytes = 0;        // bytes they started fetching or checking
  uint64_t read_ahead_bytes = 0;    // bytes speculative read-ahead started fetching
  uint64_t files_verified = 0;      // whole files whose hash matched their content id
  uint64_t verify_failures = 0;     // whole files whose hash did not (their blocks were dropped)
  uint64_t deferred_writes = 0;     // shared-tier blocks handed to the low-priority writer
};

// Per open handle: what the handle read last, to tell sequential streams from random access.
struct ReadState {
  // The kernel may read one handle from several threads. Taken with no BlockReader lock held;
  // BlockReader::mu_ may be taken under it (read-ahead claims blocks), never the other way.
  std::mutex mu;
  ReadAheadState ahead;               // the read-ahead policy's memory of this handle
  uint64_t epoch = UINT64_MAX;        // the file's content epoch at this handle's first read
};

// A block's bytes: a slice of a shared buffer (a whole coalesced response, or one block file), so
// cutting a response into blocks copies nothing.
struct BlockBytes {
  std::shared_ptr<const std::string> buffer;
  size_t offset = 0;
  size_t length = 0;
  const char* data() const { return buffer->data() + offset; }
  size_t size() const { return length; }
};

class BlockReader {
 public:
  // cache may be null (no disk cache).
  // cache and fetcher must outlive this reader; so must everything a RemoteFile's locate
  // captures (a queued read-ahead may call it until shutdown() returns).
  // shared (may be null): the shared block tier, asked after the disk cache and before the Hub
  // (see shared_blocks.h); it must outlive this reader.
  BlockReader(BlockCache* cache, RangeFetcher& fetcher, ReaderOptions options = {},
              SharedBlocks* shared = nullptr);
  // Calls shutdown().
  ~BlockReader();
  // Waits for every fetch in flight to call back (the transport bounds each; shut the transport
  // down first for a prompt return), runs the queued disk work, and stops the worker threads.
  // Afterwards nothing calls back into this reader, a RemoteFile's locate or the cache. Reads
  // must have stopped before (the FUSE session is gone). Idempotent.
  void shutdown();
  BlockReader(const BlockReader&) = delete;
  BlockReader& operator=(const BlockReader&) = delete;

  // Copies [offset, offset + length) of the file, cut at its end, into out; returns the count.
  // state may be null (no read-ahead). Thread-safe.
  Result<size_t> read(const RemoteFile& file, uint64_t offset, size_t length, char* out,
                      ReadState* state);
  // The same bytes without copying them: slices of the blocks, in order, together exactly the
  // requested range cut at the end of the file. They keep their buffers alive.
  Result<std::vector<BlockBytes>> read_slices(const RemoteFile& file, uint64_t offset, size_t length,
                                              ReadState* state);

  // Range hint (see include/hubfs/range_hint.h): starts fetching every block of `ranges` that
  // is neither in memory nor already on its way, at once (disk cache first, neighbours
  // coalesced), within the read-ahead memory budget; what does not fit is skipped. Returns the
  // bytes it started fetching or checking. Every range must be non-empty and inside the file,
  // else kInvalidArgument and nothing happens.
  Result<uint64_t> prefetch(const RemoteFile& file, const std::vector<ByteRange>& ranges);

  ReaderStats stats() const;
  const ReaderOptions& options() const { return options_; }
  // How many times the file's content failed its hash (0: never). Blocks read before a failure
  // may be corrupt: a handle whose first read saw an older epoch gets errors (see ReadState), and
  // a new open should drop whatever the kernel cached of the file.
  uint64_t content_epoch(const RemoteFile& file) const;

 private:
  struct Block;
  struct Verification;
  using BlockPtr = std::shared_ptr<Block>;

  BlockPtr claim_or_find(const RemoteFile& file, uint64_t index, bool* claimed);
  // max_run: most neighbouring blocks per request.
  // True when every block was served here (disk cache, shared tier), none left to a fetch.
  // deadline: of the read (or read-ahead task) the blocks are loaded for.
  bool load_claimed(const RemoteFile& file, std::vector<uint64_t> claimed, bool prefetch, size_t max_run,
                    const Deadline& deadline);
  void fetch_runs(const RemoteFile& file, const std::vector<uint64_t>& indices, bool prefetch, size_t max_run,
                  const Deadline& deadline);
  // The shared tier's part (see shared_blocks.h): serves what it holds, returns the rest.
  std::vector<uint64_t> load_from_shared(const RemoteFile& file, std::vector<uint64_t> misses,
                                         const Deadline& deadline);
  // A read of one of these blocks timed out moments ago: that error, else OK.
  Status recently_timed_out(const RemoteFile& file, uint64_t first, uint64_t last);
  void note_timed_out(const RemoteFile& file, uint64_t index);
  void offer_to_shared(const RemoteFile& file, uint64_t index, const BlockBytes& bytes, uint64_t epoch);
  // Writes a block that came from the shared tier to the disk cache, later (see
  // ReaderOptions::max_deferred_write_bytes); skipped if the file failed its hash meanwhile.
  void store_shared_block(const RemoteFile& file, uint64_t index, const BlockBytes& bytes, uint64_t epoch);
  // Returns once nothing was read nor looked up for kDeferredWriteQuiet (or at shutdown).
  void wait_for_quiet();
  void note_activity();
  // Serves a loaded block (or its error) to its waiters; store: write it to the disk cache too.
  void complete(const RemoteFile& file, uint64_t index, Result<BlockBytes> data, bool store);
  // complete() for blocks that arrived together (see the definition for the order of the work);
  // offer: hand them to the shared tier too (they came from the Hub).
  void complete_batch(const RemoteFile& file, const std::vector<std::pair<uint64_t, BlockBytes>>& arrivals,
                      bool store, bool offer);
  // complete()'s first half: into memory, the file's hash if this block finishes it, waiters
  // released.
  struct Published {
    bool served = false;          // the block was served (not an error, not a failed file hash)
    bool completed_file = false;  // its arrival finished the file's hash (already done)
    uint64_t epoch = 0;           // the file's content epoch when it went into memory
  };
  Published publish(const RemoteFile& file, uint64_t index, Result<BlockBytes> data);
  // Writes a served block to the disk cache, taking it back out if the file failed its hash since.
  void write_back(const RemoteFile& file, uint64_t index, const BlockBytes& bytes, uint64_t epoch);
  // Whether the file's reader sent a range hint lately (then it gets no read-ahead). Takes mu_.
  bool recently_hinted(const RemoteFile& file);
  // Claims and queues the blocks of `range` the policy chose, within the read-ahead memory
  // budget, recording how far it got in state->ahead. Caller holds state->mu.
  void read_ahead(const RemoteFile& file, BlockRange range, uint64_t last_read_block, ReadState* state);
  uint64_t block_length(const RemoteFile& file, uint64_t index) const;
  std::string cache_id(const std::string& content_id) const;
  void remember(const std::string& key, const BlockBytes& data);
  void lru_erase(std::unordered_map<std::string, std::list<std::pair<std::string, BlockBytes>>::iterator>::iterator it);
  std::optional<BlockBytes> recall(const std::string& key);
  std::optional<BlockBytes> peek(const std::string& key) const;
  Status verify_in_order(const RemoteFile& file, bool wait);
  // The file's hash in progress (begun if its first block is in memory), or null.
  std::shared_ptr<Verification> verification_for(const RemoteFile& file);
  Status check_epoch(const RemoteFile& file, ReadState* state) const;
  void forget_file(const RemoteFile& file);
  void post(std::function<void()> task);
  // Hashes the file in the calling thread (after the one hashing now) when loaded_up_to is far
  // past its hash: see kMaxHashLagBlocks.
  void take_turn_at_hash(const RemoteFile& file, uint64_t loaded_up_to);
  // `group`: blocks per task and so at most per request (capped at max_group).
  void queue_load(const RemoteFile& file, std::vector<uint64_t> claimed, size_t group, size_t max_group);

  BlockCache* cache_;
  RangeFetcher& fetcher_;
  SharedBlocks* shared_;
  const ReaderOptions options_;
  const ReadAheadPolicy read_ahead_policy_;

  mutable std::mutex mu_;
  std::unordered_map<std::string, BlockPtr> in_flight_;
  // Memory LRU: most recent at the front. Accounted by the buffers its blocks pin (a response
  // buffer lives while any of its blocks does), each counted once.
  using LruList = std::list<std::pair<std::string, BlockBytes>>;
  LruList lru_;
  std::unordered_map<std::string, LruList::iterator> lru_index_;
  std::unordered_map<const std::string*, size_t> buffer_refs_;  // blocks in lru_ per buffer
  uint64_t lru_bytes_ = 0;
  ReaderStats stats_;
  std::atomic<uint64_t> prefetch_bytes_{0};
  std::atomic<bool> stopping_{false};

  std::mutex verify_mu_;  // guards verifying_ and verify_order_; taken before a Verification's
  std::unordered_map<std::string, std::shared_ptr<Verification>> verifying_;  // by cache id
  std::list<std::string> verify_order_;  // oldest first, to bound verifying_
  std::unordered_map<std::string, uint64_t> failed_epochs_;  // by cache id (guarded by mu_)
  // When each file was last hinted (guarded by mu_): no speculative read-ahead for it meanwhile.
  std::unordered_map<std::string, std::chrono::steady_clock::time_point> hinted_at_;
  // Blocks whose read timed out, and when (guarded by mu_; see ReaderOptions::read_timeout).
  std::unordered_map<std::string, std::chrono::steady_clock::time_point> timed_out_;
  // Fetches whose callback has not yet been queued: shutdown waits for them before draining the
  // disk work (a callback posts to it).
  InFlight fetches_;
  std::atomic<uint64_t> deferred_write_bytes_{0};  // queued on deferred_writes_
  // When a read or a shared tier lookup last happened (steady_clock ticks; only kept with a
  // shared tier): the deferred writer waits for a pause.
  std::atomic<std::chrono::steady_clock::rep> last_activity_{0};
  // One low-priority thread for shared-tier blocks' disk writes; before disk_work_, whose tasks
  // post to it (so it is destroyed after).
  TaskQueue deferred_writes_;
  TaskQueue disk_work_;  // declared last: its threads start once everything above exists
};

}  // namespace hubfs
