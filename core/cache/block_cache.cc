#include "cache/block_cache.h"

#include <sys/types.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <condition_variable>
#include <cstring>
#include <mutex>
#include <thread>
#include <vector>

#include "cache/block_file.h"
#include "cache/touch_throttle.h"
#include "common/log.h"

namespace hubfs {
namespace {

using Clock = MonotonicClock;

// A temp file this old belongs to a writer that crashed (a put takes milliseconds).
constexpr std::chrono::hours kStaleTempAge{1};
// Consecutive failed puts that start a write backoff: one failure may be a race with eviction
// or a vanished shard directory; three in a row is a disk that refuses writes.
constexpr int kWriteFailureStreak = 3;
// When an eviction pass could not get under budget (files it may not remove), the next
// automatic pass waits this long, so puts do not turn into a loop of directory re-scans.
constexpr std::chrono::seconds kEvictRetryDelay{5};
// Bound on the hit-throttle table (cache/touch_throttle.h; its cost in docs/constants.md).
constexpr size_t kMaxTrackedTouches = 1 << 16;
// Scans one eviction pass may make when each runs out of candidates (see eviction_batch); the
// bound keeps a directory whose files cannot be removed from holding the thread forever.
constexpr int kMaxScansPerPass = 16;
// How far past its budget the cache may grow before puts are skipped (eviction runs in the
// background and rescans the directory, so a fast stream can outrun it): at most this over.
uint64_t overshoot_allowance(uint64_t budget) { return std::max<uint64_t>(budget / 10, 64ull << 20); }
// Shards are the 256 values of the first byte of sha256(content id).
constexpr int kShards = 256;

std::string shard_dir_name(int shard) {
  static const char kDigits[] = "0123456789abcdef";
  return {kDigits[shard >> 4], kDigits[shard & 0xF]};
}

int64_t wall_now_ns(const Env& env) {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(env.system_now().time_since_epoch()).count();
}

// Unique per process, thread and call, so concurrent writers never share a temp file.
std::string temp_path(const std::string& dir) {
  static std::atomic<uint64_t> counter{0};
  return dir + "/" + std::string(block_file::kTempPrefix) + std::to_string(::getpid()) + "." +
         std::to_string(::gettid()) + "." + std::to_string(counter.fetch_add(1));
}

std::string_view base_name(std::string_view path) {
  size_t slash = path.rfind('/');
  return slash == std::string_view::npos ? path : path.substr(slash + 1);
}

class DiskBlockCache final : public BlockCache {
 public:
  DiskBlockCache(CacheOptions options, std::shared_ptr<CacheDisk> disk, std::string blocks_dir)
      : options_(std::move(options)), env_(env_of(options_.env, "BlockCache")), disk_(std::move(disk)),
        blocks_dir_(std::move(blocks_dir)), touches_(options_.touch_interval, kMaxTrackedTouches), retry_wait_(env_), maintenance_(env_.new_executor(1)) {
    for (auto& ready : shard_ready_) ready.store(false, std::memory_order_relaxed);
    // Learn the directory's size at start (open() does not wait for it), evicting if over.
    {
      std::lock_guard<std::mutex> lock(mu_);
      pass_scheduled_ = true;
    }
    if (!maintenance_->post([this] { maintenance_pass(); })) pass_scheduled_ = false;
  }

  ~DiskBlockCache() override {
    {
      std::lock_guard<std::mutex> lock(mu_);
      stopping_.store(true);  // a pass under way gives up between shard directories
    }
    retry_wait_.shutdown();  // a pass waiting to retry ends now (it sees stopping_)
    maintenance_->drain();   // joins the maintenance thread
  }

  std::optional<std::string> get(std::string_view content_id, uint64_t index) override {
    const Location loc = locate(content_id, index);
    Result<SplitFile> contents = disk_->read_file_split(
        loc.path, block_file::kHeaderSize, block_file::kHeaderSize + block_file::kMaxDataBytes);
    if (!contents.ok()) {
      // Absent, or unreadable for a reason a later read may not share (EIO, EACCES): a miss.
      // Only a file that is not a block at all (too large, not regular) is removed.
      if (contents.status().code() == Code::kCorrupt) discard_corrupt(loc.path, 0);
      misses_.fetch_add(1, std::memory_order_relaxed);
      return std::nullopt;
    }
    SplitFile& file = contents.value();
    if (!block_file::verify(file.head, file.rest, loc.digest, index).ok()) {
      discard_corrupt(loc.path, file.head.size() + file.rest.size());
      misses_.fetch_add(1, std::memory_order_relaxed);
      return std::nullopt;
    }
    hits_.fetch_add(1, std::memory_order_relaxed);
    maybe_touch(loc);
    return std::move(file.rest);
  }

  bool get_into(std::string_view content_id, uint64_t index, char* out, size_t length) override {
    const Location loc = locate(content_id, index);
    char header[block_file::kHeaderSize];
    Result<uint64_t> size = length > block_file::kMaxDataBytes
                                ? Result<uint64_t>(Corrupt("longer than any block"))
                                : disk_->read_part(loc.path, header, sizeof header, block_file::kHeaderSize, out, length);
    return settle_read_into(content_id, index, loc, size, header, out, length, /*direct=*/false);
  }

  bool get_file_into(std::string_view content_id, uint64_t index, char* file, size_t capacity,
                     size_t length) override {
    if (length > block_file::kMaxDataBytes || capacity < block_file::kHeaderSize + length) return false;
    const Location loc = locate(content_id, index);
    Result<CacheDisk::ReadInto> read = disk_->read_file_into(loc.path, file, capacity);
    const Result<uint64_t> size = read.ok() ? Result<uint64_t>(read->size) : Result<uint64_t>(read.status());
    return settle_read_into(content_id, index, loc, size, file, file + block_file::kHeaderSize, length,
                            read.ok() && read->direct);
  }

  bool read_part(std::string_view content_id, uint64_t index, uint64_t offset, char* out, size_t length) override {
    const Location loc = locate(content_id, index);
    char header[block_file::kHeaderSize];
    Result<uint64_t> size = offset > block_file::kMaxDataBytes
                                ? Result<uint64_t>(Corrupt("past any block"))
                                : disk_->read_part(loc.path, header, sizeof header, block_file::kHeaderSize + offset,
                                                   out, length);
    if (!size.ok() || *size < block_file::kHeaderSize ||
        !block_file::verify_header(std::string_view(header, sizeof header), *size - block_file::kHeaderSize,
                                   loc.digest, index)
             .ok()) {
      // Absent, shorter, or another key's: a miss (a damaged block is get()'s to find and remove).
      misses_.fetch_add(1, std::memory_order_relaxed);
      return false;
    }
    hits_.fetch_add(1, std::memory_order_relaxed);
    maybe_touch(loc);
    return true;
  }

  void put(std::string_view content_id, uint64_t index, std::string_view data) override {
    if (data.size() > block_file::kMaxDataBytes) {
      write_failures_.fetch_add(1, std::memory_order_relaxed);
      return;
    }
    if (env_.now().time_since_epoch().count() < backoff_until_.load(std::memory_order_relaxed)) {
      writes_skipped_.fetch_add(1, std::memory_order_relaxed);
      return;
    }
    // Bounded overshoot: past budget + allowance, skip the write until eviction catches up.
    const int64_t used_now = bytes_used_.load();
    if (used_now > 0 && static_cast<uint64_t>(used_now) + data.size() >
                            options_.budget_bytes + overshoot_allowance(options_.budget_bytes)) {
      writes_skipped_.fetch_add(1, std::memory_order_relaxed);
      request_eviction();
      return;
    }
    const Location loc = locate(content_id, index);
    if (!shard_ready_[loc.shard].load(std::memory_order_acquire)) {
      if (Status d = disk_->make_dirs(loc.shard_dir, 0700); !d.ok()) return note_write_failure(d);
      shard_ready_[loc.shard].store(true, std::memory_order_release);
    }
    const std::string tmp = temp_path(loc.shard_dir);
    // The header, then the data where it lies (a slice of a response): no copy into one buffer.
    const std::string header = block_file::encode_header(loc.digest, index, data);
    Status s = disk_->write_new_file(tmp, header, data);
    if (s.code() == Code::kNotFound) {
      // The shard directory was removed under us (someone clearing the cache): make it again
      // and retry once, so clearing a live cache costs no block.
      shard_ready_[loc.shard].store(false);
      if (disk_->make_dirs(loc.shard_dir, 0700).ok()) {
        shard_ready_[loc.shard].store(true, std::memory_order_release);
        s = disk_->write_new_file(tmp, header, data);
      }
    }
    if (s.ok()) s = disk_->rename(tmp, loc.path);
    if (!s.ok()) {
      (void)disk_->remove(tmp);  // may not exist (open failed): nothing to do then
      return note_write_failure(s);
    }
    failure_streak_.store(0, std::memory_order_relaxed);
    if (failing_.exchange(false)) log_info("cache: writes to " + options_.dir + " work again");
    note_fresh(loc);  // the file's mtime is now: no touch needed for a while
    const int64_t written = static_cast<int64_t>(header.size() + data.size());
    bytes_added_.fetch_add(static_cast<uint64_t>(written));
    int64_t used = bytes_used_.fetch_add(written) + written;
    if (used > 0 && static_cast<uint64_t>(used) > options_.budget_bytes) request_eviction();
  }

  void remove(std::string_view content_id, uint64_t index) override {
    const Location loc = locate(content_id, index);
    // The size estimate is corrected by the next directory scan; a miss here is fine.
    (void)disk_->remove(loc.path);
  }

  CacheStats stats() const override {
    CacheStats s;
    s.hits = hits_.load();
    s.misses = misses_.load();
    s.corrupt = corrupt_.load();
    s.write_failures = write_failures_.load();
    s.evictions = evictions_.load();
    s.bytes_used = static_cast<uint64_t>(std::max<int64_t>(0, bytes_used_.load()));
    s.writes_skipped = writes_skipped_.load();
    s.direct_reads = direct_reads_.load();
    return s;
  }

  void enforce_budget() override { evict_pass(); }

 private:
  struct Location {
    block_file::Digest digest;
    int shard;
    std::string shard_dir;
    std::string path;
    // The block's identity in the hit-throttle table: 64 bits of the id's digest mixed with the
    // index. A collision only skips one touch, so 64 bits need not be unique, just spread.
    uint64_t touch_key;
  };

  Location locate(std::string_view content_id, uint64_t index) const {
    Location loc;
    loc.digest = block_file::digest_content_id(content_id);
    loc.shard = loc.digest[0];
    loc.shard_dir = blocks_dir_ + "/" + shard_dir_name(loc.shard);
    loc.path = loc.shard_dir + "/" + block_file::file_name(content_id, loc.digest, index);
    uint64_t id_bits = 0;
    std::memcpy(&id_bits, loc.digest.data(), sizeof(id_bits));
    loc.touch_key = id_bits ^ (index * 0x9E3779B97F4A7C15ull);  // golden-ratio multiplier
    return loc;
  }

  void note_write_failure(const Status& cause) {
    write_failures_.fetch_add(1, std::memory_order_relaxed);
    // The streak is not reset when a backoff starts, so after it ends a single failed probe
    // starts the next one.
    if (failure_streak_.fetch_add(1) + 1 >= kWriteFailureStreak) {
      // Once per episode (not per block): the disk is full or read-only until a put succeeds.
      if (!failing_.exchange(true))
        log_warning("cache: writes to " + options_.dir + " fail (" + cause.message() +
                    "); reads are served from the network without caching until the disk accepts "
                    "writes again (free space or fix permissions)");
      auto until = env_.now() + options_.write_backoff;
      backoff_until_.store(until.time_since_epoch().count(), std::memory_order_relaxed);
    }
  }

  void discard_corrupt(const std::string& path, uint64_t size) {
    corrupt_.fetch_add(1, std::memory_order_relaxed);
    if (disk_->remove(path).ok()) bytes_used_.fetch_sub(static_cast<int64_t>(size));
  }

  // The end of get_into and get_file_into: a block file of `size` bytes (or why none) read into
  // `header` and `data`. A hit when it is exactly the header and `length` data bytes that pass
  // their checks. Anything else (shorter, longer, failing its checks, unreadable): get() reads it
  // again and treats it as it treats every block, deleting a corrupt one; its bytes are then not
  // `length` long or not good, or they are (a file replaced between the two reads) and copied.
  bool settle_read_into(std::string_view content_id, uint64_t index, const Location& loc,
                        const Result<uint64_t>& size, const char* header, char* data, size_t length, bool direct) {
    if (!size.ok() && size.status().code() == Code::kNotFound) {
      misses_.fetch_add(1, std::memory_order_relaxed);
      return false;
    }
    if (size.ok() && *size == block_file::kHeaderSize + length &&
        block_file::verify(std::string_view(header, block_file::kHeaderSize), std::string_view(data, length),
                           loc.digest, index)
            .ok()) {
      hits_.fetch_add(1, std::memory_order_relaxed);
      if (direct) direct_reads_.fetch_add(1, std::memory_order_relaxed);
      maybe_touch(loc);
      return true;
    }
    std::optional<std::string> hit = get(content_id, index);
    if (!hit || hit->size() != length) return false;
    std::memcpy(data, hit->data(), length);
    return true;
  }

  void maybe_touch(const Location& loc) {
    if (!touches_.should_touch(loc.touch_key, env_.now())) return;
    (void)disk_->touch(loc.path);  // best effort: a block evicted meanwhile is simply gone
  }

  void note_fresh(const Location& loc) { touches_.note_written(loc.touch_key, env_.now()); }

  // A put pushed the estimate over budget: a pass on the maintenance thread, unless one is
  // queued, running or waiting to retry (it then looks at the request when it is done).
  void request_eviction() {
    {
      std::lock_guard<std::mutex> lock(mu_);
      eviction_requested_ = true;
      if (pass_scheduled_ || stopping_.load()) return;
      pass_scheduled_ = true;
    }
    if (!maintenance_->post([this] { maintenance_pass(); })) {
      std::lock_guard<std::mutex> lock(mu_);
      pass_scheduled_ = false;  // drained: the cache is going away
    }
  }

  // On the maintenance thread: one eviction pass, then the next step. A pass that could not get
  // under budget waits kEvictRetryDelay (on the Env's timer) before another may start, so puts
  // do not turn into a loop of directory re-scans; a request that came meanwhile starts it then.
  void maintenance_pass() {
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (stopping_.load()) {
        pass_scheduled_ = false;
        return;
      }
      eviction_requested_ = false;
    }
    const bool fits = evict_pass();
    if (!fits && retry_wait_.schedule_after(std::chrono::duration_cast<std::chrono::milliseconds>(kEvictRetryDelay),
                                            [this] { next_pass_if_requested(); })) {
      return;  // pass_scheduled_ stays set through the wait
    }
    next_pass_if_requested();
  }

  void next_pass_if_requested() {
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (!eviction_requested_ || stopping_.load()) {
        pass_scheduled_ = false;
        return;
      }
    }
    if (!maintenance_->post([this] { maintenance_pass(); })) {
      std::lock_guard<std::mutex> lock(mu_);
      pass_scheduled_ = false;
    }
  }

  // What one scan of the directory found.
  struct Scan {
    uint64_t total = 0;             // every file's size, blocks and in-flight temp files
    std::vector<DiskEntry> oldest;  // up to eviction_batch blocks, least recently used first
  };

  // Lists every shard (other processes' writes count too), removing crashed writers' temp files
  // and keeping only the oldest blocks as eviction candidates.
  Scan scan_directory() {
    const int64_t stale_before = wall_now_ns(env_) - std::chrono::nanoseconds(kStaleTempAge).count();
    const size_t keep = std::max<size_t>(1, options_.eviction_batch);
    auto newer = [](const DiskEntry& a, const DiskEntry& b) {
      return a.mtime_ns != b.mtime_ns ? a.mtime_ns < b.mtime_ns : a.path < b.path;
    };
    Scan scan;
    // A max-heap by recency: its top is the newest candidate, the first to give way.
    std::vector<DiskEntry>& heap = scan.oldest;
    // Shard by shard, so a stopping cache gives up between directories, not after all of them.
    for (int shard = 0; shard < kShards && !stopping_.load(); ++shard) {
      auto listed = disk_->list_files(blocks_dir_ + "/" + shard_dir_name(shard));
      if (!listed.ok()) continue;  // absent shard: nothing written there yet
      for (DiskEntry& e : listed.value()) {
        if (block_file::is_temp_name(base_name(e.path))) {
          if (e.mtime_ns < stale_before && disk_->remove(e.path).ok()) continue;
          scan.total += e.size;  // a write in flight: it will land, so it counts
          continue;
        }
        // Not a block (a file someone dropped here, whatever its size): not ours to count or evict.
        if (!block_file::is_block_file(base_name(e.path), e.size)) continue;
        scan.total += e.size;
        if (heap.size() == keep) {
          if (!newer(e, heap.front())) continue;
          std::pop_heap(heap.begin(), heap.end(), newer);
          heap.back() = std::move(e);
        } else {
          heap.push_back(std::move(e));
        }
        std::push_heap(heap.begin(), heap.end(), newer);
      }
    }
    std::sort_heap(heap.begin(), heap.end(), newer);  // oldest first
    return scan;
  }

  // Re-scans the directory and, if it is over budget, removes least-recently-used blocks
  // (oldest mtime) until it is under the low-water mark. Returns whether it now fits.
  bool evict_pass() {
    std::lock_guard<std::mutex> pass_lock(evict_mu_);
    const uint64_t budget = options_.budget_bytes;
    const uint64_t low_water = static_cast<uint64_t>(static_cast<double>(budget) *
                                                     std::clamp(options_.low_water, 0.0, 1.0));
    uint64_t total = 0;
    int64_t added_before = 0;
    for (int round = 0; round < kMaxScansPerPass && !stopping_.load(); ++round) {
      added_before = bytes_added_.load();
      Scan scan = scan_directory();
      total = scan.total;
      // Over budget is what starts eviction; once started, it continues down to the low water.
      if (total <= (round == 0 ? budget : low_water)) break;
      for (const DiskEntry& e : scan.oldest) {
        if (total <= low_water || stopping_.load()) break;
        Status s = disk_->remove(e.path);
        if (s.ok()) evictions_.fetch_add(1, std::memory_order_relaxed);
        // Already gone (another process evicted it) frees the space just the same.
        if (s.ok() || s.code() == Code::kNotFound) total -= e.size;
      }
      // Another scan only if this one ran out of candidates while still above the low water.
      if (total <= low_water || scan.oldest.size() < std::max<size_t>(1, options_.eviction_batch))
        break;
    }
    // Puts that landed during the scan may or may not be in it; counting them again
    // over-estimates, which at worst brings the next re-scan forward.
    bytes_used_.store(static_cast<int64_t>(total) + (bytes_added_.load() - added_before));
    return total <= budget;
  }

  const CacheOptions options_;
  Env& env_;
  const std::shared_ptr<CacheDisk> disk_;
  const std::string blocks_dir_;

  std::atomic<bool> failing_{false};  // in a write-failure episode (logged once)
  std::atomic<uint64_t> hits_{0}, misses_{0}, corrupt_{0}, write_failures_{0}, evictions_{0},
      writes_skipped_{0}, direct_reads_{0};
  std::atomic<int64_t> bytes_used_{0};   // signed: a corrupt-file removal may race a re-scan
  std::atomic<int64_t> bytes_added_{0};  // every byte ever put, to account puts during a scan

  std::atomic<int> failure_streak_{0};
  std::atomic<Clock::time_point::rep> backoff_until_{0};  // env clock ticks; puts skip until then

  std::array<std::atomic<bool>, kShards> shard_ready_;  // shard directory known to exist

  // Lock order: evict_mu_ (held for a whole pass, across disk I/O) is never taken under another
  // of these; touches_' lock (TouchThrottle) and mu_ are leaves, held briefly and never across
  // disk I/O.
  TouchThrottle touches_;  // when each block was last touched or written (hit-throttle table)

  std::mutex evict_mu_;  // one eviction pass at a time (background or enforce_budget)
  std::mutex mu_;        // guards eviction_requested_ and pass_scheduled_
  bool eviction_requested_ = false;  // a put went over budget since the last pass started
  bool pass_scheduled_ = false;      // a pass is queued, running, or waiting to retry
  std::atomic<bool> stopping_{false};
  ScheduledGroup retry_wait_;  // the wait before retrying a pass that did not fit
  std::unique_ptr<Executor> maintenance_;  // last: drained (joined) first
};

Status unusable_dir(const std::string& dir, const Status& why) {
  return Status(why.code() == Code::kOk ? Code::kIo : why.code(),
                "cache directory " + dir + " cannot be used (" + why.message() +
                    "); choose a writable directory with --cache-dir or HUBFS_CACHE_DIR");
}

}  // namespace

Result<std::unique_ptr<BlockCache>> BlockCache::open(CacheOptions options,
                                                     std::shared_ptr<CacheDisk> disk) {
  if (options.dir.empty())
    return InvalidArgument("no cache directory given; set one with --cache-dir or HUBFS_CACHE_DIR");
  if (!disk) return InvalidArgument("no disk given to the block cache");
  while (options.dir.size() > 1 && options.dir.back() == '/') options.dir.pop_back();
  const std::string blocks_dir = options.dir + "/blocks";
  if (Status s = disk->make_dirs(blocks_dir, 0700); !s.ok()) return unusable_dir(options.dir, s);
  // Creating directories can succeed where writing files is refused (an existing tree on a
  // read-only mount, or owned by someone else): prove a file can be created before promising
  // a cache. A full disk is not refused: it may drain, and until then puts back off.
  const std::string probe = temp_path(blocks_dir);
  Status s = disk->write_new_file(probe, "hubfs");
  (void)disk->remove(probe);
  if (s.code() == Code::kPermissionDenied || s.code() == Code::kNotFound)
    return unusable_dir(options.dir, s);
  return std::unique_ptr<BlockCache>(
      new DiskBlockCache(std::move(options), std::move(disk), blocks_dir));
}

bool BlockCache::get_file_into(std::string_view content_id, uint64_t index, char* file, size_t capacity,
                               size_t length) {
  if (capacity < block_file::kHeaderSize + length) return false;
  return get_into(content_id, index, file + block_file::kHeaderSize, length);
}

}  // namespace hubfs
