// The fast path's plan of a chunked read: per axis, the chunks the selection touches and what it
// takes from each, and the copy of a decoded chunk's selected part into the output.
//
// Any per-axis selection (a range of any step sign, an index list in any order, with repeats)
// becomes, per touched chunk, a list of runs: stretches that are consecutive both inside the
// chunk and on the output axis. A unit-step slice is one run per chunk, so the copy (RegionCopier) is
// one memcpy per run of the innermost copied axis, as for plain slices; a reversed or strided
// slice or a scattered list degrades to one element per run, never to wrong placement.
//
// A plan is built once per read on the caller's thread (plan_axes) and then only read, by any
// number of workers at once; RegionCopier holds references into it and copies into disjoint
// parts of the output. No locks, no state outside the plan.
#pragma once

#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "h5chunk/reader.h"
#include "h5chunk/selection.h"

namespace h5chunk {

// `len` indices from `src` inside the chunk land at `dst`, `dst + 1`, ... on the output axis.
struct AxisRun {
  uint64_t src = 0;  // chunk-local index
  uint64_t dst = 0;  // output position (0 on a dropped axis)
  uint64_t len = 0;
};

// One touched chunk along one axis, and the runs the selection takes from it.
struct AxisPiece {
  uint64_t grid = 0;              // chunk index along this axis
  const AxisRun* runs = nullptr;  // into AxisPlan::runs, in output order
  size_t num_runs = 0;
  bool full = false;              // the chunk's whole extent, in order, to consecutive positions
  uint64_t dst_start() const { return runs[0].dst; }
};

struct AxisPlan {
  std::vector<AxisPiece> pieces;  // touched chunks in increasing grid order
  std::vector<AxisRun> runs;      // backing store for AxisPiece::runs
  uint64_t extent = 1;            // elements on the output axis (1 for a dropped axis)
  uint64_t out_stride = 0;        // bytes between neighbours on the output axis (0 if dropped)
  uint64_t chunk_stride = 0;      // bytes between neighbours inside a decoded chunk
};

// One plan per axis of the layout, for any selection of it.
std::vector<AxisPlan> plan_axes(const ChunkedLayout& layout, const NormalizedSelection& sel);

// Whether a chunk covered whole is also one contiguous stretch of the output: every axis after
// the first one longer than 1 must be covered whole by this chunk alone.
bool is_direct(const std::vector<AxisPlan>& axes, const std::vector<const AxisPiece*>& pieces,
               const std::vector<uint64_t>& chunk);

// "chunk [GRID] (elements from (ORIGIN))", naming a chunk in errors.
std::string chunk_name(const std::vector<const AxisPiece*>& pieces, const std::vector<uint64_t>& chunk);

// Steps `at` (one piece index per axis) to the next touched chunk, last axis fastest, like an
// odometer; false once every chunk has been visited.
bool next_chunk(const std::vector<AxisPlan>& axes, std::vector<size_t>& at);

// Copies the selected part of one decoded chunk into the output. The longest run of trailing
// axes that the chunk covers whole, with the output no wider there, is one memcpy block.
class RegionCopier {
 public:
  RegionCopier(const std::vector<AxisPlan>& axes, const std::vector<const AxisPiece*>& pieces,
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
    const AxisPiece& p = *pieces_[d];
    const AxisPlan& a = axes_[d];
    if (d + 1 == split_) {
      copy_runs(p, a, src, dst);
      return;
    }
    for (size_t r = 0; r < p.num_runs; ++r) {
      const AxisRun& run = p.runs[r];
      for (uint64_t i = 0; i < run.len; ++i) {
        copy_axis(d + 1, src + (run.src + i) * a.chunk_stride, dst + (run.dst + i) * a.out_stride);
      }
    }
  }

  // The innermost copied axis: one memcpy per run. Runs of one element (reversed or strided
  // innermost axes) of a word-sized block use a fixed-size copy, which compiles to a move
  // where a variable-size memcpy is a call per element.
  void copy_runs(const AxisPiece& p, const AxisPlan& a, const uint8_t* src, uint8_t* dst) const {
    switch (block_) {
      case 1: return copy_runs_fixed<1>(p, a, src, dst);
      case 2: return copy_runs_fixed<2>(p, a, src, dst);
      case 4: return copy_runs_fixed<4>(p, a, src, dst);
      case 8: return copy_runs_fixed<8>(p, a, src, dst);
      default: break;
    }
    for (size_t r = 0; r < p.num_runs; ++r) {
      const AxisRun& run = p.runs[r];
      std::memcpy(dst + run.dst * a.out_stride, src + run.src * a.chunk_stride, run.len * block_);
    }
  }

  template <size_t kBlock>
  void copy_runs_fixed(const AxisPiece& p, const AxisPlan& a, const uint8_t* src, uint8_t* dst) const {
    for (size_t r = 0; r < p.num_runs; ++r) {
      const AxisRun& run = p.runs[r];
      if (run.len == 1) {
        std::memcpy(dst + run.dst * a.out_stride, src + run.src * a.chunk_stride, kBlock);
      } else {
        std::memcpy(dst + run.dst * a.out_stride, src + run.src * a.chunk_stride, run.len * kBlock);
      }
    }
  }

  const std::vector<AxisPlan>& axes_;
  const std::vector<const AxisPiece*>& pieces_;
  size_t split_ = 0;
  uint64_t block_ = 0;
};

}  // namespace h5chunk
