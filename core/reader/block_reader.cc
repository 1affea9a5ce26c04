#include "reader/block_reader.h"

#include <algorithm>
#include <cstring>

#include "common/log.h"
#include "reader/block_ranges.h"
#include "reader/disk_tier.h"
#include "reader/shared_block_tier.h"

namespace hubfs {

static std::string flight_key(const std::string& memory_id, uint64_t index) {
  return memory_id + "#" + std::to_string(index);
}

BlockReader::BlockReader(BlockCache* cache, RangeFetcher& fetcher, ReaderOptions options, SharedBlocks* shared)
    : fetcher_(fetcher),
      env_(fetcher.env()),
      options_(options),
      read_ahead_policy_(options.read_ahead()),
      block_pool_(BlockBufferPool::create(DiskTier::file_slot_bytes(options.block_size))),
      tiers_(env_, cache ? std::make_unique<DiskTier>(*cache, options.block_size, block_pool_) : nullptr,
             shared ? std::make_unique<SharedBlockTier>(*shared) : nullptr,
             TierStackOptions{.memory_bytes = options.memory_cache_bytes,
                              .max_deferred_write_bytes = options.max_deferred_write_bytes},
             [this](std::function<void()> task) { return disk_work_->post(std::move(task)); }),
      verifier_(tiers_.memory(),
                FileVerifierOptions{options.block_size, options.max_verifying_files, options.verify_whole_files},
                [this](const VerifiedFile& f) {
                  tiers_.drop_failed_file(f.memory_id, cache_id(std::string(f.content_id)), f.epoch, f.size,
                                          options_.block_size);
                }),
      hinted_(env_, kHintQuietTime, kMaxHintedFiles),  // (block_reader.h)
      timed_out_(env_, options.read_timeout),
      disk_work_(env_.new_executor(std::max(1, options.disk_threads))) {}

BlockReader::~BlockReader() { shutdown(); }

void BlockReader::shutdown() {
  stopping_.store(true);  // queued read-ahead is cancelled, not sent
  // A fetch callback posts disk work and a queued task may start a fetch: wait for fetches,
  // drain the queue, then wait for any fetch a draining task started (its callback, finding the
  // queue closed, runs its work inline).
  fetches_.wait_zero();
  disk_work_->drain();
  fetches_.wait_zero();
  // Last: disk tasks hand it writes, and nothing does after them.
  tiers_.shutdown();
}

void BlockReader::post(std::function<void()> task) {
  // Refused only after shutdown() drained the queue, which waits for every fetch first: by then
  // nothing posts. Running inline keeps a late task from being lost all the same.
  if (!disk_work_->post(task)) task();
}

uint64_t BlockReader::block_length(const RemoteFile& file, uint64_t index) const {
  const uint64_t start = index * options_.block_size;
  return start >= file.size ? 0 : std::min<uint64_t>(options_.block_size, file.size - start);
}

// A read's facts and the window they left, for the debug log: ", paused marked window 12 (last
// read 10 MiB, this one 1 MiB so far)".
static std::string describe(const ReadFacts& facts, const ReadAheadState& ahead) {
  std::string s = ",";
  if (facts.paused) s += " paused";
  if (facts.missed) s += " missed";
  if (facts.marked) s += " marked";
  if (facts.waited) s += " waited";
  if (facts.from_disk) s += " from-disk";
  if (facts.hinted) s += " hinted";
  return s + " window " + std::to_string(ahead.window_blocks) + " (last read " +
         std::to_string(ahead.last_burst_bytes >> 20) + " MiB, largest " + std::to_string(ahead.largest_burst_bytes >> 20) +
         " MiB, this one " + std::to_string(ahead.burst_bytes >> 20) + " MiB so far)";
}

std::string BlockReader::cache_id(const std::string& content_id) const {
  return disk_key(content_id, options_.block_size);
}

BlockReader::Flights::Ticket BlockReader::claim(const RemoteFile& file, const FileKey& key, uint64_t index) {
  const std::string& id = key.memory_id;
  Flights::Ticket ticket = in_flight_.join(flight_key(id, index), [&]() -> std::optional<Result<BlockBytes>> {
    if (auto hit = tiers_.memory().get(BlockId{id, index, block_length(file, index)})) return Result<BlockBytes>(*hit);
    return std::nullopt;
  });
  if (!ticket.leader) counters_.add(ticket.stored ? counters_.memory_hits : counters_.joined_flights);
  return ticket;
}

void BlockReader::complete_batch(const RemoteFile& file, const FileKey& key,
                                 const std::vector<std::pair<uint64_t, BlockBytes>>& arrivals, bool from_hub) {
  // Every block of the batch is in memory and its waiters released before any is written to
  // disk or hashed: completed one at a time, the last block of an 8-block response waited for
  // seven disk writes and for the hash passes the first seven set off (perf: one disk worker
  // hashing a third of the daemon's CPU while the reader waited on blocks it had in hand).
  const std::string& id = key.memory_id;
  // Found below memory until written (a small memory tier may evict them first).
  if (from_hub) tiers_.expect_writes(key.cache_id, key.epoch, arrivals);
  for (const auto& [index, bytes] : arrivals) tiers_.memory().put(BlockId{id, index, bytes.size()}, bytes);
  // The verifier releases the waiters, the completing block's with the file's verdict, and hashes
  // after the last release (FileVerifier::blocks_arrived).
  std::vector<bool> served(arrivals.size());
  verifier_.blocks_arrived(verified(file, key), arrivals, [&](size_t i, const Status& verdict) {
    served[i] = verdict.ok();
    in_flight_.complete(flight_key(id, arrivals[i].first), served[i] ? Result<BlockBytes>(arrivals[i].second)
                                                                     : Result<BlockBytes>(verdict));
    // Write-back once all are released, before any hash: nobody waits on the disk but this thread.
    if (from_hub && i + 1 == arrivals.size()) tiers_.store_fetched(key.cache_id, key.epoch, arrivals, served);
  });
}

void BlockReader::fail(const FileKey& key, const std::vector<uint64_t>& indices, const Status& error) {
  for (uint64_t b : indices) in_flight_.complete(flight_key(key.memory_id, b), Result<BlockBytes>(error));
}

BlockReader::Loaded BlockReader::load_claimed(const RemoteFile& file, const FileKey& key,
                                              const std::vector<uint64_t>& claimed, Origin origin, size_t max_run,
                                              const Deadline& deadline) {
  std::vector<BlockId> ids;
  for (uint64_t b : claimed) ids.push_back(BlockId{key.cache_id, b, block_length(file, b)});
  bool from_shared = false;
  std::vector<uint64_t> misses = tiers_.fill_from_lower(
      ids, key.epoch, deadline,
      [&](const auto& found) {
        complete_batch(file, key, found, false);
        // Read-ahead found them in a cache: no fetch to count as used or wasted.
        if (origin == Origin::kReadAhead)
          for (const auto& [index, bytes] : found) marks_.forget(flight_key(key.memory_id, index));
      },
      &from_shared);
  if (misses.empty()) return from_shared ? Loaded::kShared : Loaded::kDisk;
  fetch_blocks(file, key, misses, origin, max_run, deadline);
  return Loaded::kFetching;
}

void BlockReader::fetch_blocks(const RemoteFile& file, const FileKey& key, const std::vector<uint64_t>& indices,
                               Origin origin, size_t max_run, const Deadline& deadline) {
  const bool prefetch = origin != Origin::kRead;
  // indices are ascending; neighbours go out together, up to max_run. A read's own requests go
  // in parts over the idle connections (ReadAheadPolicy::demand_parts).
  const std::vector<BlockRun> runs = coalesce(indices, max_run);
  const uint64_t busy = requests_in_flight_.load();
  for (const BlockRun& run : runs) {
    // Named copies, not a structured binding: the lambdas below capture them, which clang
    // accepts only from version 16 (the sanitizer builds of scripts/test.sh use clang).
    const uint64_t first = run.first, count = run.count;
    ByteRange range{first * options_.block_size, 0};
    for (uint64_t b = first; b < first + count; ++b) range.length += block_length(file, b);
    const uint32_t parts = prefetch || file.source ? 1 : read_ahead_policy_.demand_parts(range.length, runs.size(), busy);
    if (prefetch) prefetch_bytes_ += range.length;
    if (origin == Origin::kReadAhead) {
      uint64_t used = 0;  // by reads that took the marks while the blocks were only claimed
      for (uint64_t b = first; b < first + count; ++b)
        used += marks_.fetching(flight_key(key.memory_id, b), block_length(file, b));
      counters_.add(counters_.read_ahead_bytes, range.length);
      counters_.add(counters_.read_ahead_used_bytes, used);
    }
    counters_.add(counters_.requests, parts);
    if (log_enabled(LogLevel::kDebug))
      log_debug("fetch " + file.path + " blocks " + std::to_string(first) + "+" + std::to_string(count) + " in " +
                std::to_string(parts) + (prefetch ? " (ahead)" : " (demand)"));
    fetches_.add();
    requests_in_flight_ += parts;
    const auto sent_at = env_.now();
    // Every response arrives straight into pooled block slots.
    std::shared_ptr<BlockSlots> slots =
        BlockSlots::take(*block_pool_, BlockRun{first, count}, file.size, options_.block_size);
    if (slots && file.source) {
      // A source of its own (Xet) says as the range's first bytes are in for good: each block
      // they cover is served, and its disk write queued, then, while the rest is on the wire
      // (the disk writes of a hint's responses no longer follow its last byte: docs/xet.md).
      // `early`: the blocks of the run handed over so; the completion serves the others.
      auto early = std::make_shared<std::atomic<uint64_t>>(0);
      file.source->fetch_into_async(
          file.size, range, slots,
          [this, file, key, run, early, slots](uint64_t ready) {
            // On the source's thread (a transport thread): only whole blocks, handed to a worker.
            // Never the run's last: the batch that completes a file must come after its source
            // recorded what it read (when the response ends), so the file's verdict is there to
            // take in place of a hash (FileVerifier::blocks_arrived).
            const uint64_t whole = std::min<uint64_t>(run.count - 1, ready / options_.block_size);
            uint64_t from = early->load();
            while (from < whole && !early->compare_exchange_weak(from, whole)) {
            }
            if (from >= whole) return;
            // A source's progress is of its checked bytes (RangeSource::Progress): kFileHashed.
            post([this, file, key, from, whole, slots] {
              serve_slots(file, key, *slots, from, whole, Provenance::kFileHashed);
            });
          },
          [this, file, key, run, range, prefetch, parts, sent_at, slots, early](Status status, Provenance provenance) {
            cdn_latency_.observe(env_.now() - sent_at, parts);
            requests_in_flight_ -= parts;
            // Every progress call came before this one: `early` is final.
            const uint64_t served = early->load();
            post([this, file, key, run, range, prefetch, slots, status, provenance, served] {
              if (prefetch) prefetch_bytes_ -= range.length;
              on_fetched_into(file, key, run, status, *slots, provenance, served);
            });
            fetches_.done();
          },
          deadline);
      continue;
    }
    if (slots && !file.source) {
      fetcher_.fetch_into_async(
          file.locate, file.size, range, slots,
          [this, file, key, first, count, range, prefetch, parts, sent_at, slots](Status status) {
            // On the network thread: as below.
            cdn_latency_.observe(env_.now() - sent_at, parts);
            requests_in_flight_ -= parts;
            post([this, file, key, first, count, range, prefetch, slots, status] {
              if (prefetch) prefetch_bytes_ -= range.length;
              on_fetched_into(file, key, BlockRun{first, count}, status, *slots);
            });
            fetches_.done();
          },
          deadline, parts);
      continue;
    }
    fetch_file_range(
        fetcher_, file.source, file.locate, file.size, range,
        [this, file, key, first, count, range, prefetch, parts, sent_at](Result<std::string> body,
                                                                          Provenance provenance) {
          // On the network thread: the splitting and disk writes go to a worker, queued before
          // the fetch counts as done, so shutdown's drain sees it.
          cdn_latency_.observe(env_.now() - sent_at, parts);
          requests_in_flight_ -= parts;
          auto shared = std::make_shared<Result<std::string>>(std::move(body));
          post([this, file, key, first, count, range, prefetch, shared, provenance] {
            if (prefetch) prefetch_bytes_ -= range.length;
            on_fetched(file, key, first, count, *shared, provenance);
          });
          fetches_.done();
        },
        deadline, parts);
  }
}

void BlockReader::on_fetched(const RemoteFile& file, const FileKey& key, uint64_t first, uint64_t count,
                             Result<std::string>& body, Provenance provenance) {
  if (!body.ok()) {
    counters_.add(counters_.fetch_errors, 1);
    return fail(key, BlockRun{first, count}.indices(), body.status().with_context("fetching " + file.path));
  }
  auto all = std::make_shared<const std::string>(std::move(body).value());
  counters_.add(counters_.bytes_fetched, all->size());
  counters_.add(counters_.blocks_fetched, count);
  auto blocks = split_response(all, BlockRun{first, count}, file.size, options_.block_size);
  for (auto& [index, bytes] : blocks) bytes.source_checked = provenance == Provenance::kFileHashed;
  complete_batch(file, key, blocks, /*from_hub=*/true);
}

void BlockReader::on_fetched_into(const RemoteFile& file, const FileKey& key, BlockRun run, const Status& status,
                                  const BlockSlots& slots, Provenance provenance, uint64_t served) {
  // The run's first `served` blocks went out early (the source's progress): theirs, whatever the status.
  const BlockRun rest{run.first + served, run.count - std::min(served, run.count)};
  if (!status.ok()) {
    counters_.add(counters_.fetch_errors, 1);
    return fail(key, rest.indices(), status.with_context("fetching " + file.path));
  }
  if (rest.count > 0) serve_slots(file, key, slots, served, run.count, provenance);
}

void BlockReader::serve_slots(const RemoteFile& file, const FileKey& key, const BlockSlots& slots, uint64_t from,
                              uint64_t to, Provenance provenance) {
  auto blocks = slots.blocks(from, to);
  uint64_t bytes = 0;
  for (auto& [index, b] : blocks) {
    b.source_checked = provenance == Provenance::kFileHashed;
    bytes += b.size();
  }
  counters_.add(counters_.bytes_fetched, bytes);
  counters_.add(counters_.blocks_fetched, to - from);
  complete_batch(file, key, blocks, /*from_hub=*/true);
}

std::vector<uint64_t> BlockReader::claim_ahead(const RemoteFile& file, const FileKey& key,
                                               const std::vector<uint64_t>& wanted, uint64_t* bytes,
                                               uint64_t* stopped_at, bool mark) {
  std::vector<uint64_t> claimed;
  *bytes = 0;
  for (uint64_t b : wanted) {
    // Bounded memory: past the global budget, read-ahead (or a hint) stops; a later read tries
    // again, a hint's remaining blocks are fetched on demand.
    if (prefetch_bytes_.load() + *bytes + block_length(file, b) > options_.max_prefetch_bytes) break;
    if (claim(file, key, b).leader) {
      if (mark) marks_.claim(flight_key(key.memory_id, b));
      claimed.push_back(b);
      *bytes += block_length(file, b);
    }
    *stopped_at = b + 1;
  }
  return claimed;
}

Result<size_t> BlockReader::read(const RemoteFile& file, uint64_t offset, size_t length, char* out, ReadState* state) {
  auto slices = read_slices(file, offset, length, state);
  if (!slices.ok()) return slices.status();
  size_t copied = 0;
  for (const auto& slice : *slices) {
    std::memcpy(out + copied, slice.data(), slice.size());
    copied += slice.size();
  }
  return copied;
}

Result<std::vector<BlockBytes>> BlockReader::read_slices(const RemoteFile& file, uint64_t offset, size_t length,
                                                         ReadState* state) {
  std::vector<BlockBytes> slices;
  const MonotonicClock::time_point arrived = env_.now();
  tiers_.note_activity();
  // A handle that may already have passed on bytes of a file whose hash then failed gets errors
  // from then on (reopening reads fresh bytes): a whole read never ends "successfully" with
  // corrupt bytes in it.
  Result<uint64_t> epoch = read_epoch(file, state);
  if (!epoch.ok()) return epoch.status();
  if (offset >= file.size || length == 0) return slices;
  // One deadline for the whole read: the shared tier's lookup, the Hub's requests and their
  // retries, and the wait for blocks other reads are loading.
  const Deadline deadline = Deadline::after(options_.read_timeout, env_.clock());
  const uint64_t end = std::min<uint64_t>(file.size, offset + length);
  const uint64_t first = offset / options_.block_size, last = (end - 1) / options_.block_size;
  const FileKey key = key_of(file, *epoch);
  if (Status st = timed_out_.check(file.path, key.memory_id, first, last, tiers_.memory()); !st.ok()) return st;
  // The marks first: a block read-ahead has in flight is joined below, and its mark says so.
  const bool marked = take_marks(key, first, last);
  std::vector<Flights::FlightPtr> flights;
  std::vector<uint64_t> claimed;
  bool joined = false;  // a block of the read is on its way (not in memory, not claimed here)
  for (uint64_t b = first; b <= last; ++b) {
    Flights::Ticket t = claim(file, key, b);
    if (t.leader) claimed.push_back(b);
    joined = joined || (!t.leader && !t.stored);
    flights.push_back(std::move(t.flight));
  }
  // The blocks this read needs go out first, spread over the connections (each brings its own
  // bandwidth; a lone block goes in parts); where they came from tells the policy whether this
  // read may fetch ahead (ReadFacts).
  ReadFacts facts;
  facts.marked = marked;
  facts.waited = marked && joined;
  if (!claimed.empty()) {
    const Loaded loaded =
        load_claimed(file, key, claimed, Origin::kRead, read_ahead_policy_.request_blocks(claimed.size()), deadline);
    facts.missed = loaded != Loaded::kDisk;
    facts.from_disk = loaded == Loaded::kDisk;
  }
  if (state) {
    // A hinting reader gets no speculative read-ahead: it said what it needs (its contiguous
    // chunks look sequential, and guessing past the last one fetched up to 50% more).
    facts.hinted = hinted_.marked_ago(key.cache_id).has_value();
    std::lock_guard<std::mutex> state_lock(state->mu);
    facts.paused = state->last_return && arrived - *state->last_return >= options_.reader_pause;
    auto ahead = read_ahead_policy_.on_read(state->ahead, offset, end, file.size, facts);
    // What the policy saw, for checking its rules against a real reader's pattern (the pause
    // rule fires only if a program's reads reach us as bursts: docs/benchmarks.md, issue 42).
    if (log_enabled(LogLevel::kDebug) && (!ahead || !ahead->fetch))
      log_debug("read-ahead " + file.path + ": at block " + std::to_string(last) + describe(facts, state->ahead) +
                (ahead ? ", from disk " + std::to_string(ahead->blocks.first) + "-" + std::to_string(ahead->blocks.last)
                       : ", nothing"));
    if (ahead) {
      if (!ahead->fetch) {
        queue_from_disk(file, key, ahead->blocks, ahead->blocks_per_request);
        state->ahead.prefetched_to = ahead->blocks.last + 1;
      } else {
        const std::vector<uint64_t> wanted = BlockRun{ahead->blocks.first, ahead->blocks.count()}.indices();
        uint64_t bytes = 0;
        std::vector<uint64_t> mine =
            claim_ahead(file, key, wanted, &bytes, &state->ahead.prefetched_to, /*mark=*/true);
        if (log_enabled(LogLevel::kDebug))
          log_debug("read-ahead " + file.path + ": at block " + std::to_string(last) + describe(facts, state->ahead) +
                    ", claimed " +
                    std::to_string(mine.size()) + " of " + std::to_string(ahead->blocks.first) + "-" +
                    std::to_string(ahead->blocks.last) + ", " + std::to_string(prefetch_bytes_.load() >> 20) +
                    " MiB ahead");
        if (!mine.empty()) queue_load(file, key, std::move(mine), ahead->blocks_per_request, Origin::kReadAhead);
      }
    }
  }

  const MonotonicClock::time_point started = env_.now();
  Deadline wait_deadline = deadline;
  for (uint64_t b = first; b <= last; ++b) {
    Result<BlockBytes> got = wait_for(file, key, b, flights[b - first], started, &wait_deadline);
    if (!got.ok()) return got.status();
    const BlockBytes& data = *got;
    const uint64_t block_start = b * options_.block_size;
    const uint64_t from = std::max(offset, block_start) - block_start;
    const uint64_t to = std::min(end, block_start + data.size()) - block_start;
    if (block_start + data.size() < std::min(end, block_start + options_.block_size)) {
      return Corrupt("reading " + file.path + ": block " + std::to_string(b) + " is short");
    }
    slices.push_back(BlockBytes{data.buffer, data.offset + from, to - from});
  }
  // The read that returns the file's end waits for the whole-file hash when every block is in
  // memory, so a front-to-back read of a corrupted file never ends successfully.
  if (last == (file.size - 1) / options_.block_size) {
    if (Status st = verifier_.read_reached_end(verified(file, key)); !st.ok()) return st;
  }
  if (Result<uint64_t> now = read_epoch(file, state); !now.ok()) return now.status();
  if (state) {
    std::lock_guard<std::mutex> state_lock(state->mu);
    state->last_return = env_.now();
  }
  return slices;
}

Result<BlockBytes> BlockReader::wait_for(const RemoteFile& file, const FileKey& key, uint64_t index,
                                         const Flights::FlightPtr& flight, MonotonicClock::time_point started,
                                         Deadline* deadline) {
  std::optional<Result<BlockBytes>> got;
  while (!(got = in_flight_.wait(flight, *deadline))) {
    // Past the read's deadline, a read that may have been held up by a quota wait (one running,
    // or one that ended after the read started) waits on (ReaderOptions::quota_wait_end).
    auto extended = options_.quota_extended(started, deadline->at());
    if (!extended) break;
    *deadline = deadline->later_by(std::chrono::ceil<std::chrono::milliseconds>(*extended - deadline->at()));
  }
  if (!got || (!got->ok() && got->status().code() == Code::kTimeout))
    timed_out_.mark(key.memory_id, index);
  if (got) return std::move(*got);
  return Timeout("reading " + file.path + ": block " + std::to_string(index) + " not served within " +
                 std::to_string(options_.read_timeout.count() / 1000) +
                 " s (--read-timeout); the Hub or its CDN is not answering");
}

Result<uint64_t> BlockReader::prefetch(const RemoteFile& file, const std::vector<ByteRange>& ranges,
                                       HintRequests requests) {
  auto wanted = blocks_of_ranges(ranges, file.size, options_.block_size, file.path);
  if (!wanted.ok()) return wanted.status();  // a malformed hint changes nothing
  uint64_t claimed_bytes = 0, stopped_at = 0;
  const FileKey key = key_of(file, content_epoch(file));
  // The same memory bound as read-ahead: hints cannot make the daemon buffer a whole dataset.
  std::vector<uint64_t> claimed = claim_ahead(file, key, *wanted, &claimed_bytes, &stopped_at, /*mark=*/false);
  counters_.add(counters_.hints, 1);
  counters_.add(counters_.hinted_bytes, claimed_bytes);
  hinted_.mark(key.cache_id);
  if (log_enabled(LogLevel::kDebug))
    log_debug("hint " + file.path + ": " + std::to_string(ranges.size()) + " ranges, " + std::to_string(wanted->size()) +
              " blocks, " + std::to_string(claimed.size()) + " to load");
  if (claimed.empty()) return claimed_bytes;
  // A whole file, hashed once its last block is in: graded requests, ending in file order
  // (ReaderOptions::whole_file_hint_grade). A file with a source of its own (Xet) is checked by
  // the source, chunk by chunk, with no serial pass to feed in order: its requests are equal, so
  // the largest, which bounds the read, is as small as it can be.
  if (options_.verify_whole_files && wanted->size() == blocks_in(file.size, options_.block_size)) {
    const double grade = file.source ? 1.0 : options_.whole_file_hint_grade;
    const auto sizes = graded_groups(claimed.size(), options_.parallel_requests, grade,
                                     options_.max_blocks_per_hinted_request);
    if (!sizes.empty()) {
      hint_blocks_queued_ += claimed.size();
      queue_load_groups(file, key, claimed, sizes, Origin::kHint);
      return claimed_bytes;
    }
  }
  // Spread over every request slot (at most hint_spread_requests), in one wave: 48 blocks hinted
  // at 16 requests in flight go out as 16 requests of 3 blocks, not 6 of 8, and 160 blocks as 16
  // of 10, not 20 of 8 (a
  // second wave of 4 would cost another round trip plus 8 MiB at one connection's rate). The
  // slots are shared with the hinted and read-ahead blocks still waiting to go out or to arrive:
  // behind them, this hint's runs go whole rather than one block per request (a training loop's
  // planner hints 16 files of a few frames each at once: 1 MiB requests, a round trip each, ran
  // at a third of the connections' rate; docs/benchmarks.md, the training loop).
  // Whole runs (HintRequests::kWholeRuns): each run in one request, however idle the connections.
  const uint64_t waiting = hint_blocks_queued_.load() + prefetch_bytes_.load() / options_.block_size;
  hint_blocks_queued_ += claimed.size();
  const uint32_t per_request =
      requests == HintRequests::kWholeRuns
          ? std::max<uint32_t>(1, options_.max_blocks_per_hinted_request)
          : read_ahead_policy_.request_blocks(claimed.size() + waiting, options_.max_blocks_per_hinted_request,
                                              std::max<uint32_t>(1, options_.hint_spread_requests));
  queue_load(file, key, claimed, per_request, Origin::kHint);
  return claimed_bytes;
}

void BlockReader::queue_load_groups(const RemoteFile& file, const FileKey& key, const std::vector<uint64_t>& claimed,
                                    const std::vector<uint64_t>& sizes, Origin origin) {
  size_t at = 0;
  for (uint64_t n : sizes) {
    queue_load(file, key, std::vector<uint64_t>(claimed.begin() + static_cast<long>(at),
                                                claimed.begin() + static_cast<long>(at + n)),
               n, origin);
    at += n;
  }
}

// Loads claimed blocks on the workers (disk cache first, then coalesced fetches), a request's
// worth per task so the disk checks of a large hint run on every worker, or cancels them when
// the reader is shutting down.
void BlockReader::queue_load(const RemoteFile& file, const FileKey& key, std::vector<uint64_t> claimed, size_t group,
                             Origin origin) {
  group = std::max<size_t>(group, 1);
  for (size_t i = 0; i < claimed.size(); i += group) {
    std::vector<uint64_t> part(claimed.begin() + static_cast<long>(i),
                               claimed.begin() + static_cast<long>(std::min(claimed.size(), i + group)));
    post([this, file, key, part = std::move(part), group, origin] {
      if (origin == Origin::kHint) hint_blocks_queued_ -= part.size();
      if (stopping_.load()) return fail(key, part, Unavailable("reading " + file.path + ": read-ahead cancelled (unmounting)"));
      // Only blocks served here (disk, shared tier) count: a fetch from the Hub has only started.
      // A read-ahead task has a deadline of its own, as a read does, from when it starts.
      if (load_claimed(file, key, part, origin, group, Deadline::after(options_.read_timeout, env_.clock())) != Loaded::kFetching)
        verifier_.loaded_from_tiers(verified(file, key), part.back());
    });
  }
}

void BlockReader::queue_from_disk(const RemoteFile& file, const FileKey& key, BlockRange blocks, size_t group) {
  group = std::max<size_t>(group, 1);
  for (uint64_t from = blocks.first; from <= blocks.last; from += group) {
    const uint64_t to = std::min<uint64_t>(blocks.last, from + group - 1);
    post([this, file, key, from, to] { load_from_disk(file, key, from, to); });
  }
}

void BlockReader::load_from_disk(const RemoteFile& file, const FileKey& key, uint64_t from, uint64_t to) {
  if (stopping_.load()) return;
  std::optional<uint64_t> served_to;
  for (uint64_t b = from; b <= to; ++b) {
    const BlockId id{key.cache_id, b, block_length(file, b)};
    // Read first and claimed after, so a block the disk lacks has no flight to end: a read
    // that needs it then loads it itself. Not read again if in memory or on its way.
    const std::string flight = flight_key(key.memory_id, b);
    if (in_flight_.in_progress(flight) || tiers_.memory().peek(BlockId{key.memory_id, b, id.length})) continue;
    std::optional<BlockBytes> hit = tiers_.disk_copy(id, key.epoch);
    if (!hit) continue;
    Flights::Ticket t = claim(file, key, b);
    if (!t.leader) continue;  // someone else served it meanwhile
    complete_batch(file, key, {{b, std::move(*hit)}}, /*from_hub=*/false);
    served_to = b;
  }
  if (served_to) verifier_.loaded_from_tiers(verified(file, key), *served_to);
}

bool BlockReader::wait_written(const std::string& content_id, const std::vector<uint64_t>& indices,
                               const Deadline& deadline) {
  return tiers_.wait_written(cache_id(content_id), indices, deadline);
}

std::vector<uint64_t> BlockReader::not_in_memory(const std::string& content_id, uint64_t size, uint64_t first,
                                                 uint64_t last) const {
  std::vector<uint64_t> missing;
  if (size == 0) return missing;
  last = std::min<uint64_t>(last, (size - 1) / options_.block_size);
  if (first > last) return missing;
  const std::string id = cache_id(content_id);
  const FileKey key(id, tiers_.epochs().current(id));
  for (uint64_t b = first; b <= last; ++b) {
    const uint64_t length = std::min<uint64_t>(options_.block_size, size - b * options_.block_size);
    if (!tiers_.memory().peek(BlockId{key.memory_id, b, length})) missing.push_back(b);
  }
  return missing;
}

void BlockReader::load_first_blocks_from_disk(const std::vector<RemoteFile>& files) {
  for (const RemoteFile& f : files)
    if (f.size != 0) load_from_disk(f, key_of(f, content_epoch(f)), 0, 0);
}

bool BlockReader::take_marks(const FileKey& key, uint64_t first, uint64_t last) {
  if (marks_.size() == 0) return false;  // the common warm case: no key built
  bool marked = false;
  for (uint64_t b = first; b <= last; ++b) {
    uint64_t used = 0;
    if (marks_.take(flight_key(key.memory_id, b), &used)) marked = true;
    counters_.add(counters_.read_ahead_used_bytes, used);
  }
  return marked;
}

uint64_t BlockReader::content_epoch(const RemoteFile& file) const { return tiers_.epochs().current(cache_id(file.content_id)); }

Result<uint64_t> BlockReader::read_epoch(const RemoteFile& file, ReadState* state) const {
  const uint64_t now = content_epoch(file);
  if (!state) return now;
  std::lock_guard<std::mutex> lock(state->mu);
  if (state->same_epoch(now)) return now;
  return Corrupt("reading " + file.path + ": its content failed verification after this file was opened "
                 "(bytes corrupted in transit); reopen it to read fresh bytes");
}

ReaderStats BlockReader::stats() const {
  ReaderStats s;
  counters_.copy_to(s);
  s.memory_bytes = tiers_.memory().pinned_bytes();
  s.disk_hits = tiers_.disk_hits();
  s.cdn_latency = cdn_latency_.snapshot();
  s.disk_latency = tiers_.disk_latency();
  s.shared_latency = tiers_.shared_latency();
  s.deferred_writes = tiers_.deferred_writes();
  s.blocks_in_flight = in_flight_.size();
  s.files_verified = verifier_.files_verified();
  s.files_verified_by_source = verifier_.files_verified_by_source();
  s.verify_failures = verifier_.failures();
  return s;
}

}  // namespace hubfs
