// `hubfs cache verify [--complete]`: checks every cached block's checksum, re-hashes every
// completely cached file against its content id and, with --complete, fetches what partly cached
// files lack from the Hub so they are verified whole too (core/cache/cache_admin.h). Bad files
// are purged from the disk cache and, with --shared-cache, from the shared tier.
#pragma once

#include <string>
#include <vector>

namespace hubfs {

struct CacheVerifyConfig {
  std::string cache_dir;  // already defaulted
  bool complete = false;
  std::string endpoint;   // already defaulted (flag, $HF_ENDPOINT, https://huggingface.co)
  std::string ca_bundle;  // --ca-bundle; "" = the environment's (choose_ca_bundle)
  std::vector<std::string> shared_cache;  // memcached servers; empty = no shared tier
  std::string shared_cache_key_file;
  int read_timeout_s = 120;  // each range fetched by --complete (retries included)
};

// Exit codes, for scripts (the last line printed says the same in words):
constexpr int kVerifyClean = 0;       // every cached file verified whole; nothing bad
constexpr int kVerifyBadFound = 1;    // bad blocks or files found and deleted (see "refetched")
constexpr int kVerifyError = 2;       // could not run (no such cache, bad arguments)
constexpr int kVerifyUnverified = 3;  // nothing bad, but partly cached files remain unverified

int run_cache_verify(const CacheVerifyConfig& config);

}  // namespace hubfs
