#include "h5chunk/reader.h"

#include <fcntl.h>
#include <pthread.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <condition_variable>
#include <cstring>
#include <deque>
#include <new>
#include <thread>

#include "h5chunk/checked.h"
#include "h5chunk/filter_checks.h"
#include "h5chunk/range_hints.h"

namespace h5chunk {

using hubfs::Corrupt;
using hubfs::IoError;

// ---------------------------------------------------------------------------------------------
// Worker state

WorkerState::~WorkerState() {
  if (fd >= 0) ::close(fd);
}

Buffer BufferPool::take() {
  std::lock_guard<std::mutex> lock(mu_);
  if (idle_.empty()) return Buffer();
  Buffer buffer = std::move(idle_.back());
  idle_.pop_back();
  bytes_ -= buffer.capacity();
  return buffer;
}

void BufferPool::give(Buffer buffer) {
  if (buffer.capacity() == 0 || buffer.capacity() > kRetainedBufferBytes) return;  // freed here
  std::lock_guard<std::mutex> lock(mu_);
  if (bytes_ + buffer.capacity() > cap_) return;  // freed as the call returns
  bytes_ += buffer.capacity();
  idle_.push_back(std::move(buffer));
}

size_t BufferPool::kept_bytes() const {
  std::lock_guard<std::mutex> lock(mu_);
  return bytes_;
}

size_t BufferPool::kept_count() const {
  std::lock_guard<std::mutex> lock(mu_);
  return idle_.size();
}

// Never destroyed: a worker may release its state while the process exits.
BufferPool& compressed_buffers() {
  static BufferPool* pool = new BufferPool(kPooledBufferBytes);
  return *pool;
}

BufferPool& chunk_buffers() {
  static BufferPool* pool = new BufferPool(kPooledBufferBytes);
  return *pool;
}

namespace {

[[maybe_unused]] const int g_pool_fork_handlers = pthread_atfork(
    [] {
      compressed_buffers().lock_for_fork();
      chunk_buffers().lock_for_fork();
    },
    [] {
      chunk_buffers().unlock_after_fork();
      compressed_buffers().unlock_after_fork();
    },
    [] {
      chunk_buffers().unlock_after_fork();
      compressed_buffers().unlock_after_fork();
    });

// A state about to work gets the process's idle buffers (if it has none of its own).
std::unique_ptr<WorkerState> with_pooled_buffers(std::unique_ptr<WorkerState> state) {
  if (state->compressed.capacity() == 0) state->compressed = compressed_buffers().take();
  if (state->chunk.capacity() == 0) state->chunk = chunk_buffers().take();
  return state;
}

}  // namespace

Result<std::unique_ptr<WorkerState>> WorkerStatePool::acquire() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (!idle_.empty()) {
      auto state = std::move(idle_.back());
      idle_.pop_back();
      return with_pooled_buffers(std::move(state));
    }
  }
  auto state = std::make_unique<WorkerState>();
  if (source_) {
    state->source = source_;
    return with_pooled_buffers(std::move(state));
  }
  state->fd = ::open(path_.c_str(), O_RDONLY | O_CLOEXEC);
  if (state->fd < 0) return IoError("cannot open '" + path_ + "': " + std::strerror(errno));
  // Reads are whole chunks at known offsets (announced ahead with WILLNEED or a range hint):
  // the kernel's own read-ahead past them would only fetch bytes nobody asked for.
  ::posix_fadvise(state->fd, 0, 0, POSIX_FADV_RANDOM);
  return with_pooled_buffers(std::move(state));
}

void WorkerStatePool::release(std::unique_ptr<WorkerState> state) {
  compressed_buffers().give(std::move(state->compressed));
  chunk_buffers().give(std::move(state->chunk));
  std::lock_guard<std::mutex> lock(mu_);
  idle_.push_back(std::move(state));
}

Status read_exact(WorkerState& worker, uint8_t* buf, uint64_t size, uint64_t offset,
                  const std::atomic<bool>* cancel) {
  uint64_t done = 0;
  while (done < size) {
    uint64_t n = 0;
    if (worker.source) {
      auto r = worker.source->pread(buf + done, offset + done, size - done, cancel);
      if (!r.ok()) return r.status();
      n = *r;
    } else {
      ssize_t got = ::pread(worker.fd, buf + done, size - done, static_cast<off_t>(offset + done));
      if (got < 0) {
        if (errno == EINTR) continue;
        return IoError(std::string("read failed: ") + std::strerror(errno));
      }
      n = static_cast<uint64_t>(got);
    }
    if (n == 0) {
      return Corrupt("file truncated: " + std::to_string(size) + " bytes at offset " + std::to_string(offset) +
                     " end after " + std::to_string(done));
    }
    done += n;
  }
  return Status::Ok();
}

Result<uint64_t> file_size(const WorkerState& worker) {
  if (worker.source) return worker.source->size();
  struct stat st;
  if (::fstat(worker.fd, &st) != 0) return IoError(std::string("cannot stat the file: ") + std::strerror(errno));
  return static_cast<uint64_t>(st.st_size);
}

bool hint_ranges(const WorkerState& worker, uint64_t file_size,
                 const std::vector<std::pair<uint64_t, uint64_t>>& ranges) {
  if (!worker.source) return send_range_hints(worker.fd, file_size, ranges);
  std::vector<std::pair<uint64_t, uint64_t>> inside;
  for (auto [offset, length] : ranges) {
    if (length > 0 && offset < file_size && length <= file_size - offset) inside.emplace_back(offset, length);
  }
  if (!inside.empty()) worker.source->hint(inside);
  return true;
}

namespace {

// ---------------------------------------------------------------------------------------------
// Planning: per axis, the chunks the selection touches and what it takes from each.
//
// Any per-axis selection (a range of any step sign, an index list in any order, with repeats)
// becomes, per touched chunk, a list of runs: stretches that are consecutive both inside the
// chunk and on the output axis. A unit-step slice is one run per chunk, so the copy below is
// one memcpy per run of the innermost copied axis, as for plain slices; a reversed or strided
// slice or a scattered list degrades to one element per run, never to wrong placement.

// `len` indices from `src` inside the chunk land at `dst`, `dst + 1`, ... on the output axis.
struct Run {
  uint64_t src = 0;  // chunk-local index
  uint64_t dst = 0;  // output position (0 on a dropped axis)
  uint64_t len = 0;
};

struct Piece {
  uint64_t grid = 0;         // chunk index along this axis
  const Run* runs = nullptr; // into AxisPlan::runs, in output order
  size_t num_runs = 0;
  bool full = false;         // the chunk's whole extent, in order, to consecutive positions
  uint64_t dst_start() const { return runs[0].dst; }
};

struct AxisPlan {
  std::vector<Piece> pieces;    // touched chunks in increasing grid order
  std::vector<Run> runs;        // backing store for Piece::runs
  uint64_t extent = 1;          // elements on the output axis (1 for a dropped axis)
  uint64_t out_stride = 0;      // bytes between neighbours on the output axis (0 if dropped)
  uint64_t chunk_stride = 0;    // bytes between neighbours inside a decoded chunk
};

// Pieces of a unit-step range (or an integer: a range of one on a dropped axis): one run each.
void plan_unit_range(const AxisSelection& ax, uint64_t c, std::vector<Piece>* pieces,
                     std::vector<Run>* runs) {
  const uint64_t start = ax.start, stop = ax.start + ax.count;
  for (uint64_t g = start / c; g * c < stop; ++g) {
    const uint64_t lo = std::max(start, g * c), hi = std::min(stop, (g + 1) * c);
    Piece piece;
    piece.grid = g;
    piece.num_runs = 1;
    piece.full = lo == g * c && hi - lo == c;
    pieces->push_back(piece);
    runs->push_back({lo - g * c, ax.kept() ? lo - start : 0, hi - lo});
  }
}

// Pieces of any other selection: the output positions grouped by chunk (in increasing grid
// order, each group in output order), consecutive neighbours merged into runs.
void plan_general(const AxisSelection& ax, uint64_t c, std::vector<Piece>* pieces,
                  std::vector<Run>* runs) {
  const uint64_t n = static_cast<uint64_t>(ax.count);
  auto grid_of = [&](uint64_t k) { return static_cast<uint64_t>(ax.index(k)) / c; };
  // Increasing slices and sorted lists are grouped already; the rest are sorted by chunk
  // (stable: each chunk's positions stay in output order).
  bool grouped = true;
  for (uint64_t k = 1; k < n && grouped; ++k) grouped = grid_of(k - 1) <= grid_of(k);
  std::vector<uint64_t> order;  // output positions in chunk order; empty when already grouped
  if (!grouped) {
    order.resize(n);
    for (uint64_t k = 0; k < n; ++k) order[k] = k;
    std::stable_sort(order.begin(), order.end(),
                     [&](uint64_t a, uint64_t b) { return grid_of(a) < grid_of(b); });
  }
  auto position = [&](uint64_t i) { return grouped ? i : order[i]; };
  for (uint64_t lo = 0; lo < n;) {
    const uint64_t g = grid_of(position(lo));
    Piece piece;
    piece.grid = g;
    const size_t first_run = runs->size();
    uint64_t hi = lo;
    for (; hi < n && grid_of(position(hi)) == g; ++hi) {
      const uint64_t k = position(hi);
      const uint64_t src = static_cast<uint64_t>(ax.index(k)) - g * c;
      const uint64_t dst = ax.kept() ? k : 0;
      if (runs->size() > first_run) {
        Run& last = runs->back();
        if (last.src + last.len == src && last.dst + last.len == dst) {
          ++last.len;
          continue;
        }
      }
      runs->push_back({src, dst, 1});
    }
    piece.num_runs = runs->size() - first_run;
    const Run& only = (*runs)[first_run];
    piece.full = piece.num_runs == 1 && only.src == 0 && only.len == c;
    pieces->push_back(piece);
    lo = hi;
  }
}

std::vector<AxisPlan> plan_axes(const ChunkedLayout& layout, const NormalizedSelection& sel) {
  const size_t rank = layout.shape.size();
  std::vector<AxisPlan> plans(rank);
  uint64_t out_stride = layout.elem_size, chunk_stride = layout.elem_size;
  for (size_t d = rank; d-- > 0;) {
    const AxisSelection& ax = sel.axes[d];
    AxisPlan& p = plans[d];
    const uint64_t c = layout.chunk[d];
    p.extent = ax.kept() ? static_cast<uint64_t>(ax.count) : 1;
    p.out_stride = ax.kept() ? out_stride : 0;
    p.chunk_stride = chunk_stride;
    if (ax.kept()) out_stride *= p.extent;
    chunk_stride *= c;
    const bool unit_range = ax.kind == AxisSelection::Kind::kInt ||
                            (ax.kind == AxisSelection::Kind::kRange && ax.step == 1);
    if (unit_range) {
      plan_unit_range(ax, c, &p.pieces, &p.runs);
    } else {
      plan_general(ax, c, &p.pieces, &p.runs);
    }
    // The runs vector no longer grows: point each piece at its runs.
    size_t next = 0;
    for (Piece& piece : p.pieces) {
      piece.runs = p.runs.data() + next;
      next += piece.num_runs;
    }
  }
  return plans;
}

// Copies the selected part of one decoded chunk into the output. The longest run of trailing
// axes that the chunk covers whole, with the output no wider there, is one memcpy block.
class RegionCopier {
 public:
  RegionCopier(const std::vector<AxisPlan>& axes, const std::vector<const Piece*>& pieces,
               const std::vector<uint64_t>& chunk, size_t elem)
      : axes_(axes), pieces_(pieces) {
    split_ = pieces.size();
    block_ = elem;
    while (split_ > 0 && pieces[split_ - 1]->full && chunk[split_ - 1] == axes[split_ - 1].extent) {
      --split_;
      block_ *= chunk[split_];
    }
  }

  void copy(const uint8_t* chunk, uint8_t* out) const {
    if (split_ == 0) {
      std::memcpy(out, chunk, block_);
    } else {
      copy_axis(0, chunk, out);
    }
  }

 private:
  void copy_axis(size_t d, const uint8_t* src, uint8_t* dst) const {
    const Piece& p = *pieces_[d];
    const AxisPlan& a = axes_[d];
    if (d + 1 == split_) {
      copy_runs(p, a, src, dst);
      return;
    }
    for (size_t r = 0; r < p.num_runs; ++r) {
      const Run& run = p.runs[r];
      for (uint64_t i = 0; i < run.len; ++i) {
        copy_axis(d + 1, src + (run.src + i) * a.chunk_stride, dst + (run.dst + i) * a.out_stride);
      }
    }
  }

  // The innermost copied axis: one memcpy per run. Runs of one element (reversed or strided
  // innermost axes) of a word-sized block use a fixed-size copy, which compiles to a move
  // where a variable-size memcpy is a call per element.
  void copy_runs(const Piece& p, const AxisPlan& a, const uint8_t* src, uint8_t* dst) const {
    switch (block_) {
      case 1: return copy_runs_fixed<1>(p, a, src, dst);
      case 2: return copy_runs_fixed<2>(p, a, src, dst);
      case 4: return copy_runs_fixed<4>(p, a, src, dst);
      case 8: return copy_runs_fixed<8>(p, a, src, dst);
      default: break;
    }
    for (size_t r = 0; r < p.num_runs; ++r) {
      const Run& run = p.runs[r];
      std::memcpy(dst + run.dst * a.out_stride, src + run.src * a.chunk_stride, run.len * block_);
    }
  }

  template <size_t kBlock>
  void copy_runs_fixed(const Piece& p, const AxisPlan& a, const uint8_t* src, uint8_t* dst) const {
    for (size_t r = 0; r < p.num_runs; ++r) {
      const Run& run = p.runs[r];
      if (run.len == 1) {
        std::memcpy(dst + run.dst * a.out_stride, src + run.src * a.chunk_stride, kBlock);
      } else {
        std::memcpy(dst + run.dst * a.out_stride, src + run.src * a.chunk_stride, run.len * kBlock);
      }
    }
  }

  const std::vector<AxisPlan>& axes_;
  const std::vector<const Piece*>& pieces_;
  size_t split_ = 0;
  uint64_t block_ = 0;
};

struct Task {
  std::vector<const Piece*> pieces;
  ChunkLocation loc;
  bool direct = false;     // the chunk is exactly one contiguous region of the output
  bool raw = false;        // stored unfiltered
  uint64_t out_offset = 0; // where that region starts (direct only)
  uint64_t position = 0;   // in the chunk grid (FastRead::verify_only)
};

// Whether a chunk covered whole is also one contiguous stretch of the output: every axis after
// the first one longer than 1 must be covered whole by this chunk alone.
bool is_direct(const std::vector<AxisPlan>& axes, const std::vector<const Piece*>& pieces,
               const std::vector<uint64_t>& chunk) {
  size_t first_long = pieces.size();
  for (size_t d = 0; d < pieces.size(); ++d) {
    if (!pieces[d]->full) return false;
    if (first_long == pieces.size() && chunk[d] > 1) first_long = d;
  }
  for (size_t d = first_long + 1; d < pieces.size(); ++d) {
    if (chunk[d] != axes[d].extent) return false;
  }
  return true;
}

std::string chunk_name(const std::vector<const Piece*>& pieces, const std::vector<uint64_t>& chunk) {
  std::string grid, origin;
  for (size_t d = 0; d < pieces.size(); ++d) {
    grid += (d ? ", " : "") + std::to_string(pieces[d]->grid);
    origin += (d ? ", " : "") + std::to_string(pieces[d]->grid * chunk[d]);
  }
  return "chunk [" + grid + "] (elements from (" + origin + "))";
}

// Everything the workers share for one read.
class ChunkPool {
 public:
  ChunkPool(const FastRead& request, const std::vector<AxisPlan>& axes)
      : req_(request), layout_(*request.layout), axes_(axes) {
    chunk_bytes_ = layout_.elem_size;
    for (uint64_t c : layout_.chunk) chunk_bytes_ *= c;
    queue_limit_ = 2 * static_cast<size_t>(request.threads) + 2;
  }

  uint64_t chunk_bytes() const { return chunk_bytes_; }

  // From now on, workers read with O_DIRECT (see uncached_reads_). Call before queueing tasks.
  void use_uncached_reads() { uncached_reads_.store(true); }

  // Producer side (the caller's thread). Queues the task, or returns false without taking it
  // when the queue is full (the caller then decodes a queued chunk itself instead of waiting).
  bool try_push(Task& task) {
    std::lock_guard<std::mutex> lock(mu_);
    if (failed_ || queue_.size() >= queue_limit_) return false;
    queue_.push_back(std::move(task));
    ready_.notify_one();
    return true;
  }

  bool failed() {
    std::lock_guard<std::mutex> lock(mu_);
    return failed_;
  }

  // Whether the caller asked to stop (FastRead::cancel); the first to notice fails the read.
  bool cancelled() {
    if (!req_.cancel || !req_.cancel->load(std::memory_order_relaxed)) return false;
    fail(hubfs::Unavailable(req_.source + ": read cancelled"));
    return true;
  }

  void close() {
    std::lock_guard<std::mutex> lock(mu_);
    closed_ = true;
    ready_.notify_all();
  }

  void fail(Status status) {
    std::lock_guard<std::mutex> lock(mu_);
    if (!failed_) error_ = std::move(status);
    failed_ = true;
    queue_.clear();
    ready_.notify_all();
    budget_cv_.notify_all();
  }

  Status error() {
    std::lock_guard<std::mutex> lock(mu_);
    return error_;
  }

  // A helper thread: processes chunks until the queue is closed and empty.
  void work();
  // The caller's thread: processes one queued chunk if there is one; false if there was none.
  bool help(WorkerState& worker);

  uint64_t peak_in_flight() {
    std::lock_guard<std::mutex> lock(mu_);
    return peak_in_flight_;
  }

  std::atomic<uint64_t> chunks{0}, compressed_bytes{0};

 private:
  bool pop(Task* task, bool wait) {
    std::unique_lock<std::mutex> lock(mu_);
    if (wait) ready_.wait(lock, [&] { return !queue_.empty() || closed_ || failed_; });
    if (failed_ || queue_.empty()) return false;
    *task = std::move(queue_.front());
    queue_.pop_front();
    return true;
  }

  // Reads and decodes one chunk; false (and the read failed) on error.
  bool run(const Task& task, WorkerState& worker);

  // Compressed bytes in flight stay under the limit, except that one chunk is always allowed
  // (a chunk larger than the limit must still be readable).
  bool acquire_budget(uint64_t bytes) {
    std::unique_lock<std::mutex> lock(mu_);
    budget_cv_.wait(lock, [&] {
      return failed_ || in_flight_ == 0 || in_flight_ + bytes <= req_.max_bytes_in_flight;
    });
    if (failed_) return false;
    in_flight_ += bytes;
    peak_in_flight_ = std::max(peak_in_flight_, in_flight_);
    return true;
  }

  void release_budget(uint64_t bytes) {
    std::lock_guard<std::mutex> lock(mu_);
    in_flight_ -= bytes;
    budget_cv_.notify_all();
  }

  // One chunk of fill value, or nullptr when it cannot be allocated.
  const uint8_t* fill_chunk() {
    std::call_once(fill_once_, [&] {
      fill_.reset(new (std::nothrow) uint8_t[chunk_bytes_]);
      if (!fill_) return;
      const size_t e = layout_.elem_size;
      for (uint64_t i = 0; i < chunk_bytes_; i += e) std::memcpy(&fill_[i], layout_.fill.data(), e);
    });
    return fill_.get();
  }

  Status process(const Task& task, WorkerState& worker);

  const FastRead& req_;
  const ChunkedLayout& layout_;
  const std::vector<AxisPlan>& axes_;
  uint64_t chunk_bytes_ = 0;
  size_t queue_limit_ = 0;

  std::mutex mu_;
  std::condition_variable ready_, budget_cv_;
  std::deque<Task> queue_;
  bool closed_ = false, failed_ = false;
  Status error_;
  uint64_t in_flight_ = 0, peak_in_flight_ = 0;
  // On a hubfs mount, once the chunks are hinted (their bytes already on their way), reads
  // skip the page cache: with FADV_RANDOM the kernel sends a chunk's buffered pread to the
  // mount one 1 MiB request after another, while an O_DIRECT pread goes out as concurrent
  // requests and is copied once, straight into the buffer (warm, 2 threads: 640 MB/s buffered
  // vs 750-1030 MB/s direct on this machine).
  std::atomic<bool> uncached_reads_{false};

  std::once_flag fill_once_;
  std::unique_ptr<uint8_t[]> fill_;
};

Status ChunkPool::process(const Task& task, WorkerState& worker) {
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

bool ChunkPool::run(const Task& task, WorkerState& worker) {
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

void ChunkPool::work() {
  auto worker = req_.workers->acquire();
  if (!worker.ok()) {
    fail(worker.status().with_context(req_.source));
    return;
  }
  Task task;
  while (pop(&task, /*wait=*/true) && run(task, **worker)) {
  }
  req_.workers->release(std::move(*worker));
}

bool ChunkPool::help(WorkerState& worker) {
  Task task;
  if (!pop(&task, /*wait=*/false)) return false;
  run(task, worker);
  return true;
}

// Declines (kUnsupported) a read whose not-yet-located chunks would take HDF5 longer to find
// than H5Dread takes for the whole selection: the quadratic trap of a first read over a
// dataset of many small chunks. Chunks already remembered cost nothing.
// Steps `at` (one piece index per axis) to the next touched chunk, last axis fastest, like an
// odometer; false once every chunk has been visited.
bool next_chunk(const std::vector<AxisPlan>& axes, std::vector<size_t>& at) {
  for (size_t d = axes.size(); d-- > 0;) {
    if (++at[d] < axes[d].pieces.size()) return true;
    at[d] = 0;
  }
  return false;
}

// Whether every chunk the read touches was verified before: then a verify_only read has nothing
// to do, and skips the worker, fstat and pool setup (a loop of one-element reads of a verified
// chunk took 11.5 us per read with them, 5.9 us through H5Dread alone).
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
  ChunkPool pool(req, axes);
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
  // chose a thread count, it reads them all itself (bench_h5chunk_many_chunks, first whole reads
  // of 16k-100k chunks of 1-4 KiB: one thread 1.7-3.3x H5Dread, two threads 0.6-1.7x).
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
  auto helpers = req.helpers->start(threads - 1, [&pool] { pool.work(); });

  // On a hubfs mount, announce every chunk of a many-chunk read before reading any: the mount
  // fetches them all at once (up to its request limit), so --threads no longer bounds the
  // requests in flight. Locating them first costs nothing extra: the manifest remembers them.
  // Through a source (hf:// in-process) a one-chunk read is hinted too: the hint costs nothing
  // there, and tells its reader the file is read by chunks, not streamed (a training loop's
  // workers, one frame each, otherwise looked like random reads and drew whole-file read-ahead).
  bool hinted = false;
  if (tasks > 1 || (*own)->source) {
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
            pool.use_uncached_reads();
          }
        }
        ranges.emplace_back(loc->offset, loc->size);
      }
      more = next_chunk(axes, at);
    }
    if (hinted && !ranges.empty()) hint_ranges(**own, file_size, ranges);
  }

  // Walk every touched chunk in C order (an odometer over the per-axis pieces), locating each
  // on this thread: the manifest is the only part that calls HDF5.
  Status status;
  std::vector<size_t> at(rank, 0);
  std::vector<uint64_t> grid(rank);
  bool more = rank == 0 || std::all_of(axes.begin(), axes.end(),
                                       [](const AxisPlan& a) { return !a.pieces.empty(); });
  while (more) {
    Task task;
    task.pieces.resize(rank);
    bool partial = false;
    for (size_t d = 0; d < rank; ++d) {
      task.pieces[d] = &axes[d].pieces[at[d]];
      grid[d] = task.pieces[d]->grid;
      partial |= (grid[d] + 1) * layout.chunk[d] > layout.shape[d];
    }
    if (pool.cancelled()) break;
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
      pool.fail(status);
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
        pool.fail(status);
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
    while (!pool.try_push(task)) {
      if (pool.failed()) break;
      pool.help(**own);
    }
    if (pool.failed()) break;
    more = next_chunk(axes, at);
  }
  pool.close();
  while (pool.help(**own)) {
  }
  helpers->join();
  req.workers->release(std::move(*own));
  if (status.ok()) status = pool.error();
  if (!status.ok()) return status;

  ReadStats stats;
  stats.fast_path = true;
  stats.chunks = pool.chunks.load();
  stats.compressed_bytes = pool.compressed_bytes.load();
  stats.manifest_queries = req.manifest->queries() - queries_before;
  stats.peak_bytes_in_flight = pool.peak_in_flight();
  return stats;
}

}  // namespace h5chunk
