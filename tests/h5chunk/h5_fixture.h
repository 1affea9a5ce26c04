// Test-side HDF5 writers and a reference reader for the h5chunk tests. Files are written with
// the HDF5 C library (through the installed blosc/lz4 plugins where they exist); codecs without
// a Debian plugin (zstd, bitshuffle) are written chunk by chunk with H5Dwrite_chunk from arrays
// the test knows, using the codec tests' reference encoders.
#pragma once

#include <hdf5.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include "codecs_test_util.h"
#include "h5chunk/h5chunk.h"
#include "h5chunk/selection.h"

namespace h5chunk::testing {

using Bytes = std::vector<uint8_t>;

enum class Codec {
  kNone, kDeflateShuffle, kBloscLz4, kBloscZstdBit, kLz4, kFletcherDeflate,
  kZstdDirect,        // 32015, no plugin: chunks written with H5Dwrite_chunk
  kBitshuffleDirect,  // 32008 (lz4 blocks), no plugin: chunks written with H5Dwrite_chunk
  kScaleOffset,       // HDF5's scale-offset filter (integers: minimum bits; floats: 2 decimal digits)
  kNbit,              // HDF5's n-bit filter (full precision: it still frames every chunk)
  // Scale-offset among other filters, in pipeline (write) order:
  kScaleOffsetShuffleDeflate,  // scale-offset, shuffle, deflate: h5py's order for all three
  kShuffleScaleOffset,         // shuffle, then scale-offset (the C API allows either order)
  kScaleOffsetFletcher,        // scale-offset, fletcher32 (h5py refuses it; the C API does not)
  kNbitDeflate,                // n-bit, deflate
};

inline const char* codec_name(Codec c) {
  switch (c) {
    case Codec::kNone: return "none";
    case Codec::kDeflateShuffle: return "deflate_shuffle";
    case Codec::kBloscLz4: return "blosc_lz4";
    case Codec::kBloscZstdBit: return "blosc_zstd_bit";
    case Codec::kLz4: return "lz4";
    case Codec::kFletcherDeflate: return "fletcher_deflate";
    case Codec::kZstdDirect: return "zstd";
    case Codec::kBitshuffleDirect: return "bitshuffle";
    case Codec::kScaleOffset: return "scaleoffset";
    case Codec::kNbit: return "nbit";
    case Codec::kScaleOffsetShuffleDeflate: return "scaleoffset_shuffle_deflate";
    case Codec::kShuffleScaleOffset: return "shuffle_scaleoffset";
    case Codec::kScaleOffsetFletcher: return "scaleoffset_fletcher";
    case Codec::kNbitDeflate: return "nbit_deflate";
  }
  return "?";
}

// Codecs H5Dread cannot read here (no plugin): compare against the written array instead.
// Zstd has one when HDF5_PLUGIN_PATH includes the build's plugins/ (README).
inline bool h5dread_can_decode(Codec c) {
  if (c == Codec::kZstdDirect) return H5Zfilter_avail(32015) > 0;
  return c != Codec::kBitshuffleDirect;
}

struct DType {
  hid_t type;
  size_t size;
  const char* name;
};
inline DType int16_t_() { return {H5T_NATIVE_INT16, 2, "int16"}; }
inline DType float32_() { return {H5T_NATIVE_FLOAT, 4, "float32"}; }
inline DType uint8_() { return {H5T_NATIVE_UINT8, 1, "uint8"}; }
inline DType float64_() { return {H5T_NATIVE_DOUBLE, 8, "float64"}; }

struct DatasetSpec {
  std::string name = "/data";
  DType dtype = float32_();
  std::vector<hsize_t> shape;
  std::vector<hsize_t> chunk;  // empty: contiguous
  std::vector<hsize_t> maxdims;  // empty: fixed at shape; H5S_UNLIMITED picks other chunk indexes
  Codec codec = Codec::kNone;
  bool dont_filter_partial = false;
  std::optional<double> fill;  // a user fill value
  bool write = true;           // false: leave every chunk unallocated
};

struct FileSpec {
  hsize_t userblock = 0;
  bool libver_latest = false;  // fixed-array chunk index instead of the v1 B-tree
};

inline uint64_t count(const std::vector<hsize_t>& shape) {
  uint64_t n = 1;
  for (auto d : shape) n *= d;
  return n;
}

// Deterministic, mildly compressible values of the dataset's type.
inline Bytes make_data(const DatasetSpec& spec, uint32_t seed = 1) {
  const uint64_t n = count(spec.shape);
  Bytes out(n * spec.dtype.size);
  uint32_t r = seed * 2654435761u + 1;
  for (uint64_t i = 0; i < n; ++i) {
    r = r * 1664525u + 1013904223u;
    double v = std::sin(double(i) * 0.013) * 60 + double(i % 97) * 0.25 + double(r >> 28);
    uint8_t* p = &out[i * spec.dtype.size];
    if (spec.dtype.type == H5T_NATIVE_INT16) {
      int16_t x = int16_t(v * 3);
      std::memcpy(p, &x, 2);
    } else if (spec.dtype.type == H5T_NATIVE_UINT8) {
      uint8_t x = uint8_t(int(v) & 0xff);
      std::memcpy(p, &x, 1);
    } else if (spec.dtype.type == H5T_NATIVE_FLOAT) {
      float x = float(v);
      std::memcpy(p, &x, 4);
    } else {
      std::memcpy(p, &v, 8);
    }
  }
  return out;
}

inline void check(bool ok, const std::string& what) {
  if (!ok) throw std::runtime_error("fixture: " + what + " failed");
}

// Opens (creating if needed) an HDF5 file for writing.
inline hid_t open_for_write(const std::string& path, const FileSpec& fs = {}) {
  H5Eset_auto2(H5E_DEFAULT, nullptr, nullptr);
  hid_t f = H5Fopen(path.c_str(), H5F_ACC_RDWR, H5P_DEFAULT);
  if (f >= 0) return f;
  hid_t fcpl = H5Pcreate(H5P_FILE_CREATE);
  if (fs.userblock) H5Pset_userblock(fcpl, fs.userblock);
  hid_t fapl = H5Pcreate(H5P_FILE_ACCESS);
  if (fs.libver_latest) H5Pset_libver_bounds(fapl, H5F_LIBVER_LATEST, H5F_LIBVER_LATEST);
  f = H5Fcreate(path.c_str(), H5F_ACC_TRUNC, fcpl, fapl);
  H5Pclose(fcpl);
  H5Pclose(fapl);
  check(f >= 0, "H5Fcreate " + path);
  return f;
}

// One chunk of `data` (C order over `shape`), zero-padded past the dataset's edge.
inline Bytes extract_chunk(const Bytes& data, const DatasetSpec& spec, const std::vector<hsize_t>& origin) {
  const size_t rank = spec.shape.size(), e = spec.dtype.size;
  Bytes out(count(spec.chunk) * e, 0);
  std::vector<hsize_t> at(rank, 0);
  for (uint64_t k = 0; k < count(spec.chunk); ++k) {
    uint64_t src = 0;
    bool inside = true;
    for (size_t d = 0; d < rank; ++d) {
      hsize_t x = origin[d] + at[d];
      inside &= x < spec.shape[d];
      src = src * spec.shape[d] + x;
    }
    if (inside) std::memcpy(&out[k * e], &data[src * e], e);
    for (size_t d = rank; d-- > 0;) {
      if (++at[d] < spec.chunk[d]) break;
      at[d] = 0;
    }
  }
  return out;
}

inline Bytes encode_direct(Codec codec, const Bytes& plain, size_t elem) {
  if (codec == Codec::kZstdDirect) return codec_test::zstd_encode(plain, 3);
  return codec_test::bitshuffle_encode(plain, elem, 64, 2);
}

// Writes `data` as dataset `spec` into the file at `path`.
inline void write_dataset(const std::string& path, const DatasetSpec& spec, const Bytes& data,
                          const FileSpec& fs = {}) {
  hid_t f = open_for_write(path, fs);
  const int rank = int(spec.shape.size());
  hid_t space = H5Screate_simple(rank, spec.shape.data(), spec.maxdims.empty() ? nullptr : spec.maxdims.data());
  hid_t dcpl = H5Pcreate(H5P_DATASET_CREATE);
  // No modification times in object headers: the same spec then gives the same bytes on every
  // run (the mutation fuzz replays seeds against them).
  H5Pset_obj_track_times(dcpl, false);
  if (!spec.chunk.empty()) {
    check(H5Pset_chunk(dcpl, rank, spec.chunk.data()) >= 0, "H5Pset_chunk");
    const unsigned blosc_lz4[] = {0, 0, 0, 0, 5, 1, 1}, blosc_zstd[] = {0, 0, 0, 0, 7, 2, 5};
    const unsigned bshuf[] = {0, 3, unsigned(spec.dtype.size), 64, 2};
    const bool is_float = H5Tget_class(spec.dtype.type) == H5T_FLOAT;
    auto scaleoffset = [&] {
      check(H5Pset_scaleoffset(dcpl, is_float ? H5Z_SO_FLOAT_DSCALE : H5Z_SO_INT,
                               is_float ? 2 : H5Z_SO_INT_MINBITS_DEFAULT) >= 0, "scaleoffset");
    };
    switch (spec.codec) {
      case Codec::kNone: break;
      case Codec::kDeflateShuffle:
        H5Pset_shuffle(dcpl);
        H5Pset_deflate(dcpl, 4);
        break;
      case Codec::kBloscLz4: check(H5Pset_filter(dcpl, 32001, H5Z_FLAG_OPTIONAL, 7, blosc_lz4) >= 0, "blosc"); break;
      case Codec::kBloscZstdBit: check(H5Pset_filter(dcpl, 32001, H5Z_FLAG_OPTIONAL, 7, blosc_zstd) >= 0, "blosc"); break;
      case Codec::kLz4: check(H5Pset_filter(dcpl, 32004, H5Z_FLAG_OPTIONAL, 0, nullptr) >= 0, "lz4"); break;
      case Codec::kFletcherDeflate:
        H5Pset_deflate(dcpl, 4);
        H5Pset_fletcher32(dcpl);
        break;
      case Codec::kZstdDirect: check(H5Pset_filter(dcpl, 32015, H5Z_FLAG_OPTIONAL, 0, nullptr) >= 0, "zstd"); break;
      case Codec::kBitshuffleDirect: check(H5Pset_filter(dcpl, 32008, H5Z_FLAG_OPTIONAL, 5, bshuf) >= 0, "bshuf"); break;
      case Codec::kScaleOffset: scaleoffset(); break;
      case Codec::kNbit: check(H5Pset_nbit(dcpl) >= 0, "nbit"); break;
      case Codec::kScaleOffsetShuffleDeflate:
        scaleoffset();
        H5Pset_shuffle(dcpl);
        H5Pset_deflate(dcpl, 4);
        break;
      case Codec::kShuffleScaleOffset:
        H5Pset_shuffle(dcpl);
        scaleoffset();
        break;
      case Codec::kScaleOffsetFletcher:
        scaleoffset();
        H5Pset_fletcher32(dcpl);
        break;
      case Codec::kNbitDeflate:
        check(H5Pset_nbit(dcpl) >= 0, "nbit");
        H5Pset_deflate(dcpl, 4);
        break;
    }
    if (spec.dont_filter_partial) H5Pset_chunk_opts(dcpl, H5D_CHUNK_DONT_FILTER_PARTIAL_CHUNKS);
  }
  if (spec.fill) {
    Bytes fill(spec.dtype.size);
    double v = *spec.fill;
    if (spec.dtype.type == H5T_NATIVE_INT16) { int16_t x = int16_t(v); std::memcpy(fill.data(), &x, 2); }
    else if (spec.dtype.type == H5T_NATIVE_UINT8) { uint8_t x = uint8_t(v); std::memcpy(fill.data(), &x, 1); }
    else if (spec.dtype.type == H5T_NATIVE_FLOAT) { float x = float(v); std::memcpy(fill.data(), &x, 4); }
    else std::memcpy(fill.data(), &v, 8);
    H5Pset_fill_value(dcpl, spec.dtype.type, fill.data());
  }
  hid_t d = H5Dcreate2(f, spec.name.c_str(), spec.dtype.type, space, H5P_DEFAULT, dcpl, H5P_DEFAULT);
  check(d >= 0, "H5Dcreate2 " + spec.name);
  if (spec.write && spec.codec != Codec::kZstdDirect && spec.codec != Codec::kBitshuffleDirect) {
    check(H5Dwrite(d, spec.dtype.type, H5S_ALL, H5S_ALL, H5P_DEFAULT, data.data()) >= 0, "H5Dwrite");
  } else if (spec.write) {
    std::vector<hsize_t> grid(rank, 0);
    while (true) {
      std::vector<hsize_t> origin(rank);
      for (int k = 0; k < rank; ++k) origin[k] = grid[k] * spec.chunk[k];
      Bytes stored = encode_direct(spec.codec, extract_chunk(data, spec, origin), spec.dtype.size);
      check(H5Dwrite_chunk(d, H5P_DEFAULT, 0, origin.data(), stored.size(), stored.data()) >= 0,
            "H5Dwrite_chunk");
      int k = rank - 1;
      for (; k >= 0; --k) {
        if (++grid[k] * spec.chunk[k] < spec.shape[k]) break;
        grid[k] = 0;
      }
      if (k < 0) break;
    }
  }
  H5Dclose(d);
  H5Pclose(dcpl);
  H5Sclose(space);
  H5Fclose(f);
}

// Writes one chunk's stored bytes directly (for raw, corrupt or masked chunks).
inline void write_raw_chunk(const std::string& path, const std::string& name,
                            const std::vector<hsize_t>& origin, uint32_t filter_mask, const Bytes& stored) {
  hid_t f = open_for_write(path);
  hid_t d = H5Dopen2(f, name.c_str(), H5P_DEFAULT);
  check(H5Dwrite_chunk(d, H5P_DEFAULT, filter_mask, origin.data(), stored.size(), stored.data()) >= 0,
        "H5Dwrite_chunk");
  H5Dclose(d);
  H5Fclose(f);
}

// (file offset, stored size, mask) of the chunk at `origin`, as HDF5 reports it (relative
// address plus the user block).
struct StoredChunk { uint64_t offset, size; unsigned mask; };
inline StoredChunk stored_chunk(const std::string& path, const std::string& name, const std::vector<hsize_t>& origin) {
  hid_t f = H5Fopen(path.c_str(), H5F_ACC_RDONLY, H5P_DEFAULT);
  hid_t d = H5Dopen2(f, name.c_str(), H5P_DEFAULT);
  hid_t fcpl = H5Fget_create_plist(f);
  hsize_t ub = 0;
  H5Pget_userblock(fcpl, &ub);
  unsigned mask = 0;
  haddr_t addr = 0;
  hsize_t size = 0;
  H5Dget_chunk_info_by_coord(d, origin.data(), &mask, &addr, &size);
  H5Pclose(fcpl);
  H5Dclose(d);
  H5Fclose(f);
  return {addr + ub, size, mask};
}

// The whole dataset through H5Dread: the reference every h5chunk read is compared with.
inline Bytes h5dread_all(const std::string& path, const std::string& name, hid_t type, size_t elem) {
  hid_t f = H5Fopen(path.c_str(), H5F_ACC_RDONLY, H5P_DEFAULT);
  hid_t d = H5Dopen2(f, name.c_str(), H5P_DEFAULT);
  hid_t s = H5Dget_space(d);
  hssize_t n = H5Sget_simple_extent_npoints(s);
  Bytes out(size_t(n) * elem);
  herr_t rc = H5Dread(d, type, H5S_ALL, H5S_ALL, H5P_DEFAULT, out.data());
  H5Sclose(s);
  H5Dclose(d);
  H5Fclose(f);
  check(rc >= 0, "H5Dread of " + name);
  return out;
}

// numpy indexing of a full C-order array, one element at a time: slow and obviously right.
inline Bytes index_reference(const Bytes& full, const std::vector<uint64_t>& shape, size_t elem,
                             const NormalizedSelection& sel) {
  const size_t rank = shape.size();
  std::vector<std::vector<uint64_t>> idx(rank);
  for (size_t d = 0; d < rank; ++d) {
    const auto& ax = sel.axes[d];
    if (ax.kind == AxisSelection::Kind::kList) {
      idx[d].assign(ax.indices.begin(), ax.indices.end());
    } else {
      for (int64_t k = 0; k < ax.count; ++k) idx[d].push_back(uint64_t(ax.start + k * ax.step));
    }
  }
  Bytes out(sel.num_elements * elem);
  if (sel.num_elements == 0) return out;
  std::vector<size_t> at(rank, 0);
  for (uint64_t k = 0; k < sel.num_elements; ++k) {
    uint64_t src = 0;
    for (size_t d = 0; d < rank; ++d) src = src * shape[d] + idx[d][at[d]];
    std::memcpy(&out[k * elem], &full[src * elem], elem);
    for (size_t d = rank; d-- > 0;) {
      if (++at[d] < idx[d].size()) break;
      at[d] = 0;
    }
  }
  return out;
}

// numpy's answer for `sel` on a full C-order array, worked out from the selection as written,
// independently of normalize(): Python's slice rules stepped through one index at a time, and
// orthogonal lists (each list indexes its own axis, as np.ix_). Empty optional for what numpy
// would refuse (an index out of range, a bad mask); `shape` receives the result's shape.
inline std::optional<Bytes> orthogonal_reference(const Bytes& full, const std::vector<uint64_t>& dims,
                                                 size_t elem, const Selection& sel,
                                                 std::vector<uint64_t>* shape) {
  const size_t rank = dims.size();
  std::vector<Index> items;
  size_t explicit_axes = 0;
  for (const Index& ix : sel.items) explicit_axes += ix.kind != Index::Kind::kEllipsis;
  if (explicit_axes > rank) return std::nullopt;
  for (const Index& ix : sel.items) {
    if (ix.kind != Index::Kind::kEllipsis) {
      items.push_back(ix);
      continue;
    }
    for (size_t k = explicit_axes; k < rank; ++k) items.push_back(Index::Slice());
  }
  while (items.size() < rank) items.push_back(Index::Slice());
  if (items.size() != rank) return std::nullopt;  // two ellipses
  std::vector<std::vector<uint64_t>> idx(rank);
  shape->clear();
  for (size_t d = 0; d < rank; ++d) {
    const int64_t n = int64_t(dims[d]);
    const Index& ix = items[d];
    auto wrap = [&](int64_t v) -> std::optional<uint64_t> {
      if (v < -n || v >= n) return std::nullopt;
      return uint64_t(v < 0 ? v + n : v);
    };
    switch (ix.kind) {
      case Index::Kind::kInt: {
        auto v = wrap(ix.value);
        if (!v) return std::nullopt;
        idx[d].push_back(*v);
        continue;  // the axis is dropped
      }
      case Index::Kind::kList:
        for (int64_t v : ix.list) {
          auto w = wrap(v);
          if (!w) return std::nullopt;
          idx[d].push_back(*w);
        }
        break;
      case Index::Kind::kBoolMask:
        if (int64_t(ix.mask.size()) != n) return std::nullopt;
        for (int64_t i = 0; i < n; ++i) {
          if (ix.mask[i]) idx[d].push_back(uint64_t(i));
        }
        break;
      case Index::Kind::kSlice: {
        const int64_t step = ix.step.value_or(1);
        if (step == 0) return std::nullopt;
        // CPython's PySlice_AdjustIndices, literally.
        auto adjust = [&](std::optional<int64_t> v, int64_t dflt) {
          if (!v) return dflt;
          int64_t x = *v;
          if (x < 0) {
            x += n;
            if (x < 0) x = step < 0 ? -1 : 0;
          } else if (x >= n) {
            x = step < 0 ? n - 1 : n;
          }
          return x;
        };
        const int64_t start = adjust(ix.start, step < 0 ? n - 1 : 0);
        const int64_t stop = adjust(ix.stop, step < 0 ? -1 : n);
        // Walk in __int128 so a step near 2^63 cannot wrap past the stop.
        for (__int128 i = start; step > 0 ? i < stop : i > stop; i += step) idx[d].push_back(uint64_t(i));
        break;
      }
      case Index::Kind::kEllipsis: break;
    }
    shape->push_back(idx[d].size());
  }
  uint64_t total = 1;
  for (const auto& v : idx) total *= v.size();
  Bytes out(total * elem);
  if (total == 0) return out;
  std::vector<size_t> at(rank, 0);
  for (uint64_t k = 0; k < total; ++k) {
    uint64_t src = 0;
    for (size_t d = 0; d < rank; ++d) src = src * dims[d] + idx[d][at[d]];
    std::memcpy(&out[k * elem], &full[src * elem], elem);
    for (size_t d = rank; d-- > 0;) {
      if (++at[d] < idx[d].size()) break;
      at[d] = 0;
    }
  }
  return out;
}

inline ReadOptions via(Route route) {
  ReadOptions o;
  o.route = route;
  return o;
}

inline Options quiet_options(unsigned threads = 2) {
  Options o;
  o.threads = threads;
  o.log = [](const std::string&) {};
  return o;
}

inline Bytes bytes_of(const Array& a) { return Bytes(a.data(), a.data() + a.nbytes()); }

}  // namespace h5chunk::testing
