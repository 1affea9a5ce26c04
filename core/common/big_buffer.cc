#include "common/big_buffer.h"

#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <utility>

namespace hubfs {

namespace {
constexpr size_t kHugePage = 2u << 20;
// BigBuffer's buffers from this size on are in huge pages: a chunk of a few MiB is filled once
// and read once, and every 4 KiB fault of it counts.
constexpr size_t kBufferHugeFrom = 1u << 20;

uintptr_t round_up_to_huge_page(uintptr_t x) { return (x + kHugePage - 1) / kHugePage * kHugePage; }
}  // namespace

void advise_huge_pages(void* p, size_t n) {
  if (n < 2 * kHugePage) return;
  const uintptr_t start = reinterpret_cast<uintptr_t>(p);
  const uintptr_t first = round_up_to_huge_page(start);
  const uintptr_t last = (start + n) / kHugePage * kHugePage;
  if (last > first) (void)::madvise(reinterpret_cast<void*>(first), last - first, MADV_HUGEPAGE);
}

bool prefault_pages(const void* p, size_t n) {
#ifdef MADV_POPULATE_WRITE
  static const uintptr_t kPage = static_cast<uintptr_t>(::sysconf(_SC_PAGESIZE));
  const uintptr_t start = reinterpret_cast<uintptr_t>(p);
  const uintptr_t first = (start + kPage - 1) / kPage * kPage;
  const uintptr_t last = (start + n) / kPage * kPage;
  if (!p || last <= first) return true;  // no whole page inside: nothing to do
  return ::madvise(reinterpret_cast<void*>(first), last - first, MADV_POPULATE_WRITE) == 0;
#else
  (void)p;
  (void)n;
  return false;
#endif
}

void* allocate_in_huge_pages(size_t n, size_t huge_from) {
  void* p = nullptr;
  if (n >= huge_from && n <= SIZE_MAX - kHugePage) {
    const size_t rounded = round_up_to_huge_page(n);
    p = std::aligned_alloc(kHugePage, rounded);
    if (p) (void)::madvise(p, rounded, MADV_HUGEPAGE);  // a hint: without THP, nothing
  }
  return p ? p : std::malloc(std::max<size_t>(n, 1));
}

BigBuffer& BigBuffer::operator=(BigBuffer&& other) noexcept {
  if (this != &other) {
    release();
    std::swap(data_, other.data_);
    std::swap(capacity_, other.capacity_);
  }
  return *this;
}

uint8_t* BigBuffer::reserve(size_t n) {
  if (n <= capacity_ && data_) return data_;
  release();
  data_ = static_cast<uint8_t*>(allocate_in_huge_pages(n, kBufferHugeFrom));
  capacity_ = data_ ? n : 0;
  return data_;
}

void BigBuffer::release() {
  std::free(data_);
  data_ = nullptr;
  capacity_ = 0;
}

}  // namespace hubfs
