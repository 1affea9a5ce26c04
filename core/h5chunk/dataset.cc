// Dataset: routes each read to the fast path (reader.h, contiguous.h), to h5chunk's reader of
// external storage, or to H5Dread (fallback.h), checking first what H5Dread would trust.
#include <algorithm>
#include <cstring>

#include "h5chunk/checked.h"
#include "h5chunk/contiguous.h"
#include "h5chunk/fallback.h"
#include "h5chunk/file_state.h"
#include "h5chunk/filter_checks.h"

namespace h5chunk {

using hubfs::InvalidArgument;
using hubfs::Unsupported;

namespace {

// Before H5Dread serves a read of a chunked dataset whose chunk index h5chunk has not read yet,
// the index is read (once per dataset) when its grid has at most this many chunks, so that a
// damaged index is refused rather than handed to libhdf5 (a v1 B-tree whose root points to
// itself crashes H5Dread). Larger grids are not read for a small read: their index can be
// megabytes, which on a hubfs mount would cost more than the read itself.
constexpr uint64_t kMaxGridChunksParsedBeforeH5Dread = 1u << 16;

}  // namespace

const DatasetInfo& Dataset::info() const { return state_->info; }

uint64_t Dataset::manifest_queries() const {
  return state_->manifest ? state_->manifest->queries() : 0;
}

Result<std::vector<std::pair<uint64_t, uint64_t>>> Dataset::row_ranges(uint64_t first, uint64_t count) const {
  std::vector<std::pair<uint64_t, uint64_t>> ranges;
  const DatasetInfo& info = state_->info;
  if (info.shape.empty() || count == 0 || first >= info.shape[0]) return ranges;
  count = std::min(count, info.shape[0] - first);
  if (!state_->manifest) {
    if (info.layout != "contiguous" || !state_->contiguous_offset) return ranges;
    uint64_t row_bytes = info.element.size;
    for (size_t d = 1; d < info.shape.size(); ++d) row_bytes *= info.shape[d];
    ranges.emplace_back(state_->contiguous_offset + first * row_bytes, count * row_bytes);
    return ranges;
  }
  const std::vector<uint64_t>& chunk = state_->layout.chunk;
  const size_t rank = info.shape.size();
  std::vector<uint64_t> grid(rank, 0), last(rank, 0);
  grid[0] = first / chunk[0];
  last[0] = (first + count - 1) / chunk[0];
  for (size_t d = 1; d < rank; ++d) last[d] = info.shape[d] == 0 ? 0 : (info.shape[d] - 1) / chunk[d];
  for (size_t d = 1; d < rank; ++d) {
    if (info.shape[d] == 0) return ranges;  // no elements at all
  }
  for (;;) {  // an odometer over the chunk grid, axis 0 slowest
    auto loc = state_->manifest->locate(grid.data());
    if (!loc.ok()) return loc.status().with_context("file '" + file_->path + "', dataset '" + info.path + "'");
    if (loc->allocated && loc->size > 0) ranges.emplace_back(loc->offset, loc->size);
    size_t d = rank;
    for (;;) {
      if (d == 0) return ranges;
      --d;
      if (grid[d] < last[d]) {
        ++grid[d];
        break;
      }
      grid[d] = 0;
    }
  }
}

Result<std::vector<uint64_t>> Dataset::selection_shape(const Selection& selection) const {
  auto norm = normalize(selection, state_->info.shape);
  if (!norm.ok()) return norm.status();
  return norm->out_shape;
}

Result<Array> Dataset::read(std::string_view selection, const ReadOptions& options) const {
  auto sel = parse_selection(selection);
  if (!sel.ok()) return sel.status();
  return read(*sel, options);
}

Result<Array> Dataset::read(const Selection& selection, const ReadOptions& options) const {
  const DatasetInfo& info = state_->info;
  const std::string source = "file '" + file_->path + "', dataset '" + info.path + "'";
  if (!state_->refusal.ok()) return state_->refusal;
  auto shape = selection_shape(selection);
  if (!shape.ok()) return shape.status().with_context(source);
  auto array = Array::allocate(*shape, info.element.size, info.type_text,
                               info.numeric ? std::optional<DType>(info.dtype) : std::nullopt);
  if (!array.ok()) return array.status().with_context(source);
  auto stats = read_into(selection, array->data(), array->nbytes(), options);
  if (!stats.ok()) return stats.status();
  array->stats = *stats;
  return array;
}

Result<ReadStats> Dataset::read_into(const Selection& selection, void* out, size_t out_bytes,
                                     const ReadOptions& options) const {
  ScopedReadCancel cancellable(options.cancel);  // libhdf5's and the index's reads through a source
  file_->clear_source_error();
  auto r = read_into_unmapped(selection, out, out_bytes, options);
  if (!r.ok() && r.status().code() != hubfs::Code::kInvalidArgument) {
    // A read through a source that failed there fails with the source's cause.
    return file_->source_error_or(r.status(), "file '" + file_->path + "', dataset '" + state_->info.path + "'");
  }
  return r;
}

Result<ReadStats> Dataset::read_into_unmapped(const Selection& selection, void* out, size_t out_bytes,
                                              const ReadOptions& options) const {
  const DatasetInfo& info = state_->info;
  const std::string source = "file '" + file_->path + "', dataset '" + info.path + "'";
  if (!state_->refusal.ok()) return state_->refusal;
  auto norm = normalize(selection, info.shape);
  if (!norm.ok()) return norm.status().with_context(source);
  const size_t elem_size = info.element.size;
  auto checked_bytes = checked_mul(norm->num_elements, elem_size);
  if (!checked_bytes) {
    return InvalidArgument(source + ": array is too big: the selection " +
                           shape_text(norm->out_shape) + " of " + info.type_text +
                           " needs more than 2^64 - 1 bytes");
  }
  const uint64_t bytes = *checked_bytes;
  if (out_bytes != bytes) {
    return InvalidArgument("the output buffer holds " + std::to_string(out_bytes) +
                           " bytes but the selection " + shape_text(norm->out_shape) + " of " +
                           info.type_text + " needs " + std::to_string(bytes));
  }
  ReadStats stats;
  if (bytes == 0) {
    stats.fallback_cause = "empty selection";
    return stats;
  }

  if (state_->external) return read_external(*norm, out, options, source);

  // Every selection maps to chunks (selection.h); only the dataset itself, or a small read on
  // the automatic route, sends a read to H5Dread.
  std::string cause;
  if (options.route == Route::kH5Dread) {
    cause = "H5Dread requested";
  } else if (!info.fast_path_blocker.empty()) {
    if (options.route == Route::kFastOnly) {
      return Unsupported(source + ": the fast path cannot read it: the dataset " +
                         info.fast_path_blocker + ". " + info.fix);
    }
    cause = info.fast_path_blocker;
    // A compact dataset is tiny by definition: H5Dread is the right reader, nothing to fix.
    if (info.layout != "compact") file_->note(info, cause, info.fix);
  } else if (options.route == Route::kAuto && bytes < file_->options.min_fast_path_bytes &&
             !state_->h5dread_lacks_filter) {
    cause = "small read (" + std::to_string(bytes) + " bytes, below " +
            std::to_string(file_->options.min_fast_path_bytes) + ")";
  }
  auto fast_read_request = [&](const ReadOptions& options, const NormalizedSelection& selection, void* out) {
    FastRead req;
    req.layout = &state_->layout;
    req.manifest = state_->manifest.get();
    req.workers = &file_->workers;
    req.helpers = &file_->helpers;
    req.selection = &selection;
    req.out = static_cast<uint8_t*>(out);
    req.threads = file_->threads;
    req.threads_chosen = file_->options.threads != 0;
    req.max_bytes_in_flight = file_->options.max_bytes_in_flight;
    req.progress = options.progress;
    req.cancel = options.cancel;
    req.hint_chunks = options.hint_chunks;
    req.source = source;
    return req;
  };
  // H5Dread serves the read; `why` becomes the read's fallback_cause. Except on the H5Dread
  // route (libhdf5 itself, asked for by name), a chunk index h5chunk's parser found damaged is
  // refused with that diagnosis first: libhdf5 crashes or hangs on some damaged indexes.
  auto read_with_h5dread = [&](std::string why) -> Result<ReadStats> {
    if (options.route != Route::kH5Dread && state_->manifest) {
      QuietHdf5Errors quiet;
      if (Status s = state_->manifest->damage(kMaxGridChunksParsedBeforeH5Dread); !s.ok()) {
        return s.with_context(source);
      }
      if (state_->verify_before_h5dread) {
        FastRead check = fast_read_request(options, *norm, out);
        check.verify_only = true;
        check.verified = &state_->verified;
        check.progress = nullptr;  // progress counts the bytes a fast-path read returns
        auto verified = read_chunks(check);
        if (!verified.ok()) return verified.status();  // names the source and the chunk
      }
    }
    // Whatever H5Dread leaves unwritten (it does not check every filter's output size) is then
    // zeros on every run, never the buffer's old bytes.
    std::memset(out, 0, bytes);
    Status s;
    if (std::string hazard; options.isolated_h5dread && !(hazard = h5dread_hazard(options.route)).empty()) {
      s = options.isolated_h5dread(selection, out, bytes, hazard);
      if (!s.ok()) return s;  // the runner names the file and the dataset
    } else {
      s = h5dread_selection(state_->dataset.get(), state_->element.mem_type.get(), elem_size, *norm, out);
    }
    if (!s.ok()) return s.with_context(source);
    stats.fallback_cause = std::move(why);
    return stats;
  };
  if (!cause.empty()) return read_with_h5dread(cause);

  if (info.layout == "contiguous") {
    ContiguousRead req;
    req.layout = &state_->layout;
    req.data_offset = state_->contiguous_offset;
    req.workers = &file_->workers;
    req.helpers = &file_->helpers;
    req.selection = &*norm;
    req.out = static_cast<uint8_t*>(out);
    req.threads = file_->threads;
    req.progress = options.progress;
    req.cancel = options.cancel;
    req.source = source;
    auto fast = read_contiguous(req);
    if (!fast.ok() && fast.status().code() == hubfs::Code::kUnsupported) {
      // Declined before reading anything: too many scattered pieces, H5Dread's sieve is better.
      return read_with_h5dread(fast.status().message());
    }
    return fast;
  }

  FastRead req = fast_read_request(options, *norm, out);
  // Route::kFastPath forces the fast path; H5Dread cannot stand in without its plugins. Nor,
  // for a dataset whose chunks are verified before H5Dread, would declining save anything: the
  // decline avoids locating the chunks, which the verification must do.
  req.may_decline = options.route == Route::kAuto && !state_->h5dread_lacks_filter &&
                    !state_->verify_before_h5dread;
  auto fast = [&] {
    QuietHdf5Errors quiet;  // one scope for the whole read: the per-chunk lookups nest in it
    return read_chunks(req);
  }();
  if (!fast.ok() && fast.status().code() == hubfs::Code::kUnsupported) {
    // Declined (see read_chunks): H5Dread is faster for this one, or libhdf5's own answers
    // about a chunk disagree and H5Dread is the reference. It rewrites the whole output.
    if (options.route == Route::kFastOnly) {
      return Unsupported(source + ": the fast path cannot read it: " + fast.status().message());
    }
    return read_with_h5dread(fast.status().message());
  }
  return fast;
}

std::string Dataset::h5dread_hazard(Route route) const {
  const DatasetInfo& info = state_->info;
  if (info.layout == "virtual") return "a virtual dataset, whose sources libhdf5 reads unchecked";
  if (info.layout != "chunked") return "";  // contiguous and compact data pass through no filter
  for (const FilterStep& f : info.filters) {
    if (f.id == kScaleOffsetFilter || f.id == kNbitFilter) {
      return std::string(f.id == kScaleOffsetFilter ? "the scale-offset" : "the n-bit") +
             " filter, which libhdf5 decodes trusting each chunk's header and size";
    }
  }
  if (route == Route::kH5Dread) return "H5Dread asked for by name: the chunks are not checked first";
  if (!state_->verify_before_h5dread) return "chunks that h5chunk cannot decode and check before H5Dread";
  return "";
}

Result<ReadStats> Dataset::read_external(const NormalizedSelection& selection, void* out,
                                         const ReadOptions& options, const std::string& source) const {
  ContiguousRead req;
  req.layout = &state_->layout;
  req.data_offset = 0;  // the segments laid end to end are the dataset's bytes
  req.workers = state_->external_workers.get();
  req.helpers = &file_->helpers;
  req.selection = &selection;
  req.out = static_cast<uint8_t*>(out);
  req.threads = file_->threads;
  req.progress = options.progress;
  req.cancel = options.cancel;
  req.source = source;
  auto r = read_contiguous(req);
  if (!r.ok() && r.status().code() == hubfs::Code::kUnsupported) {
    // H5Dread, the usual answer to such a selection, would read local files: not an option.
    return hubfs::IoError(source + ": " + r.status().message() +
                          "; its external storage is read by h5chunk only: read it in fewer, larger pieces");
  }
  return r;
}

}  // namespace h5chunk
