// h5chunk on hf:// files without a mount: an hf:// file (stack/hub_file.h's HubFile) as the
// ByteSource h5chunk reads through (h5chunk/byte_source.h). The HDF5 library's metadata reads,
// h5chunk's chunk-index parse and its chunk reads all go through the session's block reader,
// cache and verification, and a read's chunk list becomes one range hint, so every chunk is in
// flight at once.
//
// This library is the seam between the two sides: h5chunk knows nothing of the Hub, hubfs's
// core nothing of HDF5. The h5chunk command links it; in Python, hubfs's extension builds the
// source and hands it to h5chunk's (python/src).
#pragma once

#include <condition_variable>
#include <memory>
#include <mutex>
#include <optional>
#include <string>

#include "common/status.h"
#include "stack/hub_file.h"
#include "h5chunk/byte_source.h"
#include "h5hub/local_reads.h"

namespace hubfs {

// The files of a repo session (its pinned revision), as the FileTree through which an hf://
// file's virtual datasets, external links and external raw storage reach the files they name.
class HubFileTree : public h5chunk::FileTree, public std::enable_shared_from_this<HubFileTree> {
 public:
  // `name`: the repo's URL ("hf://datasets/ORG/NAME[@REVISION]"), no trailing '/'.
  HubFileTree(std::shared_ptr<RepoSession> session, std::string name)
      : session_(std::move(session)), name_(std::move(name)) {}
  const std::string& name() const override { return name_; }
  Result<std::shared_ptr<h5chunk::ByteSource>> open(const std::string& path) override;

 private:
  std::shared_ptr<RepoSession> session_;
  std::string name_;
};

class HubByteSource : public h5chunk::ByteSource {
 public:
  // `name`: the file's URL, for messages. The file's tree is its session's repo, named by the
  // URL without the file's path (none when `name` does not end with the path).
  HubByteSource(std::shared_ptr<HubFile> file, std::string name);
  HubByteSource(std::shared_ptr<HubFile> file, std::string name, std::shared_ptr<HubFileTree> tree)
      : file_(std::move(file)), name_(std::move(name)), tree_(std::move(tree)) {}
  // Waits for the helpers of cancelled reads still running (each ends within the session's read
  // timeout): none outlives the source, so none still uses the session, its transport or the
  // process's statics while the program exits.
  ~HubByteSource() override;

  const std::string& name() const override { return name_; }
  uint64_t size() const override { return file_->size(); }
  // Without `cancel`, or when no block of it must come from the Hub (h5hub/local_reads.h),
  // HubFile::pread on the calling thread. Otherwise the read waits on a helper thread for the
  // blocks (kept as cached slices, no copy) while the caller checks *cancel every kCancelPoll: a
  // cancelled read returns at once and the helper finishes on its own (its read is bounded by the
  // session's read timeout), never touching `dst`; the destructor waits for it.
  Result<size_t> pread(void* dst, uint64_t offset, size_t len, const std::atomic<bool>* cancel = nullptr) override;
  void hint(const std::vector<std::pair<uint64_t, uint64_t>>& ranges) override;
  std::shared_ptr<h5chunk::FileTree> tree() const override { return tree_; }
  std::string tree_path() const override { return tree_ ? file_->path() : std::string(); }

  const std::shared_ptr<HubFile>& file() const { return file_; }

 private:
  // Helper threads still running, counted; each holds this by shared_ptr and drops its HubFile
  // before it counts itself out.
  struct Helpers {
    std::mutex mu;
    std::condition_variable cv;
    int running = 0;
  };

  std::shared_ptr<HubFile> file_;
  std::string name_;
  std::shared_ptr<HubFileTree> tree_;
  std::shared_ptr<Helpers> helpers_ = std::make_shared<Helpers>();
  RecentBlock recent_;  // the block the last read ended in
};

// Opens hf://[datasets/|spaces/]ORG/NAME[@REVISION]/PATH with its own session (pinned repo,
// stack) built from `config` on `env` (the caller's: the real one in a main), for the h5chunk
// command. Errors as `hubfs cat` gives them: the repo, revision or path not found, private or
// gated, the endpoint unreachable. A Xet file's header comes from the bridge location its probe
// names, beside Xet (SessionConfig::xet_head_from_probe, set here).
Result<std::shared_ptr<HubByteSource>> open_hf_source(const std::string& url, const SessionConfig& config, Env& env,
                                                      std::optional<std::string> revision = {});

}  // namespace hubfs
