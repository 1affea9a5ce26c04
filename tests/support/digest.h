// SHA-256 of a test's bytes, as lowercase hex: the content hash hubfs verifies a whole file
// against (an LFS file's oid), computed independently of core/ with OpenSSL's one-shot call.
#pragma once

#include <openssl/evp.h>

#include <string>

namespace hubfs::testing {

inline std::string sha256_hex(const std::string& data) {
  unsigned char digest[EVP_MAX_MD_SIZE];
  unsigned int n = 0;
  EVP_Digest(data.data(), data.size(), digest, &n, EVP_sha256(), nullptr);
  static const char kHex[] = "0123456789abcdef";
  std::string hex;
  for (unsigned i = 0; i < n; ++i) {
    hex += kHex[digest[i] >> 4];
    hex += kHex[digest[i] & 15];
  }
  return hex;
}

}  // namespace hubfs::testing
