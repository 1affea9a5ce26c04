#include "cache/block_file.h"

#include <openssl/evp.h>

#include <cstring>

#include "cache/crc32c.h"

namespace hubfs::block_file {
namespace {

constexpr uint32_t kMagic = 0x4B424648;  // "HFBK" as little-endian bytes
constexpr size_t kKeyHashBytes = 16;     // 128 bits: accidental collisions are out of reach
constexpr size_t kHeaderCrcOffset = 44;  // the last header field, covering all before it
// NAME_MAX is 255; leave room for ".<20-digit index>" and stay far from the limit.
constexpr size_t kMaxEscapedName = 200;

void put_u32(char* p, uint32_t v) {
  for (int i = 0; i < 4; ++i) p[i] = static_cast<char>(v >> (8 * i));
}
void put_u64(char* p, uint64_t v) {
  for (int i = 0; i < 8; ++i) p[i] = static_cast<char>(v >> (8 * i));
}
uint32_t get_u32(const char* p) {
  uint32_t v = 0;
  for (int i = 0; i < 4; ++i) v |= static_cast<uint32_t>(static_cast<uint8_t>(p[i])) << (8 * i);
  return v;
}
uint64_t get_u64(const char* p) {
  uint64_t v = 0;
  for (int i = 0; i < 8; ++i) v |= static_cast<uint64_t>(static_cast<uint8_t>(p[i])) << (8 * i);
  return v;
}

std::string hex(const uint8_t* p, size_t n) {
  static const char kDigits[] = "0123456789abcdef";
  std::string out(2 * n, '0');
  for (size_t i = 0; i < n; ++i) {
    out[2 * i] = kDigits[p[i] >> 4];
    out[2 * i + 1] = kDigits[p[i] & 0xF];
  }
  return out;
}

bool is_plain(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-' ||
         c == '.';
}

}  // namespace

Digest digest_content_id(std::string_view content_id) {
  Digest d{};
  unsigned int len = 0;
  if (EVP_Digest(content_id.data(), content_id.size(), d.data(), &len, EVP_sha256(), nullptr) !=
      1) {
    // Cannot happen with the built-in provider; a zero digest still keeps keys apart through
    // the escaped name, and the header check still compares like with like.
    d.fill(0);
  }
  return d;
}

std::string shard_name(const Digest& digest) { return hex(digest.data(), 1); }

std::string file_name(std::string_view content_id, const Digest& digest, uint64_t index) {
  std::string name;
  bool escapable = !content_id.empty() && content_id.front() != '.';
  for (char c : content_id) {
    if (!escapable || name.size() > kMaxEscapedName) {
      escapable = false;
      break;
    }
    if (is_plain(c)) {
      name += c;
    } else if (c == '_') {
      name += "__";
    } else if (c == ':') {
      name += "_c";
    } else {
      escapable = false;
    }
  }
  if (!escapable || name.size() > kMaxEscapedName) name = "_h" + hex(digest.data(), digest.size());
  name += '.';
  name += std::to_string(index);
  return name;
}

bool is_temp_name(std::string_view file_name) { return file_name.starts_with(kTempPrefix); }

bool is_block_file(std::string_view name, uint64_t file_size) {
  if (file_size < kHeaderSize || file_size > kHeaderSize + kMaxDataBytes) return false;
  const size_t dot = name.rfind('.');
  // The index: decimal, as std::to_string writes a uint64_t.
  constexpr size_t kMaxIndexDigits = 20;
  if (dot == std::string_view::npos || dot == 0 || dot + 1 == name.size() || name.size() - dot - 1 > kMaxIndexDigits)
    return false;
  for (char c : name.substr(dot + 1))
    if (c < '0' || c > '9') return false;
  const std::string_view stem = name.substr(0, dot);
  if (stem.front() == '.') return false;
  if (stem.size() == 2 + 64 && stem.starts_with("_h")) {
    for (char c : stem.substr(2))
      if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'))) return false;
    return true;
  }
  if (stem.size() > kMaxEscapedName + 2) return false;
  for (size_t i = 0; i < stem.size(); ++i) {
    if (is_plain(stem[i])) continue;
    // '_' only as the escapes "__" and "_c".
    if (stem[i] != '_' || i + 1 == stem.size() || (stem[i + 1] != '_' && stem[i + 1] != 'c')) return false;
    ++i;
  }
  return true;
}

std::string encode(const Digest& digest, uint64_t index, std::string_view data) {
  std::string out = encode_header(digest, index, data);
  out.append(data.data(), data.size());
  return out;
}

std::string encode_header(const Digest& digest, uint64_t index, std::string_view data) {
  std::string out(kHeaderSize, '\0');
  char* h = out.data();
  put_u32(h + 0, kMagic);
  put_u32(h + 4, kFormatVersion);
  put_u64(h + 8, data.size());
  put_u64(h + 16, index);
  std::memcpy(h + 24, digest.data(), kKeyHashBytes);
  put_u32(h + 40, crc32c::value(data));
  put_u32(h + kHeaderCrcOffset, crc32c::extend(0, h, kHeaderCrcOffset));
  return out;
}

Status verify(std::string_view contents, const Digest& digest, uint64_t index) {
  if (contents.size() < kHeaderSize) return Corrupt("shorter than the block header");
  return verify(contents.substr(0, kHeaderSize), contents.substr(kHeaderSize), digest, index);
}

Status verify(std::string_view header, std::string_view data, const Digest& digest,
              uint64_t index) {
  if (Status s = verify_header(header, data.size(), digest, index); !s.ok()) return s;
  if (get_u32(header.data() + 40) != crc32c::value(data)) return Corrupt("data checksum mismatch");
  return Status::Ok();
}

Status verify_header(std::string_view header, uint64_t data_length, const Digest& digest, uint64_t index) {
  if (header.size() != kHeaderSize) return Corrupt("shorter than the block header");
  const char* h = header.data();
  if (get_u32(h + kHeaderCrcOffset) != crc32c::extend(0, h, kHeaderCrcOffset))
    return Corrupt("header checksum mismatch");
  if (get_u32(h + 0) != kMagic) return Corrupt("bad magic");
  if (get_u32(h + 4) != kFormatVersion) return Corrupt("unknown format version");
  if (get_u64(h + 8) != data_length) return Corrupt("length mismatch");
  if (get_u64(h + 16) != index) return Corrupt("block index mismatch");
  if (std::memcmp(h + 24, digest.data(), kKeyHashBytes) != 0) return Corrupt("content id mismatch");
  return Status::Ok();
}

}  // namespace hubfs::block_file
