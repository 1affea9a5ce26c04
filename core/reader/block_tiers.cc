#include "reader/block_tiers.h"

#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <string>

namespace hubfs {

// The deferred writer's nice value: well below the readers' threads, still above idle work.
constexpr int kDeferredWriteNice = 10;

BlockTiers::BlockTiers(std::unique_ptr<BlockTier> disk, std::unique_ptr<BlockTier> shared, BlockTiersOptions options,
                       Executor disk_work, EpochOf epoch_of, Executor writer)
    : memory_(options.memory_bytes),
      disk_(std::move(disk)),
      shared_(std::move(shared)),
      disk_work_(std::move(disk_work)),
      epoch_of_(std::move(epoch_of)),
      writer_(writer ? nullptr : std::make_unique<TaskQueue>(1)),
      deferred_(options.max_deferred_write_bytes, options.deferred_write_quiet,
                writer ? std::move(writer)
                       : Executor([this](std::function<void()> task) { return writer_->post(std::move(task)); }),
                options.clock) {
  // The writer's one thread runs at a lower CPU priority for good (a thread's nice value is its
  // own on Linux): between the daemon's own threads, readers come first.
  if (writer_)
    writer_->post([] { (void)setpriority(PRIO_PROCESS, static_cast<id_t>(syscall(SYS_gettid)), kDeferredWriteNice); });
}

BlockTiers::~BlockTiers() { shutdown(); }

void BlockTiers::shutdown() {
  deferred_.shutdown();       // every waiting write is due now
  if (writer_) writer_->drain();  // the pump runs them; then the thread stops
  (void)deferred_.run_due();  // with a given writer (tests): here
}

std::vector<uint64_t> BlockTiers::fill_from_lower(const std::vector<BlockId>& ids, const Deadline& deadline,
                                                  const Serve& serve) {
  std::vector<BlockId> misses;
  for (const BlockId& id : ids) {
    if (disk_) {
      if (std::optional<BlockBytes> hit = disk_->get(id)) {
        disk_hits_.fetch_add(1, std::memory_order_relaxed);
        serve({{id.index, std::move(*hit)}});
        continue;
      }
    }
    misses.push_back(id);
  }
  std::vector<uint64_t> rest;
  if (misses.empty()) return rest;
  if (!shared_) {
    for (const BlockId& id : misses) rest.push_back(id.index);
    return rest;
  }
  note_activity();
  auto found = shared_->get_many(misses, deadline);
  std::vector<std::pair<uint64_t, BlockBytes>> arrivals;
  std::vector<BlockId> arrived;
  for (size_t i = 0; i < misses.size(); ++i) {
    if (i < found.size() && found[i]) {
      arrivals.emplace_back(misses[i].index, std::move(*found[i]));
      arrived.push_back(misses[i]);
    } else {
      rest.push_back(misses[i].index);
    }
  }
  if (arrivals.empty()) return rest;
  // Into memory and the hash now (this may be a reader's thread), to the local disk later. The
  // epoch is read before the blocks are served: a hash failure after that may have been theirs.
  const uint64_t epoch = epoch_of_(misses.front().cache_id);
  serve(arrivals);
  if (disk_)
    for (size_t i = 0; i < arrivals.size(); ++i) promote_to_disk(arrived[i], arrivals[i].second, epoch);
  return rest;
}

void BlockTiers::store_fetched(std::string_view cache_id, const std::vector<std::pair<uint64_t, BlockBytes>>& blocks,
                               const std::vector<uint64_t>& epochs, const std::vector<bool>& served) {
  // Offered to the shared tier first, before the disk writes: the sooner a block is queued for
  // the tier, the sooner other machines find it (and a read that ends now does not leave a
  // response's offers waiting behind eight block files). Not once the file failed its hash since
  // the block arrived: it may be one of the bad bytes (and the failure's removal may already be
  // queued ahead of this store).
  if (shared_) {
    for (size_t i = 0; i < blocks.size(); ++i) {
      const auto& [index, bytes] = blocks[i];
      if (served[i] && epoch_of_(cache_id) == epochs[i]) shared_->put(BlockId{cache_id, index, bytes.size()}, bytes);
    }
  }
  if (disk_) {
    for (size_t i = 0; i < blocks.size(); ++i)
      if (served[i]) write_back(BlockId{cache_id, blocks[i].first, blocks[i].second.size()}, blocks[i].second, epochs[i]);
  }
}

void BlockTiers::write_back(const BlockId& id, const BlockBytes& bytes, uint64_t epoch) {
  // A hash failure of the file since this block arrived means it may be one of the bad bytes, and
  // the failure's cleanup may have run before this write landed: take it back out. (A failure
  // moves the epoch before it removes the file's blocks, so one of the two always removes it.)
  disk_->put(id, bytes);
  if (epoch_of_(id.cache_id) != epoch) disk_->remove(id);
}

void BlockTiers::promote_to_disk(const BlockId& id, const BlockBytes& bytes, uint64_t epoch) {
  auto write = [this, cache_id = std::string(id.cache_id), index = id.index, length = id.length, bytes, epoch] {
    if (epoch_of_(cache_id) != epoch) return;  // the file failed its hash: maybe a bad block
    write_back(BlockId{cache_id, index, length}, bytes, epoch);
  };
  // Memory bounded: a waiting write pins its value (most of them are in the memory tier too).
  // Past the bound, or once the writer stopped, the write goes to the disk workers at once.
  if (deferred_.add(bytes.buffer->size(), write)) return;
  if (!disk_work_ || !disk_work_(write)) write();
}

void BlockTiers::forget(const std::vector<BlockId>& ids) {
  for (const BlockId& id : ids) memory_.remove(id);
  if (disk_)
    for (const BlockId& id : ids) disk_->remove(id);
  if (shared_)
    for (const BlockId& id : ids) shared_->remove(id);
}

void BlockTiers::forget_file(std::string_view cache_id, uint64_t size, uint32_t block_size) {
  std::vector<BlockId> ids;
  for (uint64_t at = 0, b = 0; at < size; at += block_size, ++b)
    ids.push_back(BlockId{cache_id, b, std::min<uint64_t>(block_size, size - at)});
  forget(ids);
}

}  // namespace hubfs
