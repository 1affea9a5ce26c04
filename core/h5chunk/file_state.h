// The state behind the public File and Dataset handles (h5chunk.h): what a file keeps open
// (libhdf5's handle, the workers' descriptors, the helper threads) and, per dataset, what was
// learnt when it was first opened (its description, layout, chunk manifest, refusal).
//
// Ownership: a File holds its FileState by shared_ptr, and so does every Dataset handle taken
// from it, so the file stays open while a handle lives. FileState owns its DatasetStates (one per
// path, shared by every handle to it: one remembered chunk manifest). Members are destroyed
// bottom to top: the worker states and helper threads before libhdf5's file, the source link last.
//
// Thread-safety: a File and its Datasets may be used from several threads at once. `mu` guards
// `datasets` and `noted` only, and is a leaf lock (nothing is called while it is held; a
// dataset's opening runs outside it, and the first to finish is kept). A DatasetState is
// immutable after open_dataset returns it, except its thread-safe parts (the manifest,
// `verified`, the worker pools).
#pragma once

#include <cstdint>
#include <cstdio>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <utility>

#include <sys/stat.h>

#include "h5chunk/element_type.h"
#include "h5chunk/external_files.h"
#include "h5chunk/h5chunk.h"
#include "h5chunk/hdf5_handle.h"
#include "h5chunk/helper_pool.h"
#include "h5chunk/manifest.h"
#include "h5chunk/reader.h"
#include "h5chunk/size_text.h"
#include "h5chunk/source_driver.h"

namespace h5chunk {

class DatasetState {
 public:
  DatasetInfo info;
  Hid dataset;
  ChunkedLayout layout;
  ElementDescription element;               // its memory type and the fast path's conversion
  std::unique_ptr<ChunkManifest> manifest;  // chunked datasets only
  uint64_t contiguous_offset = 0;           // contiguous datasets: where the data starts in the file
  // A filter with no HDF5 plugin here (zstd, bitshuffle on Debian): H5Dread cannot read the
  // dataset at all, so even small reads take the fast path.
  bool h5dread_lacks_filter = false;
  // A chunked dataset whose whole pipeline h5chunk decodes (none, or Blosc, LZ4, Zstd, LZF,
  // bitshuffle, deflate, shuffle, fletcher32). libhdf5 does not check that a filter's output
  // fills the chunk: a chunk that decodes short leaves the rest of its buffer uninitialised in
  // H5Dread's output (different bytes on each run), and third-party plugins do not all check
  // their input (Debian's LZ4 plugin returned heap bytes for a chunk whose stored size a damaged
  // index understated: mutation fuzz seed 21077). So, except on Route::kH5Dread, H5Dread is
  // handed such a dataset's chunks only after h5chunk's own decoders accepted each of them, to
  // its exact size (once per chunk: `verified`). Also set for pipelines with scale-offset or
  // n-bit, which libhdf5 decodes trusting the chunk: each chunk's location is checked, and its
  // header and size where filter_checks.h can.
  bool verify_before_h5dread = false;
  VerifiedChunks verified;
  // External raw storage of a file read through a source: h5chunk reads its segments through
  // the source's tree (libhdf5 would open them on the local disk), whatever the route.
  std::shared_ptr<ExternalSegments> external;
  std::unique_ptr<WorkerStatePool> external_workers;
  // Why every read is refused (variable-length type, null dataspace, corrupt); Ok when reads may proceed.
  Status refusal;
};

class FileState {
 public:
  explicit FileState(std::string p) : path(p), workers(std::move(p)) {}
  // A file with no local path, read through link's source (source_driver.h).
  explicit FileState(std::shared_ptr<SourceLink> l)
      : path(l->name()), link(std::move(l)), workers(link.get()) {}
  std::string path;
  std::shared_ptr<SourceLink> link;  // null for a local file; outlives `file` and `workers`
  Options options;
  unsigned threads = 1;
  uint64_t base_address = 0;
  Hid file;
  WorkerStatePool workers;  // after `file`: destroyed first
  HelperPool helpers;       // its threads, started by the first read that hands work out

  // The file's size (nullopt when it cannot be had).
  std::optional<uint64_t> size() const {
    if (link) return link->size();
    struct stat st;
    if (::stat(path.c_str(), &st) != 0) return std::nullopt;
    return static_cast<uint64_t>(st.st_size);
  }
  // Forgets errors the source met before the operation about to start.
  void clear_source_error() const {
    if (link) link->take_error();
  }
  // `s` (a failed libhdf5 call), or the source's own error behind it when a read through the
  // source failed: its code and message say why (a timeout, a lost token) where libhdf5 only
  // says that a read failed.
  Status source_error_or(Status s, const std::string& context) const {
    if (link) {
      if (Status e = link->take_error(); !e.ok()) return e.with_context(context);
    }
    return s;
  }

  std::mutex mu;  // guards datasets and noted
  std::map<std::string, std::shared_ptr<DatasetState>> datasets;
  std::set<std::pair<std::string, std::string>> noted;

  // Says once per dataset and cause that a read missed the fast path, and how to avoid it.
  void note(const DatasetInfo& info, const std::string& cause, const std::string& fix) {
    {
      std::lock_guard<std::mutex> lock(mu);
      if (!noted.emplace(info.path, cause).second) return;
    }
    std::string line = "h5chunk: reading '" + path + "' (" + info.path + ", " +
                       human_bytes(info.nbytes) + "): the dataset " + cause +
                       " - falling back to H5Dread (serial, slower). " + fix;
    if (options.log) {
      options.log(line);
    } else {
      std::fprintf(stderr, "%s\n", line.c_str());
    }
  }

  Result<std::shared_ptr<DatasetState>> open_dataset(const std::string& name);
};

}  // namespace h5chunk
