#include "h5chunk/filter_checks.h"

#include <string>

#include "h5chunk/checked.h"

namespace h5chunk {

namespace {

using hubfs::Corrupt;
using hubfs::Status;

// Scale-offset's parameters (H5Zscaleoffset.c: H5Z_SCALEOFFSET_PARM_*) and its chunk header:
// minbits (u32 LE), the size of minval (u8), minval, padded to 21 bytes.
constexpr size_t kSoScaleType = 0, kSoScaleFactor = 1, kSoNelmts = 2, kSoClass = 3, kSoSize = 4;
constexpr size_t kSoParams = 8;  // the fill value follows
constexpr unsigned kSoClassInteger = 0;
constexpr unsigned kSoScaleInt = 2;  // H5Z_SO_INT
constexpr size_t kSoHeaderBytes = 21;

// N-bit's parameters for an atomic type (H5Znbit.c): [0] their count, [1] "need not compress",
// [2] elements, [3] class (1 = atomic), [4] size, [5] order, [6] precision, [7] offset.
constexpr size_t kNbNeedNotCompress = 1, kNbNelmts = 2, kNbClass = 3, kNbSize = 4, kNbPrecision = 6,
                 kNbOffset = 7;
constexpr unsigned kNbClassAtomic = 1;

std::string n(uint64_t v) { return std::to_string(v); }

Status check_elements(const char* filter, uint64_t nelmts, uint64_t size, size_t elem_size, uint64_t chunk_elems) {
  if (nelmts != chunk_elems || size != elem_size) {
    return Corrupt(std::string(filter) + ": its parameters give " + n(nelmts) + " elements of " + n(size) +
                   " bytes per chunk, but the chunk holds " + n(chunk_elems) + " of " + n(elem_size));
  }
  return Status::Ok();
}

Status check_scaleoffset(const std::vector<unsigned>& cd, size_t elem_size, uint64_t chunk_elems, const uint8_t* in,
                         size_t in_size) {
  if (cd.size() < kSoParams) return Corrupt("scale-offset: " + n(cd.size()) + " parameters, fewer than its 8");
  if (Status s = check_elements("scale-offset", cd[kSoNelmts], cd[kSoSize], elem_size, chunk_elems); !s.ok()) return s;
  const uint64_t bits = uint64_t{cd[kSoSize]} * 8;
  const uint64_t chunk_bytes = chunk_elems * elem_size;  // the caller's chunk, already bounded
  // An integer type stored at full precision is not processed: the stored bytes are the chunk.
  if (cd[kSoClass] == kSoClassInteger && cd[kSoScaleType] == kSoScaleInt && cd[kSoScaleFactor] == bits) {
    if (in_size != chunk_bytes) {
      return Corrupt("scale-offset: a chunk stored at full precision holds " + n(in_size) + " bytes, not " +
                     n(chunk_bytes));
    }
    return Status::Ok();
  }
  if (in_size < kSoHeaderBytes) {
    return Corrupt("scale-offset: the chunk holds " + n(in_size) + " bytes, less than its 21-byte header");
  }
  const uint32_t minbits = uint32_t{in[0]} | uint32_t{in[1]} << 8 | uint32_t{in[2]} << 16 | uint32_t{in[3]} << 24;
  if (minbits > bits) {
    return Corrupt("scale-offset: the chunk's header gives " + n(minbits) + " bits per element, more than the " +
                   n(bits) + " of its type");
  }
  // Packed minbits bits per element after the header (the full-precision case copies the chunk).
  const uint64_t needed = kSoHeaderBytes + (minbits == bits ? chunk_bytes : (chunk_elems * minbits + 7) / 8);
  if (in_size < needed) {
    return Corrupt("scale-offset: the chunk holds " + n(in_size) + " bytes, but " + n(minbits) +
                   " bits for each of its " + n(chunk_elems) + " elements need " + n(needed));
  }
  return Status::Ok();
}

Status check_nbit(const std::vector<unsigned>& cd, size_t elem_size, uint64_t chunk_elems, size_t in_size) {
  if (cd.size() <= kNbClass) return Corrupt("n-bit: " + n(cd.size()) + " parameters, fewer than its 4");
  const uint64_t chunk_bytes = chunk_elems * elem_size;
  if (cd[kNbNeedNotCompress]) {  // stored as is
    if (in_size != chunk_bytes) {
      return Corrupt("n-bit: a chunk stored uncompressed holds " + n(in_size) + " bytes, not " + n(chunk_bytes));
    }
    return Status::Ok();
  }
  if (cd[kNbNelmts] != chunk_elems) {
    return Corrupt("n-bit: its parameters give " + n(cd[kNbNelmts]) + " elements per chunk, but the chunk holds " +
                   n(chunk_elems));
  }
  if (cd[kNbClass] != kNbClassAtomic) return Status::Ok();  // records and arrays: sizes per member, not checked
  if (cd.size() <= kNbOffset) return Corrupt("n-bit: " + n(cd.size()) + " parameters, fewer than its 8");
  if (Status s = check_elements("n-bit", cd[kNbNelmts], cd[kNbSize], elem_size, chunk_elems); !s.ok()) return s;
  const uint64_t precision = cd[kNbPrecision], offset = cd[kNbOffset], bits = uint64_t{cd[kNbSize]} * 8;
  if (precision == 0 || precision > bits || offset > bits - precision) {
    return Corrupt("n-bit: a precision of " + n(precision) + " bits at offset " + n(offset) + " does not fit its " +
                   n(bits) + "-bit type");
  }
  const uint64_t needed = (chunk_elems * precision + 7) / 8;
  if (in_size < needed) {
    return Corrupt("n-bit: the chunk holds " + n(in_size) + " bytes, but " + n(precision) + " bits for each of its " +
                   n(chunk_elems) + " elements need " + n(needed));
  }
  return Status::Ok();
}

}  // namespace

UncheckedStage unchecked_stage(const std::vector<FilterStep>& pipeline, uint32_t filter_mask) {
  UncheckedStage stage;
  bool undo_after = false;
  for (size_t i = pipeline.size(); i-- > 0;) {  // in decode order
    if (i < 32 && (filter_mask >> i & 1)) continue;  // skipped for this chunk
    const FilterStep& f = pipeline[i];
    if (f.id == kScaleOffsetFilter || f.id == kNbitFilter) {
      stage.undo_after = undo_after;
      stage.step = &f;
      stage.after.assign(pipeline.begin() + long(i) + 1, pipeline.end());
      stage.after_mask = i + 1 < 32 ? filter_mask >> (i + 1) : 0;
      return stage;
    }
    if (!unsupported_filter({f}).empty()) return stage;  // its output cannot be had here
    undo_after = true;
  }
  return stage;
}

hubfs::Status check_unchecked_filter_input(const FilterStep& step, size_t elem_size, uint64_t chunk_elems,
                                           const uint8_t* in, size_t in_size) {
  if (step.id == kScaleOffsetFilter) return check_scaleoffset(step.cd_values, elem_size, chunk_elems, in, in_size);
  if (step.id == kNbitFilter) return check_nbit(step.cd_values, elem_size, chunk_elems, in_size);
  return Status::Ok();
}

}  // namespace h5chunk
