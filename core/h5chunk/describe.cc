// describe_dataset (describe.h): a dataset's description from libhdf5, checked for damage.
#include "h5chunk/describe.h"

#include <map>

#include "h5chunk/checked.h"
#include "h5chunk/codecs.h"
#include "h5chunk/hdf5_handle.h"
#include "h5chunk/size_text.h"

namespace h5chunk {

namespace {

// HDF5 1.10 refuses to create chunks of 4 GiB or more ("chunk size must be < 4GB").
constexpr uint64_t kMaxChunkBytes = (uint64_t{1} << 32) - 1;

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

}  // namespace

std::string chunk_grid_problem(const std::vector<uint64_t>& shape, const std::vector<uint64_t>& chunk) {
  std::vector<uint64_t> grid;
  for (size_t d = 0; d < shape.size(); ++d) grid.push_back(ceil_div(shape[d], chunk[d]));
  if (!checked_product(grid)) {
    return "a chunk grid of more than 2^64 - 1 chunks (shape " + shape_text(shape) + ")";
  }
  return "";
}

Status describe_dataset(hid_t dset, hid_t file_type, hid_t dcpl, DatasetInfo* info, ChunkedLayout* layout,
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

}  // namespace h5chunk
