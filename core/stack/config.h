// What a door into a repo is built from (SessionConfig: a mount's options less its FUSE-only
// ones) and the defaults the environment gives it. Plain values: nothing here builds anything
// (stack/stack.h does).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "cache/cache_key.h"
#include "common/status.h"

namespace hubfs {

struct CurlOptions;

// Everything that decides how bytes are fetched, cached and verified: a mount's options less its
// FUSE-only ones (fuse/mount.h's MountConfig extends this).
struct SessionConfig {
  std::string endpoint;   // already defaulted (flag, $HF_ENDPOINT, https://huggingface.co)
  std::string cache_dir;  // already defaulted (default_cache_dir)
  uint64_t cache_size = 10ull << 30;  // 0: no disk cache at all
  int read_timeout_s = 120;           // a read not served by then fails (EIO)
  // The reader hashes every file read whole against its content id (ReaderOptions). Off only for
  // a session whose one reader hashes what it reads itself: `hubfs cp` (copy_file), where the
  // reader's hash would be the same SHA-256 a second time.
  bool verify_whole_files = true;
  // How long a request may wait, in all, for the Hub's quota windows (the Hub's windows are 5
  // minutes: longer than that, so a spent quota is always waited out).
  int rate_limit_wait_s = 330;
  int max_requests = 16;  // HTTP requests in flight
  // curl's receive buffer per transfer (CurlOptions::receive_buffer_bytes). hf:// in Python
  // takes 64 KiB: no mallopt there (unlike the daemon), and glibc faulted each transfer's 512
  // KiB in afresh (docs/constants.md, receive_buffer_bytes).
  long receive_buffer_bytes = 512 * 1024;
  // The reader's memory tier (ReaderOptions::memory_cache_bytes) and the deferred write budget
  // sized with it. Processes sharing one cache directory share its disk tier: a
  // training loop's workers each keep a small one (hubfs.open's memory_cache).
  uint64_t memory_cache_bytes = 256ull << 20;
  // The reader's block (ReaderOptions::block_size): what is fetched, cached, verified and kept
  // in memory as one. A mount's is 1 MiB, the largest read the kernel sends it; hf:// may take
  // less (hubfs.open's block_size), where a reader of random small pieces would otherwise fetch
  // up to a block it does not need at each end of each piece. Blocks of another size have keys of
  // their own in the cache (BlockReader::disk_key). check_block_size says which sizes are taken.
  uint32_t block_size = kDefaultBlockSize;
  // --read-ahead: the most read-ahead fetches past a read, and the largest file fetched whole
  // under random access (ReaderOptions::max_ahead_bytes). UINT64_MAX: no cap, the policy's own.
  uint64_t read_ahead_bytes = UINT64_MAX;
  // No byte for this long aborts a request (then retried). Unset: the transport's defaults;
  // filled from HF_HUB_ETAG_TIMEOUT / HF_HUB_DOWNLOAD_TIMEOUT by apply_environment_timeouts.
  std::optional<int> metadata_timeout_s;
  std::optional<int> stall_timeout_s;
  std::string ca_bundle;  // "" = $REQUESTS_CA_BUNDLE, ... (find_ca_bundles)
  // Ask the Hub nothing: listings and blocks from the cache alone (HF_HUB_OFFLINE means the same).
  bool offline = false;
  // The shared block tier: memcached servers ("host:port"); empty = none. Private and gated
  // repos stay out of it unless shared_cache_private; the key authenticates every block.
  std::vector<std::string> shared_cache;
  bool shared_cache_private = false;
  std::string shared_cache_key_file;
  // A token given by the caller (hubfs.open(token=...)); unset: the environment's (HF_TOKEN,
  // the token file, ...), followed while the session lives.
  std::optional<std::string> token;
  // The first file's head through the bridge: when the probe of the file a session opens
  // (open_repo_session's first_file) shows a Xet file and names its bridge location, the first
  // read inside its first block goes there as well as to Xet, and the earlier answer is taken
  // (XetRouter::read_head_through_bridge: Xet's bytes must equal the bridge's for the file's Xet
  // check to stand for them). For a door that opens one file and reads its header first:
  // h5chunk's hf:// (open_hf_source). Never a mount's (no probe; its Xet reads ask the Hub for
  // nothing).
  bool xet_head_from_probe = false;
};

// Defaults as `hubfs mount --help` documents them.
std::string default_endpoint();
std::string default_cache_dir();
// Fills the timeouts no option set from huggingface_hub's HF_HUB_ETAG_TIMEOUT (metadata) and
// HF_HUB_DOWNLOAD_TIMEOUT (data stall); a bad value is an error naming the variable.
Status apply_environment_timeouts(SessionConfig& config);
// The CA certificates TLS connections trust: `flag` (--ca-bundle) alone, else every bundle the
// environment names (find_ca_bundles), else libcurl's store; fills options.ca_bundle or
// options.ca_pem. A named bundle that cannot be read is an error naming where it came from.
// Every door and `hubfs cache verify --complete` use it.
Status choose_ca_bundle(const std::string& flag, CurlOptions& options);
// A block size a session takes: a power of two from kMinBlockSize to kMaxBlockSize. Not more:
// the shared tier's memcached items hold at most 1 MiB. Not less: each block is a file in the
// disk cache and a request's unit, and 64 KiB already makes 16 of each per MiB.
inline constexpr uint64_t kMinBlockSize = 64 << 10;
inline constexpr uint64_t kMaxBlockSize = 1 << 20;
Status check_block_size(uint64_t bytes);
// "10G", "512M", "1.5T", "4096" -> bytes (K/M/G/T are powers of 1024).
Result<uint64_t> parse_size(const std::string& text);

}  // namespace hubfs
