// Datasets whose data lives in other files: a virtual dataset's sources, an external link's
// target, external raw storage (H5Pset_external). libhdf5 finds those files by name, on the
// local disk, and reads a missing virtual source as fill values without a word.
//
// For a file read through a source (hf://) every name resolves in the source's tree (its repo
// at the same revision: source_driver.h), and what cannot be read there is a named error before
// anything is read: a name outside the repo (absolute, a URL, ".." past the root), a file the
// repo lacks, a virtual source dataset missing from its file. External raw storage is read by
// h5chunk itself through the tree (ExternalSegments), never by libhdf5 from the local disk. A
// source with no tree (a Python file object) refuses all three. For a local file libhdf5's own
// behaviour stands; missing_virtual_sources says which sources it will read as fill values.
#pragma once

#include <hdf5.h>

#include <memory>
#include <string>
#include <vector>

#include "common/status.h"
#include "h5chunk/byte_source.h"
#include "h5chunk/source_driver.h"

namespace h5chunk {

// Ok, or why a dataset of `file` (read through `link`) cannot be read: an external link on the
// way to `dataset_path` (each of its groups) names a file outside the tree or one it lacks, or
// the source has no tree. `where` names the dataset in messages.
hubfs::Status check_external_links(hid_t file, const std::string& dataset_path,
                                   const std::shared_ptr<SourceLink>& link, const std::string& where);

// Ok, or why the virtual dataset with creation list `dcpl` in `file` (at tree path `home`, read
// through `link` or a file an external link of it leads to) cannot be read exactly: a mapping
// names a file outside the tree, a file the tree lacks, or a source dataset that file lacks.
// Mappings with printf-style names (%b: an unlimited dataset's files, some not yet written) are
// checked for the tree's bounds only.
hubfs::Status check_virtual_sources(hid_t file, const std::string& home, hid_t dcpl,
                                    const std::shared_ptr<SourceLink>& link, const std::string& where);

// The sources ("FILE:/DATASET (why)") of the virtual dataset `dataset` (creation list `dcpl`)
// in the local file `file_path` that libhdf5 will not find, and so reads as fill values; it
// looks for them as libhdf5 does (H5F_prefix_open_file: an absolute name, $HDF5_VDS_PREFIX,
// the dataset access list's prefix, the file's folder, the current directory).
std::vector<std::string> missing_virtual_sources(hid_t file, hid_t dataset, hid_t dcpl, const std::string& file_path);

// External raw storage read through a tree: the dataset's segments laid end to end, as the
// contiguous bytes of a file of the dataset's size. As libhdf5 reads them (H5D__efl_read):
// segment i is `size` bytes at `offset` of its file, bytes past the end of a short file read as
// zeros, and a read past the last segment is an error.
class ExternalSegments : public ByteSource {
 public:
  struct Segment {
    std::string path;  // in the tree
    uint64_t offset = 0;
    uint64_t size = 0;  // H5F_UNLIMITED for the last one, possibly
    std::shared_ptr<ByteSource> file;
  };
  ExternalSegments(std::string name, uint64_t size, std::vector<Segment> segments)
      : name_(std::move(name)), size_(size), segments_(std::move(segments)) {}
  const std::string& name() const override { return name_; }
  uint64_t size() const override { return size_; }
  hubfs::Result<size_t> pread(void* dst, uint64_t offset, size_t len,
                              const std::atomic<bool>* cancel = nullptr) override;
  void hint(const std::vector<std::pair<uint64_t, uint64_t>>& ranges) override;

 private:
  std::string name_;
  uint64_t size_;
  std::vector<Segment> segments_;
};

// The external raw storage of a dataset (creation list `dcpl`, `nbytes` bytes) in the file at
// tree path `home` (`link`'s, or one an external link of it leads to), each segment's file
// opened in the tree (names resolved against the file's folder, as
// libhdf5 resolves them against the current directory by default, or against the file's with
// the prefix "${ORIGIN}"). An error names the segment and why (outside the repo, not in it, no
// tree).
hubfs::Result<std::shared_ptr<ExternalSegments>> open_external_segments(hid_t dcpl, uint64_t nbytes,
                                                                        const std::shared_ptr<SourceLink>& link,
                                                                        const std::string& home,
                                                                        const std::string& where);

}  // namespace h5chunk
