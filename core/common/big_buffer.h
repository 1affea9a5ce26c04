// Memory for large buffers (a compressed chunk, a decode target, a whole output array, a response
// body) in transparent huge pages.
//
// Why: filling fresh memory costs a page fault per 4 KiB page, and on a virtual machine a fault
// is dear (a paravirtualised interrupt enable on every one), so a cold read spent much of its CPU
// on faults; huge pages make that one fault per 2 MiB (docs/benchmarks.md, "Huge pages"). The
// kernel's setting here is "madvise": nothing is huge unless asked for.
//
// Unlike std::vector, nothing is zeroed: a buffer is written before it is read.
#pragma once

#include <cstddef>
#include <cstdint>

namespace hubfs {

// Asks for transparent huge pages on the whole 2 MiB pages inside [p, p + n) (n from 4 MiB; a
// hint, no error): for a large buffer allocated elsewhere (a std::string's reserve) that is about
// to be filled. Call it before the buffer is written.
void advise_huge_pages(void* p, size_t n);

// Maps the whole pages inside [p, p + n) into the process now, writable, as a first write would,
// without reading or writing a byte of them (MADV_POPULATE_WRITE): the faults and page zeroing
// of fresh memory are paid by the calling thread, ahead of the thread that fills the buffer.
// Concurrent writes by other threads are safe (no byte changes). False when the kernel cannot
// (before Linux 5.14) or a page is not mapped; nothing else changes then.
bool prefault_pages(const void* p, size_t n);

// n bytes (at least 1) to be freed with std::free, or null. From `huge_from` bytes on, whole
// 2 MiB pages, 2 MiB aligned (THP only maps aligned 2 MiB ranges) and advised into huge pages;
// below it, or when that allocation fails, plain malloc.
void* allocate_in_huge_pages(size_t n, size_t huge_from);

class BigBuffer {
 public:
  BigBuffer() = default;
  ~BigBuffer() { release(); }
  BigBuffer(BigBuffer&& other) noexcept : data_(other.data_), capacity_(other.capacity_) {
    other.data_ = nullptr;
    other.capacity_ = 0;
  }
  BigBuffer& operator=(BigBuffer&& other) noexcept;
  BigBuffer(const BigBuffer&) = delete;
  BigBuffer& operator=(const BigBuffer&) = delete;

  // At least n bytes (the old contents are not kept), or nullptr when they cannot be had (sizes
  // may come from a file: an allocation failure must not throw in a worker thread).
  uint8_t* reserve(size_t n);
  uint8_t* data() const { return data_; }
  size_t capacity() const { return capacity_; }
  void release();

 private:
  uint8_t* data_ = nullptr;  // from allocate_in_huge_pages
  size_t capacity_ = 0;
};

}  // namespace hubfs
