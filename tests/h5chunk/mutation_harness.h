// Mutation fuzzing of whole HDF5 files: real fixtures written with the C API, damaged the way
// an attacker or a bad disk would (bytes of chunk data, object headers and chunk-index nodes,
// dataspace dimensions, truncation, zeroed pages), then read through h5chunk and through
// H5Dread in separate child processes.
//
// The contract checked, per dataset, selection and route: h5chunk either returns a clear error
// or exactly the bytes H5Dread returns for the same file; it never crashes, hangs, runs away
// with memory, or succeeds where the reference did not.
//
// A damaged file can make libhdf5 itself crash or hang. Each read therefore runs in a forked
// child with a deadline and a memory ceiling, and blame is assigned by re-running: a crash or
// hang of the H5Dread child alone is libhdf5's (counted, printed, not a failure); a crash or hang
// of the h5chunk child (whatever H5Dread did: h5chunk must refuse where H5Dread would loop) is
// libhdf5's only if a third child making just the HDF5 calls h5chunk makes
// (open, describe, chunk queries) crashes or hangs too. Anything else is h5chunk's.
#pragma once

#include <hdf5.h>
#include <poll.h>
#include <signal.h>
#include <sys/syscall.h>
#include <sys/sysinfo.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <fstream>
#include <functional>
#include <map>
#include <random>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "h5_fixture.h"
#include "h5chunk/checked.h"
#include "hostile_util.h"
#include "reference_filters.h"

namespace h5chunk::testing::mutation {

// ---------------------------------------------------------------------------------------------
// Fixtures and where their structures lie

struct Region {
  uint64_t begin = 0, end = 0;
  std::string what;  // "/deflate chunk 3", "/ header", "TREE node"
};

struct Fixture {
  std::string name;  // "v1" or "latest"
  std::vector<uint8_t> bytes;
  std::vector<std::string> datasets;
  std::vector<std::vector<uint64_t>> shapes;
  std::vector<Region> chunks, headers, index_nodes, dims;
};

// Datasets covering every codec, index type and layout h5chunk handles. The default (v1)
// format gives v1 object headers and v1 B-tree chunk indexes; libver latest gives checksummed
// v2 headers and the fixed-array, extensible-array, v2 B-tree and single-chunk indexes.
inline std::vector<DatasetSpec> fixture_specs(bool latest) {
  auto spec = [](const char* name, DType dtype, std::vector<hsize_t> shape, std::vector<hsize_t> chunk,
                 Codec codec, std::vector<hsize_t> maxdims = {}) {
    DatasetSpec s;
    s.name = name;
    s.dtype = dtype;
    s.shape = std::move(shape);
    s.chunk = std::move(chunk);
    s.codec = codec;
    s.maxdims = std::move(maxdims);
    return s;
  };
  const hsize_t U = H5S_UNLIMITED;
  std::vector<DatasetSpec> specs;
  if (!latest) {
    specs.push_back(spec("/blosc", float32_(), {24, 32}, {6, 32}, Codec::kBloscLz4));
    specs.push_back(spec("/deflate", int16_t_(), {30, 17}, {8, 5}, Codec::kDeflateShuffle));
    specs.push_back(spec("/lz4", uint8_(), {16, 40}, {4, 40}, Codec::kLz4));
    specs.push_back(spec("/fletcher", float64_(), {20, 20}, {5, 20}, Codec::kFletcherDeflate));
    specs.push_back(spec("/zstd", float32_(), {12, 30}, {4, 30}, Codec::kZstdDirect));
    specs.push_back(spec("/bitshuffle", int16_t_(), {16, 24}, {4, 24}, Codec::kBitshuffleDirect));
    specs.push_back(spec("/raw", int16_t_(), {10, 12}, {4, 5}, Codec::kNone));
    specs.push_back(spec("/contiguous", int16_t_(), {10, 10}, {}, Codec::kNone));
    DatasetSpec unwritten = spec("/unwritten", uint8_(), {8, 8}, {4, 4}, Codec::kDeflateShuffle);
    unwritten.write = false;
    unwritten.fill = 7;
    specs.push_back(unwritten);
  } else {
    specs.push_back(spec("/fixed_array", float32_(), {24, 32}, {6, 32}, Codec::kBloscLz4));
    specs.push_back(spec("/extensible_array", int16_t_(), {30, 17}, {8, 5}, Codec::kDeflateShuffle, {U, 17}));
    specs.push_back(spec("/btree2", uint8_(), {16, 40}, {4, 8}, Codec::kLz4, {U, U}));
    specs.push_back(spec("/single_chunk", float64_(), {20, 20}, {20, 20}, Codec::kFletcherDeflate));
    specs.push_back(spec("/zstd", float32_(), {12, 30}, {4, 30}, Codec::kZstdDirect, {U, 30}));
    specs.push_back(spec("/contiguous", int16_t_(), {10, 10}, {}, Codec::kNone));
  }
  return specs;
}

// Signatures of the on-disk structures that index chunks (v1 B-tree, v2 B-tree, fixed and
// extensible arrays) and hold group and heap metadata.
inline const std::vector<std::string>& index_signatures() {
  static const std::vector<std::string> s = {"TREE", "BTHD", "BTIN", "BTLF", "FAHD", "FADB", "EAHD",
                                             "EAIB", "EASB", "EADB", "SNOD", "HEAP", "FRHP", "FHDB"};
  return s;
}

// A fixture file named `name` holding `specs`, and where its structures lie.
inline Fixture make_fixture_from(const std::string& dir, const std::string& name, const std::vector<DatasetSpec>& specs,
                                 bool latest) {
  Fixture fx;
  fx.name = name;
  const std::string path = dir + "/pristine_" + fx.name + ".h5";
  FileSpec fs;
  fs.libver_latest = latest;
  uint32_t seed = 1;
  for (const DatasetSpec& spec : specs) {
    write_dataset(path, spec, make_data(spec, seed++), fs);
    fx.datasets.push_back(spec.name);
    fx.shapes.emplace_back(spec.shape.begin(), spec.shape.end());
  }
  fx.bytes = read_file_bytes(path);

  // Where each structure lies, as HDF5 reports it (no user block: addresses are offsets).
  hid_t f = H5Fopen(path.c_str(), H5F_ACC_RDONLY, H5P_DEFAULT);
  check(f >= 0, "H5Fopen " + path);
  auto header = [&](const std::string& name) {
    H5O_info_t info;
    if (H5Oget_info_by_name2(f, name.c_str(), &info, H5O_INFO_BASIC | H5O_INFO_HDR, H5P_DEFAULT) >= 0) {
      fx.headers.push_back({info.addr, info.addr + info.hdr.space.total, name + " object header"});
    }
  };
  header("/");
  for (size_t i = 0; i < fx.datasets.size(); ++i) {
    const std::string& name = fx.datasets[i];
    header(name);
    hid_t d = H5Dopen2(f, name.c_str(), H5P_DEFAULT);
    hid_t dcpl = H5Dget_create_plist(d);
    if (H5Pget_layout(dcpl) == H5D_CHUNKED) {
      hsize_t n = 0;
      hid_t space = H5Dget_space(d);  // HDF5 1.10.8 refuses H5S_ALL here
      H5Dget_num_chunks(d, space, &n);
      for (hsize_t k = 0; k < n; ++k) {
        hsize_t offset[8];
        unsigned mask = 0;
        haddr_t addr = 0;
        hsize_t size = 0;
        if (H5Dget_chunk_info(d, space, k, offset, &mask, &addr, &size) >= 0 && addr != HADDR_UNDEF) {
          fx.chunks.push_back({addr, addr + size, name + " chunk " + std::to_string(k)});
        }
      }
      H5Sclose(space);
    } else {
      haddr_t addr = H5Dget_offset(d);
      if (addr != HADDR_UNDEF) fx.chunks.push_back({addr, addr + H5Dget_storage_size(d), name + " data"});
    }
    H5Pclose(dcpl);
    H5Dclose(d);
    auto hits = find_dims(fx.bytes, fx.shapes[i]);
    if (!hits.empty()) {
      fx.dims.push_back({hits[0], hits[0] + 8 * fx.shapes[i].size(), name});
    }
  }
  H5Fclose(f);

  auto inside_data = [&](uint64_t at) {
    for (const Region& r : fx.chunks)
      if (at >= r.begin && at < r.end) return true;
    return false;
  };
  for (const std::string& sig : index_signatures()) {
    for (size_t at = 0; at + 4 <= fx.bytes.size(); ++at) {
      if (std::memcmp(&fx.bytes[at], sig.data(), 4) == 0 && !inside_data(at)) {
        // A node's exact extent needs parsing it; its first 256 bytes hold the header and the
        // first entries, which is what a flip there should hit.
        fx.index_nodes.push_back({at, std::min<uint64_t>(at + 256, fx.bytes.size()), sig + " node"});
      }
    }
  }
  return fx;
}

inline Fixture make_fixture(const std::string& dir, bool latest) {
  return make_fixture_from(dir, latest ? "latest" : "v1", fixture_specs(latest), latest);
}

// ---------------------------------------------------------------------------------------------
// Mutations

enum class Kind { kChunkBytes, kHeaderBytes, kIndexBytes, kDims, kTruncate, kZeroPage, kAnyBytes };
inline constexpr int kKinds = 7;

inline const char* kind_name(Kind k) {
  switch (k) {
    case Kind::kChunkBytes: return "chunk bytes";
    case Kind::kHeaderBytes: return "object header bytes";
    case Kind::kIndexBytes: return "index/metadata node bytes";
    case Kind::kDims: return "dataspace dims";
    case Kind::kTruncate: return "truncation";
    case Kind::kZeroPage: return "zeroed page";
    case Kind::kAnyBytes: return "bytes anywhere";
  }
  return "?";
}

// Damages `bytes` as the seed says; returns what it did, for the failure report.
inline std::string mutate(std::vector<uint8_t>& bytes, const Fixture& fx, Kind kind, std::mt19937_64& rng) {
  auto below = [&](uint64_t n) { return n ? rng() % n : 0; };
  auto flip = [&](const Region& r, int count) {
    std::string what = r.what + " [" + std::to_string(r.begin) + ", " + std::to_string(r.end) + "):";
    for (int i = 0; i < count && r.end > r.begin; ++i) {
      const uint64_t at = r.begin + below(r.end - r.begin);
      if (at >= bytes.size()) continue;
      const uint8_t x = rng() % 2 ? uint8_t(1u << below(8)) : uint8_t(1 + below(255));
      bytes[at] ^= x;
      what += " @" + std::to_string(at) + "^" + std::to_string(x);
    }
    return what;
  };
  auto pick = [&](const std::vector<Region>& rs) -> const Region& { return rs[below(rs.size())]; };
  switch (kind) {
    case Kind::kChunkBytes: {
      const Region& r = pick(fx.chunks);
      if (rng() % 4 == 0 && r.end > r.begin) {
        // A run of garbage, as a bad sector would leave.
        const uint64_t at = r.begin + below(r.end - r.begin);
        const uint64_t n = std::min<uint64_t>(8 + below(57), bytes.size() - at);
        for (uint64_t i = 0; i < n; ++i) bytes[at + i] = uint8_t(rng());
        return r.what + ": " + std::to_string(n) + " random bytes at " + std::to_string(at);
      }
      return flip(r, 1 + int(below(4)));
    }
    case Kind::kHeaderBytes: return flip(pick(fx.headers), 1 + int(below(3)));
    case Kind::kIndexBytes: return flip(pick(fx.index_nodes.empty() ? fx.headers : fx.index_nodes), 1 + int(below(3)));
    case Kind::kDims: {
      const Region& r = pick(fx.dims);
      const size_t rank = (r.end - r.begin) / 8;
      const size_t axis = below(rank);
      uint64_t old = 0;
      for (int i = 7; i >= 0; --i) old = old << 8 | bytes[r.begin + 8 * axis + size_t(i)];
      const uint64_t absurd[] = {0, 1, uint64_t{1} << 57, (uint64_t{1} << 57) + 1, (uint64_t{1} << 57) - 1,
                                 uint64_t{1} << 63, UINT64_MAX, UINT64_MAX - 1, uint64_t{1} << 32,
                                 uint64_t{1} << 40, old * 2, old + 1, old - 1, old << 31, rng()};
      const uint64_t v = absurd[below(std::size(absurd))];
      put_le64(&bytes[r.begin + 8 * axis], v);
      return r.what + " dims: axis " + std::to_string(axis) + " " + std::to_string(old) + " -> " + std::to_string(v);
    }
    case Kind::kTruncate: {
      uint64_t size = below(bytes.size());
      if (rng() % 2) {  // just inside or past a structure's end, where readers trip
        const auto& rs = rng() % 2 ? fx.chunks : fx.headers;
        const Region& r = pick(rs);
        size = std::min<uint64_t>(r.begin + below(r.end - r.begin + 1), bytes.size());
      }
      bytes.resize(size);
      return "truncated to " + std::to_string(size) + " bytes";
    }
    case Kind::kZeroPage: {
      const uint64_t page = rng() % 2 ? 4096 : 512;
      const uint64_t at = below(bytes.size()) / page * page;
      const uint64_t end = std::min<uint64_t>(at + page, bytes.size());
      std::fill(bytes.begin() + long(at), bytes.begin() + long(end), 0);
      return "zeroed [" + std::to_string(at) + ", " + std::to_string(end) + ")";
    }
    case Kind::kAnyBytes: return flip({0, bytes.size(), "anywhere"}, 1 + int(below(8)));
  }
  return "?";
}

// ---------------------------------------------------------------------------------------------
// What each child reports: per key ("/deflate[0:3]@fast"), an outcome and bytes or a message.

enum class Outcome : uint8_t { kOk, kError, kTooBig };

struct Record {
  Outcome outcome = Outcome::kError;
  std::string payload;  // the bytes read, or the error message
  // The same read into a buffer prefilled differently gave other bytes: part of the result
  // is whatever memory held (HDF5 1.10.8 does this when a filter returns fewer bytes than a
  // chunk holds, e.g. after a chunk shape was damaged).
  bool unstable = false;
  bool fast_path = false;  // h5chunk only: its own decoders served the read, not H5Dread
};
using Records = std::map<std::string, Record>;

inline void write_records(const std::string& path, const Records& records) {
  std::ofstream f(path, std::ios::binary | std::ios::trunc);
  for (const auto& [key, r] : records) {
    const uint64_t klen = key.size(), plen = r.payload.size();
    f.write(reinterpret_cast<const char*>(&klen), 8).write(key.data(), std::streamsize(klen));
    f.put(char(r.outcome)).put(char(r.unstable)).put(char(r.fast_path));
    f.write(reinterpret_cast<const char*>(&plen), 8).write(r.payload.data(), std::streamsize(plen));
  }
}

inline Records read_records(const std::string& path) {
  Records out;
  std::ifstream f(path, std::ios::binary);
  uint64_t klen = 0, plen = 0;
  while (f.read(reinterpret_cast<char*>(&klen), 8)) {
    std::string key(klen, '\0');
    f.read(key.data(), std::streamsize(klen));
    Record r;
    r.outcome = Outcome(f.get());
    r.unstable = f.get() != 0;
    r.fast_path = f.get() != 0;
    f.read(reinterpret_cast<char*>(&plen), 8);
    r.payload.resize(plen);
    f.read(r.payload.data(), std::streamsize(plen));
    out[key] = std::move(r);
  }
  return out;
}

// The selections read from every dataset, in numpy syntax (all on axis 0).
inline const std::vector<std::string>& selections() {
  static const std::vector<std::string> s = {":", "0", "-1", "1:3"};
  return s;
}

// Reads larger than this are not made (by either side): a legitimately huge read of a patched
// shape would only measure the machine. Larger-than-memory reads must still fail cleanly.
inline constexpr uint64_t kMaxReadBytes = uint64_t{64} << 20;

inline uint64_t memory_and_swap() {
  struct sysinfo si;
  if (::sysinfo(&si) != 0) return UINT64_MAX;
  return (uint64_t(si.totalram) + si.totalswap) * (si.mem_unit ? si.mem_unit : 1);
}

// h5chunk's readers skip a read that is possible but too large to be worth making (over
// kMaxReadBytes, yet within memory and swap); a larger-than-memory one is still made and must fail.
inline bool too_big_to_read(const Dataset& d, const std::string& sel) {
  auto shape = d.selection_shape(*parse_selection(sel));
  if (!shape.ok() || !d.info().readable) return false;
  auto bytes = checked_product(*shape, d.info().element.size);
  return bytes && *bytes > kMaxReadBytes && *bytes <= memory_and_swap();
}

// The reference: the C API alone, H5Dread into the dataset's native type.
inline Records reference_reads(const std::string& path, const std::vector<std::string>& datasets) {
  register_reference_filters();
  H5Eset_auto2(H5E_DEFAULT, nullptr, nullptr);
  Records out;
  hid_t f = H5Fopen(path.c_str(), H5F_ACC_RDONLY, H5P_DEFAULT);
  for (const std::string& name : datasets) {
    hid_t d = f >= 0 ? H5Dopen2(f, name.c_str(), H5P_DEFAULT) : -1;
    hid_t type = d >= 0 ? H5Dget_type(d) : -1;
    // The memory type h5chunk asks H5Dread for: the native type of the file type's class,
    // sign and size (a damaged type may be odd, e.g. 16-bit with 50 bits of precision; HDF5
    // converts it to this, and so must the reference, for the bytes to be comparable).
    hid_t mem = -1;
    if (type >= 0) {
      const size_t size = H5Tget_size(type);
      const H5T_class_t cls = H5Tget_class(type);
      const bool is_signed = cls == H5T_INTEGER && H5Tget_sign(type) == H5T_SGN_2;
      if (cls == H5T_INTEGER && (size == 1 || size == 2 || size == 4 || size == 8)) {
        const hid_t s[] = {H5T_NATIVE_INT8, H5T_NATIVE_INT16, H5T_NATIVE_INT32, H5T_NATIVE_INT64};
        const hid_t u[] = {H5T_NATIVE_UINT8, H5T_NATIVE_UINT16, H5T_NATIVE_UINT32, H5T_NATIVE_UINT64};
        const int k = size == 1 ? 0 : size == 2 ? 1 : size == 4 ? 2 : 3;
        mem = H5Tcopy(is_signed ? s[k] : u[k]);
      } else if (cls == H5T_FLOAT && (size == 4 || size == 8)) {
        mem = H5Tcopy(size == 4 ? H5T_NATIVE_FLOAT : H5T_NATIVE_DOUBLE);
      }
    }
    const size_t elem = mem >= 0 ? H5Tget_size(mem) : 0;
    for (const std::string& sel : selections()) {
      Record& r = out[name + "[" + sel + "]"];
      hid_t space = d >= 0 ? H5Dget_space(d) : -1;
      const int rank = space >= 0 ? H5Sget_simple_extent_ndims(space) : -1;
      if (mem < 0 || rank < 1 || elem == 0 || H5Sget_simple_extent_type(space) != H5S_SIMPLE) {
        r.payload = "cannot open or describe";
        if (space >= 0) H5Sclose(space);
        continue;
      }
      const size_t n_axes = static_cast<size_t>(rank);
      std::vector<hsize_t> dims(n_axes), start(n_axes, 0);
      H5Sget_simple_extent_dims(space, dims.data(), nullptr);
      std::vector<hsize_t> count = dims;
      const hsize_t n0 = dims[0];
      bool valid = true;
      if (sel == "0" || sel == "-1") {
        valid = n0 > 0;
        start[0] = sel == "0" ? 0 : n0 - 1;
        count[0] = 1;
      } else if (sel == "1:3") {
        start[0] = std::min<hsize_t>(1, n0);
        count[0] = std::min<hsize_t>(3, n0) - start[0];
      }
      auto bytes = checked_product(count, elem);
      if (!valid) {
        r.payload = "index out of range";
      } else if (!bytes || *bytes > kMaxReadBytes) {
        r.outcome = Outcome::kTooBig;
      } else if (*bytes == 0) {
        r.outcome = Outcome::kOk;
      } else if (H5Sselect_hyperslab(space, H5S_SELECT_SET, start.data(), nullptr, count.data(), nullptr) < 0) {
        r.payload = "H5Sselect_hyperslab failed";
      } else {
        const hsize_t n = *bytes / elem;
        hid_t ms = H5Screate_simple(1, &n, nullptr);
        std::string buf(*bytes, '\0'), again(*bytes, '\xff');
        if (H5Dread(d, mem, ms, space, H5P_DEFAULT, buf.data()) >= 0) {
          r.outcome = Outcome::kOk;
          r.unstable = H5Dread(d, mem, ms, space, H5P_DEFAULT, again.data()) < 0 || again != buf;
          r.payload = std::move(buf);
        } else {
          r.payload = "H5Dread failed";
        }
        H5Sclose(ms);
      }
      H5Sclose(space);
    }
    if (mem >= 0) H5Tclose(mem);
    if (type >= 0) H5Tclose(type);
    if (d >= 0) H5Dclose(d);
  }
  if (f >= 0) H5Fclose(f);
  return out;
}

// h5chunk's answers, forced onto the fast path and on the automatic route.
inline Records h5chunk_reads(const std::string& path, const std::vector<std::string>& datasets) {
  Records out;
  auto file = File::open(path, quiet_options(2));
  for (const std::string& name : datasets) {
    auto dset = file.ok() ? file->dataset(name) : Result<Dataset>(file.status());
    for (const std::string& sel : selections()) {
      for (Route route : {Route::kFastPath, Route::kAuto}) {
        Record& r = out[name + "[" + sel + "]" + (route == Route::kFastPath ? "@fast" : "@auto")];
        if (!dset.ok()) {
          r.payload = dset.status().message();
          continue;
        }
        if (too_big_to_read(*dset, sel)) {
          r.outcome = Outcome::kTooBig;
          continue;
        }
        auto got = dset->read(sel, via(route));
        if (got.ok()) {
          r.outcome = Outcome::kOk;
          r.payload.assign(reinterpret_cast<const char*>(got->data()), got->nbytes());
          r.fast_path = got->stats.fast_path;
          std::string again(got->nbytes(), '\xa5');
          auto twice = dset->read_into(*parse_selection(sel), again.data(), again.size(), via(route));
          r.unstable = !twice.ok() || again != r.payload;
        } else {
          r.payload = got.status().message();
        }
      }
    }
  }
  return out;
}

// Just the HDF5 calls h5chunk makes to open and describe each dataset and locate the chunks
// its reads touch (no decoding, no H5Dread): whether libhdf5 itself survives them.
inline void hdf5_calls_h5chunk_makes(const std::string& path, const std::vector<std::string>& datasets) {
  H5Eset_auto2(H5E_DEFAULT, nullptr, nullptr);
  if (H5Fis_hdf5(path.c_str()) <= 0) return;
  hid_t f = H5Fopen(path.c_str(), H5F_ACC_RDONLY, H5P_DEFAULT);
  if (f < 0) return;
  hid_t fcpl = H5Fget_create_plist(f);
  hsize_t ub = 0;
  if (fcpl >= 0) H5Pget_userblock(fcpl, &ub), H5Pclose(fcpl);
  for (const std::string& name : datasets) {
    if (H5Lexists(f, name.c_str(), H5P_DEFAULT) <= 0) continue;
    hid_t d = H5Dopen2(f, name.c_str(), H5P_DEFAULT);
    if (d < 0) continue;
    hid_t type = H5Dget_type(d), dcpl = H5Dget_create_plist(d), space = H5Dget_space(d);
    const int rank = space >= 0 ? H5Sget_simple_extent_ndims(space) : -1;
    std::vector<hsize_t> dims(size_t(std::max(rank, 0))), chunk(dims.size());
    if (rank > 0) H5Sget_simple_extent_dims(space, dims.data(), nullptr);
    if (dcpl >= 0) {
      for (int i = 0, n = H5Pget_nfilters(dcpl); i < n; ++i) {
        unsigned flags = 0, cd[32], config = 0;
        size_t ncd = 32;
        char fname[256];
        H5Z_filter_t id = H5Pget_filter2(dcpl, unsigned(i), &flags, &ncd, cd, sizeof fname, fname, &config);
        H5Zfilter_avail(id);
      }
      H5D_fill_value_t fs;
      if (H5Pfill_value_defined(dcpl, &fs) >= 0 && type >= 0) {
        std::vector<uint8_t> fill(std::max<size_t>(H5Tget_size(type), 16));
        hid_t mem = H5Tget_native_type(type, H5T_DIR_ASCEND);
        if (mem >= 0 && H5Tget_size(mem) <= fill.size()) H5Pget_fill_value(dcpl, mem, fill.data());
        if (mem >= 0) H5Tclose(mem);
      }
      if (rank > 0 && H5Pget_layout(dcpl) == H5D_CHUNKED && H5Pget_chunk(dcpl, rank, chunk.data()) == rank) {
        // The chunks of the first, second and last rows of chunks, as the selections touch.
        bool sane = true;
        for (hsize_t c : chunk) sane &= c > 0;
        for (size_t a = 1; sane && a < dims.size(); ++a) sane &= ceil_div(dims[a], chunk[a]) <= 64;
        if (sane && dims[0] > 0) {
          const hsize_t rows = ceil_div(dims[0], chunk[0]);
          for (hsize_t row : {hsize_t{0}, std::min<hsize_t>(1, rows - 1), rows - 1}) {
            std::vector<hsize_t> at(dims.size(), 0);
            at[0] = row * chunk[0];
            while (true) {
              unsigned mask;
              haddr_t addr;
              hsize_t size;
              H5Dget_chunk_info_by_coord(d, at.data(), &mask, &addr, &size);
              size_t a = dims.size();
              while (--a > 0 && (at[a] += chunk[a]) >= dims[a]) at[a] = 0;
              if (a == 0) break;
            }
          }
        }
      }
    }
    if (space >= 0) H5Sclose(space);
    if (dcpl >= 0) H5Pclose(dcpl);
    if (type >= 0) H5Tclose(type);
    H5Dclose(d);
  }
  H5Fclose(f);
}

// ---------------------------------------------------------------------------------------------
// Children

struct ChildEnd {
  enum How { kExited, kCrashed, kHung, kRunaway } how = kExited;
  int code = 0;         // exit status or signal
  std::string stderr_text;
  bool failed() const { return how != kExited || code != 0; }
  std::string describe() const {
    switch (how) {
      case kExited: return code ? "exited with status " + std::to_string(code) : "exited normally";
      case kCrashed: return std::string("killed by signal ") + strsignal(code);
      case kHung: return "hung (killed at the deadline)";
      case kRunaway: return "ran away with memory (killed)";
    }
    return "?";
  }
};

struct Limits {
  double deadline_seconds = 30;          // a case takes milliseconds; this is a hang detector
  // Growth over the parent's resident size at the fork (a child starts out sharing all of it,
  // which under AddressSanitizer is already hundreds of MB).
  uint64_t rss_limit_bytes = uint64_t{2} << 30;
};

inline uint64_t rss_bytes(pid_t pid) {
  std::ifstream f("/proc/" + std::to_string(pid) + "/statm");
  uint64_t size = 0, resident = 0;
  f >> size >> resident;
  return resident * uint64_t(::sysconf(_SC_PAGESIZE));
}

// Runs each body in its own forked child (stderr to a file under dir), all at once, and waits
// for them all within the limits.
inline std::vector<ChildEnd> run_children(const std::vector<std::function<void()>>& bodies, const std::string& dir,
                                          const Limits& limits) {
  std::vector<pid_t> pids;
  std::vector<std::string> logs;
  const uint64_t baseline = rss_bytes(::getpid());
  for (size_t i = 0; i < bodies.size(); ++i) {
    logs.push_back(dir + "/child" + std::to_string(i) + ".stderr");
    std::fflush(nullptr);
    pid_t pid = ::fork();
    if (pid == 0) {
      FILE* log = std::fopen(logs.back().c_str(), "w");
      if (log) ::dup2(fileno(log), STDERR_FILENO);
      bodies[i]();
      ::_exit(0);
    }
    pids.push_back(pid);
  }
  std::vector<ChildEnd> ends(pids.size());
  std::vector<bool> done(pids.size(), false);
  // A pidfd per child polls readable when it exits: the loop wakes at once for each exit, and
  // between exits every kWatchMs to look at the children's memory and the deadline (watching
  // real processes: a hung child is what this catches). -1 where pidfd_open failed.
  constexpr int kWatchMs = 2;
  std::vector<int> pidfds;
  for (pid_t pid : pids) pidfds.push_back(static_cast<int>(::syscall(SYS_pidfd_open, pid, 0)));
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(limits.deadline_seconds);
  for (size_t left = pids.size(); left > 0;) {
    for (size_t i = 0; i < pids.size(); ++i) {
      if (done[i]) continue;
      int status = 0;
      pid_t r = ::waitpid(pids[i], &status, WNOHANG);
      if (r == pids[i]) {
        done[i] = true;
        --left;
        if (WIFSIGNALED(status)) {
          if (ends[i].how == ChildEnd::kExited) ends[i] = {ChildEnd::kCrashed, WTERMSIG(status), ""};
        } else {
          ends[i].code = WEXITSTATUS(status);
        }
        continue;
      }
      if (ends[i].how != ChildEnd::kExited) continue;  // already killed, being reaped
      if (std::chrono::steady_clock::now() > deadline) {
        ends[i].how = ChildEnd::kHung;
        ::kill(pids[i], SIGKILL);
      } else if (rss_bytes(pids[i]) > baseline + limits.rss_limit_bytes) {
        ends[i].how = ChildEnd::kRunaway;
        ::kill(pids[i], SIGKILL);
      }
    }
    if (left) {
      std::vector<pollfd> watch;
      for (size_t i = 0; i < pids.size(); ++i)
        if (!done[i] && pidfds[i] >= 0) watch.push_back(pollfd{pidfds[i], POLLIN, 0});
      (void)::poll(watch.data(), watch.size(), kWatchMs);
    }
  }
  for (int fd : pidfds)
    if (fd >= 0) ::close(fd);
  for (size_t i = 0; i < ends.size(); ++i) {
    std::ifstream f(logs[i]);
    std::stringstream ss;
    ss << f.rdbuf();
    ends[i].stderr_text = ss.str();
    if (ends[i].stderr_text.size() > 4000) ends[i].stderr_text = ends[i].stderr_text.substr(0, 4000) + "...";
  }
  return ends;
}

// ---------------------------------------------------------------------------------------------
// One case

enum class Verdict {
  kVerified,        // every h5chunk answer was an error or H5Dread's bytes
  kHdf5Garbage,     // H5Dread returned uninitialised bytes: what h5chunk's H5Dread route gives
                    // cannot be checked, and its own decoders' results cannot be compared
  kHdf5Crash,       // libhdf5 crashed or hung under H5Dread; h5chunk refused or answered
  kHdf5QueryCrash,  // libhdf5 crashed or hung under the calls h5chunk makes (open, describe, chunk queries)
  kFailure,         // h5chunk crashed, hung, lied, or succeeded where the reference did not
};

struct CaseResult {
  Verdict verdict = Verdict::kVerified;
  std::string detail;
  int ok_reads = 0, error_reads = 0, too_big = 0;
};

// The contract, one key at a time: a success must be the reference's success, byte for byte.
inline CaseResult compare(const Records& reference, const Records& h5chunk) {
  CaseResult result;
  for (const auto& [key, got] : h5chunk) {
    const std::string ref_key = key.substr(0, key.rfind('@'));
    auto it = reference.find(ref_key);
    if (got.outcome == Outcome::kTooBig) {
      ++result.too_big;
      continue;
    }
    if (got.outcome == Outcome::kError) {
      ++result.error_reads;
      if (got.payload.empty()) {
        result.verdict = Verdict::kFailure;
        result.detail += key + ": an error without a message\n";
      }
      continue;
    }
    ++result.ok_reads;
    if (got.unstable && (got.fast_path || it == reference.end() || !it->second.unstable)) {
      // Its own decoders must write every byte; and through H5Dread it may only be as unstable
      // as H5Dread is for the reference.
      result.verdict = Verdict::kFailure;
      result.detail += key + ": h5chunk returned different bytes for the same read" +
                       (got.fast_path ? " on its fast path" : "") + "\n";
    } else if (it != reference.end() && it->second.outcome == Outcome::kOk && it->second.unstable) {
      if (result.verdict == Verdict::kVerified) result.verdict = Verdict::kHdf5Garbage;
      result.detail += key + ": H5Dread returns uninitialised bytes for this read\n";
    } else if (it == reference.end() || it->second.outcome != Outcome::kOk) {
      result.verdict = Verdict::kFailure;
      result.detail += key + ": h5chunk returned " + std::to_string(got.payload.size()) +
                       " bytes where H5Dread " +
                       (it == reference.end() ? std::string("gave nothing")
                        : it->second.outcome == Outcome::kTooBig ? std::string("had more than the read limit")
                                                                 : "failed (" + it->second.payload + ")") +
                       "\n";
    } else if (it->second.payload != got.payload) {
      result.verdict = Verdict::kFailure;
      size_t first = 0;
      while (first < got.payload.size() && first < it->second.payload.size() &&
             got.payload[first] == it->second.payload[first])
        ++first;
      result.detail += key + ": h5chunk's " + std::to_string(got.payload.size()) + " bytes differ from H5Dread's " +
                       std::to_string(it->second.payload.size()) + " (first at byte " + std::to_string(first) + ")\n";
    }
  }
  return result;
}

inline CaseResult run_case(const Fixture& fx, const std::string& file, const std::string& dir, const Limits& limits) {
  const std::string ref_out = dir + "/reference.bin", ours_out = dir + "/h5chunk.bin";
  std::remove(ref_out.c_str());
  std::remove(ours_out.c_str());
  auto ends = run_children({[&] { write_records(ref_out, reference_reads(file, fx.datasets)); },
                            [&] { write_records(ours_out, h5chunk_reads(file, fx.datasets)); }},
                           dir, limits);
  const ChildEnd& ref = ends[0];
  const ChildEnd& ours = ends[1];
  CaseResult result;
  if (ref.failed() && !ours.failed()) {
    result.verdict = Verdict::kHdf5Crash;
    result.detail = "H5Dread child " + ref.describe() + "; h5chunk child " + ours.describe();
    return result;
  }
  if (ours.failed()) {
    // Where H5Dread crashes or hangs, h5chunk must still refuse (its default route must not
    // hand such a file to H5Dread): its child failing too is its failure, unless the calls it
    // makes into libhdf5 fail on their own.
    // Blame libhdf5 only if the calls h5chunk makes into it fail on their own.
    auto probe = run_children({[&] { hdf5_calls_h5chunk_makes(file, fx.datasets); }}, dir, limits);
    result.verdict = probe[0].failed() ? Verdict::kHdf5QueryCrash : Verdict::kFailure;
    result.detail = "h5chunk child " + ours.describe() + "; HDF5 calls alone: " + probe[0].describe() +
                    "; H5Dread child " + ref.describe() +
                    "\n--- h5chunk child stderr ---\n" + ours.stderr_text;
    return result;
  }
  return compare(read_records(ref_out), read_records(ours_out));
}

// ---------------------------------------------------------------------------------------------
// The determinism corpus: many small seed files (one dataset each: every codec, both formats,
// contiguous, edge chunks, and the filters libhdf5 decodes unchecked, scale-offset and n-bit),
// damaged by flips, overwrites and truncations, each read twice as `h5chunk read` reads it, in
// two processes whose heaps differ (glibc's M_PERTURB): a result that depends on memory nobody
// wrote shows up as two different answers.

inline std::vector<Fixture> corpus_seed_files(const std::string& dir) {
  auto one = [](const char* name, DType dtype, std::vector<hsize_t> shape, std::vector<hsize_t> chunk, Codec codec) {
    DatasetSpec s;
    s.name = name;
    s.dtype = dtype;
    s.shape = std::move(shape);
    s.chunk = std::move(chunk);
    s.codec = codec;
    return std::vector<DatasetSpec>{s};
  };
  std::vector<Fixture> out;
  for (bool latest : {false, true}) {
    const std::string f = latest ? "latest_" : "v1_";
    const Codec codecs[] = {Codec::kNone,    Codec::kDeflateShuffle, Codec::kBloscLz4,        Codec::kLz4,
                            Codec::kFletcherDeflate, Codec::kZstdDirect, Codec::kBitshuffleDirect};
    for (Codec c : codecs) {
      out.push_back(make_fixture_from(dir, f + codec_name(c), one("/d", int16_t_(), {24, 20}, {6, 20}, c), latest));
    }
    out.push_back(make_fixture_from(dir, f + "contiguous", one("/d", float32_(), {12, 10}, {}, Codec::kNone), latest));
    out.push_back(make_fixture_from(dir, f + "edges", one("/d", float64_(), {13, 7}, {4, 3}, Codec::kDeflateShuffle),
                                    latest));
    out.push_back(make_fixture_from(dir, f + "scaleoffset_int", one("/d", int16_t_(), {16, 12}, {4, 12}, Codec::kScaleOffset),
                                    latest));
    out.push_back(make_fixture_from(dir, f + "scaleoffset_float", one("/d", float32_(), {16, 12}, {8, 6}, Codec::kScaleOffset),
                                    latest));
    out.push_back(make_fixture_from(dir, f + "nbit", one("/d", int16_t_(), {16, 12}, {4, 12}, Codec::kNbit), latest));
    // Scale-offset and n-bit among other filters: their chunks are checked after the filters
    // after them are undone (filter_checks.h).
    for (Codec c : {Codec::kScaleOffsetShuffleDeflate, Codec::kScaleOffsetFletcher, Codec::kNbitDeflate}) {
      out.push_back(make_fixture_from(dir, f + codec_name(c), one("/d", int16_t_(), {16, 12}, {4, 12}, c), latest));
    }
    out.push_back(make_fixture_from(dir, f + "shuffle_scaleoffset_float",
                                    one("/d", float32_(), {16, 12}, {8, 6}, Codec::kShuffleScaleOffset), latest));
  }
  return out;
}

// The command's helper process (tools/h5chunk_helper.h) in this process's terms: the H5Dread
// runs in a forked child (the corpus's readers hold no other threads while H5Dread runs), and a
// child that crashes is the command's error, "libhdf5 crashed reading it (signal N)".
inline Status h5dread_in_child(const Dataset& d, const Selection& sel, void* out, size_t bytes) {
  int fds[2];
  check(::pipe(fds) == 0, "pipe");
  std::fflush(nullptr);
  const pid_t pid = ::fork();
  if (pid == 0) {
    ::close(fds[0]);
    ReadOptions o;
    o.route = Route::kH5Dread;
    std::vector<uint8_t> buf(bytes);
    auto r = d.read_into(sel, buf.data(), bytes, o);
    std::string msg = r.ok() ? std::string("D") : "E" + std::string(1, char(r.status().code())) + r.status().message();
    if (r.ok()) msg.append(reinterpret_cast<const char*>(buf.data()), bytes);
    for (size_t at = 0; at < msg.size();) {
      const ssize_t w = ::write(fds[1], msg.data() + at, msg.size() - at);
      if (w <= 0) ::_exit(2);
      at += size_t(w);
    }
    ::_exit(0);
  }
  ::close(fds[1]);
  std::string got;
  char buf[65536];
  for (ssize_t n; (n = ::read(fds[0], buf, sizeof buf)) > 0;) got.append(buf, size_t(n));
  ::close(fds[0]);
  int status = 0;
  ::waitpid(pid, &status, 0);
  if (WIFSIGNALED(status)) {
    return hubfs::Corrupt("libhdf5 crashed reading it (signal " + std::to_string(WTERMSIG(status)) + ")");
  }
  if (got.size() >= 2 && got[0] == 'E') return Status(hubfs::Code(got[1]), got.substr(2));
  if (got.size() != bytes + 1 || got[0] != 'D') return hubfs::Internal("the H5Dread child ended without a result");
  std::memcpy(out, got.data() + 1, bytes);
  return Status::Ok();
}

// What `h5chunk read FILE DATASET SELECTION` answers (default options, the automatic route) for
// each dataset and selection: the bytes, or the error message.
inline Records cli_reads(const std::string& path, const std::vector<std::string>& datasets, const std::string& prefix) {
  Records out;
  Options options;
  options.log = [](const std::string&) {};
  auto file = File::open(path, options);
  for (const std::string& name : datasets) {
    auto dset = file.ok() ? file->dataset(name) : Result<Dataset>(file.status());
    for (const std::string& sel : selections()) {
      Record& r = out[prefix + name + "[" + sel + "]"];
      if (!dset.ok()) {
        r.payload = dset.status().message();
        continue;
      }
      if (too_big_to_read(*dset, sel)) {
        r.outcome = Outcome::kTooBig;
        continue;
      }
      ReadOptions ro;  // as the command reads: H5Dreads libhdf5 might crash on in a child
      ro.isolated_h5dread = [&](const Selection& s, void* o, size_t n, const std::string&) {
        return h5dread_in_child(*dset, s, o, n);
      };
      auto got = dset->read(sel, ro);
      if (got.ok()) {
        r.outcome = Outcome::kOk;
        r.payload.assign(reinterpret_cast<const char*>(got->data()), got->nbytes());
      } else {
        r.payload = got.status().message();
      }
    }
  }
  return out;
}

// One damaged file of the corpus: which seed file, and what was done to it.
struct Mutant {
  size_t fixture = 0;
  std::string what;
};

// Mutant `seed` of the corpus: flips, overwrites (random runs, zeroed pages, absurd dims) and
// truncations of one of the seed files, as mutate() makes them.
inline Mutant make_mutant(const std::vector<Fixture>& fixtures, uint64_t seed, std::vector<uint8_t>* bytes) {
  std::mt19937_64 rng(seed);
  Mutant m;
  m.fixture = size_t(seed % fixtures.size());
  const Fixture& fx = fixtures[m.fixture];
  Kind kind = Kind(rng() % kKinds);
  if ((kind == Kind::kDims && fx.dims.empty()) || (kind == Kind::kChunkBytes && fx.chunks.empty())) kind = Kind::kAnyBytes;
  *bytes = fx.bytes;
  m.what = fx.name + ", " + kind_name(kind) + ": " + mutate(*bytes, fx, kind, rng);
  return m;
}

}  // namespace h5chunk::testing::mutation
