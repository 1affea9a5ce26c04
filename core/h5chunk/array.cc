// The plain dtypes' names and sizes, and Array: a read's result, allocated without zeroing.
#include <sys/sysinfo.h>

#include <algorithm>
#include <cstdlib>
#include <new>

#include "common/big_buffer.h"
#include "h5chunk/checked.h"
#include "h5chunk/h5chunk.h"
#include "h5chunk/size_text.h"

namespace h5chunk {

using hubfs::InvalidArgument;

// ---------------------------------------------------------------------------------------------
// Types

const char* dtype_name(DType t) {
  switch (t) {
    case DType::kInt8: return "int8";
    case DType::kUInt8: return "uint8";
    case DType::kInt16: return "int16";
    case DType::kUInt16: return "uint16";
    case DType::kInt32: return "int32";
    case DType::kUInt32: return "uint32";
    case DType::kInt64: return "int64";
    case DType::kUInt64: return "uint64";
    case DType::kFloat32: return "float32";
    case DType::kFloat64: return "float64";
  }
  return "?";
}

size_t dtype_size(DType t) {
  switch (t) {
    case DType::kInt8: case DType::kUInt8: return 1;
    case DType::kInt16: case DType::kUInt16: return 2;
    case DType::kInt32: case DType::kUInt32: case DType::kFloat32: return 4;
    case DType::kInt64: case DType::kUInt64: case DType::kFloat64: return 8;
  }
  return 1;
}

// ---------------------------------------------------------------------------------------------
// Array

// Arrays at least this large live in transparent huge pages where the kernel allows it (THP
// "madvise" mode, as here): the first write to fresh memory costs more than decoding
// (docs/constants.md, kHugePageArrayBytes), and a 2 MiB page takes one fault where 4 KiB pages
// take 512 (common/big_buffer.h).
constexpr size_t kHugePageArrayBytes = 8u << 20;

namespace {

// Physical memory plus swap: the most an array whose every byte is written can occupy. Asking
// for more can only end in the OOM killer (or, under AddressSanitizer, an abort on an
// allocation larger than its allocator supports), so it is refused up front.
uint64_t memory_and_swap_bytes() {
  struct sysinfo si;
  if (::sysinfo(&si) != 0) return UINT64_MAX;
  auto total = checked_add(si.totalram, si.totalswap);
  auto bytes = total ? checked_mul(*total, si.mem_unit ? si.mem_unit : 1) : std::nullopt;
  return bytes.value_or(UINT64_MAX);
}

}  // namespace

Result<Array> Array::allocate(std::vector<uint64_t> shape, DType dtype) {
  return allocate(std::move(shape), dtype_size(dtype), dtype_name(dtype), dtype);
}

Result<Array> Array::allocate(std::vector<uint64_t> shape, size_t element_size,
                              const std::string& type_name, std::optional<DType> dtype) {
  const std::string what = "an array of shape " + shape_text(shape) + " of " + type_name;
  auto bytes = checked_product(shape, std::max<size_t>(element_size, 1));
  if (!bytes) {
    return InvalidArgument("array is too big: " + what + " needs more than 2^64 - 1 bytes");
  }
  const uint64_t limit = memory_and_swap_bytes();
  if (*bytes > limit) {
    return InvalidArgument("array is too big: " + what + " needs " + std::to_string(*bytes) +
                           " bytes (" + human_bytes(*bytes) +
                           "), more than this machine's memory and swap (" + human_bytes(limit) +
                           "); read a smaller selection");
  }
  void* p = hubfs::allocate_in_huge_pages(*bytes, kHugePageArrayBytes);
  if (!p) {
    return hubfs::Unavailable("out of memory: cannot allocate " + std::to_string(*bytes) +
                              " bytes (" + human_bytes(*bytes) + ") for " + what +
                              "; read a smaller selection or free memory");
  }
  Array array;
  array.shape_ = std::move(shape);
  array.dtype_ = dtype.value_or(DType::kUInt8);
  array.elem_size_ = std::max<size_t>(element_size, 1);
  array.nbytes_ = *bytes;
  array.data_.reset(static_cast<uint8_t*>(p));
  return array;
}

Array::Array(std::vector<uint64_t> shape, DType dtype) {
  auto array = allocate(std::move(shape), dtype);
  if (!array.ok()) throw std::bad_alloc();
  *this = std::move(*array);
}

void Array::Free::operator()(uint8_t* p) const { std::free(p); }

uint64_t Array::num_elements() const {
  return nbytes_ / elem_size_;  // allocate() checked the product
}

}  // namespace h5chunk
