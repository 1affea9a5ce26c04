// Element types: what a dataset's stored type is, the memory type h5chunk returns it as (what
// h5py asks H5Dread for, in native byte order), how to describe it to numpy, and the in-place
// byte conversion that turns stored elements into returned ones on the fast path.
//
// The conversion is derived once per dataset and applied to each chunk right after it is
// decoded (chunk_queue.cc), so it costs one pass over bytes already in cache and never a separate
// pass over the whole output. It only does what H5Dread's conversion does for these type
// pairs: reverse the bytes of big-endian numbers, and clear what follows a null-terminated
// string's terminator. Anything else (integers of unusual precision, space-padded strings)
// leaves `fast_path_blocker` set and H5Dread converts.
#pragma once

#include <hdf5.h>

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "h5chunk/h5chunk.h"
#include "h5chunk/hdf5_handle.h"

namespace h5chunk {

struct ConversionOp {
  enum Kind : uint8_t {
    kSwap,      // reverse `size` bytes (one big-endian number)
    kNullTerm,  // a null-terminated string of `size` bytes: zero everything after the first
                // NUL, as H5Dread's conversion to the null-padded strings h5py reads does
    kZero,      // padding bytes of a number (x86 long double: 80 bits in 16 bytes), which
                // H5Dread leaves undefined: zeroed so results are deterministic
  };
  uint32_t offset = 0;  // within the element
  uint32_t size = 0;
  Kind kind = kSwap;
};

// The in-place conversion of whole elements; empty when the stored bytes are the returned ones.
class Conversion {
 public:
  Conversion() = default;
  Conversion(std::vector<ConversionOp> ops, size_t elem_size);
  bool empty() const { return ops_.empty(); }
  const std::vector<ConversionOp>& ops() const { return ops_; }
  // Converts bytes / elem_size whole elements starting at `data` (bytes is a multiple of it).
  void apply(uint8_t* data, size_t bytes) const;

 private:
  std::vector<ConversionOp> ops_;
  size_t elem_size_ = 0;
  // 2, 4 or 8 when every op swaps one word of that size and together they tile the element
  // (a big-endian number, complex number, or record of equal-sized numbers): then the whole
  // buffer is swapped word by word in one loop the compiler vectorises.
  uint32_t word_swap_ = 0;
};

struct ElementDescription {
  ElementType type;
  std::optional<DType> dtype;     // set for the plain numeric types DType names
  Hid mem_type;                   // what H5Dread is asked for; the fill value is read as this
  Conversion conversion;          // stored -> returned bytes on the fast path
  std::string unsupported;        // non-empty: no read is possible (why, e.g. "variable-length string")
  bool damaged = false;           // `unsupported` is what only a damaged datatype message says
                                  // (a compound member outside its record, a name twice): numpy
                                  // and h5py cannot represent it either, so the dataset is corrupt
  std::string fast_path_blocker;  // non-empty: H5Dread must convert (why)
};

// Describes `file_type` (a dataset's H5Dget_type). Never fails: what cannot be described is
// reported in `unsupported`.
ElementDescription describe_element(hid_t file_type);

}  // namespace h5chunk
