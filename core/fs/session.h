// The doors into a repo that are not a mount, and the assembly every door shares. A mount
// (fuse/mount.cc), hubfs.open in Python and `hubfs cat|cp` all build the same stack from the
// same options: transport, Hub client, block cache (same directory, same keys), shared tier,
// reader with verification, and a FileSystem over the pinned repo. Assembling it here, once,
// is what keeps a file read through a mount warm for hubfs.open and the other way round.
//
// No FUSE here: core/ never links it (docs/architecture.md).
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "cache/block_cache.h"
#include "common/env.h"
#include "common/status.h"
#include "fs/filesystem.h"
#include "fs/listing_cache.h"
#include "fs/xet_routing.h"
#include "hub/environment.h"
#include "hub/hub_client.h"
#include "hub/repo_ref.h"
#include "net/curl_transport.h"
#include "net/quota_gate.h"
#include "net/range_fetcher.h"
#include "net/retrying_transport.h"
#include "reader/block_reader.h"
#include "reader/shared_blocks.h"
#include "shared/memcached_tier.h"

namespace hubfs {

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
  // The reader's memory tier (ReaderOptions::memory_cache_bytes) and the read-ahead and deferred
  // write budgets sized with it. Processes sharing one cache directory share its disk tier: a
  // training loop's workers each keep a small one (hubfs.open's memory_cache).
  uint64_t memory_cache_bytes = 256ull << 20;
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
// "10G", "512M", "1.5T", "4096" -> bytes (K/M/G/T are powers of 1024).
Result<uint64_t> parse_size(const std::string& text);

// The fetch stack every door owns, in construction order (destroyed in reverse). shutdown()
// (also run by the destructor) answers retries waiting out a long Retry-After and fails what is
// on the wire, then drains the reader while everything its tasks reach still exists.
struct Stack {
  // Time and threads for every piece below (common/env.h): the process's real Env, or a test's.
  // Set before build_stack; must outlive the stack.
  Env* env = &Env::real();
  std::unique_ptr<QuotaGate> quota;  // consulted by transport: outlives it
  std::shared_ptr<TokenWatcher> tokens;
  std::unique_ptr<CurlTransport> curl;
  std::unique_ptr<RetryingTransport> transport;
  std::unique_ptr<HubClient> hub;
  std::unique_ptr<BlockCache> cache;  // null: cache_size 0
  std::unique_ptr<RangeFetcher> fetcher;
  std::optional<SharedTierKey> shared_key;      // shared_cache_key_file, read before anything else
  std::unique_ptr<MemcachedTier> shared_tier;   // null: no shared tier, or a private repo
  std::unique_ptr<SharedBlocks> shared_blocks;  // the reader's view of shared_tier
  // Xet-stored files read natively (one repo's: its read token), with the chunk cache beside
  // the blocks; null without a pinned repo, offline, or with HF_HUB_DISABLE_XET.
  std::unique_ptr<xet::ChunkCache> chunk_cache;
  std::unique_ptr<xet::XetReader> xet;
  std::shared_ptr<XetRouter> xet_router;
  std::unique_ptr<BlockReader> reader;

  Stack() = default;
  Stack(const Stack&) = delete;
  Stack& operator=(const Stack&) = delete;
  ~Stack() { shutdown(); }
  void shutdown();
};

// Transport, quota gate, token and Hub client (no cache, no reader yet).
Status build_stack(const SessionConfig& config, Stack& s);
// The Xet read path for one pinned repo (fs/xet_routing.h): chunk cache, XetReader, router.
// Call after build_reader; fills fs_options.range_source. Does nothing offline or with
// HF_HUB_DISABLE_XET.
void build_xet(const SessionConfig& config, Stack& s, const RepoRef& pinned, FsOptions& fs_options);
// Block cache, fetcher, shared tier and reader. `repo`: the one repo these blocks belong to
// (decides whether they may go to the shared tier); null for a whole-Hub mount.
Status build_reader(const SessionConfig& config, Stack& s, const PinnedRevision* repo = nullptr,
                    const std::string& repo_label = "");

// `hubfs cache info` and `clear REPO` map content ids back to repo files through this index
// (cache/cache_index.h); best effort.
std::function<void(const RemoteFile&)> index_recorder(const std::string& cache_dir, const std::string& repo_label,
                                                      const std::string& revision, const std::string& commit);

// One repo (or one directory of it) pinned to a commit, with its FileSystem over the stack.
struct RepoSession {
  RepoRef repo;           // as named: revision as asked ("main", a tag, a sha)
  std::string subfolder;  // the directory the FileSystem's root shows ("" = the repo's root)
  std::string label;      // "datasets/ORG/NAME"
  PinnedRevision info;    // the commit it is pinned to, private/gated
  bool offline = false;
  Stack stack;
  // Work open_repo_session started and did not wait for (a first file's probe that was slow to
  // answer: see open_repo_session). Drained after the stack's shutdown, which ends its requests,
  // and before the stack goes.
  std::unique_ptr<Executor> background;
  std::unique_ptr<FileSystem> fs;  // declared last: destroyed first

  ~RepoSession() {
    stack.shutdown();  // fetches in flight end before the FileSystem and the stack go
    fs.reset();
  }
};

// Pins spec's repo (offline: from the stored listings), checks its subfolder, builds the stack
// and the FileSystem with the listings kept in the cache. `customize` may add to the FileSystem's
// options before it is built (the mount adds its status attribute). Lists the root ahead of the
// first access (a failure there is only logged).
//
// `first_file`: the repo path of the file the caller opens next (the hf:// doors open one file
// per session they make). Unless the cache knows it at the commit this revision was pinned to
// last (a stored listing of its directory, or its own record), its HEAD resolve runs beside the
// pin (HubClient::probe_file), on RepoSession::background; one not answered within a second of
// the pin (or the pin's own time, if longer: a probe held for the resolvers' quota, say) is not
// waited for. If it was served from the pinned commit, the FileSystem knows
// the file from it (FileSystem::know_file), its CDN location is kept, its record is stored
// (ListingCache::save_file: the next session, offline ones too, needs no request for it) and
// the root is not listed ahead: the file's first block is one round trip after the pin instead
// of three (the listing, the resolve, the block). Whatever else is looked up lists as before.
Status open_repo_session(const SessionConfig& config, const RepoSpec& spec, RepoSession& s,
                         const std::function<void(RepoSession&, FsOptions&)>& customize = {},
                         const std::string& first_file = "");

// ---- A file without a mount --------------------------------------------------------------

// "hf://[datasets/|spaces/]ORG/NAME[@REVISION]/PATH" as huggingface_hub's HfFileSystem writes
// it: the revision ends at the next '/', so one holding a '/' is percent-encoded
// (refs%2Fpr%2F1). The "hf://" prefix is optional. Legacy ids without ORG as parse_repo_ref
// accepts them ("gpt2@main/config.json"; "gpt2/config.json" is the repo gpt2/config.json).
struct HfUrl {
  RepoRef repo;
  std::string path;  // "" = the repo's root; no leading or trailing '/'
};
Result<HfUrl> parse_hf_url(std::string_view url, std::optional<std::string> revision_override = {});

// The errno an error maps to (ENOENT, EACCES, EIO ...), for callers that speak errno.
int errno_of(const Status& s);
// An FsError as a Status: ENOENT -> kNotFound, EACCES/EPERM -> kPermissionDenied, ETIMEDOUT
// -> kTimeout, EISDIR/ENOTDIR/EINVAL/EROFS -> kInvalidArgument, anything else kIo; the message
// says `what` failed and carries the reason.
Status status_of(const FsError& e, const std::string& what);

// What a path names: a file or directory of the session's repo.
struct PathInfo {
  std::string path;  // relative to the repo's root
  bool is_dir = false;
  uint64_t size = 0;
};

// Looks `path` up ("" or "/" is the root), listing directories as needed.
Result<PathInfo> stat_path(RepoSession& s, const std::string& path);
// The entries of directory `path`, sorted by name.
Result<std::vector<PathInfo>> list_dir(RepoSession& s, const std::string& path);

// An open file of a RepoSession: positioned reads, thread-safe and blocking, served by the same
// reader, cache and verification as a read through the mount. Holds its session alive.
class HubFile {
 public:
  static Result<std::unique_ptr<HubFile>> open(std::shared_ptr<RepoSession> session, const std::string& path);
  ~HubFile();
  HubFile(const HubFile&) = delete;
  HubFile& operator=(const HubFile&) = delete;

  const std::string& path() const { return path_; }
  uint64_t size() const { return size_; }
  // "sha256:<hex>" (LFS) or "oid:<hex>" (the git blob id): what the whole file hashes to.
  const std::string& content_id() const { return content_id_; }
  // The bytes from offset on, as slices of cached blocks (no copy): all of [offset, offset + len)
  // cut at end of file, or fewer past 16 MiB (call again); empty at or past end of file.
  Result<std::vector<BlockBytes>> read(uint64_t offset, size_t len);
  // Copies len bytes at offset into dst (fewer only at end of file); returns how many.
  Result<size_t> pread(void* dst, uint64_t offset, size_t len);
  // Ranges the caller will read soon, fetched concurrently into the cache (the mount's range
  // hint, include/hubfs/range_hint.h). Returns the bytes newly scheduled.
  Result<uint64_t> hint(const std::vector<ByteRange>& ranges);
  // This file's bytes failed a hash the caller took (copy_file's): they leave every cache tier,
  // so running it again fetches them afresh (FileSystem::discard).
  void discard_cached();
  // Opens the file again (a handle that read bytes which then failed their hash refuses further
  // reads: reader/file_epochs.h).
  Status reopen();
  const std::shared_ptr<RepoSession>& session() const { return session_; }

 private:
  HubFile(std::shared_ptr<RepoSession> session, std::string path, uint64_t handle, uint64_t size,
          std::string content_id)
      : session_(std::move(session)), path_(std::move(path)), handle_(handle), size_(size),
        content_id_(std::move(content_id)) {}
  std::shared_ptr<RepoSession> session_;
  std::string path_;
  uint64_t handle_;  // 0 after a failed reopen
  uint64_t size_;
  std::string content_id_;
};

// Streams the whole file, in order, to `sink` (which may fail, stopping the copy), hashing it as
// it goes and comparing with its content id: a mismatch is kCorrupt, the bytes already given to
// sink must be discarded (`hubfs cp` writes a temp file it then removes), and the file's cached
// blocks are dropped (HubFile::discard_cached) so that running it again fetches them afresh.
// Blocks already in the cache are not fetched again, so a copy interrupted and run again resumes
// where it stopped.
// `progress(done, total)` is called after every piece; `stop()` true ends the copy (kUnavailable,
// "interrupted"). Reads `window` bytes ahead of the sink (concurrent range requests).
// A copy whose file failed a whole-file hash (copy_file's own, or the reader's: a corrupt byte on
// the wire, which no hash can see before the whole file is there) starts over once, with the
// file's blocks fetched afresh, when the sink can start over: no sink, or `rewind` (which drops
// what the sink took). Only a second failure is returned.
struct CopyOptions {
  std::function<Status(const char* data, size_t n)> sink;
  std::function<Status()> rewind;
  std::function<void(uint64_t done, uint64_t total)> progress;
  std::function<bool()> stop;
};
Status copy_file(HubFile& file, const CopyOptions& options);

}  // namespace hubfs
