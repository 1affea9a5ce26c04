#include "reader/tier_stack.h"

#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <iterator>
#include <string>

namespace hubfs {

// The deferred writer's nice value: well below the readers' threads, still above idle work.
constexpr int kDeferredWriteNice = 10;

TierStack::TierStack(Env& env, std::unique_ptr<BlockTier> disk, std::unique_ptr<BlockTier> shared,
                     TierStackOptions options, PostFn disk_work, PostFn writer)
    : memory_(options.memory_bytes),
      disk_(std::move(disk)),
      shared_(std::move(shared)),
      disk_work_(std::move(disk_work)),
      latency_clock_(env.clock()),
      writer_(writer ? nullptr : env.new_executor(1)),
      deferred_(env, options.max_deferred_write_bytes, options.deferred_write_quiet,
                writer ? std::move(writer)
                       : PostFn([this](std::function<void()> task) { return writer_->post(std::move(task)); })) {
  // The writer's one thread runs at a lower CPU priority for good (a thread's nice value is its
  // own on Linux): between the daemon's own threads, readers come first.
  if (writer_)
    writer_->post([] { (void)setpriority(PRIO_PROCESS, static_cast<id_t>(syscall(SYS_gettid)), kDeferredWriteNice); });
}

TierStack::~TierStack() { shutdown(); }

void TierStack::shutdown() {
  deferred_.shutdown();       // every waiting write is due now
  if (writer_) writer_->drain();  // the pump runs them; then the thread stops
  (void)deferred_.run_due();  // with a given writer (tests): here
}

std::vector<uint64_t> TierStack::fill_from_lower(const std::vector<BlockId>& ids, uint64_t epoch,
                                                  const Deadline& deadline, const Serve& serve, bool* from_shared) {
  std::vector<BlockId> misses;
  for (size_t i = 0; i < ids.size(); ++i) {
    const BlockId& id = ids[i];
    std::optional<BlockBytes> hit;
    if (disk_) {
      // Each lookup inside its own access, and served outside it: serving may hash the file, and
      // a failing hash's cleanup waits for the accesses under way.
      FileEpochs::Access access(epochs_, id.cache_id, epoch);
      if (!access.granted()) {  // being cleaned, or moved on: nothing below memory is trusted
        std::vector<uint64_t> rest;
        for (size_t j = 0; j < misses.size(); ++j) rest.push_back(misses[j].index);
        for (size_t j = i; j < ids.size(); ++j) rest.push_back(ids[j].index);
        return rest;
      }
      hit = find_writing(id, epoch);
      if (!hit) {
        const auto asked = latency_clock_.now();
        hit = disk_->get(id);
        if (hit) disk_latency_.observe(latency_clock_.now() - asked);
      }
    }
    if (hit) {
      disk_hits_.fetch_add(1, std::memory_order_relaxed);
      serve({{id.index, std::move(*hit)}});
      continue;
    }
    misses.push_back(id);
  }
  std::vector<uint64_t> rest;
  if (misses.empty()) return rest;
  std::vector<std::optional<BlockBytes>> found;
  if (shared_) {
    note_activity();
    FileEpochs::Access access(epochs_, misses.front().cache_id, epoch);
    if (access.granted()) {
      const auto asked = latency_clock_.now();
      found = shared_->get_many(misses, deadline);
      shared_latency_.observe(latency_clock_.now() - asked, misses.size());
    }
  }
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
  if (from_shared) *from_shared = true;
  // Into memory and the hash now (this may be a reader's thread), to the local disk later.
  serve(arrivals);
  if (disk_)
    for (size_t i = 0; i < arrivals.size(); ++i) promote_to_disk(arrived[i], arrivals[i].second, epoch);
  return rest;
}

std::optional<BlockBytes> TierStack::disk_copy(const BlockId& id, uint64_t epoch) {
  if (!disk_) return std::nullopt;
  FileEpochs::Access access(epochs_, id.cache_id, epoch);
  if (!access.granted()) return std::nullopt;
  if (auto waiting = find_writing(id, epoch)) {
    disk_hits_.fetch_add(1, std::memory_order_relaxed);
    return waiting;
  }
  const auto asked = latency_clock_.now();
  auto hit = disk_->get(id);
  if (hit) {
    disk_latency_.observe(latency_clock_.now() - asked);
    disk_hits_.fetch_add(1, std::memory_order_relaxed);
  }
  return hit;
}

std::string TierStack::writing_key(std::string_view cache_id, uint64_t index) {
  std::string k(cache_id);
  k += '#';
  k += std::to_string(index);
  return k;
}

void TierStack::add_writing(std::string_view cache_id, uint64_t index, const BlockBytes& bytes, uint64_t epoch) {
  std::lock_guard<std::mutex> lock(writing_mu_);
  writing_[writing_key(cache_id, index)] = Writing{bytes, epoch};
}

std::optional<BlockBytes> TierStack::find_writing(const BlockId& id, uint64_t epoch) const {
  std::lock_guard<std::mutex> lock(writing_mu_);
  if (writing_.empty()) return std::nullopt;  // the common case: no key built
  auto it = writing_.find(writing_key(id.cache_id, id.index));
  if (it == writing_.end() || it->second.epoch != epoch || it->second.bytes.size() != id.length) return std::nullopt;
  hits_before_write_.fetch_add(1, std::memory_order_relaxed);
  return it->second.bytes;
}

void TierStack::done_writing(std::string_view cache_id, uint64_t index, const BlockBytes& bytes) {
  std::lock_guard<std::mutex> lock(writing_mu_);
  auto it = writing_.find(writing_key(cache_id, index));
  // Only this write's entry: a later fetch of the block (a new epoch) may have replaced it.
  if (it != writing_.end() && it->second.bytes.buffer.get() == bytes.buffer.get() &&
      it->second.bytes.offset == bytes.offset) {
    writing_.erase(it);
    if (write_waits_.empty()) return;
    auto [from, to] = write_waits_.equal_range(writing_key(cache_id, index));
    for (auto w = from; w != to; ++w)
      if (--w->second->left == 0) w->second->cv.notify_all();
    write_waits_.erase(from, to);
  }
}

bool TierStack::wait_written(std::string_view cache_id, const std::vector<uint64_t>& indices,
                             const Deadline& deadline) {
  WriteWait wait;
  std::vector<std::string> keys;  // the blocks waited on (each entry of write_waits_ added)
  std::unique_lock<std::mutex> lock(writing_mu_);
  for (uint64_t index : indices) {
    std::string key = writing_key(cache_id, index);
    if (!writing_.count(key)) continue;
    write_waits_.emplace(key, &wait);
    keys.push_back(std::move(key));
    ++wait.left;
  }
  if (wait.left == 0) return true;
  if (deadline.wait(wait.cv, lock, [&] { return wait.left == 0; })) return true;  // done_writing took every entry
  for (const std::string& key : keys) {  // past the deadline: the entries still here go
    auto [from, to] = write_waits_.equal_range(key);
    for (auto w = from; w != to;) w = w->second == &wait ? write_waits_.erase(w) : std::next(w);
  }
  return false;
}

size_t TierStack::writes_waiting() const {
  std::lock_guard<std::mutex> lock(writing_mu_);
  return writing_.size();
}

void TierStack::expect_writes(std::string_view cache_id, uint64_t epoch,
                              const std::vector<std::pair<uint64_t, BlockBytes>>& blocks) {
  if (!disk_) return;
  for (const auto& [index, bytes] : blocks) add_writing(cache_id, index, bytes, epoch);
}

void TierStack::store_fetched(std::string_view cache_id, uint64_t epoch,
                               const std::vector<std::pair<uint64_t, BlockBytes>>& blocks,
                               const std::vector<bool>& served) {
  // Offered to the shared tier first, before the disk writes: the sooner a block is queued for
  // the tier, the sooner other machines find it (and a read that ends now does not leave a
  // response's offers waiting behind eight block files). Queued inside the access: the tier runs
  // its deletes after the stores queued before them, so a cleanup's delete follows these.
  if (shared_) {
    FileEpochs::Access access(epochs_, cache_id, epoch);
    if (access.granted()) {
      for (size_t i = 0; i < blocks.size(); ++i) {
        const auto& [index, bytes] = blocks[i];
        if (served[i]) shared_->put(BlockId{cache_id, index, bytes.size()}, bytes);
      }
    }
  }
  if (disk_) {
    for (size_t i = 0; i < blocks.size(); ++i) {
      if (served[i]) write_back(BlockId{cache_id, blocks[i].first, blocks[i].second.size()}, blocks[i].second, epoch);
      done_writing(cache_id, blocks[i].first, blocks[i].second);  // on disk now, or never
    }
  }
}

void TierStack::write_back(const BlockId& id, const BlockBytes& bytes, uint64_t epoch) {
  // Not once the file failed its hash since the block's read began: it may be one of the bad
  // bytes. A cleanup that begins during the write waits for it, then removes it.
  FileEpochs::Access access(epochs_, id.cache_id, epoch);
  if (access.granted()) disk_->put(id, bytes);
}

void TierStack::promote_to_disk(const BlockId& id, const BlockBytes& bytes, uint64_t epoch) {
  add_writing(id.cache_id, id.index, bytes, epoch);
  auto write = [this, cache_id = std::string(id.cache_id), index = id.index, length = id.length, bytes, epoch] {
    write_back(BlockId{cache_id, index, length}, bytes, epoch);
    done_writing(cache_id, index, bytes);
  };
  // Memory bounded: a waiting write pins its value (most of them are in the memory tier too).
  // Past the bound, or once the writer stopped, the write goes to the disk workers at once.
  if (deferred_.add(bytes.buffer->size(), write)) return;
  if (!disk_work_ || !disk_work_(write)) write();
}

void TierStack::drop_failed_file(std::string_view memory_id, std::string_view cache_id, uint64_t epoch,
                                  uint64_t size, uint32_t block_size) {
  // The epoch moves first: from here on reads use a fresh memory namespace and the lower tiers
  // refuse this file until the removals below are done.
  const bool clean_below = epochs_.begin_cleanup(cache_id, epoch);
  for (uint64_t at = 0, b = 0; at < size; at += block_size, ++b) {
    const uint64_t length = std::min<uint64_t>(block_size, size - at);
    memory_.remove(BlockId{memory_id, b, length});  // unreachable already; frees the memory
    if (!clean_below) continue;
    if (disk_) disk_->remove(BlockId{cache_id, b, length});
    if (shared_) shared_->remove(BlockId{cache_id, b, length});
  }
  if (clean_below) epochs_.end_cleanup(cache_id);
}

}  // namespace hubfs
