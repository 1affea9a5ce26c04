#include "common/big_buffer.h"

#include <sys/mman.h>

#include <new>
#include <utility>

namespace hubfs {

namespace {
constexpr size_t kHugePage = 2u << 20;
// Below this a buffer comes from the heap: a mapping of its own costs two system calls, and
// a small buffer is too small to gain from huge pages.
constexpr size_t kMapFrom = 1u << 20;
}  // namespace

void advise_huge_pages(void* p, size_t n) {
  if (n < 2 * kHugePage) return;
  const uintptr_t start = reinterpret_cast<uintptr_t>(p);
  const uintptr_t first = (start + kHugePage - 1) / kHugePage * kHugePage;
  const uintptr_t last = (start + n) / kHugePage * kHugePage;
  if (last > first) (void)::madvise(reinterpret_cast<void*>(first), last - first, MADV_HUGEPAGE);
}

BigBuffer& BigBuffer::operator=(BigBuffer&& other) noexcept {
  if (this != &other) {
    release();
    std::swap(data_, other.data_);
    std::swap(capacity_, other.capacity_);
    std::swap(mapped_, other.mapped_);
  }
  return *this;
}

uint8_t* BigBuffer::reserve(size_t n) {
  if (n <= capacity_ && data_) return data_;
  release();
  if (n < kMapFrom) {
    data_ = new (std::nothrow) uint8_t[n == 0 ? 1 : n];
    capacity_ = data_ ? n : 0;
    return data_;
  }
  // Whole huge pages, 2 MiB aligned (THP only maps aligned 2 MiB ranges): one huge page more is
  // mapped, and what lies before the aligned start and past its end is given back.
  const size_t length = (n + kHugePage - 1) / kHugePage * kHugePage;
  void* p = ::mmap(nullptr, length + kHugePage, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (p == MAP_FAILED) return nullptr;
  const uintptr_t start = reinterpret_cast<uintptr_t>(p);
  const uintptr_t aligned = (start + kHugePage - 1) / kHugePage * kHugePage;
  if (aligned > start) ::munmap(p, aligned - start);
  if (const size_t tail = start + length + kHugePage - (aligned + length); tail > 0)
    ::munmap(reinterpret_cast<void*>(aligned + length), tail);
  (void)::madvise(reinterpret_cast<void*>(aligned), length, MADV_HUGEPAGE);  // a hint: without THP, nothing
  data_ = reinterpret_cast<uint8_t*>(aligned);
  capacity_ = n;
  mapped_ = length;
  return data_;
}

void BigBuffer::release() {
  if (mapped_) {
    ::munmap(data_, mapped_);
  } else {
    delete[] data_;
  }
  data_ = nullptr;
  capacity_ = 0;
  mapped_ = 0;
}

}  // namespace hubfs
