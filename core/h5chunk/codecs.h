// In-process decoders for the HDF5 filter pipelines h5chunk understands. Thread-safe: every
// call brings its own scratch (per-thread zstd/blosc contexts live in DecodeScratch).
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "common/status.h"

namespace h5chunk {

using hubfs::Result;
using hubfs::Status;

// HDF5 filter ids.
enum FilterId : unsigned {
  kDeflate = 1, kShuffle = 2, kFletcher32 = 3, kBlosc = 32001, kLz4 = 32004, kBitshuffle = 32008,
  kZstd = 32015,
};

struct FilterStep {
  unsigned id = 0;
  unsigned flags = 0;
  std::vector<unsigned> cd_values;
  std::string name;  // as HDF5 reports it, for messages
};

// Empty if every filter of the pipeline can be decoded here; else why not ("lzf (32000)").
std::string unsupported_filter(const std::vector<FilterStep>& pipeline);

// Per-thread state reused across chunks: temporaries and codec contexts. Not thread-safe:
// one per worker.
class DecodeScratch {
 public:
  DecodeScratch();
  ~DecodeScratch();
  struct Impl;
  Impl& impl() { return *impl_; }

 private:
  std::unique_ptr<Impl> impl_;
};

// Undoes the pipeline on one stored chunk, last filter first, skipping filter i where bit i of
// filter_mask is set. Writes exactly out_size bytes to out (the full chunk), or returns an error
// (kCorrupt: decoder failure, wrong decoded size, fletcher32 mismatch). Never writes past out_size.
// elem_size is the dataset's element size (for shuffle).
Status decode_chunk(const std::vector<FilterStep>& pipeline, uint32_t filter_mask, size_t elem_size,
                    const uint8_t* in, size_t in_size, uint8_t* out, size_t out_size,
                    DecodeScratch& scratch);

}  // namespace h5chunk
