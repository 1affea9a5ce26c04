// A file h5chunk reads through something other than a local path: positioned reads plus a
// range hint. hubfs implements it over an hf:// file read in-process (core/h5hub), so the HDF5
// library (through source_driver.h), the chunk-index parser and the fast path's workers all read
// through the same block reader and cache as a mount, without one.
//
// h5chunk depends on nothing behind this interface (no curl, no Hub); the interface is
// header-only so an implementation can live in another shared object (the hubfs Python
// extension hands one to the h5chunk extension) as long as both are built from this header.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "common/status.h"

namespace h5chunk {

class ByteSource;

// The other files a source's file may name (a virtual dataset's sources, an external link's
// target, external raw storage): for an hf:// file, the files of its repo at the same revision.
class FileTree {
 public:
  virtual ~FileTree() = default;
  // Names the tree in messages and in the file names libhdf5 is given ("hf://datasets/ORG/NAME");
  // no trailing '/'.
  virtual const std::string& name() const = 0;
  // The file at `path`, relative to the tree's root and normalised (no leading '/', no "." or
  // ".." component, no empty one). kNotFound when the tree has no such file; other errors carry
  // their cause (a timeout, a gated repo).
  virtual hubfs::Result<std::shared_ptr<ByteSource>> open(const std::string& path) = 0;
};

class ByteSource {
 public:
  virtual ~ByteSource() = default;

  // Names the file in messages ("hf://datasets/ORG/NAME/scan.hdf5").
  virtual const std::string& name() const = 0;
  // The file's size in bytes; fixed for the source's life.
  virtual uint64_t size() const = 0;
  // Copies `len` bytes at `offset` into `dst`; fewer only at the end of the file. Returns how
  // many. Thread-safe, blocking. An error carries the cause and the fix (a timeout, a lost
  // token, content that failed its hash). With `cancel` (a read's ReadOptions::cancel), a
  // source whose reads can wait long (on a network) returns soon after *cancel turns true,
  // with kUnavailable, writing nothing more into `dst` after it returns.
  virtual hubfs::Result<size_t> pread(void* dst, uint64_t offset, size_t len,
                                      const std::atomic<bool>* cancel = nullptr) = 0;
  // The caller will read these (offset, length) ranges soon: the source may start fetching all
  // of them at once. Best effort: never fails, and reads work whether or not it was called.
  virtual void hint(const std::vector<std::pair<uint64_t, uint64_t>>& ranges) = 0;
  // The tree this file lives in, for the files it names, and its path there (normalised as
  // FileTree::open's). Null (the default): the source can reach no other file (a Python file
  // object), so h5chunk refuses the datasets whose data lives in other files. Two sources are
  // the same file when they have the same tree object and path.
  virtual std::shared_ptr<FileTree> tree() const { return nullptr; }
  virtual std::string tree_path() const { return {}; }
};

}  // namespace h5chunk
