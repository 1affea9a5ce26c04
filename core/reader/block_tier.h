// A block tier: one place a file's blocks may be kept (memory, the local disk cache, the shared
// tier of other machines), behind the same three calls. BlockTiers (block_tiers.h) stacks them
// and decides what moves between them; BlockReader asks it, never a tier directly.
//
// Blocks are named by the file's cache id (its content id, plus a suffix for a non-default block
// size: indices only mean something for one block size) and their index; `length` is what the
// block must measure (the last block of a file is short), so a tier never serves a block of the
// wrong length.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "common/deadline.h"

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

// One block of one file. The cache id is borrowed: it must outlive the call it is passed to.
struct BlockId {
  std::string_view cache_id;
  uint64_t index = 0;
  uint64_t length = 0;
};

class BlockTier {
 public:
  virtual ~BlockTier() = default;
  // The block, if this tier holds a good copy of the right length (a bad one is a miss).
  virtual std::optional<BlockBytes> get(const BlockId& id) = 0;
  // Several blocks of one file by `deadline` (what has not come by then is a miss); one round
  // trip for a tier behind a network. The default asks get() for each.
  virtual std::vector<std::optional<BlockBytes>> get_many(const std::vector<BlockId>& ids, const Deadline& deadline);
  // Keeps the block (or not: every tier may drop blocks at will; failures are never errors).
  virtual void put(const BlockId& id, const BlockBytes& bytes) = 0;
  // Drops the block (its file failed its hash: it must not be served again).
  virtual void remove(const BlockId& id) = 0;
};

inline std::vector<std::optional<BlockBytes>> BlockTier::get_many(const std::vector<BlockId>& ids, const Deadline&) {
  std::vector<std::optional<BlockBytes>> out;
  out.reserve(ids.size());
  for (const BlockId& id : ids) out.push_back(get(id));
  return out;
}

}  // namespace hubfs
