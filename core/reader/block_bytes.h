// A block's bytes as the reader hands them out (BlockReader::read_slices, FsApi::read, HubFile):
// its own header, so what only passes them on need not include the reader.
#pragma once

#include <cstddef>
#include <memory>
#include <string>
#include <string_view>

namespace hubfs {

// A buffer blocks are cut from, shared: a string (a whole coalesced response, a shared-tier value)
// or memory a BlockBufferPool lends (a block read from the disk cache: reader/block_buffers.h).
// Copying one copies no bytes. `buffer->data()`, `buffer->size()` and `buffer.get()` (the
// buffer's identity, for accounting) read as they would for a shared_ptr to a string.
class SharedBytes {
 public:
  SharedBytes() = default;
  // Implicit: a string is the usual buffer.
  SharedBytes(std::shared_ptr<const std::string> s)  // NOLINT(google-explicit-constructor)
      : data_(s ? s->data() : nullptr), size_(s ? s->size() : 0), owner_(std::move(s)) {}
  // `size` bytes at `data`, alive while `owner` is.
  SharedBytes(std::shared_ptr<const void> owner, const char* data, size_t size)
      : data_(data), size_(size), owner_(std::move(owner)) {}
  const char* data() const { return data_; }
  size_t size() const { return size_; }
  const void* get() const { return owner_.get(); }
  const SharedBytes* operator->() const { return this; }
  explicit operator bool() const { return owner_ != nullptr; }

 private:
  const char* data_ = nullptr;
  size_t size_ = 0;
  std::shared_ptr<const void> owner_;
};

// A block's bytes: a slice of a shared buffer (a whole coalesced response, or one block file), so
// cutting a response into blocks copies nothing.
struct BlockBytes {
  SharedBytes buffer;
  size_t offset = 0;
  size_t length = 0;
  // Fetched from a file's own source, whose whole-file check covers these bytes
  // (Provenance::kFileHashed, net/range_source.h); false for every other fetch and for blocks
  // from a lower tier. Kept with the block in memory, where the reader's FileVerifier reads it.
  bool source_checked = false;
  const char* data() const { return buffer->data() + offset; }
  size_t size() const { return length; }
  std::string_view view() const { return {data(), length}; }
};

}  // namespace hubfs
