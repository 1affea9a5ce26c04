// An HDF5 virtual file driver (HDF5 1.10's H5FDregister) that reads through a ByteSource, so
// libhdf5 opens and reads a file that has no local path: its metadata reads and any H5Dread
// fallback go through the source, as h5chunk's own chunk reads do.
//
// Read-only. The driver is registered once per process, on first use; every file opened
// through it holds its source until libhdf5 closes the file.
#pragma once

#include <hdf5.h>

#include <atomic>
#include <memory>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "common/status.h"
#include "h5chunk/byte_source.h"

namespace h5chunk {

// The cancel flag (ReadOptions::cancel) of the read running on this thread, for the reads made
// on its behalf without one: libhdf5's through the driver and the chunk index's, which run on the
// reading thread. Dataset::read_into sets it for its length, so Ctrl-C also ends a read waiting
// on a network source for metadata.
class ScopedReadCancel {
 public:
  explicit ScopedReadCancel(const std::atomic<bool>* cancel) : previous_(current_) { current_ = cancel; }
  ~ScopedReadCancel() { current_ = previous_; }
  ScopedReadCancel(const ScopedReadCancel&) = delete;
  ScopedReadCancel& operator=(const ScopedReadCancel&) = delete;
  static const std::atomic<bool>* current() { return current_; }

 private:
  const std::atomic<bool>* previous_;
  static inline thread_local const std::atomic<bool>* current_ = nullptr;
};

// What the driver, h5chunk's own readers and the File share for one file: the source, wrapped
// so that every read through it that fails is remembered. libhdf5 reports only "read failed";
// this keeps the source's own cause (a timeout, a revoked token) for the message the caller
// returns, and tells the chunk manifest that a failure was the source's, not the file's (so it
// is not remembered as damage: the next read tries again).
//
// A file that names another file (a virtual dataset's source, an external link's target) is
// opened by libhdf5 through the driver too: the link of that file reports its failed reads to
// the link of the file h5chunk opened (`report_to`), whose caller sees them.
class SourceLink : public ByteSource {
 public:
  explicit SourceLink(std::shared_ptr<ByteSource> source, std::shared_ptr<SourceLink> report_to = nullptr)
      : source_(std::move(source)), report_to_(std::move(report_to)) {}
  const std::string& name() const override { return source_->name(); }
  uint64_t size() const override { return source_->size(); }
  hubfs::Result<size_t> pread(void* dst, uint64_t offset, size_t len,
                              const std::atomic<bool>* cancel = nullptr) override {
    auto r = source_->pread(dst, offset, len, cancel ? cancel : ScopedReadCancel::current());
    if (!r.ok()) record(r.status());
    return r;
  }
  void hint(const std::vector<std::pair<uint64_t, uint64_t>>& ranges) override { source_->hint(ranges); }
  std::shared_ptr<FileTree> tree() const override { return source_->tree(); }
  std::string tree_path() const override { return source_->tree_path(); }

  const ByteSource* inner() const { return source_.get(); }
  // Failed reads so far (a failure between two looks at it was the source's).
  uint64_t error_count() const { return errors_.load(); }
  // The first error since the last call, then Ok.
  hubfs::Status take_error() {
    std::lock_guard<std::mutex> lock(mu_);
    return std::exchange(error_, hubfs::Status::Ok());
  }

 private:
  void record(const hubfs::Status& s) {
    if (report_to_) report_to_->record(s);
    errors_.fetch_add(1);
    std::lock_guard<std::mutex> lock(mu_);
    if (error_.ok()) error_ = s;
  }
  std::shared_ptr<ByteSource> source_;
  std::shared_ptr<SourceLink> report_to_;
  std::atomic<uint64_t> errors_{0};
  std::mutex mu_;  // leaf (a link reports to its parent before taking its own)
  hubfs::Status error_;
};

// The name the driver gives libhdf5 for `source`'s file: "/" + tree name + "/" + path for a
// source in a tree (an absolute name, so libhdf5 resolves a relative name the file gives
// against the file's folder, as it does for a local file), else the source's name.
std::string hdf5_file_name(const ByteSource& source);

// Resolves `name`, which the file at `from` (a tree path) gives for another file, as libhdf5
// resolves a relative name against the folder of a local file: the normalised tree path. "."
// names the file itself. kInvalidArgument, naming the cause, for a name outside the tree: an
// absolute path, a URL (another host), or one whose ".." leaves the tree's root.
hubfs::Result<std::string> resolve_in_tree(const std::string& from, const std::string& name);

// A file access property list that opens files through `link`'s source: H5Fopen of
// hdf5_file_name(*link) opens the source itself; another name (a virtual dataset's source, an
// external link's target) opens the file of that path in the source's tree, never a local file,
// and fails (the message on libhdf5's error stack saying why) when the source has no tree, the
// name lies outside it or the tree has no such file. The caller closes it (H5Pclose). kInternal
// if libhdf5 refuses to register the driver.
hubfs::Result<hid_t> source_fapl(std::shared_ptr<SourceLink> link);

}  // namespace h5chunk
