// Digests of a test's bytes. SHA-256, as lowercase hex: the content hash hubfs verifies a whole file
// against (an LFS file's oid), computed independently of core/ with OpenSSL's one-shot call.
#pragma once

#include <openssl/evp.h>

#include <string>

namespace hubfs::testing {

inline std::string digest_hex(const std::string& data, const EVP_MD* md) {
  unsigned char digest[EVP_MAX_MD_SIZE];
  unsigned int n = 0;
  EVP_Digest(data.data(), data.size(), digest, &n, md, nullptr);
  static const char kHex[] = "0123456789abcdef";
  std::string hex;
  for (unsigned i = 0; i < n; ++i) {
    hex += kHex[digest[i] >> 4];
    hex += kHex[digest[i] & 15];
  }
  return hex;
}

inline std::string sha256_hex(const std::string& data) { return digest_hex(data, EVP_sha256()); }

// The same bytes' git blob id (a small file's oid): a second content id that names them and
// verifies, for a test that needs the bytes uncached under a new key without a false hash.
inline std::string git_blob_id(const std::string& data) {
  return "oid:" + digest_hex("blob " + std::to_string(data.size()) + std::string(1, '\0') + data, EVP_sha1());
}

}  // namespace hubfs::testing
