// A file of a RepoSession without a mount (stack/session.h): hf:// URLs, paths looked up and
// listed, positioned reads and whole-file copies, served by the same reader, cache and
// verification as a read through the mount.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "common/status.h"
#include "fs/fs_api.h"
#include "hub/repo_ref.h"
#include "net/byte_range.h"
#include "reader/block_bytes.h"
#include "stack/session.h"

namespace hubfs {

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
  // hint, include/hubfs/range_hint.h), cut into requests as `requests` says. Returns the bytes
  // newly scheduled.
  Result<uint64_t> hint(const std::vector<ByteRange>& ranges, HintRequests requests = HintRequests::kSpread);
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
