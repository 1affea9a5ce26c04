// Serves byte ranges of remote, immutable files block by block, and orchestrates the pieces that
// do the work:
// - TierStack (tier_stack.h): memory, then the on-disk BlockCache, then the shared tier; what
//   moves between them (promotion, write-back, deferred writes);
// - SingleFlight (common/single_flight.h): each missing block is loaded once however many
//   readers wait for it;
// - FileVerifier (file_verifier.h): whole-file hashes and the content epochs they move. The
//   reader tells it what happened (blocks arrived, a read reached the file's end, a loader
//   loaded from the tiers), one call per event, and it decides when to hash and who waits;
// - ReadAheadPolicy (read_ahead.h): which blocks a sequential handle gets ahead of its reads;
// - fetch_blocks (here): neighbouring missing blocks coalesced into one range request to the Hub.
//
// This is the whole read path of the mount, kept free of FUSE so it can be tested with a fake
// transport and a temporary cache directory.
//
// Time and threads come from the fetcher's Env (its stack's; a manual one in tests): every read's
// deadline and wait, and the executors below.
//
// Threads it owns: 4 disk workers (an Env executor: disk-cache checks for read-ahead and hints,
// splitting responses into blocks, hashing, write-back) and TierStack's deferred writer (one
// thread, low priority). Stopping order: shutdown() below.
//
// Lock order, outermost first (no lock is held across a wait on another component but one: a
// failed hash's cleanup waits, under its Verification::mu, for the file's lower-tier accesses
// under way, which are pure disk and shared-tier I/O: FileEpochs::begin_cleanup):
//   ReadState::mu (a handle's read-ahead state; taken with no reader lock held: read-ahead claims
//     its blocks under it) -> the in-flight SingleFlight's mutex (a join looks in memory under
//     it) -> MemoryTier's mutex;
//   a FileVerifier Verification::mu (held by the thread hashing a file; its failure drops the
//     file from every tier under it) -> FileVerifier::mu_ (records) -> MemoryTier's mutex.
// The two chains never nest in each other (the verifier releases a batch's waiters, taking the
// SingleFlight's mutex, with none of its locks held). Leaves: MemoryTier's,
// Verification::arrival_mu, RecentKeys', DeferredWrites', FileEpochs', and below the tiers
// BlockCache's and SharedBlocks' (a failed hash's removals run under a Verification::mu).
#pragma once

#include <algorithm>
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

#include "common/env.h"
#include "common/latency_histogram.h"
#include "cache/block_cache.h"
#include "cache/cache_key.h"
#include "cache/content_verifier.h"
#include "common/deadline.h"
#include "common/single_flight.h"
#include "common/status.h"
#include "common/task_queue.h"  // InFlight
#include "net/range_fetcher.h"
#include "net/range_source.h"
#include "reader/block_buffers.h"
#include "reader/block_slots.h"
#include "reader/block_tier.h"
#include "reader/hint_requests.h"
#include "reader/tier_stack.h"
#include "reader/file_verifier.h"
#include "reader/read_ahead.h"
#include "reader/read_ahead_marks.h"
#include "reader/recent_keys.h"
#include "reader/timed_out_blocks.h"
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
  // one block; a small random read (HDF5 metadata) then fetches little, while streams are carried
  // by coalescing and read-ahead (docs/constants.md, block_size).
  uint32_t block_size = 1u << 20;
  // Up to 8 neighbouring missing blocks share one request: fewer round trips for a large read,
  // while 8 MiB keeps one slow request from holding back the blocks behind it for long.
  uint32_t max_blocks_per_request = 8;
  // A range hint names blocks its reader needs now: they are split over parallel_requests
  // requests of equal size, so they arrive in one wave, up to this many blocks each (beyond it,
  // a hint of hundreds of MiB goes out in several waves rather than one slow request holding
  // 50+ MiB back).
  uint32_t max_blocks_per_hinted_request = 32;
  // A hint that names a whole file (its hash will run when the last block is in) in one wave is
  // split into graded requests, each this many times the one before (graded_groups in
  // reader/block_ranges.h): they end in file order, so the hash and the decoding of the early
  // ones run while the later ones arrive. 1: equal requests, all ending together
  // (docs/constants.md, whole_file_hint_grade). Not for a file with a source of its own (Xet):
  // the source checks it, so its requests are equal.
  double whole_file_hint_grade = 1.08;
  // Requests the transport runs at once (--max-requests): hinted ranges are split over this many
  // requests (at most hint_spread_requests), since each connection brings its own bandwidth.
  uint32_t parallel_requests = 16;
  // The request slots a hint's blocks are spread over, with the hinted and read-ahead blocks
  // still waiting to go out or arrive: min(parallel_requests, this). More connections than this
  // run more hinted runs at once, not the same runs cut smaller: spread over 32, a training
  // loop's plan cut its 2-3-block frames into 1-block requests until 32 x 3 blocks were waiting
  // (218-240 requests for 160 frames instead of 172, each a round trip more; docs/constants.md,
  // hint_spread_requests).
  uint32_t hint_spread_requests = 16;
  // Read-ahead window for a sequential handle: starts small so one stray sequential pair costs
  // little, doubles per sequential read, and caps at 16 requests of 8 blocks: with a bandwidth
  // cap per connection, a stream needs every request slot busy (docs/constants.md,
  // max_readahead_blocks).
  uint32_t min_readahead_blocks = 4;
  uint32_t max_readahead_blocks = 128;
  // A fetching run from a file's first block reaches this far ahead at once (read_ahead.h,
  // start_window_bytes; 0: none).
  uint64_t start_window_bytes = 16ull << 20;
  // The most read-ahead fetches past a run's last read, and the largest file fetched whole
  // (read_ahead.h, max_ahead_bytes; `hubfs mount --read-ahead`). UINT64_MAX: no cap.
  uint64_t max_ahead_bytes = UINT64_MAX;
  // A handle's read that comes this long after its last read returned starts a new read of the
  // program's own (ReadFacts::paused): the kernel sends the 1 MiB pieces of one large read()
  // back to back (well under a millisecond apart from memory), while h5py decodes for 10 ms or
  // more between its chunk reads (docs/constants.md, reader_pause).
  std::chrono::milliseconds reader_pause{5};
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
  // read waits at least as long as that request may run. Called with no reader lock held; must
  // not block (QuotaGate takes only its own leaf lock).
  std::function<std::optional<MonotonicClock::time_point>()> quota_wait_end;
  std::chrono::milliseconds quota_max_wait{0};
  // The rule above: the later wait deadline for a read that started at `started` and whose wait
  // reached `deadline`, or nullopt (no quota wait, or none that moves it).
  std::optional<MonotonicClock::time_point> quota_extended(MonotonicClock::time_point started,
                                                           MonotonicClock::time_point deadline) const {
    auto until = quota_wait_end ? quota_wait_end() : std::nullopt;
    if (!until) return std::nullopt;
    auto extended = std::min(*until + read_timeout, started + read_timeout + quota_max_wait);
    return extended > deadline ? std::optional(extended) : std::nullopt;
  }
  // Threads that check the disk cache for read-ahead blocks and write fetched blocks to it, so
  // neither the network thread nor a reader waits on the disk for someone else. Four: a finished
  // 8 MiB response is 8 block files to write, and read-ahead tasks queue behind those writes
  // (with two, bench/peer_bench.py saw 3-4 requests in flight of 16 allowed).
  int disk_threads = 4;
  // Blocks served by the shared tier are written to the local disk cache later, by one thread of
  // low CPU priority once reading pauses for a moment, so a stream from the tier does not share
  // the CPU with its own write-backs, which took a large share of it while the reader waited
  // (docs/constants.md, max_deferred_write_bytes). Up to this
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

  // The read-ahead policy's settings: the window, the request size and the link it weighs bytes
  // against round trips with (read_ahead.h, under the same names; the link's round trip and
  // per-connection bandwidth keep their defaults there).
  ReadAheadOptions read_ahead() const {
    ReadAheadOptions o;
    o.block_size = block_size;
    o.min_readahead_blocks = min_readahead_blocks;
    o.max_readahead_blocks = max_readahead_blocks;
    o.start_window_bytes = start_window_bytes;
    o.max_ahead_bytes = max_ahead_bytes;
    o.max_blocks_per_request = max_blocks_per_request;
    o.parallel_requests = parallel_requests;
    return o;
  }
};

struct ReaderStats {
  uint64_t memory_hits = 0;
  uint64_t joined_flights = 0;      // blocks a read (or read-ahead) found already being loaded
  uint64_t disk_hits = 0;
  uint64_t blocks_fetched = 0;
  uint64_t requests = 0;
  uint64_t bytes_fetched = 0;
  uint64_t fetch_errors = 0;
  uint64_t memory_bytes = 0;        // bytes the memory cache pins (whole response buffers)
  uint64_t hints = 0;               // prefetch() calls (range hints)
  uint64_t hinted_bytes = 0;        // bytes they started fetching or checking
  uint64_t read_ahead_bytes = 0;    // bytes speculative read-ahead asked of the network
  uint64_t read_ahead_used_bytes = 0;  // of those, bytes a read has consumed since (the rest: waste)
  uint64_t files_verified = 0;      // whole files whose hash matched their content id
  uint64_t files_verified_by_source = 0;  // of those, files whose source's own check stood for it
  uint64_t verify_failures = 0;     // whole files whose hash did not (their blocks were dropped)
  uint64_t deferred_writes = 0;     // shared-tier blocks handed to the low-priority writer
  uint64_t blocks_in_flight = 0;    // blocks claimed and being loaded now (0: the reader is idle)
  // Latencies: each range request for file content (the CDN, or Xet storage), from the request
  // to its answer, one observation per request counted in `requests` (a range sent in parts
  // counts each part at the whole range's time); each block read from the disk cache that hit
  // (one per disk_hits); each block asked of the shared tier (hits and misses).
  LatencySnapshot cdn_latency;
  LatencySnapshot disk_latency;
  LatencySnapshot shared_latency;
};

// Per open handle: what the handle read last, to tell sequential streams from random access.
struct ReadState {
  // The kernel may read one handle from several threads. Taken with no reader lock held; the
  // in-flight SingleFlight's mutex (and under it the memory tier's) may be taken under it
  // (read-ahead claims blocks), never the other way.
  std::mutex mu;
  ReadAheadState ahead;               // the read-ahead policy's memory of this handle
  uint64_t epoch = UINT64_MAX;        // the file's content epoch at this handle's first read
  // When this handle's last read returned (unset: none yet), to tell the reader's pauses.
  std::optional<MonotonicClock::time_point> last_return;

  // Records the epoch at the handle's first read; false once the file's epoch moved since.
  // Caller holds mu.
  bool same_epoch(uint64_t now) {
    if (epoch == UINT64_MAX) epoch = now;
    return epoch == now;
  }
};

// BlockBytes (a block's bytes, a slice of a shared buffer) is in reader/block_bytes.h.

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
  // Stops, in this order: (1) queued read-ahead is cancelled, not sent; (2) waits for every fetch
  // in flight to call back (the transport bounds each; shut the transport down first for a prompt
  // return); (3) drains the disk workers (their queued work runs) and joins them; (4) waits for
  // any fetch a draining task started (its callback, finding the queue closed, runs inline);
  // (5) TierStack::shutdown(): the deferred writes still waiting run at once, and the writer
  // thread is joined. Afterwards nothing calls back into this reader, a RemoteFile's locate or
  // the cache. Reads must have stopped before (the FUSE session is gone). Idempotent.
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
  // `requests`: how its runs are cut into requests (reader/hint_requests.h).
  Result<uint64_t> prefetch(const RemoteFile& file, const std::vector<ByteRange>& ranges,
                            HintRequests requests = HintRequests::kSpread);
  // Loads each file's first block, where the disk cache holds it, into memory, on the caller's
  // thread, in order. Fetches nothing, marks nothing as hinted (the files' read-ahead is
  // unchanged); stops once shutdown() has begun. For blocks a caller will likely read soon, run
  // while it waits on something else (a session's pin).
  void load_first_blocks_from_disk(const std::vector<RemoteFile>& files);
  // Of blocks first..last of the file with this content, those not in memory now, in order (no
  // disk look, not counted as a use; blocks past the file's end are left out): for a caller
  // deciding whether a read can wait on nothing. The file's cache id and epoch are worked out
  // once for the span, not per block.
  std::vector<uint64_t> not_in_memory(const std::string& content_id, uint64_t size, uint64_t first,
                                      uint64_t last) const;
  // Waits until none of these blocks of the file with this content waits for its disk-cache write
  // (fetched and released, not yet written: TierStack::wait_written), or until `deadline`; true
  // when none does. Blocks still on the wire are not waited for: read them first.
  bool wait_written(const std::string& content_id, const std::vector<uint64_t>& indices, const Deadline& deadline);

  ReaderStats stats() const;
  const ReaderOptions& options() const { return options_; }
  // The key a file's blocks have in the disk cache (BlockCache), for a reader of `block_size`:
  // block indices only mean something for one block size, so a non-default size gets its own
  // key space (in memory and on disk; cache/cache_key.h).
  static std::string disk_key(const std::string& content_id, uint32_t block_size) {
    return cache_key(content_id, block_size);
  }
  // How many times the file's content failed its hash (0: never; reader/file_epochs.h). Blocks
  // read before a failure may be corrupt: a handle whose first read saw an older epoch gets errors
  // (see ReadState), and a new open should drop whatever the kernel cached of the file.
  uint64_t content_epoch(const RemoteFile& file) const;
  // The file's bytes in the epoch this handle reads failed a hash its reader took itself (a copy
  // that hashes what it writes, with verify_whole_files off): drops them from every tier and
  // moves the epoch, as a failed whole-file hash here does, so the next read fetches fresh bytes.
  // Nothing happens for a handle that has not read, or whose epoch already moved on.
  void discard(const RemoteFile& file, ReadState& state) {
    uint64_t epoch;
    {
      std::lock_guard<std::mutex> lock(state.mu);
      epoch = state.epoch;
    }
    if (epoch == UINT64_MAX) return;
    const FileKey key = key_of(file, epoch);
    tiers_.drop_failed_file(key.memory_id, key.cache_id, epoch, file.size, options_.block_size);
  }

 private:
  using Flights = SingleFlight<std::string, Result<BlockBytes>>;
  // A file's blocks in one content epoch (reader/file_epochs.h): `cache_id` names them in the
  // lower tiers (the disk cache, the shared tier), which a failure cleans; `memory_id` in the
  // memory tier, the flights and the hashes, a namespace per epoch ("<cache id>~<epoch>" past 0),
  // so a failure leaves every old block, flight and hash behind at once.
  struct FileKey {
    FileKey(std::string id, uint64_t e)
        : cache_id(std::move(id)), epoch(e), memory_id(e == 0 ? cache_id : cache_id + "~" + std::to_string(e)) {}
    std::string cache_id;
    uint64_t epoch;
    std::string memory_id;
  };

  // Joins the block's flight, or starts one (leader: the caller loads it); a block in memory comes
  // back as a finished flight.
  Flights::Ticket claim(const RemoteFile& file, const FileKey& key, uint64_t index);
  // Claims the blocks for read-ahead or a hint, within the read-ahead memory budget; stops at
  // the first that does not fit. Returns the indices this call must load; `bytes` their size.
  // mark: read-ahead's claims, marked (ReadAheadMarks); a hint's are not.
  std::vector<uint64_t> claim_ahead(const RemoteFile& file, const FileKey& key, const std::vector<uint64_t>& wanted,
                                    uint64_t* bytes, uint64_t* stopped_at, bool mark);
  // Who asks for a block: a read waiting on it, speculative read-ahead (its blocks are marked:
  // ReadAheadMarks), or a hint (the reader said it needs them: no mark, no read-ahead follows).
  enum class Origin { kRead, kReadAhead, kHint };
  // Where loaded blocks came from.
  enum class Loaded { kDisk, kShared, kFetching };
  // Loads claimed blocks: the tiers below memory, then the Hub (max_run blocks per request).
  // kDisk: the disk cache served every one; kShared: the shared tier some and none is left to a
  // fetch; kFetching: some were.
  Loaded load_claimed(const RemoteFile& file, const FileKey& key, const std::vector<uint64_t>& claimed, Origin origin,
                      size_t max_run, const Deadline& deadline);
  // The one place blocks are asked of the network: coalesces neighbouring indices (ascending)
  // into range requests of up to max_run blocks.
  void fetch_blocks(const RemoteFile& file, const FileKey& key, const std::vector<uint64_t>& indices, Origin origin,
                    size_t max_run, const Deadline& deadline);
  // A warm stream's read-ahead: the blocks the disk cache holds go into memory, on the workers;
  // nothing is fetched.
  void queue_from_disk(const RemoteFile& file, const FileKey& key, BlockRange blocks, size_t group);
  // queue_from_disk's task: blocks from..to of the file into memory where the disk has them.
  void load_from_disk(const RemoteFile& file, const FileKey& key, uint64_t from, uint64_t to);
  // Takes the read-ahead marks of blocks [first, last] (ReadAheadMarks): true if any was marked.
  bool take_marks(const FileKey& key, uint64_t first, uint64_t last);
  // A response (or its error) for blocks [first, first + count): split and served, on a worker.
  void on_fetched(const RemoteFile& file, const FileKey& key, uint64_t first, uint64_t count,
                  Result<std::string>& body, Provenance provenance);
  // The blocks of a run fetched into `slots` (RangeFetcher::fetch_into_async,
  // RangeSource::fetch_into_async), or its error, but for its first `served` blocks, served
  // early (serve_slots from the source's progress). provenance: of the others' bytes.
  void on_fetched_into(const RemoteFile& file, const FileKey& key, BlockRun run, const Status& status,
                       const BlockSlots& slots, Provenance provenance = Provenance::kPlain, uint64_t served = 0);
  // Blocks [from, to) of a run fetched into `slots` (counted from its first), all in: served,
  // and written to disk. provenance: of their bytes. For a source's blocks reported in while the
  // rest of the run was on its way, and for a run's blocks at its end.
  void serve_slots(const RemoteFile& file, const FileKey& key, const BlockSlots& slots, uint64_t from, uint64_t to,
                   Provenance provenance);
  // Serves blocks that arrived together: every one into memory and its waiters released before
  // any is stored or hashed. from_hub: offer them to the shared tier and write them to disk.
  void complete_batch(const RemoteFile& file, const FileKey& key,
                      const std::vector<std::pair<uint64_t, BlockBytes>>& arrivals, bool from_hub);
  // Fails the blocks' flights with `error`.
  void fail(const FileKey& key, const std::vector<uint64_t>& indices, const Status& error);
  // `group`: blocks per task and so at most per request.
  void queue_load(const RemoteFile& file, const FileKey& key, std::vector<uint64_t> claimed, size_t group,
                  Origin origin);
  // The same in tasks of the given sizes (adding up to claimed.size()), in order.
  void queue_load_groups(const RemoteFile& file, const FileKey& key, const std::vector<uint64_t>& claimed,
                         const std::vector<uint64_t>& sizes, Origin origin);
  // Waits for one block a read needs, past the read's deadline while a quota wait may hold it.
  Result<BlockBytes> wait_for(const RemoteFile& file, const FileKey& key, uint64_t index,
                              const Flights::FlightPtr& flight, MonotonicClock::time_point started,
                              Deadline* deadline);
  // The epoch a read works in: the handle's (an error once the file's epoch moved past it: the
  // handle may have passed on bad bytes), or without a handle the file's epoch now.
  Result<uint64_t> read_epoch(const RemoteFile& file, ReadState* state) const;
  void post(std::function<void()> task);
  uint64_t block_length(const RemoteFile& file, uint64_t index) const;
  std::string cache_id(const std::string& content_id) const;
  FileKey key_of(const RemoteFile& file, uint64_t epoch) const { return FileKey(cache_id(file.content_id), epoch); }
  VerifiedFile verified(const RemoteFile& file, const FileKey& key) const {
    return VerifiedFile{file.path, file.content_id, key.memory_id, file.size, key.epoch, file.source.get()};
  }

  RangeFetcher& fetcher_;
  Env& env_;  // the fetcher's
  const ReaderOptions options_;
  const ReadAheadPolicy read_ahead_policy_;
  // Memory for blocks, mapped once and reused: blocks fetched from the Hub are written into its
  // slots as they arrive (reader/block_slots.h), blocks read from the disk cache are read into
  // them (DiskTier). One pool for both, so what it maps is bounded by the blocks held at once.
  const std::shared_ptr<BlockBufferPool> block_pool_;
  TierStack tiers_;
  FileVerifier verifier_;
  Flights in_flight_;  // by "<memory id>#<index>"
  // Files whose reader sent a range hint lately: no speculative read-ahead for them for
  // kHintQuietTime; at most kMaxHintedFiles remembered.
  static constexpr std::chrono::seconds kHintQuietTime{30};
  static constexpr size_t kMaxHintedFiles = 4096;
  RecentKeys hinted_;
  TimedOutBlocks timed_out_;
  // Blocks read-ahead claimed, is fetching or fetched that no read consumed yet; at most 64 Ki
  // (64 GiB of 1 MiB blocks: far past the memory tier, so a block still marked is long gone).
  static constexpr size_t kMaxReadAheadMarks = 1 << 16;
  ReadAheadMarks marks_{kMaxReadAheadMarks};
  std::atomic<uint64_t> prefetch_bytes_{0};
  // Hinted blocks claimed whose load task has not started yet: with prefetch_bytes_, the blocks
  // the connections carry before a new hint's (prefetch(): how finely that hint is split).
  std::atomic<uint64_t> hint_blocks_queued_{0};
  // HTTP requests this reader has in flight (a range in parts counts each): what is left of
  // parallel_requests decides how many parts a read's own request goes in.
  std::atomic<uint64_t> requests_in_flight_{0};
  std::atomic<bool> stopping_{false};
  // The counters kept here (the tiers and the verifier keep theirs).
  struct Counters {
    std::atomic<uint64_t> memory_hits{0}, joined_flights{0}, blocks_fetched{0}, requests{0}, bytes_fetched{0},
        fetch_errors{0}, hints{0}, hinted_bytes{0}, read_ahead_bytes{0}, read_ahead_used_bytes{0};
    void add(std::atomic<uint64_t>& counter, uint64_t n = 1) { counter.fetch_add(n, std::memory_order_relaxed); }
    void copy_to(ReaderStats& s) const {
      s.memory_hits = memory_hits, s.joined_flights = joined_flights, s.blocks_fetched = blocks_fetched;
      s.requests = requests, s.bytes_fetched = bytes_fetched, s.fetch_errors = fetch_errors;
      s.hints = hints, s.hinted_bytes = hinted_bytes, s.read_ahead_bytes = read_ahead_bytes;
      s.read_ahead_used_bytes = read_ahead_used_bytes;
    }
  } counters_;
  LatencyHistogram cdn_latency_;  // ReaderStats::cdn_latency
  // Fetches whose callback has not yet been queued: shutdown waits for them before draining the
  // disk work (a callback posts to it).
  InFlight fetches_;
  std::unique_ptr<Executor> disk_work_;  // declared last: its threads start once everything above exists
};

}  // namespace hubfs
