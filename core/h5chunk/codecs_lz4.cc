// LZ4 filter (32004), HDF5 framing: u64 BE plain size, u32 BE block size, then per block a
// u32 BE compressed size and a raw LZ4 block; a block whose compressed size equals its plain
// size is stored as is.
#include <lz4.h>

#include <algorithm>
#include <cstring>
#include <string>

#include "h5chunk/codecs.h"

namespace h5chunk::codec {
namespace {

constexpr size_t kLz4HeaderBytes = 12;      // u64 plain size + u32 block size

std::string lz4_block_error(size_t block, const std::string& what) {
  return "lz4: block " + std::to_string(block) + " " + what;
}

}  // namespace

Result<size_t> lz4_hdf5_decode(const uint8_t* in, size_t in_size, Target out) {
  if (in_size < kLz4HeaderBytes) {
    return hubfs::Corrupt("lz4: " + std::to_string(in_size) + " bytes is shorter than the 12-byte header");
  }
  uint64_t total = load_be64(in);
  uint64_t block_size = load_be32(in + 8);
  if (Status st = check_announced_size("lz4", total, out); !st.ok()) return st;
  // No writer stores a block size of 0 (the HDF5 plugin fails on it, and it would loop here):
  // the header lies. One larger than the chunk is capped at it, as the plugin does.
  if (block_size == 0 && total > 0) {
    return hubfs::Corrupt("lz4: the header gives a block size of 0 for " + std::to_string(total) + " bytes");
  }
  if (block_size > total) block_size = total;
  // LZ4_decompress_safe counts in int.
  if (block_size > static_cast<uint64_t>(LZ4_MAX_INPUT_SIZE)) {
    return hubfs::Corrupt("lz4: block size " + std::to_string(block_size) + " exceeds what LZ4 can decode");
  }

  size_t pos = kLz4HeaderBytes;
  size_t written = 0;
  for (size_t block = 0; written < total; ++block) {
    size_t plain = static_cast<size_t>(std::min<uint64_t>(block_size, total - written));
    auto framed = next_framed_block(in, in_size, pos, "lz4", block);
    if (!framed.ok()) return framed.status();
    const size_t compressed = *framed;
    if (compressed == plain) {
      std::memcpy(out.data + written, in + pos, plain);
    } else {
      int got = LZ4_decompress_safe(reinterpret_cast<const char*>(in + pos),
                                    reinterpret_cast<char*>(out.data + written), static_cast<int>(compressed),
                                    static_cast<int>(plain));
      if (got < 0) return hubfs::Corrupt(lz4_block_error(block, "is not valid LZ4"));
      if (static_cast<size_t>(got) != plain) {
        return hubfs::Corrupt(lz4_block_error(
            block, "decoded " + std::to_string(got) + " bytes, expected " + std::to_string(plain)));
      }
    }
    pos += compressed;
    written += plain;
  }
  if (pos != in_size) {
    return hubfs::Corrupt("lz4: " + std::to_string(in_size - pos) + " bytes after the last block");
  }
  return written;
}

}  // namespace h5chunk::codec
