#include "cache/content_verifier.h"

#include <openssl/evp.h>

#include "common/text.h"

namespace hubfs {

struct ContentVerifier::Hasher {
  EVP_MD_CTX* ctx = EVP_MD_CTX_new();
  ~Hasher() { EVP_MD_CTX_free(ctx); }
};

std::unique_ptr<ContentVerifier> ContentVerifier::for_content(const std::string& content_id, uint64_t size) {
  std::string_view id(content_id);
  const EVP_MD* md = nullptr;
  std::string prefix;  // what git hashes before the bytes
  std::string_view hex;
  if (id.starts_with("sha256:") && is_hex(id.substr(7), 64)) {
    md = EVP_sha256();
    hex = id.substr(7);
  } else if (id.starts_with("oid:") && is_hex(id.substr(4), 40)) {
    md = EVP_sha1();
    hex = id.substr(4);
    prefix = "blob " + std::to_string(size) + std::string(1, '\0');
  } else {
    return nullptr;
  }
  auto hasher = std::make_unique<Hasher>();
  if (!hasher->ctx || EVP_DigestInit_ex(hasher->ctx, md, nullptr) != 1) return nullptr;
  if (!prefix.empty()) EVP_DigestUpdate(hasher->ctx, prefix.data(), prefix.size());
  return std::unique_ptr<ContentVerifier>(new ContentVerifier(std::move(hasher), ascii_lower(hex), size));
}

ContentVerifier::ContentVerifier(std::unique_ptr<Hasher> hasher, std::string expected, uint64_t size)
    : hasher_(std::move(hasher)), expected_(std::move(expected)), size_(size) {}

ContentVerifier::~ContentVerifier() = default;

void ContentVerifier::update(std::string_view bytes) {
  EVP_DigestUpdate(hasher_->ctx, bytes.data(), bytes.size());
  seen_ += bytes.size();
}

ContentVerifier::Verdict ContentVerifier::finish() {
  unsigned char digest[EVP_MAX_MD_SIZE];
  unsigned int n = 0;
  EVP_DigestFinal_ex(hasher_->ctx, digest, &n);
  static const char kHex[] = "0123456789abcdef";
  Verdict v;
  for (unsigned i = 0; i < n; ++i) {
    v.computed += kHex[digest[i] >> 4];
    v.computed += kHex[digest[i] & 15];
  }
  v.expected = expected_;
  v.match = seen_ == size_ && v.computed == expected_;
  return v;
}

}  // namespace hubfs
