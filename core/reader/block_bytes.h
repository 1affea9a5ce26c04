// A block's bytes as the reader hands them out (BlockReader::read_slices, FsApi::read, HubFile):
// its own header, so what only passes them on need not include the reader.
#pragma once

#include <cstddef>
#include <memory>
#include <string>
#include <string_view>

namespace hubfs {

// A block's bytes: a slice of a shared buffer (a whole coalesced response, or one block file), so
// cutting a response into blocks copies nothing.
struct BlockBytes {
  std::shared_ptr<const std::string> buffer;
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
