// The on-disk form of one cached block: where it lives and what its file holds.
//
//   <dir>/blocks/<2 hex of sha256(content id)>/<escaped content id>.<index>
//
// The file is a fixed 48-byte little-endian header followed by the block's bytes:
//   0  u32  magic "HFBK"
//   4  u32  format version
//   8  u64  data length
//   16 u64  block index
//   24 16B  first half of sha256(content id): a file copied or renamed onto another key's path
//           is rejected instead of adopted
//   40 u32  CRC-32C of the data
//   44 u32  CRC-32C of header bytes [0, 44): a flipped bit anywhere in the file is caught
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "common/status.h"

namespace hubfs::block_file {

constexpr size_t kHeaderSize = 48;  // the fields above; fixed so a file's size checks its length
// Callers choose block sizes (1 MiB by default); 64 MiB bounds what one get() may allocate.
constexpr uint64_t kMaxDataBytes = 64ull << 20;
// Bumped when the layout changes: files of another version fail verification and are re-fetched.
constexpr uint32_t kFormatVersion = 1;

using Digest = std::array<uint8_t, 32>;
Digest digest_content_id(std::string_view content_id);

// "ab": one of 256 shard directories, so no directory grows past a few thousand entries.
std::string shard_name(const Digest& digest);
// "sha256_c<hex>.<index>". Content ids are escaped injectively into [A-Za-z0-9_.-] ('_' -> "__",
// ':' -> "_c"); ids with any other character, too long, empty or starting with '.' become
// "_h<hex of digest>", a form escaping never produces. Never starts with '.', so it cannot be
// mistaken for a temp file.
std::string file_name(std::string_view content_id, const Digest& digest, uint64_t index);

// Whether a file found in the blocks directory can be a block: a name file_name() produces
// ("<escaped id>.<index>" or "_h<64 hex>.<index>") and a size a block file can have (a header
// and at most kMaxDataBytes). Anything else is not the cache's: the mount's budget scan neither
// counts nor evicts it (a 10 GiB file dropped there must not push good blocks out); `hubfs cache
// verify` is what deletes such files.
bool is_block_file(std::string_view file_name, uint64_t file_size);

// Temp files are dot files in the target's directory: ".tmp.<pid>.<tid>.<counter>".
constexpr std::string_view kTempPrefix = ".tmp.";
bool is_temp_name(std::string_view file_name);

// Header followed by data, ready to be written.
std::string encode(const Digest& digest, uint64_t index, std::string_view data);
// The header alone (kHeaderSize bytes): written before `data` itself, it makes the same file
// without copying the data into one buffer first.
std::string encode_header(const Digest& digest, uint64_t index, std::string_view data);
// Checks every header field and the data checksum against the expected key. Ok means
// contents.substr(kHeaderSize) is exactly the block that was put; otherwise kCorrupt, saying why.
Status verify(std::string_view contents, const Digest& digest, uint64_t index);
// The same, for a file read as its first kHeaderSize bytes and the rest (the block's bytes).
Status verify(std::string_view header, std::string_view data, const Digest& digest, uint64_t index);
// Every header field against the expected key and a data length, but not the data's checksum:
// for a reader of part of a block that checks those bytes itself (BlockCache::read_part).
Status verify_header(std::string_view header, uint64_t data_length, const Digest& digest, uint64_t index);

}  // namespace hubfs::block_file
