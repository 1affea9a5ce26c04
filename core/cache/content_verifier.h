// Checks a whole file's bytes against its content id as they stream by: the LFS sha256
// ("sha256:<hex>") or the git blob id ("oid:<hex>", SHA-1 of "blob <size>\0" + bytes).
//
// The block cache's CRC protects bytes on disk; this protects them end to end, against a CDN
// or proxy that corrupts a body without changing its length. It can only judge a file read in
// full (a partial range has no hash to compare with: that needs the Hub's per-chunk Xet hashes).
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

namespace hubfs {

class ContentVerifier {
 public:
  // nullptr when the id is not a hash we can compute (unknown prefix or malformed hex).
  static std::unique_ptr<ContentVerifier> for_content(const std::string& content_id, uint64_t size);
  ~ContentVerifier();

  // Feeds the next bytes of the file, in order.
  void update(std::string_view bytes);
  uint64_t bytes_seen() const { return seen_; }
  // After exactly `size` bytes: the hex digest computed, and whether it equals the expected one.
  struct Verdict {
    bool match = false;
    std::string computed;
    std::string expected;
  };
  Verdict finish();

 private:
  struct Hasher;
  ContentVerifier(std::unique_ptr<Hasher> hasher, std::string expected, uint64_t size);

  std::unique_ptr<Hasher> hasher_;
  std::string expected_;
  uint64_t size_;
  uint64_t seen_ = 0;
};

}  // namespace hubfs
