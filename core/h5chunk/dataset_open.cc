// FileState::open_dataset: opens a dataset once per file, describes it, and decides how every
// read of it is served (refused, H5Dread, the fast path, or external storage read by h5chunk).
#include <algorithm>

#include "h5chunk/checked.h"
#include "h5chunk/codecs.h"
#include "h5chunk/describe.h"
#include "h5chunk/file_state.h"
#include "h5chunk/filter_checks.h"

namespace h5chunk {

using hubfs::InvalidArgument;
using hubfs::NotFound;
using hubfs::Unsupported;

namespace {

// The name libhdf5 opened the file holding `object` with ("" if it cannot say).
std::string file_name_of(hid_t object) {
  const ssize_t n = H5Fget_name(object, nullptr, 0);
  if (n <= 0) return {};
  std::string name(static_cast<size_t>(n) + 1, '\0');
  if (H5Fget_name(object, name.data(), name.size()) != n) return {};
  name.resize(static_cast<size_t>(n));
  return name;
}

}  // namespace

Result<std::shared_ptr<DatasetState>> FileState::open_dataset(const std::string& raw_name) {
  std::string name = raw_name.empty() || raw_name[0] != '/' ? "/" + raw_name : raw_name;
  {
    std::lock_guard<std::mutex> lock(mu);
    if (auto it = datasets.find(name); it != datasets.end()) return it->second;
  }
  QuietHdf5Errors quiet;
  const std::string where = "'" + path + "'";
  if (H5Lexists(file.get(), name.c_str(), H5P_DEFAULT) <= 0 && name != "/") {
    return NotFound("no dataset '" + name + "' in " + where +
                    " (run 'h5chunk info FILE' to list its datasets)");
  }
  auto state = std::make_shared<DatasetState>();
  clear_source_error();
  if (link) {
    // An external link on the way opens another file: only one of the tree, checked first.
    if (Status s = check_external_links(file.get(), name, link, "file '" + path + "', dataset '" + name + "'");
        !s.ok()) {
      return s;
    }
  }
  state->dataset = Hid(H5Dopen2(file.get(), name.c_str(), H5P_DEFAULT));
  if (!state->dataset.valid()) {
    if (Status e = source_error_or(Status::Ok(), "opening '" + name + "' in " + where); !e.ok()) return e;
    const std::string why = hdf5_error_text();
    // A dataset libhdf5 cannot open (its object header says dataset; its layout, dataspace or
    // type message is one libhdf5 refuses, e.g. a chunked layout of rank 0) is a damaged file,
    // not a wrong name: kCorrupt (Python: OSError), naming libhdf5's reason.
    H5O_info_t oinfo;
    if (H5Oget_info_by_name2(file.get(), name.c_str(), &oinfo, H5O_INFO_BASIC, H5P_DEFAULT) >= 0 &&
        oinfo.type == H5O_TYPE_DATASET) {
      return hubfs::Corrupt("file '" + path + "', dataset '" + name +
                            "' is corrupt: libhdf5 cannot open it (" + why + ")");
    }
    return InvalidArgument("'" + name + "' in " + where + " is not a dataset (" +
                           hdf5_error_text() + ")");
  }
  state->info.path = name;
  // A dataset an external link leads to lives in another file: h5chunk's own readers read this
  // one (its chunk index, chunks and contiguous data at that file's offsets would be this file's
  // bytes), so H5Dread reads it, and names in it resolve against that file's folder.
  bool foreign = false;
  std::string home = link ? link->tree_path() : std::string();
  Hid home_file(H5Iget_file_id(state->dataset.get()));
  {
    H5O_info_t here, there;
    foreign = H5Oget_info2(file.get(), &here, H5O_INFO_BASIC) >= 0 &&
              H5Oget_info2(state->dataset.get(), &there, H5O_INFO_BASIC) >= 0 && here.fileno != there.fileno;
    const std::shared_ptr<FileTree> tree = link ? link->tree() : nullptr;
    if (foreign && tree) {
      const std::string opened = file_name_of(state->dataset.get());
      const std::string root = "/" + tree->name() + "/";
      if (opened.compare(0, root.size(), root) == 0) home = opened.substr(root.size());
    }
  }
  Hid type(H5Dget_type(state->dataset.get()));
  Hid dcpl(H5Dget_create_plist(state->dataset.get()));
  if (!type.valid() || !dcpl.valid()) {
    return hubfs::IoError("cannot describe '" + name + "' in " + where + ": " + hdf5_error_text());
  }
  std::string corrupt;
  if (Status s = describe_dataset(state->dataset.get(), type.get(), dcpl.get(), &state->info, &state->layout,
                                  &state->element, &corrupt);
      !s.ok()) {
    return s.with_context("describing '" + name + "' in " + where);
  }
  if (foreign && state->info.fast_path_blocker.empty()) {
    state->info.fast_path_blocker = "lives in another file (an external link's target)";
    state->info.fix = "Open that file itself to read the dataset in parallel.";
  }
  for (const FilterStep& f : state->info.filters) {
    if (H5Zfilter_avail(static_cast<H5Z_filter_t>(f.id)) <= 0) state->h5dread_lacks_filter = true;
  }
  // Chunks can be planned and checked here: the layout is sound (corrupt is empty), every filter
  // is one h5chunk decodes or scale-offset or n-bit (filter_checks.h), and the grid can be
  // numbered (the fast path's own preconditions; other blockers, e.g. an element type H5Dread
  // converts, leave the chunks decodable).
  const bool checkable = std::all_of(state->info.filters.begin(), state->info.filters.end(), [](const FilterStep& f) {
    return unsupported_filter({f}).empty() || f.id == kScaleOffsetFilter || f.id == kNbitFilter;
  });
  state->verify_before_h5dread =
      !foreign && corrupt.empty() && state->info.readable && state->info.layout == "chunked" && checkable &&
      chunk_grid_problem(state->info.shape, state->info.chunk).empty();
  const std::string source = "file '" + path + "', dataset '" + name + "'";
  const bool external_storage = state->info.layout == "contiguous" && H5Pget_external_count(dcpl.get()) > 0;
  if (!corrupt.empty()) {
    state->refusal = hubfs::Corrupt(source + " is corrupt: " + corrupt);
    state->info.readable = false;
  } else if (state->info.layout == "virtual" && link &&
             // libhdf5 reads a source it cannot open, or a dataset missing from it, as fill values.
             !(state->refusal = check_virtual_sources(home_file.get(), home, dcpl.get(), link, source)).ok()) {
    state->info.readable = false;
    state->info.unsupported_type.clear();  // not h5py's to read either: the refusal stands
  } else if ((state->info.layout == "virtual" || foreign) && link && !state->info.readable && corrupt.empty() &&
             !state->info.null_space) {
    // Python hands datasets h5chunk cannot return to h5py over hubfs.open, whose file-object
    // driver looks other files up in the file itself (docs/usage.md).
    state->refusal = hubfs::IoError(
        source + (foreign ? " lives in another file (an external link's target)" : " is a virtual dataset") +
        " of a type h5chunk cannot return (" + state->info.type_text +
        "), and h5py over hubfs.open would not read the other files from the repo; read it from a mount or a "
        "download of the repo");
    state->info.unsupported_type.clear();
  } else if (external_storage && link) {
    auto segments = state->info.readable && state->element.fast_path_blocker.empty()
                        ? open_external_segments(dcpl.get(), state->info.nbytes, link, home, source)
                        : hubfs::Result<std::shared_ptr<ExternalSegments>>(hubfs::IoError(
                              source + " is stored in external files and has a type (" + state->info.type_text +
                              ") h5chunk cannot convert itself; h5chunk reads the external storage of an hf:// "
                              "file itself (libhdf5 would read local files), so it cannot read this one: download "
                              "the repo's files and read them locally"));
    if (segments.ok()) {
      state->external = *segments;
      state->external_workers = std::make_unique<WorkerStatePool>(state->external.get());
      state->info.fast_path_blocker.clear();
      state->info.fix.clear();
    } else {
      state->refusal = segments.status();
      state->info.readable = false;
      state->info.unsupported_type.clear();
    }
  } else if (!state->info.readable) {
    state->refusal = Unsupported(source + " " + state->info.fast_path_blocker + "; " + state->info.fix);
  } else if (!foreign && (state->info.layout == "contiguous" || state->info.layout == "compact")) {
    // These layouts store exactly the dataspace's bytes. A dataspace that disagrees with the
    // storage (dims patched on disk) sends H5Dread past it, and HDF5 1.10.8 then answers the
    // same read with an error once and stale bytes the next time.
    const hsize_t stored = H5Dget_storage_size(state->dataset.get());
    const haddr_t at = state->info.layout == "contiguous" ? H5Dget_offset(state->dataset.get()) : HADDR_UNDEF;
    const std::optional<uint64_t> file_size = size();
    // H5Dget_offset is already absolute (it includes any user block), unlike chunk addresses.
    const auto end = at == HADDR_UNDEF ? std::optional<uint64_t>(0) : checked_add(at, stored);
    if (file_size && (!end || *end > *file_size)) {
      // Likewise for storage placed past the end of the file (a damaged address): HDF5 fails
      // the first read and serves stale bytes to the next.
      state->refusal = hubfs::Corrupt(source + " is corrupt: its contiguous storage (" + std::to_string(stored) +
                                      " bytes at " + std::to_string(at) + ") lies past the end of the file (" +
                                      std::to_string(*file_size) + " bytes)");
      state->info.readable = false;
    } else if (stored > 0 && stored != state->info.nbytes) {
      state->refusal = hubfs::Corrupt(
          source + " is corrupt: its shape " + shape_text(state->info.shape) + " of " + state->info.type_text +
          " needs " + (state->info.nbytes == UINT64_MAX ? std::string("more than 2^64 - 1") : std::to_string(state->info.nbytes)) +
          " bytes, but its " + state->info.layout + " storage holds " + std::to_string(stored));
      state->info.readable = false;
    }
  }
  if (state->info.layout == "contiguous" && state->info.fast_path_blocker.empty() && !state->external) {
    // Unlike chunk addresses, H5Dget_offset includes the user block already (HDF5 adds the
    // base address): a 512-byte user block put the data at 2560 with the base at 512, and
    // adding the base again read 512 bytes too far.
    state->contiguous_offset = H5Dget_offset(state->dataset.get());
  }
  if (state->info.layout == "chunked" && !foreign) {
    state->manifest = std::make_unique<ChunkManifest>(state->dataset.get(), state->info.shape,
                                                      state->info.chunk, base_address,
                                                      link.get());
  }
  if (state->info.layout == "virtual" && !link && state->refusal.ok()) {
    std::string home_path = file_name_of(state->dataset.get());
    if (home_path.empty()) home_path = path;
    state->info.missing_sources =
        missing_virtual_sources(home_file.get(), state->dataset.get(), dcpl.get(), home_path);
  }
  state->info.refusal = state->refusal.message();
  std::lock_guard<std::mutex> lock(mu);
  auto [it, inserted] = datasets.emplace(name, state);
  return it->second;
}

}  // namespace h5chunk
