// A chunked read's workers (chunk_queue.h): how one chunk is read, checked, decoded and placed.
#include "h5chunk/chunk_queue.h"

#include <fcntl.h>

#include "h5chunk/filter_checks.h"

namespace h5chunk {

using hubfs::Corrupt;

Status ChunkQueue::process(const ChunkTask& task, WorkerState& worker) {
  if (uncached_reads_.load(std::memory_order_relaxed) && !worker.uncached && worker.fd >= 0) {
    // Linux lets O_DIRECT be switched on for an open descriptor; if it cannot be, the reads
    // stay buffered, which is slower but as correct.
    const int flags = ::fcntl(worker.fd, F_GETFL);
    worker.uncached = flags >= 0 && ::fcntl(worker.fd, F_SETFL, flags | O_DIRECT) == 0;
  }
  uint8_t* const direct_out = req_.out + task.out_offset;
  auto place = [&](const uint8_t* chunk) {
    RegionCopier(axes_, task.pieces, layout_.chunk, layout_.elem_size).copy(chunk, req_.out);
  };
  // Stored bytes to returned ones (big-endian numbers, null-terminated strings), while the
  // decoded chunk is still in cache; fill values are already in returned form.
  auto convert = [&](uint8_t* chunk) {
    if (!layout_.conversion.empty()) layout_.conversion.apply(chunk, chunk_bytes_);
  };
  auto out_of_memory = [](const char* what, uint64_t bytes) {
    return hubfs::Unavailable("out of memory: cannot allocate " + std::to_string(bytes) +
                              " bytes for " + what);
  };
  if (!task.loc.allocated) {
    // Never written: the region reads as the fill value, as H5Dread would return it.
    const uint8_t* fill = fill_chunk();
    if (!fill) return out_of_memory("a chunk of fill value", chunk_bytes_);
    if (task.direct) {
      std::memcpy(direct_out, fill, chunk_bytes_);
    } else {
      place(fill);
    }
    return Status::Ok();
  }
  auto need_scratch = [&] { return worker.chunk.reserve(chunk_bytes_); };
  if (req_.verify_only) {
    // What H5Dread's filters will be handed, checked by ours; the decoded bytes are discarded.
    if (task.raw) {
      if (task.loc.size == chunk_bytes_) return Status::Ok();
      return Corrupt("stored unfiltered but holds " + std::to_string(task.loc.size) +
                     " bytes instead of the chunk's " + std::to_string(chunk_bytes_));
    }
    // A pipeline h5chunk does not decode: a scale-offset or n-bit chunk is checked as far as it
    // can be without decoding it, once the filters after it are undone (filter_checks.h); of any
    // other, only the location (checked by the caller).
    const UncheckedStage unchecked =
        layout_.decodable ? UncheckedStage{} : unchecked_stage(layout_.pipeline, task.loc.filter_mask);
    if (!layout_.decodable && !unchecked.step) return Status::Ok();
    uint8_t* in = worker.compressed.reserve(task.loc.size);
    if (!in) return out_of_memory("a stored chunk", task.loc.size);
    if (Status s = read_exact(worker, in, task.loc.size, task.loc.offset, req_.cancel); !s.ok()) return s;
    if (unchecked.step) {
      const uint8_t* stage_in = in;
      size_t stage_size = task.loc.size;
      if (unchecked.undo_after) {
        const uint64_t capacity = max_unchecked_input(chunk_bytes_);
        uint8_t* buf = worker.chunk.reserve(capacity);
        if (!buf) return out_of_memory("a partly decoded chunk", capacity);
        auto made = decode_chunk_bounded(unchecked.after, unchecked.after_mask, layout_.elem_size, in, task.loc.size,
                                         buf, capacity, worker.decode);
        if (!made.ok()) return made.status();
        stage_in = buf;
        stage_size = *made;
      }
      return check_unchecked_filter_input(*unchecked.step, layout_.elem_size, chunk_bytes_ / layout_.elem_size,
                                          stage_in, stage_size);
    }
    uint8_t* target = need_scratch();
    if (!target) return out_of_memory("a decoded chunk", chunk_bytes_);
    return decode_chunk(layout_.pipeline, task.loc.filter_mask, layout_.elem_size, in, task.loc.size,
                        target, chunk_bytes_, worker.decode);
  }
  if (task.raw) {
    // Stored unfiltered (every filter skipped, or a partial edge chunk under
    // DONT_FILTER_PARTIAL_CHUNKS): the stored bytes are the chunk itself.
    if (task.loc.size != chunk_bytes_) {
      return Corrupt("stored unfiltered but holds " + std::to_string(task.loc.size) +
                     " bytes instead of the chunk's " + std::to_string(chunk_bytes_));
    }
    uint8_t* buf = task.direct ? direct_out : need_scratch();
    if (!buf) return out_of_memory("a decoded chunk", chunk_bytes_);
    if (Status s = read_exact(worker, buf, chunk_bytes_, task.loc.offset, req_.cancel); !s.ok()) return s;
    convert(buf);
    if (!task.direct) place(buf);
    return Status::Ok();
  }
  uint8_t* in = worker.compressed.reserve(task.loc.size);
  if (!in) return out_of_memory("a stored chunk", task.loc.size);
  if (Status s = read_exact(worker, in, task.loc.size, task.loc.offset, req_.cancel); !s.ok()) return s;
  uint8_t* target = task.direct ? direct_out : need_scratch();
  if (!target) return out_of_memory("a decoded chunk", chunk_bytes_);
  Status s = decode_chunk(layout_.pipeline, task.loc.filter_mask, layout_.elem_size, in,
                          task.loc.size, target, chunk_bytes_, worker.decode);
  if (!s.ok()) return s;
  convert(target);
  if (!task.direct) place(target);
  return Status::Ok();
}

bool ChunkQueue::run(const ChunkTask& task, WorkerState& worker) {
  if (cancelled()) return false;
  const uint64_t bytes = task.loc.size;
  if (!acquire_budget(bytes)) return false;
  Status s = process(task, worker);
  release_budget(bytes);
  if (!s.ok()) {
    fail(s.with_context(req_.source + ", " + chunk_name(task.pieces, layout_.chunk)));
    return false;
  }
  if (req_.verify_only) req_.verified->insert(task.position);
  chunks.fetch_add(1, std::memory_order_relaxed);
  compressed_bytes.fetch_add(bytes, std::memory_order_relaxed);
  if (req_.progress && bytes) req_.progress(bytes);
  return true;
}

void ChunkQueue::work() {
  auto worker = req_.workers->acquire();
  if (!worker.ok()) {
    fail(worker.status().with_context(req_.source));
    return;
  }
  ChunkTask task;
  while (pop(&task, /*wait=*/true) && run(task, **worker)) {
  }
  req_.workers->release(std::move(*worker));
}

bool ChunkQueue::help(WorkerState& worker) {
  ChunkTask task;
  if (!pop(&task, /*wait=*/false)) return false;
  run(task, worker);
  return true;
}

}  // namespace h5chunk
