#include "h5chunk/manifest.h"

#include <string>

#include "h5chunk/checked.h"
#include "h5chunk/chunk_index.h"
#include "h5chunk/hdf5_handle.h"

namespace h5chunk {

// The superblock starts every HDF5 file (at the base address); its shortest form (versions 2
// and 3) is 48 bytes.
constexpr haddr_t kSmallestSuperblockBytes = 48;

// The parsed index is kept as a dense table of one ChunkLocation (32 bytes) per chunk of the
// grid up to 4M chunks (128 MiB); a larger grid keeps only its allocated chunks, at most as many
// (a huge sparse dataset: (2^40, 1) in chunks of 1024 with three regions written). Datasets with
// more allocated chunks than that stay on per-chunk queries.
constexpr uint64_t kMaxIndexedChunks = 1ull << 22;

namespace {

std::string coords_text(const std::vector<hsize_t>& origin) {
  std::string coords;
  for (size_t d = 0; d < origin.size(); ++d) coords += (d ? ", " : "") + std::to_string(origin[d]);
  return coords;
}

// A chunk the index walk (ours, or H5Dget_chunk_info_by_coord) found, checked against HDF5's
// lookup of its stored size, and not on the superblock; else the index is damaged.
//
// Only found chunks are checked. H5Dget_chunk_storage_size consults the dataset's chunk cache
// before the index, and libhdf5 1.10.8 keeps entries there for unallocated chunks an H5Dread
// touched (h5py reading the same file in this process is enough): for those it answers the
// unfiltered chunk size although no chunk exists. So "no chunk" is decided by the walk alone:
// by our parser (whose structure checks passed; a sound index's lookup finds only what a full
// walk lists), or on the per-chunk path by the walk's address (query()).
Status check_found(hid_t dataset, const std::vector<hsize_t>& origin, uint64_t addr, uint64_t size) {
  // H5Dget_chunk_info_by_coord walks the index; H5Dread looks chunks up (a B-tree search, an
  // array index). On a sound index both find the same chunk. On a damaged one (a key or child
  // pointer overwritten) they can disagree, and reading what the walk found would return bytes
  // H5Dread never would (in one fuzz case, the superblock as chunk data). The lookup's view of
  // the chunk's size is cheap to ask for (no walk), so every located chunk is cross-checked.
  // A cache entry of an allocated chunk holds its true size (the file is read-only: never dirty).
  if (size == 0) {
    // No writer stores an empty chunk; H5Dread fails on it. Reading it as unwritten would
    // return fill values for a chunk the file says exists.
    return hubfs::Corrupt("the chunk index is damaged at (" + coords_text(origin) +
                          "): it lists the chunk at address " + std::to_string(addr) +
                          " with a stored size of 0 bytes; the file is corrupt");
  }
  hsize_t looked_up = 0;
  const bool lookup_ok = H5Dget_chunk_storage_size(dataset, origin.data(), &looked_up) >= 0;
  if (!lookup_ok) looked_up = 0;
  if (looked_up != size) {
    return hubfs::Corrupt(
        "the chunk index is damaged at (" + coords_text(origin) + "): walking it finds a chunk of " +
        std::to_string(size) + " bytes, looking the chunk up " +
        (looked_up ? "finds one of " + std::to_string(looked_up) + " bytes"
                   : "finds none" + (lookup_ok ? std::string() : " (" + hdf5_error_text() + ")")) +
        "; the file is corrupt");
  }
  if (addr < kSmallestSuperblockBytes) {
    // Both views agree, but on a pointer a damaged index holds (a zeroed page): the superblock
    // is at address 0, so no chunk can start there, whatever H5Dread would make of it.
    return hubfs::Corrupt("the chunk index is damaged at (" + coords_text(origin) +
                          "): it places the chunk at address " + std::to_string(addr) +
                          ", inside the file's superblock; the file is corrupt");
  }
  return Status::Ok();
}

}  // namespace

ChunkManifest::ChunkManifest(hid_t dataset, std::vector<uint64_t> shape,
                             std::vector<uint64_t> chunk, uint64_t base_address, SourceLink* source)
    : dataset_(dataset), shape_(std::move(shape)), chunk_(std::move(chunk)),
      base_address_(base_address), source_(source) {
  for (size_t d = 0; d < shape_.size(); ++d) {
    // ceil_div: shape + chunk - 1 wraps near 2^64, and a corrupt layout can declare a zero
    // chunk dimension (the dataset then never takes the fast path; see chunk_shape_problem).
    grid_shape_.push_back(ceil_div(shape_[d], chunk_[d]));
  }
}

uint64_t ChunkManifest::position(const uint64_t* grid) const {
  uint64_t key = 0;
  for (size_t d = 0; d < grid_shape_.size(); ++d) key = key * grid_shape_[d] + grid[d];
  return key;
}

bool ChunkManifest::known(const uint64_t* grid) const {
  const uint64_t key = position(grid);
  std::lock_guard<std::mutex> lock(mu_);
  return index_state_ == IndexState::kParsed || memo_.count(key) > 0;
}

bool ChunkManifest::indexed() {
  std::lock_guard<std::mutex> lock(mu_);
  (void)try_index();  // a source's failure: not indexed now; damage() or locate() report it
  return index_state_ == IndexState::kParsed;
}

Status ChunkManifest::try_index() {
  if (index_state_ != IndexState::kUntried) return Status::Ok();
  const uint64_t source_errors = source_ ? source_->error_count() : 0;
  Status status = read_index();
  if (!status.ok() && source_ && source_->error_count() != source_errors) return status;
  index_status_ = std::move(status);
  // Unsupported: a format corner, driver or size we do not index; libhdf5's per-chunk queries
  // stand in. Anything else (a checksum, a broken structure, an I/O error) means the index is
  // damaged, and the per-chunk queries cannot be trusted on it either: their cross-check
  // compares sizes only, and a damaged v1 B-tree key can make the walk and the lookup find two
  // different chunks of the same size. So every chunk reports the damage.
  if (index_status_.ok()) {
    index_state_ = IndexState::kParsed;
  } else if (index_status_.code() == hubfs::Code::kUnsupported) {
    index_state_ = IndexState::kFailed;
  } else {
    index_state_ = IndexState::kDamaged;
  }
  return Status::Ok();
}

Status ChunkManifest::damage(uint64_t max_grid_chunks) {
  std::lock_guard<std::mutex> lock(mu_);
  if (index_state_ == IndexState::kUntried) {
    auto total = checked_product(grid_shape_);
    if (!total || *total > max_grid_chunks) return Status::Ok();
    if (Status s = try_index(); !s.ok()) return s;
  }
  if (index_state_ != IndexState::kDamaged) return Status::Ok();
  return damaged_index_error();
}

Status ChunkManifest::damaged_index_error() const {
  return hubfs::Corrupt(index_status_.message() +
                        "; the file is corrupt (h5chunk does not hand it to H5Dread, which crashes or "
                        "hangs on some such files; --route h5dread asks libhdf5 anyway)");
}

std::string ChunkManifest::index_type() const {
  std::lock_guard<std::mutex> lock(mu_);
  return index_type_;
}

Status ChunkManifest::index_status() const {
  std::lock_guard<std::mutex> lock(mu_);
  return index_status_;
}

ChunkLocation ChunkManifest::parsed(uint64_t key) const {
  if (dense_) return table_[key];
  auto it = sparse_.find(key);
  return it == sparse_.end() ? ChunkLocation{} : it->second.loc;
}

bool ChunkManifest::parsed_verified(uint64_t key) const {
  if (dense_) return verified_[key];
  auto it = sparse_.find(key);
  return it == sparse_.end() || it->second.verified;  // unallocated: nothing to verify
}

void ChunkManifest::mark_verified(uint64_t key) {
  if (dense_) {
    verified_[key] = true;
  } else if (auto it = sparse_.find(key); it != sparse_.end()) {
    it->second.verified = true;
  }
}

Status ChunkManifest::read_index() {
  auto total = checked_product(grid_shape_);
  if (grid_shape_.empty() || !total) {
    return hubfs::Unsupported("the chunk grid is too large to index in memory");
  }
  const bool dense = *total <= kMaxIndexedChunks;
  QuietHdf5Errors quiet;
  ChunkIndexSource src;
  src.base_address = base_address_;
  src.shape = shape_;
  src.chunk = chunk_;
  // The file descriptor libhdf5 reads through (the default sec2 driver's handle): the same file,
  // whatever path or working directory it was opened by. pread leaves its offset alone.
  // A file opened from a ByteSource is read through it (source_driver.h), the same bytes.
  Hid file(H5Iget_file_id(dataset_));
  if (source_) {
    src.source = source_;
  } else {
    Hid fapl(file.valid() ? H5Fget_access_plist(file.get()) : H5I_INVALID_HID);
    void* handle = nullptr;
    if (!fapl.valid() || H5Pget_driver(fapl.get()) != H5FD_SEC2 ||
        H5Fget_vfd_handle(file.get(), H5P_DEFAULT, &handle) < 0 || !handle) {
      return hubfs::Unsupported("the file is not read through HDF5's default (sec2) driver");
    }
    src.fd = *static_cast<int*>(handle);
  }
  Hid fcpl(H5Fget_create_plist(file.get()));
  size_t sizeof_addr = 0, sizeof_size = 0;
  if (!fcpl.valid() || H5Pget_sizes(fcpl.get(), &sizeof_addr, &sizeof_size) < 0) {
    return hubfs::Unsupported("HDF5 does not tell the file's address size: " + hdf5_error_text());
  }
  src.sizeof_addr = static_cast<unsigned>(sizeof_addr);
  src.sizeof_size = static_cast<unsigned>(sizeof_size);
  H5O_info_t info;
  if (H5Oget_info2(dataset_, &info, H5O_INFO_BASIC) < 0 || info.addr == HADDR_UNDEF) {
    return hubfs::Unsupported("HDF5 does not tell the dataset's header address: " + hdf5_error_text());
  }
  src.header_address = info.addr;
  Hid space(H5Dget_space(dataset_));
  Hid type(H5Dget_type(dataset_));
  std::vector<hsize_t> dims(shape_.size()), maxdims(shape_.size());
  if (!space.valid() || !type.valid() || H5Sget_simple_extent_ndims(space.get()) != int(shape_.size()) ||
      H5Sget_simple_extent_dims(space.get(), dims.data(), maxdims.data()) < 0) {
    return hubfs::Unsupported("HDF5 does not describe the dataset's extent: " + hdf5_error_text());
  }
  for (hsize_t m : maxdims) src.maxdims.push_back(m == H5S_UNLIMITED ? UINT64_MAX : m);
  src.elem_size = H5Tget_size(type.get());
  Hid dcpl(H5Dget_create_plist(dataset_));
  const int nfilters = dcpl.valid() ? H5Pget_nfilters(dcpl.get()) : -1;
  if (nfilters < 0) return hubfs::Unsupported("HDF5 does not list the dataset's filters: " + hdf5_error_text());
  src.filtered = nfilters > 0;

  std::vector<ChunkLocation> table(dense ? *total : 0);
  std::vector<bool> seen(dense ? *total : 0);
  std::unordered_map<uint64_t, SparseEntry> sparse;
  auto sink = [&](const IndexedChunk& c) -> Status {
    const uint64_t key = position(c.grid);
    ChunkLocation* slot = nullptr;
    if (dense) {
      if (seen[key]) return hubfs::Corrupt("the chunk index lists a chunk twice");
      seen[key] = true;
      slot = &table[key];
    } else {
      if (sparse.size() >= kMaxIndexedChunks) {
        return hubfs::Unsupported("the dataset has more than " + std::to_string(kMaxIndexedChunks) +
                                  " chunks written over a grid too large to index in memory");
      }
      auto [it, inserted] = sparse.try_emplace(key);
      if (!inserted) return hubfs::Corrupt("the chunk index lists a chunk twice");
      slot = &it->second.loc;
    }
    ChunkLocation& loc = *slot;
    loc.allocated = true;
    auto offset = checked_add(c.address, base_address_);
    if (!offset) return hubfs::Corrupt("the chunk index places a chunk past 2^64");
    loc.offset = *offset;
    loc.size = c.size;
    loc.filter_mask = c.filter_mask;
    return Status::Ok();
  };
  auto type_name = read_chunk_index(src, sink);
  if (!type_name.ok()) return type_name.status();
  dense_ = dense;
  table_ = std::move(table);
  verified_.assign(table_.size(), false);
  sparse_ = std::move(sparse);
  index_type_ = *type_name;
  return Status::Ok();
}

Result<ChunkLocation> ChunkManifest::verify(const uint64_t* grid, uint64_t key) {
  const ChunkLocation loc = parsed(key);
  // Unallocated in the parsed index: nothing to cross-check (see check_found).
  if (!loc.allocated || parsed_verified(key)) return loc;
  origin_.resize(chunk_.size());  // a member: a whole read verifies 100k chunks, allocation-free
  for (size_t d = 0; d < chunk_.size(); ++d) origin_[d] = grid[d] * chunk_[d];
  QuietHdf5Errors quiet;
  ++queries_;
  if (Status s = check_found(dataset_, origin_, loc.offset - base_address_, loc.size); !s.ok()) return s;
  mark_verified(key);
  return loc;
}

Result<ChunkLocation> ChunkManifest::locate(const uint64_t* grid) {
  const uint64_t key = position(grid);
  std::lock_guard<std::mutex> lock(mu_);
  if (Status s = try_index(); !s.ok()) return s;
  if (index_state_ == IndexState::kDamaged) return damaged_index_error();
  if (auto it = memo_.find(key); it != memo_.end()) return it->second;
  // A chunk found damaged stays damaged: asking again could give another answer once H5Dread
  // has filled HDF5's chunk caches, which the lookup below consults first.
  if (auto it = damaged_.find(key); it != damaged_.end()) return it->second;
  const uint64_t source_errors = source_ ? source_->error_count() : 0;
  auto result = index_state_ == IndexState::kParsed ? verify(grid, key) : query(grid);
  if (result.ok()) {
    if (index_state_ != IndexState::kParsed) memo_.emplace(key, *result);  // table_ holds it
  } else if (!source_ || source_->error_count() == source_errors) {
    damaged_.emplace(key, result.status());  // the file's answer, not a failed read's
  }
  return result;
}

Result<ChunkLocation> ChunkManifest::query(const uint64_t* grid) {

  std::vector<hsize_t> origin(chunk_.size());
  for (size_t d = 0; d < chunk_.size(); ++d) origin[d] = grid[d] * chunk_[d];
  unsigned mask = 0;
  haddr_t addr = HADDR_UNDEF;
  hsize_t size = 0;
  QuietHdf5Errors quiet;
  ++queries_;
  if (H5Dget_chunk_info_by_coord(dataset_, origin.data(), &mask, &addr, &size) < 0) {
    return hubfs::Corrupt("HDF5 could not locate the chunk at (" + coords_text(origin) +
                          "): " + hdf5_error_text());
  }
  ChunkLocation loc;
  if (addr == HADDR_UNDEF) {
    // No chunk, by the walk's address. libhdf5 leaves the mask (and in other versions the size)
    // unset for an unallocated chunk: neither is read. Its lookup may still report a size,
    // from a chunk cache entry of this unallocated chunk (see check_found), from its walk's
    // mislabelling of some extensible arrays (docs/hdf5-formats.md), or from damage; which one
    // cannot be told from here, and only the last two would make fill values wrong bytes.
    hsize_t looked_up = 0;
    if (H5Dget_chunk_storage_size(dataset_, origin.data(), &looked_up) >= 0 && looked_up > 0) {
      return hubfs::Unsupported("libhdf5's walk of the chunk index finds no chunk at (" + coords_text(origin) +
                                ") but its lookup reports " + std::to_string(looked_up) +
                                " bytes there (a cached unwritten chunk, or a damaged index); H5Dread decides");
    }
    return loc;
  }
  if (Status s = check_found(dataset_, origin, addr, size); !s.ok()) return s;
  loc.allocated = true;
  auto offset = checked_add(addr, base_address_);
  if (!offset) return hubfs::Corrupt("the chunk index places the chunk at (" + coords_text(origin) + ") past 2^64");
  loc.offset = *offset;
  loc.size = size;
  loc.filter_mask = mask;
  return loc;
}

uint64_t ChunkManifest::queries() const {
  std::lock_guard<std::mutex> lock(mu_);
  return queries_;
}

}  // namespace h5chunk
