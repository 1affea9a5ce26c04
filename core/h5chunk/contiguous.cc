#include "h5chunk/contiguous.h"

#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <mutex>
#include <thread>
#include <vector>

#include "h5chunk/checked.h"
#include "h5chunk/range_hints.h"

namespace h5chunk {

namespace {

using Kind = AxisSelection::Kind;

// One stretch of the selection: contiguous in the file and in the output.
struct Run {
  uint64_t file = 0;  // from element 0 of the dataset
  uint64_t out = 0;   // into the output
  uint64_t len = 0;
};

// What one pread covers: runs [first, first + count), spanning `span` bytes from `file`.
struct Piece {
  uint64_t file = 0;
  uint64_t span = 0;
  size_t first = 0;
  size_t count = 0;
};

// The selection's runs in output order (not always file order: slices may step backwards and
// index lists may be unsorted or repeat). The trailing axes selected whole, and the last axis
// before them, make one run per combination of the earlier axes' indices when that axis is a
// unit-step slice, else one run per index of it; runs that follow each other in both the file
// and the output merge.
Result<std::vector<Run>> plan_runs(const std::vector<uint64_t>& shape, size_t elem,
                                   const NormalizedSelection& sel) {
  const size_t rank = shape.size();
  std::vector<uint64_t> stride(rank);
  uint64_t total = elem;
  for (size_t d = rank; d-- > 0;) {
    stride[d] = total;
    total *= shape[d];  // cannot overflow: the open checked storage size == shape x elem
  }
  size_t inner = rank;
  while (inner > 0) {
    const AxisSelection& a = sel.axes[inner - 1];
    if (a.kind != Kind::kRange || a.step != 1 || a.start != 0 || static_cast<uint64_t>(a.count) != shape[inner - 1]) break;
    --inner;
  }
  std::vector<Run> runs;
  if (inner == 0) {
    runs.push_back({0, 0, total});
    return runs;
  }
  const size_t k = inner - 1;  // the axis whose selection forms the runs
  const AxisSelection& run_axis = sel.axes[k];
  const bool one_run = run_axis.kind != Kind::kList && run_axis.step == 1;
  uint64_t bound = one_run ? 1 : static_cast<uint64_t>(run_axis.count);
  for (size_t d = 0; d < k && bound <= kContiguousMaxRuns; ++d) bound *= static_cast<uint64_t>(sel.axes[d].count);
  if (bound > kContiguousMaxRuns) {
    return hubfs::Unsupported("selects over " + std::to_string(kContiguousMaxRuns) +
                              " separate pieces of contiguous storage (H5Dread sieves them faster)");
  }
  runs.reserve(bound);
  uint64_t out = 0;
  auto emit = [&](uint64_t file, uint64_t len) {
    if (!runs.empty() && runs.back().file + runs.back().len == file) {
      runs.back().len += len;
    } else {
      runs.push_back({file, out, len});
    }
    out += len;
  };
  // Every axis through AxisSelection::index: it knows steps of either sign and lists.
  auto index = [&](size_t d, size_t i) -> uint64_t {
    return static_cast<uint64_t>(sel.axes[d].index(static_cast<int64_t>(i)));
  };
  std::vector<size_t> at(k, 0);
  for (;;) {
    uint64_t base = 0;
    for (size_t d = 0; d < k; ++d) base += index(d, at[d]) * stride[d];
    if (!one_run) {
      for (int64_t i = 0; i < run_axis.count; ++i)
        emit(base + static_cast<uint64_t>(run_axis.index(i)) * stride[k], stride[k]);
    } else {
      emit(base + static_cast<uint64_t>(run_axis.start) * stride[k],
           static_cast<uint64_t>(run_axis.count) * stride[k]);
    }
    size_t d = k;  // odometer over axes [0, k), last fastest
    while (d-- > 0) {
      if (++at[d] < static_cast<size_t>(sel.axes[d].count)) break;
      at[d] = 0;
    }
    if (d == SIZE_MAX) break;
  }
  return runs;
}

// Splits runs longer than a piece (at element boundaries), then groups neighbouring runs into
// pieces of at most kContiguousPieceBytes with gaps under kContiguousMaxGapBytes.
std::vector<Piece> plan_pieces(std::vector<Run>& runs, size_t elem) {
  const uint64_t max_piece = std::max<uint64_t>(elem, kContiguousPieceBytes / elem * elem);
  std::vector<Run> split;
  split.reserve(runs.size());
  for (const Run& r : runs) {
    for (uint64_t done = 0; done < r.len; done += max_piece) {
      split.push_back({r.file + done, r.out + done, std::min(max_piece, r.len - done)});
    }
  }
  runs.swap(split);
  std::vector<Piece> pieces;
  for (size_t i = 0; i < runs.size(); ++i) {
    if (!pieces.empty()) {
      Piece& p = pieces.back();
      const Run& last = runs[i - 1];
      const uint64_t end = runs[i].file + runs[i].len;
      if (runs[i].file - (last.file + last.len) < kContiguousMaxGapBytes && end - p.file <= max_piece) {
        p.span = end - p.file;
        ++p.count;
        continue;
      }
    }
    pieces.push_back({runs[i].file, runs[i].len, i, 1});
  }
  return pieces;
}

}  // namespace

Result<ReadStats> read_contiguous(const ContiguousRead& req) {
  const ChunkedLayout& layout = *req.layout;
  const size_t elem = layout.elem_size;
  auto planned = plan_runs(layout.shape, elem, *req.selection);
  if (!planned.ok()) return planned.status();
  std::vector<Run> runs = std::move(*planned);
  const std::vector<Piece> pieces = plan_pieces(runs, elem);

  auto own = req.workers->acquire();
  if (!own.ok()) return own.status().with_context(req.source);
  if (auto size = file_size(**own); size.ok() && pieces.size() > 1) {
    // On a hubfs mount or a source every piece is requested at once; elsewhere this does nothing.
    std::vector<std::pair<uint64_t, uint64_t>> ranges;
    for (const Piece& p : pieces) ranges.emplace_back(req.data_offset + p.file, p.span);
    hint_ranges(**own, *size, ranges);
  }

  std::atomic<size_t> next{0};
  std::atomic<uint64_t> bytes_read{0};
  std::mutex mu;
  Status error;
  std::atomic<bool> failed{false};
  auto fail = [&](Status s) {
    std::lock_guard<std::mutex> lock(mu);
    if (error.ok()) error = std::move(s);
    failed = true;
  };
  auto work = [&](WorkerState& worker) {
    for (size_t i; !failed.load() && (i = next.fetch_add(1)) < pieces.size();) {
      if (req.cancel && req.cancel->load(std::memory_order_relaxed)) {
        fail(hubfs::Unavailable(req.source + ": read cancelled"));
        return;
      }
      const Piece& p = pieces[i];
      const Run& first = runs[p.first];
      const uint64_t at = req.data_offset + p.file;
      if (p.count == 1) {  // straight into the output
        uint8_t* dst = req.out + first.out;
        if (Status s = read_exact(worker, dst, first.len, at, req.cancel); !s.ok()) return fail(s.with_context(req.source));
        if (!layout.conversion.empty()) layout.conversion.apply(dst, first.len);
      } else {
        uint8_t* buf = worker.compressed.reserve(p.span);
        if (!buf) {
          return fail(hubfs::Unavailable("out of memory: cannot allocate " + std::to_string(p.span) +
                                         " bytes for a piece of contiguous storage"));
        }
        if (Status s = read_exact(worker, buf, p.span, at, req.cancel); !s.ok()) return fail(s.with_context(req.source));
        for (size_t r = p.first; r < p.first + p.count; ++r) {
          uint8_t* dst = req.out + runs[r].out;
          std::memcpy(dst, buf + (runs[r].file - p.file), runs[r].len);
          if (!layout.conversion.empty()) layout.conversion.apply(dst, runs[r].len);
        }
      }
      bytes_read.fetch_add(p.span, std::memory_order_relaxed);
      if (req.progress) req.progress(p.span);
    }
  };

  const unsigned threads =
      static_cast<unsigned>(std::clamp<uint64_t>(pieces.size(), 1, std::max(1u, req.threads)));
  // threads - 1 helpers from the file's pool; a piece is claimed by whoever gets to it first, so
  // helpers that never start (the pool busy with another read) only leave more to this thread.
  auto helpers = req.helpers->start(threads - 1, [&] {
    auto worker = req.workers->acquire();
    if (!worker.ok()) return fail(worker.status().with_context(req.source));
    work(**worker);
    req.workers->release(std::move(*worker));
  });
  work(**own);
  helpers->join();
  req.workers->release(std::move(*own));
  if (!error.ok()) return error;

  ReadStats stats;
  stats.fast_path = true;
  stats.chunks = pieces.size();
  stats.compressed_bytes = bytes_read.load();
  return stats;
}

}  // namespace h5chunk
