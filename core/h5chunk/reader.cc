// read_chunks (reader.h): plans a chunked read, locates its chunks on the caller's thread,
// announces them to the file's source or mount, and runs them through a ChunkQueue.
#include "h5chunk/reader.h"

#include <fcntl.h>

#include <algorithm>
#include <optional>

#include "common/big_buffer.h"
#include "common/task_queue.h"
#include "h5chunk/checked.h"
#include "h5chunk/chunk_plan.h"
#include "h5chunk/chunk_queue.h"
#include "h5chunk/range_hints.h"

namespace h5chunk {

using hubfs::Corrupt;

namespace {

// Whether every chunk the read touches was verified before: then a verify_only read has nothing
// to do, and skips the worker, fstat and queue setup, which would cost a one-element read more
// than H5Dread itself (docs/benchmarks.md, h5chunk).
bool all_verified(const FastRead& req, const std::vector<AxisPlan>& axes) {
  const size_t rank = axes.size();
  if (std::any_of(axes.begin(), axes.end(), [](const AxisPlan& a) { return a.pieces.empty(); })) return true;
  std::vector<size_t> at(rank, 0);
  std::vector<uint64_t> grid(rank);
  do {
    for (size_t d = 0; d < rank; ++d) grid[d] = axes[d].pieces[at[d]].grid;
    if (!req.verified->contains(req.manifest->position(grid.data()))) return false;
  } while (next_chunk(axes, at));
  return true;
}

// Declines (kUnsupported) a read whose not-yet-located chunks would take HDF5 longer to find
// than H5Dread takes for the whole selection: the quadratic trap of a first read over a
// dataset of many small chunks. Chunks already remembered cost nothing.
Status check_lookup_cost(const FastRead& req, const std::vector<AxisPlan>& axes) {
  // With the chunk index read from the file, every chunk is located in memory: no walk, no trap.
  if (req.manifest->indexed()) return Status::Ok();
  // Damaged: refused, not handed to H5Dread (it crashes or hangs on some damaged indexes).
  if (Status s = req.manifest->damage(0); !s.ok()) return s.with_context(req.source);
  const size_t rank = axes.size();
  const double budget_us =
      kH5DreadMicros + double(req.selection->num_elements * req.layout->elem_size) / kH5DreadBytesPerMicro;
  double cost_us = 0;
  uint64_t cold = 0;
  std::vector<size_t> at(rank, 0);
  std::vector<uint64_t> grid(rank);
  for (bool more = true; more;) {
    for (size_t d = 0; d < rank; ++d) grid[d] = axes[d].pieces[at[d]].grid;
    if (!req.manifest->known(grid.data())) {
      ++cold;
      cost_us += kLookupMicros +
                 kLookupMicrosPerIndexPosition * double(req.manifest->position(grid.data()));
      if (cost_us > budget_us) {
        return hubfs::Unsupported(
            "locating " + std::to_string(cold) +
            "+ chunks would cost more than H5Dread (HDF5 1.10 takes longer per chunk the "
            "further into its index)");
      }
    }
    more = next_chunk(axes, at);
  }
  return Status::Ok();
}

}  // namespace

Result<ReadStats> read_chunks(const FastRead& req) {
  const ChunkedLayout& layout = *req.layout;
  const size_t rank = layout.shape.size();
  const std::vector<AxisPlan> axes = plan_axes(layout, *req.selection);
  if (req.verify_only && all_verified(req, axes)) return ReadStats{};
  ChunkQueue queue(req, axes);
  const uint64_t queries_before = req.manifest->queries();
  const uint32_t all_filters = layout.pipeline.empty()
                                   ? 0
                                   : static_cast<uint32_t>((1ull << layout.pipeline.size()) - 1);

  // The caller's thread is one of the workers: it locates chunks (the only HDF5 calls), and
  // whenever the queue is full it decodes a chunk itself rather than wait. So `threads` workers
  // means threads - 1 helpers, and a one-chunk read hands nothing to another thread.
  uint64_t tasks = 1;
  for (const AxisPlan& a : axes) tasks *= a.pieces.size();
  if (req.may_decline) {
    if (Status s = check_lookup_cost(req, axes); !s.ok()) return s;
  }
  uint64_t chunk_bytes = layout.elem_size;
  for (uint64_t c : layout.chunk) chunk_bytes *= c;
  // Chunks this small cost less to decode than to hand to another thread: unless the caller
  // chose a thread count, it reads them all itself (docs/constants.md, kMinChunkBytesToShare).
  const unsigned wanted =
      chunk_bytes < kMinChunkBytesToShare && !req.threads_chosen ? 1u : std::max(1u, req.threads);
  const unsigned threads = static_cast<unsigned>(std::clamp<uint64_t>(tasks, 1, wanted));
  auto own = req.workers->acquire();
  if (!own.ok()) return own.status().with_context(req.source);
  // Every chunk must lie inside the file: the index's offsets and sizes are the file's word,
  // and a stored size read from a damaged index would otherwise size a buffer first.
  auto size = h5chunk::file_size(**own);
  if (!size.ok()) {
    req.workers->release(std::move(*own));
    return size.status().with_context(req.source);
  }
  const uint64_t file_size = *size;
  // threads - 1 helpers from the file's pool (none started per read); the caller is the other.
  auto helpers = req.helpers->start(threads - 1, [&queue] { queue.work(); });

  // On a hubfs mount, announce every chunk of a many-chunk read before reading any: the mount
  // fetches them all at once (up to its request limit), so --threads no longer bounds the
  // requests in flight. Locating them first costs nothing extra: the manifest remembers them.
  // Through a source (hf:// in-process) a one-chunk read is hinted too: the hint costs nothing
  // there, and tells its reader the file is read by chunks, not streamed (a training loop's
  // workers, one frame each, otherwise looked like random reads and drew whole-file read-ahead).
  bool hinted = false;
  if (req.hint_chunks && (tasks > 1 || (*own)->source)) {
    std::vector<std::pair<uint64_t, uint64_t>> ranges;
    std::vector<size_t> at(rank, 0);
    std::vector<uint64_t> grid(rank);
    bool more = std::all_of(axes.begin(), axes.end(), [](const AxisPlan& a) { return !a.pieces.empty(); });
    bool probed = false;
    while (more) {
      for (size_t d = 0; d < rank; ++d) grid[d] = axes[d].pieces[at[d]].grid;
      auto loc = req.manifest->locate(grid.data());
      if (!loc.ok()) break;  // the read below reports it
      if (loc->allocated && loc->size > 0) {
        // Only a hubfs mount wants the rest located ahead: anywhere else, locating overlaps
        // with reading below, as it always did. The probe names one byte: a whole first chunk
        // would go out as its own requests and take request slots the full hint then lacks
        // (the mount splits each hint over all its slots).
        if (!probed) {
          probed = true;
          if ((*own)->source) {
            hinted = true;  // a source always takes the hint: no probe, and no descriptor flags
          } else {
            if (!send_range_hints((*own)->fd, file_size, {{loc->offset, 1}})) break;
            hinted = true;
            queue.use_uncached_reads();
          }
        }
        ranges.emplace_back(loc->offset, loc->size);
      }
      more = next_chunk(axes, at);
    }
    if (hinted && !ranges.empty()) hint_ranges(**own, file_size, ranges);
  }
  // Hinted: the chunks are on their way, and the workers will wait for them. Meanwhile one
  // thread maps the output's pages, which the decoders would otherwise fault in after the last
  // byte (kPrefaultOutputFrom). No byte of the output changes; joined before the read returns.
  uint64_t prefaulted = 0;
  std::optional<hubfs::TaskQueue> prefaulter;
  if (hinted && req.out && !req.verify_only) {
    const auto out_bytes = checked_mul(req.selection->num_elements, static_cast<uint64_t>(layout.elem_size));
    if (out_bytes && *out_bytes >= kPrefaultOutputFrom) {
      prefaulted = *out_bytes;
      prefaulter.emplace(1);
      (void)prefaulter->post([out = req.out, n = static_cast<size_t>(*out_bytes)] { (void)hubfs::prefault_pages(out, n); });
    }
  }

  // Walk every touched chunk in C order (an odometer over the per-axis pieces), locating each
  // on this thread: the manifest is the only part that calls HDF5.
  Status status;
  std::vector<size_t> at(rank, 0);
  std::vector<uint64_t> grid(rank);
  bool more = rank == 0 || std::all_of(axes.begin(), axes.end(),
                                       [](const AxisPlan& a) { return !a.pieces.empty(); });
  while (more) {
    ChunkTask task;
    task.pieces.resize(rank);
    bool partial = false;
    for (size_t d = 0; d < rank; ++d) {
      task.pieces[d] = &axes[d].pieces[at[d]];
      grid[d] = task.pieces[d]->grid;
      partial |= (grid[d] + 1) * layout.chunk[d] > layout.shape[d];
    }
    if (queue.cancelled()) break;
    if (req.verify_only) {
      task.position = req.manifest->position(grid.data());
      if (req.verified->contains(task.position)) {
        more = next_chunk(axes, at);
        continue;
      }
    }
    auto loc = req.manifest->locate(grid.data());
    if (req.verify_only && !loc.ok() && loc.status().code() == hubfs::Code::kUnsupported) {
      // libhdf5's walk and lookup disagree about this chunk: H5Dread is the reference there,
      // and there is no location of ours to check.
      more = next_chunk(axes, at);
      continue;
    }
    if (!loc.ok()) {
      status = loc.status().with_context(req.source);
      queue.fail(status);
      break;
    }
    task.loc = *loc;
    if (req.verify_only && !task.loc.allocated) {
      // Never written: H5Dread returns the fill value, no filter sees anything.
      more = next_chunk(axes, at);
      continue;
    }
    if (task.loc.allocated) {
      auto end = checked_add(task.loc.offset, task.loc.size);
      if (!end || *end > file_size) {
        status = Corrupt("file truncated or chunk index corrupt: " +
                         chunk_name(task.pieces, layout.chunk) + " is " +
                         std::to_string(task.loc.size) + " bytes at offset " +
                         std::to_string(task.loc.offset) + ", but the file ends at " +
                         std::to_string(file_size))
                     .with_context(req.source);
        queue.fail(status);
        break;
      }
    }
    if (task.loc.allocated && task.loc.size > 0 && !hinted) {
      // Announce each chunk as soon as it is located. On a network filesystem (a hubfs mount)
      // the kernel turns this into read-ahead of every chunk at once, so they arrive in
      // parallel however few workers there are; on a local disk it starts the I/O early; on
      // cached pages it costs a syscall.
      ::posix_fadvise((*own)->fd, static_cast<off_t>(task.loc.offset), static_cast<off_t>(task.loc.size),
                      POSIX_FADV_WILLNEED);
    }
    task.direct = !req.verify_only && is_direct(axes, task.pieces, layout.chunk);
    if (task.direct) {
      for (size_t d = 0; d < rank; ++d) task.out_offset += task.pieces[d]->dst_start() * axes[d].out_stride;
    }
    task.raw = layout.pipeline.empty() || (task.loc.filter_mask & all_filters) == all_filters ||
               (partial && layout.dont_filter_partial);
    while (!queue.try_push(task)) {
      if (queue.failed()) break;
      queue.help(**own);
    }
    if (queue.failed()) break;
    more = next_chunk(axes, at);
  }
  queue.close();
  while (queue.help(**own)) {
  }
  helpers->join();
  if (prefaulter) prefaulter->drain();
  req.workers->release(std::move(*own));
  if (status.ok()) status = queue.error();
  if (!status.ok()) return status;

  ReadStats stats;
  stats.fast_path = true;
  stats.chunks = queue.chunks.load();
  stats.compressed_bytes = queue.compressed_bytes.load();
  stats.manifest_queries = req.manifest->queries() - queries_before;
  stats.peak_bytes_in_flight = queue.peak_in_flight();
  stats.prefaulted_bytes = prefaulted;
  return stats;
}

}  // namespace h5chunk
