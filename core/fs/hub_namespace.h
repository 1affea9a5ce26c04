// The whole Hub as one tree (`hubfs mount --hub MNT`): fixed top levels datasets/, models/ and
// spaces/, then ORG/ and NAME/ (or NAME@REV/) resolved lazily. The first lookup of ORG/NAME asks
// the Hub for the repo and pins its revision (main, or REV) to a commit; that repo's FileSystem
// is created then and kept for the life of the mount, so everything under it behaves exactly as
// a mount of that one repo. A repo that does not exist (or is not visible with the token) is
// ENOENT at once, and the answer is remembered for a short while so probing tools do not turn
// into a request per stat.
//
// What is listed: the Hub has millions of repos, so a type directory lists only the ORGs, and an
// ORG directory only the repos, touched since the mount started. Any well-formed ORG name is a
// directory (the Hub has no cheap "does this org exist" call); names that cannot be Hub ids
// (".git", ".Trash-0", "a b") are ENOENT without a request.
//
// Inode and handle numbers keep repos apart: the top 24 bits are the repo's slot (0 for the
// namespace's own directories), the low 40 bits the number inside that repo's FileSystem.
//
// Threads: every method is thread-safe. mu_ guards the tables and is never held across a
// request to the Hub or a call into a repo's FileSystem; a single-flight per name makes concurrent
// first lookups of one repo share a single resolution.
#pragma once

#include <chrono>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <shared_mutex>
#include <string>
#include <vector>

#include "common/single_flight.h"

#include "common/env.h"
#include "fs/filesystem.h"
#include "fs/fs_api.h"
#include "fs/listing_cache.h"

namespace hubfs {

struct HubNamespaceOptions {
  // Pins a repo on first touch (revision "main" unless NAME@REV): normally pin_revision(). A
  // kNotFound or kPermissionDenied answer makes the name absent (ENOENT, resp. EACCES) and is
  // remembered for negative_ttl; any other failure is EIO and is not remembered.
  std::function<Result<PinnedRevision>(const RepoRef&)> pin;
  // The options of a repo's FileSystem once pinned (mtime, listings, on_open, offline).
  std::function<FsOptions(const RepoRef& asked, const PinnedRevision&)> repo_options;
  // Served as user.hubfs.status on the mount's root, as FsOptions::status_json.
  std::function<std::string()> status_json;
  // How long "no such repo" is remembered (by us and by the kernel's negative entry): short, so
  // a repo created meanwhile appears soon, long enough that a loop of stats makes one request.
  std::chrono::seconds negative_ttl{30};
  // Its clock times negative entries out. Required (no default: the stack's, or a test's); must
  // outlive the namespace.
  Env* env = nullptr;
  time_t mtime = 0;  // of the namespace's own directories (the mount's start)
};

// A repo touched since the mount started, as `hubfs status` shows it.
struct TouchedRepo {
  std::string path;      // "datasets/org/name" or "datasets/org/name@rev", as under the mount
  std::string revision;  // as asked ("main" by default)
  std::string commit;    // what it was pinned to
};

class HubNamespace : public FsApi {
 public:
  // hub and reader must outlive this object; every repo's FileSystem shares them.
  HubNamespace(HubClient& hub, BlockReader& reader, HubNamespaceOptions options);
  ~HubNamespace() override;
  HubNamespace(const HubNamespace&) = delete;
  HubNamespace& operator=(const HubNamespace&) = delete;

  FsResult<EntryReply> lookup(Ino parent, const std::string& name) override;
  FsResult<struct stat> getattr(Ino ino) override;
  FsResult<uint64_t> opendir(Ino ino) override;
  std::vector<DirEntry> readdir(uint64_t handle, uint64_t offset) override;
  void releasedir(uint64_t handle) override;
  FsResult<OpenReply> open(Ino ino, int flags) override;
  FsResult<std::vector<BlockBytes>> read(uint64_t handle, uint64_t offset, size_t size) override;
  void release(uint64_t handle) override;
  FsResult<uint64_t> hint(uint64_t handle, const std::vector<ByteRange>& ranges, HintRequests requests) override;
  FsResult<std::string> getxattr(Ino ino, const std::string& name) override;
  FsResult<std::string> listxattr(Ino ino) override;
  struct statvfs statfs() override;
  double attr_timeout_s() const override { return kStableTimeoutS; }
  bool listing_is_stable(Ino ino) const override;

  std::vector<TouchedRepo> touched() const;

  // Bits of an inode or handle number that belong to the repo's own FileSystem.
  static constexpr int kLocalBits = 40;

 private:
  struct Dir;   // a namespace directory: the root, a type, or an ORG
  struct Repo;  // a pinned repo and its FileSystem
  struct Negative {
    MonotonicClock::time_point until;
    int code = ENOENT;
  };

  static uint64_t slot_of(uint64_t n) { return n >> kLocalBits; }
  static uint64_t local_of(uint64_t n) { return n & ((uint64_t{1} << kLocalBits) - 1); }
  static uint64_t global(uint64_t slot, uint64_t local) { return (slot << kLocalBits) | local; }

  Dir* dir(Ino ino) const;                // slot 0 only
  Repo* repo(uint64_t slot) const;        // slot >= 1
  FsResult<EntryReply> lookup_repo(Dir* org, const std::string& name);
  Dir* add_dir(Dir* parent, const std::string& name, RepoType type);  // mu_ held exclusively
  struct stat dir_attributes(const Dir& d) const;
  struct stat repo_attributes(uint64_t slot, struct stat st) const;

  HubClient& hub_;
  BlockReader& reader_;
  HubNamespaceOptions options_;
  mutable std::shared_mutex mu_;
  std::vector<std::unique_ptr<Dir>> dirs_;    // index = inode number (slot 0); 0 unused
  std::vector<std::unique_ptr<Repo>> repos_;  // index = slot - 1
  std::map<std::string, Negative> negatives_;  // by repo key (see lookup_repo)
  // Resolutions in progress, by repo key: a lookup waits for the one running, then looks again
  // (and resolves itself if it found nothing: one at a time, as the flight's leader).
  SingleFlight<std::string, bool> resolving_;
  // The namespace's own directory handles (slot 0).
  std::mutex handles_mu_;
  uint64_t next_handle_ = 1;
  std::map<uint64_t, std::vector<DirEntry>> dir_handles_;
};

}  // namespace hubfs
