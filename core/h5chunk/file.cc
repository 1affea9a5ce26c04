// File: opens a local file or a ByteSource with libhdf5, lists its datasets, hands out Dataset
// handles (FileState::open_dataset) and passes range hints to its source or mount.
#include <fcntl.h>
#include <unistd.h>

#include <sys/stat.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <thread>

#include "h5chunk/file_state.h"
#include "h5chunk/range_hints.h"

namespace h5chunk {

using hubfs::InvalidArgument;
using hubfs::NotFound;

namespace {

unsigned default_threads(const Options& options) {
  const unsigned cores = std::max(1u, std::thread::hardware_concurrency());
  return options.threads ? options.threads : std::min(kMaxDefaultThreads, cores);
}

// What every open does once libhdf5 has the file: the user block (chunk addresses are relative
// to the base address, which sits after it).
void read_base_address(FileState& state) {
  Hid fcpl(H5Fget_create_plist(state.file.get()));
  hsize_t userblock = 0;
  if (fcpl.valid()) H5Pget_userblock(fcpl.get(), &userblock);
  state.base_address = userblock;
}

}  // namespace

Result<File> File::open(const std::string& path, Options options) {
  struct stat st;
  if (::stat(path.c_str(), &st) != 0) {
    return NotFound("cannot open '" + path + "': " + std::strerror(errno));
  }
  auto state = std::make_shared<FileState>(path);
  state->options = std::move(options);
  state->threads = default_threads(state->options);
  state->helpers.set_threads(state->threads - 1);  // the caller is the other worker
  if (::access(path.c_str(), R_OK) != 0) {
    return hubfs::IoError("cannot open '" + path + "': " + std::strerror(errno));
  }
  QuietHdf5Errors quiet;
  // H5Fopen alone, as the open of a ByteSource below does, so a damaged file gives the same
  // error whether it is read here or over hf:// (H5Fis_hdf5 says "no" without a cause).
  state->file = Hid(H5Fopen(path.c_str(), H5F_ACC_RDONLY, H5P_DEFAULT));
  if (!state->file.valid()) {
    return InvalidArgument("'" + path + "' is not an HDF5 file (or is truncated): " + hdf5_error_text());
  }
  // HDF5 reads metadata in small scattered pieces; the kernel's read-ahead behind them fetched
  // megabytes nobody needed (docs/benchmarks.md, "Over-read and random access"). The default
  // (sec2) driver's handle is the file descriptor.
  Hid fapl(H5Fget_access_plist(state->file.get()));
  void* handle = nullptr;
  if (fapl.valid() && H5Pget_driver(fapl.get()) == H5FD_SEC2 &&
      H5Fget_vfd_handle(state->file.get(), H5P_DEFAULT, &handle) >= 0 && handle) {
    ::posix_fadvise(*static_cast<int*>(handle), 0, 0, POSIX_FADV_RANDOM);
  }
  read_base_address(*state);
  File f;
  f.state_ = std::move(state);
  return f;
}

Result<File> File::open(std::shared_ptr<ByteSource> source, Options options) {
  if (!source) return InvalidArgument("File::open: no source");
  auto state = std::make_shared<FileState>(std::make_shared<SourceLink>(std::move(source)));
  state->options = std::move(options);
  state->threads = default_threads(state->options);
  state->helpers.set_threads(state->threads - 1);  // the caller is the other worker
  const std::string& name = state->path;
  auto fapl_id = source_fapl(state->link);
  if (!fapl_id.ok()) return fapl_id.status();
  Hid fapl(*fapl_id);
  QuietHdf5Errors quiet;
  state->file = Hid(H5Fopen(hdf5_file_name(*state->link).c_str(), H5F_ACC_RDONLY, fapl.get()));
  if (!state->file.valid()) {
    // A read that failed says why (a timeout, a lost token); otherwise the bytes are not HDF5.
    if (Status e = state->source_error_or(Status::Ok(), "opening '" + name + "'"); !e.ok()) return e;
    return InvalidArgument("'" + name + "' is not an HDF5 file (or is truncated): " + hdf5_error_text());
  }
  read_base_address(*state);
  File f;
  f.state_ = std::move(state);
  return f;
}

const std::string& File::path() const { return state_->path; }

unsigned File::threads() const { return state_->threads; }

Result<Dataset> File::dataset(const std::string& path) const {
  auto ds = state_->open_dataset(path);
  if (!ds.ok()) return ds.status();
  Dataset d;
  d.file_ = state_;
  d.state_ = *ds;
  return d;
}

void File::hint(const std::vector<std::pair<uint64_t, uint64_t>>& ranges) const {
  if (ranges.empty()) return;
  if (state_->link) {
    state_->link->hint(ranges);
    return;
  }
  // On a descriptor the file's reads keep: a plan hints each frame, and a descriptor of its own
  // cost every hint an open and a release by the mount's daemon, in series with the plan.
  auto worker = state_->workers.acquire();
  if (!worker.ok()) return;  // a hint only: the reads report what is wrong
  const int fd = (*worker)->fd;
  struct stat st;
  if (::fstat(fd, &st) == 0) {
    // A warm training epoch on a mount: every frame already in the kernel's page cache, no hint.
    const auto uncached = ranges_not_in_page_cache(fd, ranges);
    if (!uncached.empty()) (void)send_range_hints(fd, static_cast<uint64_t>(st.st_size), uncached);
  }
  state_->workers.release(std::move(*worker));
}

Result<std::vector<std::string>> File::dataset_paths() const {
  std::vector<std::string> out;
  QuietHdf5Errors quiet;
  auto visit = [](hid_t, const char* name, const H5O_info_t* info, void* data) -> herr_t {
    if (info->type == H5O_TYPE_DATASET) {
      static_cast<std::vector<std::string>*>(data)->push_back(std::string("/") + name);
    }
    return 0;
  };
  if (H5Ovisit2(state_->file.get(), H5_INDEX_NAME, H5_ITER_INC, visit, &out, H5O_INFO_BASIC) < 0) {
    return hubfs::IoError("cannot list the datasets of '" + state_->path + "': " + hdf5_error_text());
  }
  return out;
}

}  // namespace h5chunk
