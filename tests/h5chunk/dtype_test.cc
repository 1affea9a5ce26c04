// Every fixed-size element type, and every layout and file format seen in the wild, on the fast
// path: each read must equal H5Dread's (with the memory type h5chunk asks H5Dread for) byte
// for byte, and take the fast path unless the type needs a conversion h5chunk leaves to HDF5.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <functional>

#include "h5_fixture.h"
#include "h5chunk/hdf5_handle.h"
#include "support/temp_dir.h"

namespace h5chunk::testing {
namespace HUBFS_UNITY_ID {

enum class Layout { kChunkedDeflate, kChunkedBlosc, kChunkedRaw, kContiguous, kCompact };

struct TypedSpec {
  std::string name = "/d";
  hid_t file_type = H5I_INVALID_HID;  // not owned
  std::vector<hsize_t> shape = {37, 11};
  std::vector<hsize_t> chunk = {8, 4};
  std::vector<hsize_t> maxdims;  // empty: fixed
  Layout layout = Layout::kChunkedDeflate;
  bool early_alloc = false;
};

// Deterministic bytes; `fix` makes each element valid for its type (finite floats).
Bytes random_bytes(size_t n, uint32_t seed) {
  Bytes out(n);
  uint32_t r = seed * 2654435761u + 7;
  for (auto& b : out) {
    r = r * 1664525u + 1013904223u;
    b = uint8_t(r >> 24);
  }
  return out;
}

using Fix = std::function<void(uint8_t* element)>;

// Writes stored bytes exactly (the file type is also the memory type: no conversion).
Bytes write_typed(hid_t f, const TypedSpec& spec, uint32_t seed, const Fix& fix = {}) {
  const size_t elem = H5Tget_size(spec.file_type);
  Bytes raw = random_bytes(count(spec.shape) * elem, seed);
  if (fix) {
    for (size_t i = 0; i < raw.size(); i += elem) fix(&raw[i]);
  }
  hid_t space = H5Screate_simple(int(spec.shape.size()), spec.shape.data(),
                                 spec.maxdims.empty() ? nullptr : spec.maxdims.data());
  hid_t dcpl = H5Pcreate(H5P_DATASET_CREATE);
  H5Pset_obj_track_times(dcpl, false);
  switch (spec.layout) {
    case Layout::kChunkedDeflate:
      H5Pset_chunk(dcpl, int(spec.chunk.size()), spec.chunk.data());
      H5Pset_shuffle(dcpl);
      H5Pset_deflate(dcpl, 4);
      break;
    case Layout::kChunkedBlosc: {
      const unsigned blosc_lz4[] = {0, 0, 0, 0, 5, 1, 1};
      H5Pset_chunk(dcpl, int(spec.chunk.size()), spec.chunk.data());
      check(H5Pset_filter(dcpl, 32001, H5Z_FLAG_OPTIONAL, 7, blosc_lz4) >= 0, "blosc");
      break;
    }
    case Layout::kChunkedRaw: H5Pset_chunk(dcpl, int(spec.chunk.size()), spec.chunk.data()); break;
    case Layout::kContiguous: H5Pset_layout(dcpl, H5D_CONTIGUOUS); break;
    case Layout::kCompact: H5Pset_layout(dcpl, H5D_COMPACT); break;
  }
  if (spec.early_alloc) H5Pset_alloc_time(dcpl, H5D_ALLOC_TIME_EARLY);
  hid_t d = H5Dcreate2(f, spec.name.c_str(), spec.file_type, space, H5P_DEFAULT, dcpl, H5P_DEFAULT);
  check(d >= 0, "H5Dcreate2 " + spec.name);
  check(H5Dwrite(d, spec.file_type, H5S_ALL, H5S_ALL, H5P_DEFAULT, raw.data()) >= 0, "H5Dwrite " + spec.name);
  H5Dclose(d);
  H5Pclose(dcpl);
  H5Sclose(space);
  return raw;
}

// Reads of `selections` via the fast path equal H5Dread's; returns how many took the fast path.
int expect_equal_reads(const Dataset& dset, const std::vector<std::string>& selections, bool want_fast = true,
                       const std::vector<std::pair<size_t, size_t>>& padding = {}) {
  auto members = [&](Bytes b) {
    const size_t elem = dset.info().element.size;
    for (size_t e = 0; e + elem <= b.size(); e += elem) {
      for (auto [lo, hi] : padding) std::fill(b.begin() + e + lo, b.begin() + e + hi, 0);
    }
    return b;
  };
  int fast = 0;
  for (const std::string& s : selections) {
    SCOPED_TRACE(dset.info().path + "[" + s + "]");
    auto got = dset.read(s, via(Route::kFastPath));
    auto ref = dset.read(s, via(Route::kH5Dread));
    EXPECT_TRUE(got.ok()) << got.status().message();
    EXPECT_TRUE(ref.ok()) << ref.status().message();
    if (!got.ok() || !ref.ok()) continue;
    EXPECT_EQ(got->stats.fast_path, want_fast) << got->stats.fallback_cause;
    fast += got->stats.fast_path;
    EXPECT_EQ(got->shape(), ref->shape());
    EXPECT_EQ(members(bytes_of(*got)), members(bytes_of(*ref)));
  }
  return fast;
}

const std::vector<std::string> kSelections = {":", "3:30, 2:9", "[0,5,36], :", "7", "-1, 3", "8:16, :", ":, 4:8"};

Hid half(H5T_order_t order) {
  Hid t(H5Tcopy(H5T_IEEE_F32LE));
  H5Tset_fields(t.get(), 15, 10, 5, 0, 10);
  H5Tset_precision(t.get(), 16);
  H5Tset_size(t.get(), 2);
  H5Tset_ebias(t.get(), 15);
  H5Tset_order(t.get(), order);
  return t;
}

Hid complex_of(hid_t f) {
  const size_t s = H5Tget_size(f);
  Hid t(H5Tcreate(H5T_COMPOUND, 2 * s));
  H5Tinsert(t.get(), "r", 0, f);
  H5Tinsert(t.get(), "i", s, f);
  return t;
}

Hid string_type(size_t n, H5T_str_t pad) {
  Hid t(H5Tcopy(H5T_C_S1));
  H5Tset_size(t.get(), n);
  H5Tset_strpad(t.get(), pad);
  return t;
}

// Finite floats: the sign/exponent byte set so no value is NaN, infinite or subnormal (H5Dread's
// float conversion may canonicalise those; byte-order swaps never do).
Fix finite_at(std::vector<size_t> exponent_bytes, uint8_t value = 0x40) {
  return [exponent_bytes, value](uint8_t* e) {
    for (size_t at : exponent_bytes) e[at] = value;
  };
}

struct TypeCase {
  std::string name;
  Hid type;
  Fix fix;
  std::string kind;
  std::string numpy;
  std::string numpy_stored;
  bool fast = true;
  // Bytes no member covers: H5Dread leaves them as whatever its conversion buffer held (seen:
  // leftovers of earlier reads), so only the members are compared there. The fast path
  // returns the stored bytes, as h5py (whose memory type is the stored layout) does.
  std::vector<std::pair<size_t, size_t>> padding;
};

std::vector<TypeCase> type_cases() {
  std::vector<TypeCase> c;
  auto add = [&](std::string name, Hid t, Fix fix, std::string kind, std::string np, std::string stored,
                 bool fast = true) {
    c.push_back({std::move(name), std::move(t), std::move(fix), std::move(kind), std::move(np), std::move(stored), fast, {}});
  };
  add("i32be", Hid(H5Tcopy(H5T_STD_I32BE)), {}, "int", "'<i4'", "'>i4'");
  add("u16be", Hid(H5Tcopy(H5T_STD_U16BE)), {}, "uint", "'<u2'", "'>u2'");
  add("i64be", Hid(H5Tcopy(H5T_STD_I64BE)), {}, "int", "'<i8'", "'>i8'");
  add("i8be", Hid(H5Tcopy(H5T_STD_I8BE)), {}, "int", "'|i1'", "'|i1'");
  add("f32be", Hid(H5Tcopy(H5T_IEEE_F32BE)), finite_at({0}), "float", "'<f4'", "'>f4'");
  add("f64be", Hid(H5Tcopy(H5T_IEEE_F64BE)), finite_at({0}), "float", "'<f8'", "'>f8'");
  add("f16le", half(H5T_ORDER_LE), finite_at({1}), "float", "'<f2'", "'<f2'");
  add("f16be", half(H5T_ORDER_BE), finite_at({0}), "float", "'<f2'", "'>f2'");
  {
    Hid b(H5Tenum_create(H5T_NATIVE_INT8));
    int8_t v0 = 0, v1 = 1;
    H5Tenum_insert(b.get(), "FALSE", &v0);
    H5Tenum_insert(b.get(), "TRUE", &v1);
    add("bool", std::move(b), [](uint8_t* e) { e[0] &= 1; }, "bool", "'|b1'", "'|b1'");
  }
  {
    Hid e(H5Tenum_create(H5T_STD_I16BE));
    for (int16_t v = 0; v < 4; ++v) {
      const char* names[] = {"RED", "GREEN", "BLUE", "ALPHA"};
      H5Tenum_insert(e.get(), names[v], &v);  // the value in native order, as HDF5 expects
    }
    add("enum16be", std::move(e), [](uint8_t* x) { x[0] = 0; x[1] &= 3; }, "enum", "'<i2'", "'>i2'");
  }
  add("c8be", complex_of(H5T_IEEE_F32BE), finite_at({0, 4}), "complex", "'<c8'", "'>c8'");
  add("c16le", complex_of(H5T_IEEE_F64LE), finite_at({7, 15}), "complex", "'<c16'", "'<c16'");
  {
    // Padding between members, big-endian members, a string, an array and a nested record.
    Hid inner(H5Tcreate(H5T_COMPOUND, 8));
    H5Tinsert(inner.get(), "p", 0, H5T_STD_U8LE);
    H5Tinsert(inner.get(), "q", 4, H5T_STD_I32BE);
    hsize_t three = 3;
    Hid arr(H5Tarray_create2(H5T_STD_U16BE, 1, &three));
    Hid str = string_type(5, H5T_STR_NULLTERM);
    Hid rec(H5Tcreate(H5T_COMPOUND, 40));
    H5Tinsert(rec.get(), "a", 0, H5T_STD_I16BE);
    H5Tinsert(rec.get(), "b", 8, H5T_IEEE_F64LE);
    H5Tinsert(rec.get(), "c", 16, str.get());
    H5Tinsert(rec.get(), "d", 22, arr.get());
    H5Tinsert(rec.get(), "e", 28, inner.get());
    add("record", std::move(rec), finite_at({15}), "compound",
        "{'names': ['a', 'b', 'c', 'd', 'e'], 'formats': ['<i2', '<f8', '|S5', ('<u2', (3,)), "
        "{'names': ['p', 'q'], 'formats': ['|u1', '<i4'], 'offsets': [0, 4], 'itemsize': 8}], "
        "'offsets': [0, 8, 16, 22, 28], 'itemsize': 40}",
        "{'names': ['a', 'b', 'c', 'd', 'e'], 'formats': ['>i2', '<f8', '|S5', ('>u2', (3,)), "
        "{'names': ['p', 'q'], 'formats': ['|u1', '>i4'], 'offsets': [0, 4], 'itemsize': 8}], "
        "'offsets': [0, 8, 16, 22, 28], 'itemsize': 40}");
    c.back().padding = {{2, 8}, {21, 22}, {29, 32}, {36, 40}};
  }
  // Strings: random bytes hold NULs anywhere, the case where null-terminated and null-padded
  // differ (H5Dread clears everything after the first NUL, and the last byte).
  auto some_nuls = [](uint8_t* e) {
    for (int i = 0; i < 7; ++i) e[i] = e[i] < 40 ? 0 : e[i];
  };
  add("s7nullterm", string_type(7, H5T_STR_NULLTERM), some_nuls, "string", "'|S7'", "'|S7'");
  add("s7nullpad", string_type(7, H5T_STR_NULLPAD), some_nuls, "string", "'|S7'", "'|S7'");
  add("s7spacepad", string_type(7, H5T_STR_SPACEPAD), some_nuls, "string", "'|S7'", "'|S7'", false);
  {
    Hid o(H5Tcreate(H5T_OPAQUE, 5));
    H5Tset_tag(o.get(), "blob");
    add("opaque5", std::move(o), {}, "opaque", "'|V5'", "'|V5'");
  }
  add("b16be", Hid(H5Tcopy(H5T_STD_B16BE)), {}, "bitfield", "'<u2'", "'>u2'");
  {
    Hid odd(H5Tcopy(H5T_STD_I16LE));
    H5Tset_precision(odd.get(), 12);
    add("i12", std::move(odd), [](uint8_t* e) { e[1] &= 0x0f; }, "int", "'<i2'", "'<i2'", false);
  }
  return c;
}

TEST(DType, EveryFixedSizeTypeEqualsH5DreadChunkedAndContiguous) {
  hubfs::testing::TempDir dir;
  const std::string path = (dir / "types.h5").string();
  auto cases = type_cases();
  {
    hid_t f = open_for_write(path);
    uint32_t seed = 1;
    for (const auto& c : cases) {
      for (Layout layout : {Layout::kChunkedDeflate, Layout::kContiguous}) {
        TypedSpec spec;
        spec.name = "/" + c.name + (layout == Layout::kContiguous ? "_contig" : "_chunked");
        spec.file_type = c.type.get();
        spec.layout = layout;
        write_typed(f, spec, seed++, c.fix);
      }
    }
    H5Fclose(f);
  }
  auto file = File::open(path, quiet_options());
  ASSERT_TRUE(file.ok()) << file.status().message();
  int fast = 0, reads = 0;
  for (const auto& c : cases) {
    for (const char* suffix : {"_chunked", "_contig"}) {
      SCOPED_TRACE(c.name + suffix);
      auto d = file->dataset("/" + c.name + suffix);
      ASSERT_TRUE(d.ok()) << d.status().message();
      const DatasetInfo& info = d->info();
      EXPECT_TRUE(info.readable);
      EXPECT_EQ(info.element.kind, c.kind);
      EXPECT_EQ(info.element.numpy, c.numpy);
      EXPECT_EQ(info.element.numpy_stored, c.numpy_stored);
      EXPECT_EQ(info.fast_path_blocker.empty(), c.fast) << info.fast_path_blocker;
      fast += expect_equal_reads(*d, kSelections, c.fast, c.padding);
      reads += int(kSelections.size());
    }
  }
  // The fast path serves every type but the two that need a conversion h5chunk leaves to HDF5.
  EXPECT_EQ(fast, reads - 2 * 2 * int(kSelections.size()));
}

TEST(DType, BigEndianValuesAreNative) {
  // Written from native values (HDF5 converts them to big-endian on disk); read back equal.
  hubfs::testing::TempDir dir;
  const std::string path = (dir / "be.h5").string();
  std::vector<int32_t> ints(37 * 11);
  std::vector<double> doubles(ints.size());
  for (size_t i = 0; i < ints.size(); ++i) {
    ints[i] = int32_t(i * 2654435761u);
    doubles[i] = double(i) * 0.5 - 100;
  }
  {
    hid_t f = open_for_write(path);
    hsize_t shape[] = {37, 11}, chunk[] = {8, 4};
    hid_t space = H5Screate_simple(2, shape, nullptr);
    hid_t dcpl = H5Pcreate(H5P_DATASET_CREATE);
    H5Pset_chunk(dcpl, 2, chunk);
    H5Pset_deflate(dcpl, 1);
    hid_t a = H5Dcreate2(f, "i", H5T_STD_I32BE, space, H5P_DEFAULT, dcpl, H5P_DEFAULT);
    H5Dwrite(a, H5T_NATIVE_INT32, H5S_ALL, H5S_ALL, H5P_DEFAULT, ints.data());
    hid_t b = H5Dcreate2(f, "f", H5T_IEEE_F64BE, space, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
    H5Dwrite(b, H5T_NATIVE_DOUBLE, H5S_ALL, H5S_ALL, H5P_DEFAULT, doubles.data());
    H5Dclose(a);
    H5Dclose(b);
    H5Pclose(dcpl);
    H5Sclose(space);
    H5Fclose(f);
  }
  auto file = File::open(path, quiet_options());
  auto i = file->dataset("i")->read("", via(Route::kFastPath));
  ASSERT_TRUE(i.ok()) << i.status().message();
  EXPECT_TRUE(i->stats.fast_path);
  EXPECT_EQ(i->dtype(), h5chunk::DType::kInt32);
  EXPECT_EQ(std::vector<int32_t>(i->as<int32_t>(), i->as<int32_t>() + ints.size()), ints);
  auto f = file->dataset("f")->read("", via(Route::kFastPath));
  ASSERT_TRUE(f.ok()) << f.status().message();
  EXPECT_TRUE(f->stats.fast_path);
  EXPECT_EQ(std::vector<double>(f->as<double>(), f->as<double>() + doubles.size()), doubles);
}

TEST(DType, FillValuesOfUnwrittenChunksAreReturnedNative) {
  // Unwritten chunks read as the fill value H5Dread gives (already in the memory type): the
  // conversion must not swap them a second time.
  hubfs::testing::TempDir dir;
  const std::string path = (dir / "fill.h5").string();
  {
    hid_t f = open_for_write(path);
    hsize_t shape[] = {40, 10}, chunk[] = {8, 10}, one[] = {8, 10}, at[] = {16, 0};
    hid_t space = H5Screate_simple(2, shape, nullptr);
    hid_t dcpl = H5Pcreate(H5P_DATASET_CREATE);
    H5Pset_chunk(dcpl, 2, chunk);
    H5Pset_deflate(dcpl, 1);
    const int32_t fill = 0x01020304;
    H5Pset_fill_value(dcpl, H5T_NATIVE_INT32, &fill);
    hid_t d = H5Dcreate2(f, "be", H5T_STD_I32BE, space, H5P_DEFAULT, dcpl, H5P_DEFAULT);
    std::vector<int32_t> block(80, -7);
    hid_t ms = H5Screate_simple(2, one, nullptr);
    H5Sselect_hyperslab(space, H5S_SELECT_SET, at, nullptr, one, nullptr);
    H5Dwrite(d, H5T_NATIVE_INT32, ms, space, H5P_DEFAULT, block.data());  // one chunk of five
    H5Sclose(ms);
    H5Dclose(d);
    H5Pclose(dcpl);
    H5Sclose(space);
    H5Fclose(f);
  }
  auto file = File::open(path, quiet_options());
  auto d = file->dataset("be");
  ASSERT_TRUE(d.ok());
  expect_equal_reads(*d, {"", "5:30", "20, 3"});
  auto all = d->read("", via(Route::kFastPath));
  ASSERT_TRUE(all.ok());
  EXPECT_EQ(all->as<int32_t>()[0], 0x01020304);
  EXPECT_EQ(all->as<int32_t>()[16 * 10], -7);
}

TEST(DType, NullTerminatedStringsAreClearedAfterTheirEnd) {
  hubfs::testing::TempDir dir;
  const std::string path = (dir / "s.h5").string();
  Hid t = string_type(6, H5T_STR_NULLTERM);
  const char raw[] = "ab\0xyzabcdef\0\0\0\0\0\0";  // three 6-byte strings, one without a NUL
  {
    hid_t f = open_for_write(path);
    hsize_t n = 3;
    hid_t space = H5Screate_simple(1, &n, nullptr);
    hid_t d = H5Dcreate2(f, "s", t.get(), space, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
    H5Dwrite(d, t.get(), H5S_ALL, H5S_ALL, H5P_DEFAULT, raw);
    H5Dclose(d);
    H5Sclose(space);
    H5Fclose(f);
  }
  auto file = File::open(path, quiet_options());
  auto s = file->dataset("s")->read("", via(Route::kFastPath));
  ASSERT_TRUE(s.ok()) << s.status().message();
  EXPECT_TRUE(s->stats.fast_path);
  const std::string want("ab\0\0\0\0abcdef\0\0\0\0\0\0", 18);
  EXPECT_EQ(std::string(reinterpret_cast<const char*>(s->data()), s->nbytes()), want);
}

TEST(DType, VariableLengthTypesAreRefusedWithTheReason) {
  hubfs::testing::TempDir dir;
  const std::string path = (dir / "vl.h5").string();
  {
    hid_t f = open_for_write(path);
    hsize_t n = 2;
    hid_t space = H5Screate_simple(1, &n, nullptr);
    hid_t vs = H5Tcopy(H5T_C_S1);
    H5Tset_size(vs, H5T_VARIABLE);
    hid_t d = H5Dcreate2(f, "vs", vs, space, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
    H5Dclose(d);
    H5Tclose(vs);
    H5Sclose(space);
    H5Fclose(f);
  }
  auto file = File::open(path, quiet_options());
  auto d = file->dataset("vs");
  ASSERT_TRUE(d.ok());
  EXPECT_FALSE(d->info().readable);
  auto r = d->read("");
  EXPECT_EQ(r.status().code(), hubfs::Code::kUnsupported);
  EXPECT_THAT(r.status().message(), ::testing::HasSubstr("variable-length string"));
}

// ---------------------------------------------------------------------------------------------
// Layouts and file formats

struct LayoutCase {
  std::string name;
  std::vector<hsize_t> shape, chunk, maxdims;
  Layout layout;
  bool early_alloc = false;
};

// Every chunk index HDF5 1.10 writes, as the C API picks them: with libver latest, one chunk
// equal to the dataset = single chunk, early allocation without filters = implicit, fixed
// maxdims = fixed array, one unlimited axis = extensible array, two = version 2 B-tree; with
// the default (earliest) format, a version 1 B-tree.
std::vector<LayoutCase> layout_cases() {
  const hsize_t U = H5S_UNLIMITED;
  return {
      {"single_chunk", {37, 11}, {37, 11}, {}, Layout::kChunkedDeflate},
      {"implicit", {37, 11}, {8, 4}, {}, Layout::kChunkedRaw, true},
      {"fixed_array", {37, 11}, {8, 4}, {}, Layout::kChunkedBlosc},
      {"extensible_array", {37, 11}, {8, 4}, {U, 11}, Layout::kChunkedDeflate},
      {"btree2", {37, 11}, {8, 4}, {U, U}, Layout::kChunkedDeflate},
      {"contiguous", {37, 11}, {}, {}, Layout::kContiguous},
      {"compact", {37, 11}, {}, {}, Layout::kCompact},
  };
}

void write_layouts(const std::string& path, hid_t fcpl, hid_t fapl, hid_t type, const Fix& fix = {}) {
  hid_t f = H5Fcreate(path.c_str(), H5F_ACC_TRUNC, fcpl, fapl);
  check(f >= 0, "H5Fcreate " + path);
  uint32_t seed = 11;
  for (const auto& c : layout_cases()) {
    TypedSpec spec;
    spec.name = "/" + c.name;
    spec.file_type = type;
    spec.shape = c.shape;
    spec.chunk = c.chunk;
    spec.maxdims = c.maxdims;
    spec.layout = c.layout;
    spec.early_alloc = c.early_alloc;
    write_typed(f, spec, seed++, fix);
  }
  H5Fclose(f);
}

void expect_layouts_read_fast(const std::string& path) {
  auto file = File::open(path, quiet_options());
  ASSERT_TRUE(file.ok()) << file.status().message();
  for (const auto& c : layout_cases()) {
    SCOPED_TRACE(path + " " + c.name);
    auto d = file->dataset("/" + c.name);
    ASSERT_TRUE(d.ok()) << d.status().message();
    const bool compact = c.layout == Layout::kCompact;
    EXPECT_EQ(d->info().layout, compact ? "compact" : c.layout == Layout::kContiguous ? "contiguous" : "chunked");
    expect_equal_reads(*d, kSelections, /*want_fast=*/!compact);
  }
}

TEST(FileFormat, EveryChunkIndexAndLayoutWithLibverLatest) {
  hubfs::testing::TempDir dir;
  const std::string path = (dir / "latest.h5").string();
  hid_t fapl = H5Pcreate(H5P_FILE_ACCESS);
  H5Pset_libver_bounds(fapl, H5F_LIBVER_LATEST, H5F_LIBVER_LATEST);
  write_layouts(path, H5P_DEFAULT, fapl, H5T_STD_I32BE);
  H5Pclose(fapl);
  // The index types the C API chose are what the cases say (HDF5 1.10 reports them through the
  // layout's chunk index only in H5Dget_chunk_info's walk; its storage sizes differ by index,
  // so this checks that each dataset is at least chunked and readable).
  expect_layouts_read_fast(path);
}

TEST(FileFormat, EarliestFormatUsesVersion1BTrees) {
  hubfs::testing::TempDir dir;
  const std::string path = (dir / "earliest.h5").string();
  write_layouts(path, H5P_DEFAULT, H5P_DEFAULT, H5T_IEEE_F32LE, finite_at({3}));
  expect_layouts_read_fast(path);
}

TEST(FileFormat, PagedFileSpaceStrategyAsZeaWrites) {
  // fs_strategy="page", fs_persist=True (h5py's names): metadata and raw data in file-space
  // pages, free-space managers kept in the file.
  hubfs::testing::TempDir dir;
  const std::string path = (dir / "paged.h5").string();
  hid_t fcpl = H5Pcreate(H5P_FILE_CREATE);
  check(H5Pset_file_space_strategy(fcpl, H5F_FSPACE_STRATEGY_PAGE, 1, 1) >= 0, "fs strategy");
  check(H5Pset_file_space_page_size(fcpl, 4096) >= 0, "page size");
  hid_t fapl = H5Pcreate(H5P_FILE_ACCESS);
  H5Pset_libver_bounds(fapl, H5F_LIBVER_LATEST, H5F_LIBVER_LATEST);
  write_layouts(path, fcpl, fapl, H5T_STD_U16LE);
  H5Pclose(fapl);
  H5Pclose(fcpl);
  expect_layouts_read_fast(path);
}

TEST(Contiguous, LargeDatasetReadsInParallelPieces) {
  // 16 MiB of big-endian int32: several 4 MiB pieces, each swapped as it lands.
  hubfs::testing::TempDir dir;
  const std::string path = (dir / "big.h5").string();
  {
    hid_t f = open_for_write(path, FileSpec{.userblock = 512});
    TypedSpec spec;
    spec.file_type = H5T_STD_I32BE;
    spec.shape = {1024, 4096};
    spec.layout = Layout::kContiguous;
    write_typed(f, spec, 3);
    H5Fclose(f);
  }
  auto file = File::open(path, quiet_options(4));
  auto d = file->dataset("/d");
  ASSERT_TRUE(d.ok());
  auto all = d->read("", via(Route::kFastPath));
  ASSERT_TRUE(all.ok()) << all.status().message();
  EXPECT_TRUE(all->stats.fast_path);
  EXPECT_EQ(all->stats.chunks, 4u);  // 16 MiB in 4 MiB pieces
  expect_equal_reads(*d, {"", "100:900", "[0, 1, 2, 500, 1023], 7:4000", "3, 5:4095", ":, 17", "-1"});
  // Route::kAuto still sends a small selection to H5Dread.
  auto column = d->read(":, 17");
  ASSERT_TRUE(column.ok());
  EXPECT_EQ(column->stats.fallback_cause, "small read (4096 bytes, below 1048576)");
}

TEST(Contiguous, ScalarAndCompactDatasets) {
  hubfs::testing::TempDir dir;
  const std::string path = (dir / "scalar.h5").string();
  {
    hid_t f = open_for_write(path);
    hid_t space = H5Screate(H5S_SCALAR);
    double v = 2.5;
    hid_t d = H5Dcreate2(f, "scalar", H5T_IEEE_F64BE, space, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
    H5Dwrite(d, H5T_NATIVE_DOUBLE, H5S_ALL, H5S_ALL, H5P_DEFAULT, &v);
    H5Dclose(d);
    H5Sclose(space);
    TypedSpec spec;
    spec.name = "/compact";
    spec.file_type = H5T_STD_I16BE;
    spec.shape = {10, 10};
    spec.layout = Layout::kCompact;
    write_typed(f, spec, 5);
    H5Fclose(f);
  }
  std::vector<std::string> notes;
  Options o = quiet_options();
  o.log = [&](const std::string& line) { notes.push_back(line); };
  auto file = File::open(path, o);
  auto d = file->dataset("scalar");
  ASSERT_TRUE(d.ok());
  auto r = d->read("", via(Route::kFastPath));
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_TRUE(r->stats.fast_path);
  EXPECT_EQ(*r->as<double>(), 2.5);
  // Compact: H5Dread, and no fallback note (nothing to fix).
  auto c = file->dataset("compact");
  ASSERT_TRUE(c.ok());
  expect_equal_reads(*c, {"", "2:5, 3"}, /*want_fast=*/false);
  EXPECT_TRUE(notes.empty()) << notes[0];
}

TEST(Contiguous, ExternalStorageAndUnwrittenDataGoToH5Dread) {
  hubfs::testing::TempDir dir;
  const std::string path = (dir / "ext.h5").string(), raw = (dir / "ext.bin").string();
  std::vector<int32_t> values(100);
  for (int i = 0; i < 100; ++i) values[i] = i * 3;
  {
    hid_t f = open_for_write(path);
    hsize_t n = 100;
    hid_t space = H5Screate_simple(1, &n, nullptr);
    hid_t dcpl = H5Pcreate(H5P_DATASET_CREATE);
    H5Pset_external(dcpl, raw.c_str(), 0, H5F_UNLIMITED);
    hid_t d = H5Dcreate2(f, "external", H5T_NATIVE_INT32, space, H5P_DEFAULT, dcpl, H5P_DEFAULT);
    H5Dwrite(d, H5T_NATIVE_INT32, H5S_ALL, H5S_ALL, H5P_DEFAULT, values.data());
    H5Dclose(d);
    H5Pclose(dcpl);
    d = H5Dcreate2(f, "unwritten", H5T_NATIVE_INT32, space, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
    H5Dclose(d);
    H5Sclose(space);
    H5Fclose(f);
  }
  auto file = File::open(path, quiet_options());
  auto ext = file->dataset("external");
  ASSERT_TRUE(ext.ok());
  EXPECT_THAT(ext->info().fast_path_blocker, ::testing::HasSubstr("external"));
  auto got = ext->read("", via(Route::kFastPath));
  ASSERT_TRUE(got.ok()) << got.status().message();
  EXPECT_EQ(std::vector<int32_t>(got->as<int32_t>(), got->as<int32_t>() + 100), values);
  auto unwritten = file->dataset("unwritten");
  ASSERT_TRUE(unwritten.ok());
  expect_equal_reads(*unwritten, {"", "5:9"}, /*want_fast=*/false);
}

TEST(Blosc, TrailingBytesAfterTheBufferAreIgnoredAsThePluginDoes) {
  // A writer that stores its whole compression buffer (nbytes + BLOSC_MAX_OVERHEAD) rather
  // than the used part: the HDF5 Blosc plugin reads it, so h5chunk must too.
  hubfs::testing::TempDir dir;
  const std::string path = (dir / "pad.h5").string();
  DatasetSpec spec;
  spec.shape = {4, 256};
  spec.chunk = {1, 256};
  spec.codec = Codec::kBloscLz4;
  const Bytes data = make_data(spec);
  write_dataset(path, spec, data);
  Bytes plain(data.begin(), data.begin() + 1024);
  Bytes stored(plain.size() + 16);
  const int n = blosc_compress_ctx(5, 1, 4, plain.size(), plain.data(), stored.data(), stored.size(), "lz4", 0, 1);
  ASSERT_GT(n, 0);
  stored.resize(size_t(n) + 40, 0xAB);  // the buffer, then bytes nobody should read
  write_raw_chunk(path, "/data", {0, 0}, 0, stored);
  auto file = File::open(path, quiet_options());
  auto d = file->dataset("/data");
  ASSERT_TRUE(d.ok());
  auto got = d->read("", via(Route::kFastPath));
  ASSERT_TRUE(got.ok()) << got.status().message();
  EXPECT_EQ(bytes_of(*got), data);
  if (H5Zfilter_avail(32001) > 0) {
    auto ref = d->read("", via(Route::kH5Dread));
    ASSERT_TRUE(ref.ok()) << ref.status().message();
    EXPECT_EQ(bytes_of(*ref), data);
  }
}

}  // namespace
}  // namespace h5chunk::testing
