// File and Dataset: open, describe, and route each read to the fast path or to H5Dread.
#include "h5chunk/h5chunk.h"

#include <fcntl.h>
#include <unistd.h>

#include <sys/stat.h>
#include <sys/sysinfo.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <new>
#include <map>
#include <mutex>
#include <set>
#include <thread>

#include "common/big_buffer.h"
#include "h5chunk/checked.h"
#include "h5chunk/contiguous.h"
#include "h5chunk/element_type.h"
#include "h5chunk/external_files.h"
#include "h5chunk/fallback.h"
#include "h5chunk/filter_checks.h"
#include "h5chunk/hdf5_handle.h"
#include "h5chunk/manifest.h"
#include "h5chunk/range_hints.h"
#include "h5chunk/reader.h"
#include "h5chunk/source_driver.h"

namespace h5chunk {

using hubfs::InvalidArgument;
using hubfs::NotFound;
using hubfs::Unsupported;

// ---------------------------------------------------------------------------------------------
// Types

const char* dtype_name(DType t) {
  switch (t) {
    case DType::kInt8: return "int8";
    case DType::kUInt8: return "uint8";
    case DType::kInt16: return "int16";
    case DType::kUInt16: return "uint16";
    case DType::kInt32: return "int32";
    case DType::kUInt32: return "uint32";
    case DType::kInt64: return "int64";
    case DType::kUInt64: return "uint64";
    case DType::kFloat32: return "float32";
    case DType::kFloat64: return "float64";
  }
  return "?";
}

size_t dtype_size(DType t) {
  switch (t) {
    case DType::kInt8: case DType::kUInt8: return 1;
    case DType::kInt16: case DType::kUInt16: return 2;
    case DType::kInt32: case DType::kUInt32: case DType::kFloat32: return 4;
    case DType::kInt64: case DType::kUInt64: case DType::kFloat64: return 8;
  }
  return 1;
}

namespace {

std::string human_bytes(uint64_t n) {
  const char* units[] = {"B", "KB", "MB", "GB", "TB", "PB", "EB"};
  double v = static_cast<double>(n);
  int u = 0;
  while (v >= 1000 && u < 6) {
    v /= 1000;
    ++u;
  }
  char buf[32];
  std::snprintf(buf, sizeof buf, u ? "%.1f %s" : "%.0f %s", v, units[u]);
  return buf;
}

std::string shape_text(const std::vector<uint64_t>& shape) {
  std::string s = "(";
  for (size_t i = 0; i < shape.size(); ++i) s += (i ? ", " : "") + std::to_string(shape[i]);
  return s + (shape.size() == 1 ? ",)" : ")");
}

}  // namespace

// ---------------------------------------------------------------------------------------------
// Array

// Arrays at least this large live in transparent huge pages where the kernel allows it (THP
// "madvise" mode, as here): the first write to fresh memory costs more than decoding on these
// VMs (0.24-0.85 GB/s), and a 2 MiB page takes one fault where 4 KiB pages take 512
// (common/big_buffer.h).
constexpr size_t kHugePageArrayBytes = 8u << 20;

namespace {

// Physical memory plus swap: the most an array whose every byte is written can occupy. Asking
// for more can only end in the OOM killer (or, under AddressSanitizer, an abort on an
// allocation larger than its allocator supports), so it is refused up front.
uint64_t memory_and_swap_bytes() {
  struct sysinfo si;
  if (::sysinfo(&si) != 0) return UINT64_MAX;
  auto total = checked_add(si.totalram, si.totalswap);
  auto bytes = total ? checked_mul(*total, si.mem_unit ? si.mem_unit : 1) : std::nullopt;
  return bytes.value_or(UINT64_MAX);
}

}  // namespace

Result<Array> Array::allocate(std::vector<uint64_t> shape, DType dtype) {
  return allocate(std::move(shape), dtype_size(dtype), dtype_name(dtype), dtype);
}

Result<Array> Array::allocate(std::vector<uint64_t> shape, size_t element_size,
                              const std::string& type_name, std::optional<DType> dtype) {
  const std::string what = "an array of shape " + shape_text(shape) + " of " + type_name;
  auto bytes = checked_product(shape, std::max<size_t>(element_size, 1));
  if (!bytes) {
    return InvalidArgument("array is too big: " + what + " needs more than 2^64 - 1 bytes");
  }
  const uint64_t limit = memory_and_swap_bytes();
  if (*bytes > limit) {
    return InvalidArgument("array is too big: " + what + " needs " + std::to_string(*bytes) +
                           " bytes (" + human_bytes(*bytes) +
                           "), more than this machine's memory and swap (" + human_bytes(limit) +
                           "); read a smaller selection");
  }
  void* p = hubfs::allocate_in_huge_pages(*bytes, kHugePageArrayBytes);
  if (!p) {
    return hubfs::Unavailable("out of memory: cannot allocate " + std::to_string(*bytes) +
                              " bytes (" + human_bytes(*bytes) + ") for " + what +
                              "; read a smaller selection or free memory");
  }
  Array array;
  array.shape_ = std::move(shape);
  array.dtype_ = dtype.value_or(DType::kUInt8);
  array.elem_size_ = std::max<size_t>(element_size, 1);
  array.nbytes_ = *bytes;
  array.data_.reset(static_cast<uint8_t*>(p));
  return array;
}

Array::Array(std::vector<uint64_t> shape, DType dtype) {
  auto array = allocate(std::move(shape), dtype);
  if (!array.ok()) throw std::bad_alloc();
  *this = std::move(*array);
}

void Array::Free::operator()(uint8_t* p) const { std::free(p); }

uint64_t Array::num_elements() const {
  return nbytes_ / elem_size_;  // allocate() checked the product
}

// ---------------------------------------------------------------------------------------------
// Internal state

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

namespace {

// HDF5 1.10 refuses to create chunks of 4 GiB or more ("chunk size must be < 4GB").
constexpr uint64_t kMaxChunkBytes = (uint64_t{1} << 32) - 1;

// Before H5Dread serves a read of a chunked dataset whose chunk index h5chunk has not read yet,
// the index is read (once per dataset) when its grid has at most this many chunks, so that a
// damaged index is refused rather than handed to libhdf5 (a v1 B-tree whose root points to
// itself crashes H5Dread). Larger grids are not read for a small read: their index can be
// megabytes, which on a hubfs mount would cost more than the read itself.
constexpr uint64_t kMaxGridChunksParsedBeforeH5Dread = 1u << 16;

// Empty if this chunk shape can be the dataset's; else what is wrong with it (only damage makes
// one: HDF5 never writes it, and H5Dread crashes, hangs or returns stale memory on some).
// Every size the reader derives from the chunk shape (chunk bytes, chunk positions in the grid)
// is bounded here and in chunk_grid_problem, so the reader's own arithmetic cannot overflow.
std::string chunk_shape_problem(const std::vector<uint64_t>& shape, const std::vector<uint64_t>& chunk,
                                int chunk_rank, size_t elem_size) {
  if (shape.empty() || chunk_rank != static_cast<int>(shape.size())) {
    return "a chunk shape of rank " + std::to_string(chunk_rank) + " for a dataset of rank " +
           std::to_string(shape.size());
  }
  for (size_t d = 0; d < chunk.size(); ++d) {
    if (chunk[d] == 0) return "a chunk shape with a zero dimension (axis " + std::to_string(d) + ")";
  }
  auto chunk_bytes = checked_product(chunk, elem_size);
  if (!chunk_bytes || *chunk_bytes > kMaxChunkBytes) {
    return "chunks of " + shape_text(chunk) + " elements, over HDF5's 4 GiB chunk limit";
  }
  return "";
}

// Empty if the fast path can number the chunks of this (sound) chunk shape; a valid file can
// have more than 2^64 chunks ((2^40, 2^40) in chunks of 1): H5Dread reads those.
std::string chunk_grid_problem(const std::vector<uint64_t>& shape, const std::vector<uint64_t>& chunk) {
  std::vector<uint64_t> grid;
  for (size_t d = 0; d < shape.size(); ++d) grid.push_back(ceil_div(shape[d], chunk[d]));
  if (!checked_product(grid)) {
    return "a chunk grid of more than 2^64 - 1 chunks (shape " + shape_text(shape) + ")";
  }
  return "";
}

// Sets *corrupt to why the file's description of the dataset cannot be right (reads are then
// refused: H5Dread would return memory it never wrote), or leaves it empty.
Status describe(hid_t dset, hid_t file_type, hid_t dcpl, DatasetInfo* info, ChunkedLayout* layout,
                ElementDescription* element, std::string* corrupt) {
  // Shape.
  Hid space(H5Dget_space(dset));
  if (!space.valid()) return hubfs::IoError("H5Dget_space failed: " + hdf5_error_text());
  int rank = H5Sget_simple_extent_ndims(space.get());
  if (rank < 0) return hubfs::IoError("cannot read the dataset's shape: " + hdf5_error_text());
  std::vector<hsize_t> dims(rank), maxdims(rank);
  if (rank > 0 && H5Sget_simple_extent_dims(space.get(), dims.data(), maxdims.data()) != rank) {
    return hubfs::IoError("cannot read the dataset's shape: " + hdf5_error_text());
  }
  info->shape.assign(dims.begin(), dims.end());
  // HDF5 never writes a current dimension over its maximum (H5Screate_simple and H5Dset_extent
  // refuse one); only damage to the dataspace message makes it. libhdf5 does not check it on
  // open, and H5Dread then loops over chunks the dataset cannot have (mutation fuzz seeds 1676
  // and 12891: one bit of a dimension of an unfiltered chunked dataset, H5Dread never returned).
  for (int d = 0; d < rank && corrupt->empty(); ++d) {
    if (maxdims[d] != H5S_UNLIMITED && dims[d] > maxdims[d]) {
      *corrupt = "its dataspace message gives axis " + std::to_string(d) + " " + std::to_string(dims[d]) +
                 " elements, over its maximum of " + std::to_string(maxdims[d]) + " (shape " +
                 shape_text(std::vector<uint64_t>(dims.begin(), dims.end())) + ")";
    }
  }
  // A null dataspace holds no elements at all (not even the one a scalar has).
  const bool null_space = H5Sget_simple_extent_type(space.get()) == H5S_NULL;
  info->null_space = null_space;

  // Element type: any fixed-size type (element_type.h says how each is returned).
  *element = describe_element(file_type);
  const size_t size = H5Tget_size(file_type);
  info->element = element->type;
  info->numeric = element->dtype.has_value();
  info->dtype = element->dtype.value_or(DType::kUInt8);
  if (info->numeric) {
    info->type_text = dtype_name(info->dtype);
  } else if (element->unsupported.empty() && element->type.kind != "compound" &&
             element->type.kind != "array") {
    // "float16", "bool", "complex64", "string (8 bytes)": numpy's names where they exist.
    const std::string& k = element->type.kind;
    info->type_text = k == "float" || k == "complex" ? k + std::to_string(size * 8)
                      : k == "bool"                  ? k
                                                     : k + " (" + std::to_string(size) + " bytes)";
  } else {
    static const std::map<int, const char*> names = {
        {H5T_INTEGER, "integer"}, {H5T_FLOAT, "float"}, {H5T_STRING, "string"},
        {H5T_BITFIELD, "bitfield"}, {H5T_OPAQUE, "opaque"}, {H5T_COMPOUND, "compound"},
        {H5T_REFERENCE, "reference"}, {H5T_ENUM, "enum"}, {H5T_VLEN, "variable-length"},
        {H5T_ARRAY, "array"}};
    auto it = names.find(H5Tget_class(file_type));
    info->type_text = std::string(it == names.end() ? "unknown" : it->second) + " (" +
                      std::to_string(size) + " bytes)";
    if (!element->unsupported.empty()) info->type_text += ": " + element->unsupported;
  }
  const bool fixed_size = element->unsupported.empty();
  // A damaged datatype is no type h5py reads either: corrupt, not "read it with h5py".
  if (element->damaged) *corrupt = "its datatype message describes " + element->unsupported;
  info->unsupported_type = element->damaged ? std::string() : element->unsupported;
  info->big_endian = H5Tget_order(file_type) == H5T_ORDER_BE;
  info->nbytes = checked_product(info->shape, size).value_or(UINT64_MAX);

  // Layout and filters.
  switch (H5Pget_layout(dcpl)) {
    case H5D_CHUNKED: info->layout = "chunked"; break;
    case H5D_CONTIGUOUS: info->layout = "contiguous"; break;
    case H5D_COMPACT: info->layout = "compact"; break;
    case H5D_VIRTUAL: info->layout = "virtual"; break;
    default: info->layout = "unknown"; break;
  }
  // The chunk shape as the file states it; checked below before anything divides by it.
  int chunk_rank = -1;
  if (info->layout == "chunked") {
    std::vector<hsize_t> chunk(rank);
    chunk_rank = H5Pget_chunk(dcpl, rank, chunk.data());
    info->chunk.assign(chunk.begin(), chunk.end());
    // HDF5 refuses to create chunks longer than a fixed-size axis; only damage makes one. Such
    // a chunk's decoded bytes fill only part of what H5Dread expects, and it returns the rest
    // of its buffer uninitialised (seen with a chunk dim flipped from 6 to 8198).
    for (int d = 0; d < rank && chunk_rank == rank; ++d) {
      if (maxdims[d] != H5S_UNLIMITED && chunk[d] > maxdims[d]) {
        *corrupt = "its chunk shape " + shape_text(info->chunk) + " exceeds its fixed maximum shape on axis " +
                   std::to_string(d) + " (" + std::to_string(maxdims[d]) + ")";
      }
    }
    // A rank, zero dimension or size HDF5 never writes (a 32-d layout with its rank patched to
    // 0 made H5Dread allocate 3.8 GB and hang): refused, never handed to H5Dread.
    if (std::string why = chunk_shape_problem(info->shape, info->chunk, chunk_rank, size); !why.empty()) {
      *corrupt = "its layout message gives " + why;
    }
    info->filters = filter_pipeline(dcpl);
    unsigned opts = 0;
    H5Pget_chunk_opts(dcpl, &opts);
    layout->dont_filter_partial = opts & H5D_CHUNK_DONT_FILTER_PARTIAL_CHUNKS;
  }

  // Why the fast path cannot read it, and what would fix that.
  const std::string resave =
      "Fix: re-save it chunked (e.g. one frame per chunk) with Blosc, zstd, lz4 or gzip "
      "compression to read it in parallel.";
  if (null_space) {
    info->fast_path_blocker = "has a null dataspace (it holds no elements, whatever its dtype)";
    info->fix = "There is nothing to read (h5py returns h5py.Empty for it).";
  } else if (!fixed_size) {
    info->fast_path_blocker = "has a dtype h5chunk cannot return (" + info->type_text + ")";
    info->fix = "h5chunk reads fixed-size types only; read it with h5py.";
  } else if (info->layout == "compact") {
    // Compact data lives in the object header (at most 64 KiB): one H5Dread has it at once.
    info->fast_path_blocker = "is stored compact (in its object header)";
    info->fix = "None needed: compact datasets hold at most 64 KiB, which H5Dread reads at once.";
  } else if (info->layout == "contiguous" &&
             (H5Pget_external_count(dcpl) != 0 || H5Dget_offset(dset) == HADDR_UNDEF)) {
    info->fast_path_blocker = "has no contiguous storage in the file (never written, or external)";
    info->fix = "H5Dread returns its fill value or reads its external files.";
  } else if (info->layout != "chunked" && info->layout != "contiguous") {
    info->fast_path_blocker = "is stored " + info->layout + " (not chunked)";
    info->fix = resave;
  } else if (std::string why = unsupported_filter(info->filters); !why.empty()) {
    info->fast_path_blocker = "is compressed with " + why + ", which h5chunk cannot decode";
    info->fix = resave;
  } else if (std::string why = info->layout == "chunked" && corrupt->empty()
                                   ? chunk_grid_problem(info->shape, info->chunk)
                                   : std::string();
             !why.empty()) {
    info->fast_path_blocker = "has " + why;
    info->fix = "Re-save it with larger chunks to read it in parallel.";
  } else if (!element->fast_path_blocker.empty()) {
    info->fast_path_blocker = "has " + element->fast_path_blocker;
    info->fix = "h5chunk returns what H5Dread returns; re-save it with standard types to read it in parallel.";
  }
  info->readable = !null_space && fixed_size;

  if (info->readable) {
    layout->shape = info->shape;
    layout->chunk = info->chunk;
    layout->elem_size = size;
    layout->pipeline = info->filters;
    layout->conversion = element->conversion;
    layout->decodable = unsupported_filter(info->filters).empty();
    // The fill value H5Dread gives unwritten chunks; zeros when none was defined.
    layout->fill.assign(layout->elem_size, 0);
    H5D_fill_value_t fill_status = H5D_FILL_VALUE_UNDEFINED;
    if (H5Pfill_value_defined(dcpl, &fill_status) >= 0 && fill_status != H5D_FILL_VALUE_UNDEFINED) {
      H5Pget_fill_value(dcpl, element->mem_type.get(), layout->fill.data());
    }
  }
  return Status::Ok();
}

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
  if (Status s = describe(state->dataset.get(), type.get(), dcpl.get(), &state->info, &state->layout,
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

// ---------------------------------------------------------------------------------------------
// File

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
  // megabytes nobody needed (on a hubfs mount, up to 30 MB of requests for a 5-frame read). The
  // default (sec2) driver's handle is the file descriptor.
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
  const int fd = ::open(state_->path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return;  // a hint only: the reads report what is wrong
  struct stat st;
  if (::fstat(fd, &st) == 0) (void)send_range_hints(fd, static_cast<uint64_t>(st.st_size), ranges);
  ::close(fd);
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

// ---------------------------------------------------------------------------------------------
// Dataset

const DatasetInfo& Dataset::info() const { return state_->info; }

uint64_t Dataset::manifest_queries() const {
  return state_->manifest ? state_->manifest->queries() : 0;
}

Result<std::vector<std::pair<uint64_t, uint64_t>>> Dataset::row_ranges(uint64_t first, uint64_t count) const {
  std::vector<std::pair<uint64_t, uint64_t>> ranges;
  const DatasetInfo& info = state_->info;
  if (info.shape.empty() || count == 0 || first >= info.shape[0]) return ranges;
  count = std::min(count, info.shape[0] - first);
  if (!state_->manifest) {
    if (info.layout != "contiguous" || !state_->contiguous_offset) return ranges;
    uint64_t row_bytes = info.element.size;
    for (size_t d = 1; d < info.shape.size(); ++d) row_bytes *= info.shape[d];
    ranges.emplace_back(state_->contiguous_offset + first * row_bytes, count * row_bytes);
    return ranges;
  }
  const std::vector<uint64_t>& chunk = state_->layout.chunk;
  const size_t rank = info.shape.size();
  std::vector<uint64_t> grid(rank, 0), last(rank, 0);
  grid[0] = first / chunk[0];
  last[0] = (first + count - 1) / chunk[0];
  for (size_t d = 1; d < rank; ++d) last[d] = info.shape[d] == 0 ? 0 : (info.shape[d] - 1) / chunk[d];
  for (size_t d = 1; d < rank; ++d) {
    if (info.shape[d] == 0) return ranges;  // no elements at all
  }
  for (;;) {  // an odometer over the chunk grid, axis 0 slowest
    auto loc = state_->manifest->locate(grid.data());
    if (!loc.ok()) return loc.status().with_context("file '" + file_->path + "', dataset '" + info.path + "'");
    if (loc->allocated && loc->size > 0) ranges.emplace_back(loc->offset, loc->size);
    size_t d = rank;
    for (;;) {
      if (d == 0) return ranges;
      --d;
      if (grid[d] < last[d]) {
        ++grid[d];
        break;
      }
      grid[d] = 0;
    }
  }
}

Result<std::vector<uint64_t>> Dataset::selection_shape(const Selection& selection) const {
  auto norm = normalize(selection, state_->info.shape);
  if (!norm.ok()) return norm.status();
  return norm->out_shape;
}

Result<Array> Dataset::read(std::string_view selection, const ReadOptions& options) const {
  auto sel = parse_selection(selection);
  if (!sel.ok()) return sel.status();
  return read(*sel, options);
}

Result<Array> Dataset::read(const Selection& selection, const ReadOptions& options) const {
  const DatasetInfo& info = state_->info;
  const std::string source = "file '" + file_->path + "', dataset '" + info.path + "'";
  if (!state_->refusal.ok()) return state_->refusal;
  auto shape = selection_shape(selection);
  if (!shape.ok()) return shape.status().with_context(source);
  auto array = Array::allocate(*shape, info.element.size, info.type_text,
                               info.numeric ? std::optional<DType>(info.dtype) : std::nullopt);
  if (!array.ok()) return array.status().with_context(source);
  auto stats = read_into(selection, array->data(), array->nbytes(), options);
  if (!stats.ok()) return stats.status();
  array->stats = *stats;
  return array;
}

Result<ReadStats> Dataset::read_into(const Selection& selection, void* out, size_t out_bytes,
                                     const ReadOptions& options) const {
  ScopedReadCancel cancellable(options.cancel);  // libhdf5's and the index's reads through a source
  file_->clear_source_error();
  auto r = read_into_unmapped(selection, out, out_bytes, options);
  if (!r.ok() && r.status().code() != hubfs::Code::kInvalidArgument) {
    // A read through a source that failed there fails with the source's cause.
    return file_->source_error_or(r.status(), "file '" + file_->path + "', dataset '" + state_->info.path + "'");
  }
  return r;
}

Result<ReadStats> Dataset::read_into_unmapped(const Selection& selection, void* out, size_t out_bytes,
                                              const ReadOptions& options) const {
  const DatasetInfo& info = state_->info;
  const std::string source = "file '" + file_->path + "', dataset '" + info.path + "'";
  if (!state_->refusal.ok()) return state_->refusal;
  auto norm = normalize(selection, info.shape);
  if (!norm.ok()) return norm.status().with_context(source);
  const size_t elem_size = info.element.size;
  auto checked_bytes = checked_mul(norm->num_elements, elem_size);
  if (!checked_bytes) {
    return InvalidArgument(source + ": array is too big: the selection " +
                           shape_text(norm->out_shape) + " of " + info.type_text +
                           " needs more than 2^64 - 1 bytes");
  }
  const uint64_t bytes = *checked_bytes;
  if (out_bytes != bytes) {
    return InvalidArgument("the output buffer holds " + std::to_string(out_bytes) +
                           " bytes but the selection " + shape_text(norm->out_shape) + " of " +
                           info.type_text + " needs " + std::to_string(bytes));
  }
  ReadStats stats;
  if (bytes == 0) {
    stats.fallback_cause = "empty selection";
    return stats;
  }

  if (state_->external) return read_external(*norm, out, options, source);

  // Every selection maps to chunks (selection.h); only the dataset itself, or a small read on
  // the automatic route, sends a read to H5Dread.
  std::string cause;
  if (options.route == Route::kH5Dread) {
    cause = "H5Dread requested";
  } else if (!info.fast_path_blocker.empty()) {
    if (options.route == Route::kFastOnly) {
      return Unsupported(source + ": the fast path cannot read it: the dataset " +
                         info.fast_path_blocker + ". " + info.fix);
    }
    cause = info.fast_path_blocker;
    // A compact dataset is tiny by definition: H5Dread is the right reader, nothing to fix.
    if (info.layout != "compact") file_->note(info, cause, info.fix);
  } else if (options.route == Route::kAuto && bytes < file_->options.min_fast_path_bytes &&
             !state_->h5dread_lacks_filter) {
    cause = "small read (" + std::to_string(bytes) + " bytes, below " +
            std::to_string(file_->options.min_fast_path_bytes) + ")";
  }
  auto fast_read_request = [&](const ReadOptions& options, const NormalizedSelection& selection, void* out) {
    FastRead req;
    req.layout = &state_->layout;
    req.manifest = state_->manifest.get();
    req.workers = &file_->workers;
    req.helpers = &file_->helpers;
    req.selection = &selection;
    req.out = static_cast<uint8_t*>(out);
    req.threads = file_->threads;
    req.threads_chosen = file_->options.threads != 0;
    req.max_bytes_in_flight = file_->options.max_bytes_in_flight;
    req.progress = options.progress;
    req.cancel = options.cancel;
    req.source = source;
    return req;
  };
  // H5Dread serves the read; `why` becomes the read's fallback_cause. Except on the H5Dread
  // route (libhdf5 itself, asked for by name), a chunk index h5chunk's parser found damaged is
  // refused with that diagnosis first: libhdf5 crashes or hangs on some damaged indexes.
  auto read_with_h5dread = [&](std::string why) -> Result<ReadStats> {
    if (options.route != Route::kH5Dread && state_->manifest) {
      QuietHdf5Errors quiet;
      if (Status s = state_->manifest->damage(kMaxGridChunksParsedBeforeH5Dread); !s.ok()) {
        return s.with_context(source);
      }
      if (state_->verify_before_h5dread) {
        FastRead check = fast_read_request(options, *norm, out);
        check.verify_only = true;
        check.verified = &state_->verified;
        check.progress = nullptr;  // progress counts the bytes a fast-path read returns
        auto verified = read_chunks(check);
        if (!verified.ok()) return verified.status();  // names the source and the chunk
      }
    }
    // Whatever H5Dread leaves unwritten (it does not check every filter's output size) is then
    // zeros on every run, never the buffer's old bytes.
    std::memset(out, 0, bytes);
    Status s;
    if (std::string hazard; options.isolated_h5dread && !(hazard = h5dread_hazard(options.route)).empty()) {
      s = options.isolated_h5dread(selection, out, bytes, hazard);
      if (!s.ok()) return s;  // the runner names the file and the dataset
    } else {
      s = h5dread_selection(state_->dataset.get(), state_->element.mem_type.get(), elem_size, *norm, out);
    }
    if (!s.ok()) return s.with_context(source);
    stats.fallback_cause = std::move(why);
    return stats;
  };
  if (!cause.empty()) return read_with_h5dread(cause);

  if (info.layout == "contiguous") {
    ContiguousRead req;
    req.layout = &state_->layout;
    req.data_offset = state_->contiguous_offset;
    req.workers = &file_->workers;
    req.helpers = &file_->helpers;
    req.selection = &*norm;
    req.out = static_cast<uint8_t*>(out);
    req.threads = file_->threads;
    req.progress = options.progress;
    req.cancel = options.cancel;
    req.source = source;
    auto fast = read_contiguous(req);
    if (!fast.ok() && fast.status().code() == hubfs::Code::kUnsupported) {
      // Declined before reading anything: too many scattered pieces, H5Dread's sieve is better.
      return read_with_h5dread(fast.status().message());
    }
    return fast;
  }

  FastRead req = fast_read_request(options, *norm, out);
  // Route::kFastPath forces the fast path; H5Dread cannot stand in without its plugins. Nor,
  // for a dataset whose chunks are verified before H5Dread, would declining save anything: the
  // decline avoids locating the chunks, which the verification must do.
  req.may_decline = options.route == Route::kAuto && !state_->h5dread_lacks_filter &&
                    !state_->verify_before_h5dread;
  auto fast = [&] {
    QuietHdf5Errors quiet;  // one scope for the whole read: the per-chunk lookups nest in it
    return read_chunks(req);
  }();
  if (!fast.ok() && fast.status().code() == hubfs::Code::kUnsupported) {
    // Declined (see read_chunks): H5Dread is faster for this one, or libhdf5's own answers
    // about a chunk disagree and H5Dread is the reference. It rewrites the whole output.
    if (options.route == Route::kFastOnly) {
      return Unsupported(source + ": the fast path cannot read it: " + fast.status().message());
    }
    return read_with_h5dread(fast.status().message());
  }
  return fast;
}

std::string Dataset::h5dread_hazard(Route route) const {
  const DatasetInfo& info = state_->info;
  if (info.layout == "virtual") return "a virtual dataset, whose sources libhdf5 reads unchecked";
  if (info.layout != "chunked") return "";  // contiguous and compact data pass through no filter
  for (const FilterStep& f : info.filters) {
    if (f.id == kScaleOffsetFilter || f.id == kNbitFilter) {
      return std::string(f.id == kScaleOffsetFilter ? "the scale-offset" : "the n-bit") +
             " filter, which libhdf5 decodes trusting each chunk's header and size";
    }
  }
  if (route == Route::kH5Dread) return "H5Dread asked for by name: the chunks are not checked first";
  if (!state_->verify_before_h5dread) return "chunks that h5chunk cannot decode and check before H5Dread";
  return "";
}

Result<ReadStats> Dataset::read_external(const NormalizedSelection& selection, void* out,
                                         const ReadOptions& options, const std::string& source) const {
  ContiguousRead req;
  req.layout = &state_->layout;
  req.data_offset = 0;  // the segments laid end to end are the dataset's bytes
  req.workers = state_->external_workers.get();
  req.helpers = &file_->helpers;
  req.selection = &selection;
  req.out = static_cast<uint8_t*>(out);
  req.threads = file_->threads;
  req.progress = options.progress;
  req.cancel = options.cancel;
  req.source = source;
  auto r = read_contiguous(req);
  if (!r.ok() && r.status().code() == hubfs::Code::kUnsupported) {
    // H5Dread, the usual answer to such a selection, would read local files: not an option.
    return hubfs::IoError(source + ": " + r.status().message() +
                          "; its external storage is read by h5chunk only: read it in fewer, larger pieces");
  }
  return r;
}

}  // namespace h5chunk
