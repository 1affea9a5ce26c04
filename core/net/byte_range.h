// A range of a file's bytes: what a range request asks for and what a range hint names.
#pragma once

#include <cstdint>

namespace hubfs {

struct ByteRange {
  uint64_t offset = 0;
  uint64_t length = 0;
  bool operator==(const ByteRange&) const = default;
};

}  // namespace hubfs
