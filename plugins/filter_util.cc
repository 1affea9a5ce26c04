#include "filter_util.h"

namespace hubfs_plugins {

size_t fail(const char* function, const std::string& message) {
  H5Epush2(H5E_DEFAULT, __FILE__, function, __LINE__, H5E_ERR_CLS, H5E_PLINE, H5E_CANTFILTER, "%s",
           message.c_str());
  return 0;
}

H5Buffer::H5Buffer(size_t capacity) {
  // At least one byte: H5allocate_memory(0) returns null, which would read as out of memory.
  data_ = static_cast<unsigned char*>(H5allocate_memory(capacity ? capacity : 1, false));
  capacity_ = data_ ? capacity : 0;
}

H5Buffer::~H5Buffer() {
  if (data_) H5free_memory(data_);
}

bool H5Buffer::grow(size_t capacity) {
  void* p = H5resize_memory(data_, capacity);
  if (!p) return false;
  data_ = static_cast<unsigned char*>(p);
  capacity_ = capacity;
  return true;
}

size_t H5Buffer::hand_over(size_t used, size_t* buf_size, void** buf) {
  H5free_memory(*buf);
  *buf = data_;
  *buf_size = capacity_;
  data_ = nullptr;
  capacity_ = 0;
  return used;
}

}  // namespace hubfs_plugins
