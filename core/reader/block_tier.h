// A block tier: one place a file's blocks may be kept (memory, the local disk cache, the shared
// tier of other machines), behind the same three calls. TierStack (tier_stack.h) stacks them
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
#include "reader/block_bytes.h"

namespace hubfs {

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
