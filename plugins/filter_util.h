// What both HDF5 filter plugins share: reporting a failure on HDF5's error stack, and the
// buffer a filter hands back to HDF5 in place of the one it was given.
#pragma once

#include <hdf5.h>

#include <cstddef>
#include <string>

namespace hubfs_plugins {

// HDF5 chunk sizes are 32-bit: no chunk, hence no filter output, is larger than this.
inline constexpr size_t kMaxChunkBytes = 0xffffffffu;

// Pushes "<filter>: <message>" onto the calling thread's HDF5 error stack (what h5dump, h5py
// and H5Eprint show) and returns 0, which tells HDF5 the filter failed.
size_t fail(const char* function, const std::string& message);

// A buffer from H5allocate_memory: HDF5 frees filter output with its own allocator, so a
// filter must allocate what it hands over the same way. Frees itself unless handed over.
class H5Buffer {
 public:
  explicit H5Buffer(size_t capacity);  // data() is null if the allocation failed
  ~H5Buffer();
  H5Buffer(const H5Buffer&) = delete;
  H5Buffer& operator=(const H5Buffer&) = delete;

  unsigned char* data() const { return data_; }
  size_t capacity() const { return capacity_; }
  bool grow(size_t capacity);  // keeps the contents; false (and unchanged) if out of memory

  // Replaces HDF5's buffer *buf (freeing it) with this one, of which `used` bytes are the
  // filter's result, and returns `used` (what a filter returns on success).
  size_t hand_over(size_t used, size_t* buf_size, void** buf);

 private:
  unsigned char* data_ = nullptr;
  size_t capacity_ = 0;
};

}  // namespace hubfs_plugins
