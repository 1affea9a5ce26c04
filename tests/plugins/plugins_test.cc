// The HDF5 filter plugins in build/plugins (Zstd 32015, LZF 32000): their ABI; writing and
// H5Dread through them in this process (found with H5PLprepend); h5dump, h5ls, h5repack and h5py
// loading them through HDF5_PLUGIN_PATH; h5chunk reading what they wrote, its H5Dread fallback
// included; corrupt chunks failing with an error, never a crash.
#include <dlfcn.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <hdf5.h>
#include <lzf.h>
#include <sys/wait.h>
#include <zstd.h>

#include <cctype>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <functional>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include "h5chunk/h5chunk.h"
#include "h5chunk/hdf5_handle.h"
#include "support/temp_dir.h"

namespace HUBFS_UNITY_ID {

using ::testing::HasSubstr;
using h5chunk::Hid;
using Bytes = std::vector<uint8_t>;

const std::string kPluginDir = HUBFS_PLUGIN_DIR;
constexpr unsigned kZstd = 32015, kLzf = 32000;

// Every test here reads through the plugins, so this process finds them first.
class PluginPath : public ::testing::Environment {
 public:
  void SetUp() override { ASSERT_GE(H5PLprepend(kPluginDir.c_str()), 0); }
};
const auto* const kPluginPathEnv = ::testing::AddGlobalTestEnvironment(new PluginPath);

struct Ran {
  int code;
  std::string out;
};

// Runs a shell command with HDF5_PLUGIN_PATH pointing at the build's plugins.
Ran run_with_plugins(const std::string& command) {
  std::string cmd = "HDF5_PLUGIN_PATH='" + kPluginDir + "' " + command + " 2>&1";
  FILE* p = ::popen(cmd.c_str(), "r");
  if (!p) return {-1, "popen failed"};
  std::string out;
  char buf[4096];
  size_t n;
  while ((n = std::fread(buf, 1, sizeof buf, p)) > 0) out.append(buf, n);
  int status = ::pclose(p);
  return {WIFEXITED(status) ? WEXITSTATUS(status) : -1, out};
}

// Every description on this thread's HDF5 error stack, joined.
std::string error_stack_text() {
  std::string text;
  H5Ewalk2(
      H5E_DEFAULT, H5E_WALK_DOWNWARD,
      [](unsigned, const H5E_error2_t* e, void* data) -> herr_t {
        auto* t = static_cast<std::string*>(data);
        if (e->desc) *t += std::string(e->desc) + "; ";
        return 0;
      },
      &text);
  return text;
}

// ---- the test datasets ---------------------------------------------------------------------

// 2-D int32, chunks that do not divide the shape (edge chunks on both axes).
constexpr hsize_t kRows = 50, kCols = 70;
const std::vector<hsize_t> kShape = {kRows, kCols}, kChunk = {16, 32};

// Compressible, not trivial; h5py's writer in H5pyWritesThroughTheZstdPlugin uses the same.
std::vector<int32_t> values() {
  std::vector<int32_t> v(kRows * kCols);
  for (size_t i = 0; i < v.size(); ++i) v[i] = int32_t(i * 7 % 1000) - 300;
  return v;
}

// Noise: no chunk compresses.
std::vector<int32_t> noise() {
  std::vector<int32_t> v(kRows * kCols);
  uint32_t x = 12345;
  for (auto& e : v) e = int32_t(x = x * 1664525u + 1013904223u);
  return v;
}

using Configure = std::function<void(hid_t dcpl)>;
Configure zstd(std::vector<unsigned> cd) {
  return [cd](hid_t dcpl) {
    ASSERT_GE(H5Pset_filter(dcpl, kZstd, H5Z_FLAG_MANDATORY, cd.size(), cd.data()), 0) << error_stack_text();
  };
}
Configure lzf(unsigned flags, bool shuffle) {
  return [=](hid_t dcpl) {
    if (shuffle) {
      ASSERT_GE(H5Pset_shuffle(dcpl), 0);
    }
    ASSERT_GE(H5Pset_filter(dcpl, kLzf, flags, 0, nullptr), 0) << error_stack_text();
  };
}

void write(hid_t file, const char* name, const std::vector<int32_t>& v, const Configure& configure) {
  Hid space(H5Screate_simple(2, kShape.data(), nullptr));
  Hid dcpl(H5Pcreate(H5P_DATASET_CREATE));
  ASSERT_GE(H5Pset_chunk(dcpl.get(), 2, kChunk.data()), 0);
  configure(dcpl.get());
  Hid d(H5Dcreate2(file, name, H5T_STD_I32LE, space.get(), H5P_DEFAULT, dcpl.get(), H5P_DEFAULT));
  ASSERT_TRUE(d.valid()) << error_stack_text();
  ASSERT_GE(H5Dwrite(d.get(), H5T_NATIVE_INT32, H5S_ALL, H5S_ALL, H5P_DEFAULT, v.data()), 0) << error_stack_text();
}

std::vector<int32_t> h5dread(const std::string& path, const char* name) {
  Hid f(H5Fopen(path.c_str(), H5F_ACC_RDONLY, H5P_DEFAULT));
  Hid d(H5Dopen2(f.get(), name, H5P_DEFAULT));
  std::vector<int32_t> v(kRows * kCols, 0x5a5a5a5a);
  EXPECT_GE(H5Dread(d.get(), H5T_NATIVE_INT32, H5S_ALL, H5S_ALL, H5P_DEFAULT, v.data()), 0)
      << name << ": " << error_stack_text();
  return v;
}

struct ChunkInfo {
  hsize_t offset[2];
  unsigned mask;
  hsize_t size;
  // Edge chunks are partly fill (zeros), which compresses even next to noise.
  bool interior() const { return offset[0] + kChunk[0] <= kRows && offset[1] + kChunk[1] <= kCols; }
};
std::vector<ChunkInfo> chunk_infos(const std::string& path, const char* name) {
  Hid f(H5Fopen(path.c_str(), H5F_ACC_RDONLY, H5P_DEFAULT));
  Hid d(H5Dopen2(f.get(), name, H5P_DEFAULT));
  Hid space(H5Dget_space(d.get()));
  hsize_t n = 0;
  EXPECT_GE(H5Dget_num_chunks(d.get(), space.get(), &n), 0);
  std::vector<ChunkInfo> out;
  for (hsize_t i = 0; i < n; ++i) {
    haddr_t addr;
    ChunkInfo c{};
    EXPECT_GE(H5Dget_chunk_info(d.get(), space.get(), i, c.offset, &c.mask, &addr, &c.size), 0);
    out.push_back(c);
  }
  return out;
}

// Numbers in a tool's data listing, with the "(row,col):" / "(row,col)" position labels dropped.
std::vector<int32_t> listed_numbers(const std::string& text) {
  std::vector<int32_t> out;
  for (size_t i = 0; i < text.size();) {
    if (text[i] == '(') {
      i = text.find(')', i);
      if (i == std::string::npos) break;
      ++i;
    } else if (std::isdigit(static_cast<unsigned char>(text[i])) ||
               (text[i] == '-' && i + 1 < text.size() && std::isdigit(static_cast<unsigned char>(text[i + 1])))) {
      size_t used = 0;
      out.push_back(std::stoi(text.substr(i, 12), &used));
      i += used;
    } else {
      ++i;
    }
  }
  return out;
}

// The DATA { ... } part of h5dump's output.
std::string h5dump_data(const std::string& out) {
  size_t start = out.find("DATA {");
  if (start == std::string::npos) return "";
  start += 6;
  return out.substr(start, out.find('}', start) - start);
}

// One file with every dataset the tests share, written in this process through the plugins.
class Plugins : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = new hubfs::testing::TempDir;
    Hid f(H5Fcreate(path().c_str(), H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT));
    ASSERT_TRUE(f.valid());
    write(f.get(), "zstd", values(), zstd({5}));
    write(f.get(), "zstd_default_level", values(), zstd({}));
    write(f.get(), "lzf", values(), lzf(H5Z_FLAG_OPTIONAL, false));
    write(f.get(), "lzf_shuffle", values(), lzf(H5Z_FLAG_OPTIONAL, true));
    write(f.get(), "lzf_noise", noise(), lzf(H5Z_FLAG_OPTIONAL, false));
    write(f.get(), "lzf_noise_mandatory", noise(), lzf(H5Z_FLAG_MANDATORY, false));
    write(f.get(), "zstd_noise", noise(), zstd({1}));
  }
  static void TearDownTestSuite() {
    delete dir_;
    dir_ = nullptr;
  }
  static std::string path() { return (*dir_ / "plugins.h5").string(); }
  static hubfs::testing::TempDir* dir_;
};
hubfs::testing::TempDir* Plugins::dir_ = nullptr;

const char* const kDatasets[] = {"zstd", "zstd_default_level", "lzf", "lzf_shuffle",
                                 "lzf_noise", "lzf_noise_mandatory", "zstd_noise"};
std::vector<int32_t> expected(const std::string& name) {
  return name.find("noise") == std::string::npos ? values() : noise();
}

// ---- the plugin ABI ------------------------------------------------------------------------

TEST(PluginAbi, EachModuleDescribesItsFilter) {
  struct Case {
    const char* file;
    unsigned id;
  };
  for (Case c : {Case{"libhubfs_h5z_zstd.so", kZstd}, Case{"libhubfs_h5z_lzf.so", kLzf}}) {
    SCOPED_TRACE(c.file);
    void* so = dlopen((kPluginDir + "/" + c.file).c_str(), RTLD_NOW | RTLD_LOCAL);
    ASSERT_NE(so, nullptr) << dlerror();
    auto type = reinterpret_cast<H5PL_type_t (*)()>(dlsym(so, "H5PLget_plugin_type"));
    auto info = reinterpret_cast<const void* (*)()>(dlsym(so, "H5PLget_plugin_info"));
    ASSERT_NE(type, nullptr);
    ASSERT_NE(info, nullptr);
    EXPECT_EQ(type(), H5PL_TYPE_FILTER);
    const auto* cls = static_cast<const H5Z_class2_t*>(info());
    ASSERT_NE(cls, nullptr);
    EXPECT_EQ(cls->version, H5Z_CLASS_T_VERS);
    EXPECT_EQ(cls->id, H5Z_filter_t(c.id));
    EXPECT_EQ(cls->encoder_present, 1);
    EXPECT_EQ(cls->decoder_present, 1);
    EXPECT_NE(cls->filter, nullptr);
    dlclose(so);
  }
}

TEST(PluginAbi, ModulesExportOnlyThePluginFunctions) {
  // Anything else exported (the codecs, C++ runtime templates) could bind to or be bound by a
  // different copy in the program that loads the plugin.
  for (const char* file : {"libhubfs_h5z_zstd.so", "libhubfs_h5z_lzf.so"}) {
    Ran r = run_with_plugins("nm -D --defined-only '" + kPluginDir + "/" + file + "'");
    ASSERT_EQ(r.code, 0) << r.out;
    // Lines are "ADDRESS TYPE NAME".
    std::vector<std::string> names;
    std::istringstream lines(r.out);
    for (std::string address, type, name; lines >> address >> type >> name;) names.push_back(name);
    EXPECT_THAT(names, ::testing::UnorderedElementsAre("H5PLget_plugin_type", "H5PLget_plugin_info")) << file;
  }
}

// ---- the filter functions, called as HDF5 calls them ----------------------------------------

// One plugin module, opened for a test that calls its filter function directly.
class Module {
 public:
  explicit Module(const char* file) : so_(dlopen((kPluginDir + "/" + file).c_str(), RTLD_NOW | RTLD_LOCAL)) {}
  ~Module() {
    if (so_) dlclose(so_);
  }
  Module(const Module&) = delete;
  Module& operator=(const Module&) = delete;
  const H5Z_class2_t* filter_class() const {
    if (!so_) return nullptr;
    auto info = reinterpret_cast<const void* (*)()>(dlsym(so_, "H5PLget_plugin_info"));
    return info ? static_cast<const H5Z_class2_t*>(info()) : nullptr;
  }

 private:
  void* so_;
};

// Runs `cls`'s filter in the decode direction on a copy of `stored` in an HDF5-allocated buffer
// (the filter frees it and hands back its own), as H5Z_pipeline does. Empty on failure.
std::optional<Bytes> decode_with(const H5Z_class2_t* cls, std::vector<unsigned> cd, const Bytes& stored) {
  size_t buf_size = stored.size();
  void* buf = H5allocate_memory(buf_size, false);
  std::memcpy(buf, stored.data(), buf_size);
  h5chunk::QuietHdf5Errors quiet;
  size_t n = cls->filter(H5Z_FLAG_REVERSE, cd.size(), cd.data(), stored.size(), &buf_size, &buf);
  std::optional<Bytes> out;
  if (n != 0) {
    EXPECT_LE(n, buf_size);
    out = Bytes(static_cast<uint8_t*>(buf), static_cast<uint8_t*>(buf) + n);
  }
  H5free_memory(buf);
  return out;
}

Bytes zeros_then_pattern(size_t n) {
  Bytes b(n, 0);
  for (size_t i = n / 2; i < n; ++i) b[i] = uint8_t(i % 251);
  return b;
}

TEST(PluginFilter, LzfWithoutARecordedChunkSizeGrowsItsOutput) {
  // A writer that skipped set_local leaves no chunk size: the filter must find it, as h5py's
  // does, by growing its buffer (it starts at 64 KiB here, the chunk is 1 MiB).
  Module m("libhubfs_h5z_lzf.so");
  ASSERT_NE(m.filter_class(), nullptr);
  const Bytes plain = zeros_then_pattern(1 << 20);
  Bytes stream(plain.size());
  stream.resize(lzf_compress(plain.data(), unsigned(plain.size()), stream.data(), unsigned(stream.size())));
  ASSERT_FALSE(stream.empty());
  ASSERT_LT(stream.size() * 4, plain.size());
  EXPECT_EQ(decode_with(m.filter_class(), {}, stream), plain);
  EXPECT_EQ(decode_with(m.filter_class(), {4, 0x105, unsigned(plain.size())}, stream), plain);
  EXPECT_EQ(decode_with(m.filter_class(), {4, 0x105, unsigned(plain.size() - 1)}, stream), std::nullopt);
  EXPECT_EQ(decode_with(m.filter_class(), {}, Bytes(100, 0xff)), std::nullopt);
  // A cut at an instruction boundary is a valid, shorter stream: only the recorded size
  // (which set_local always writes) can refuse it.
  const Bytes cut(stream.begin(), stream.end() - 3);
  auto unsized = decode_with(m.filter_class(), {}, cut);
  EXPECT_TRUE(!unsized || unsized->size() < plain.size());
  EXPECT_EQ(decode_with(m.filter_class(), {4, 0x105, unsigned(plain.size())}, cut), std::nullopt);
}

TEST(PluginFilter, ZstdFramesWithoutContentSizeOrSeveralFramesDecode) {
  Module m("libhubfs_h5z_zstd.so");
  ASSERT_NE(m.filter_class(), nullptr);
  const Bytes plain = zeros_then_pattern(1 << 20);
  // Streamed: the frame does not record its size.
  ZSTD_CCtx* cctx = ZSTD_createCCtx();
  ZSTD_CCtx_setParameter(cctx, ZSTD_c_contentSizeFlag, 0);
  Bytes streamed(ZSTD_compressBound(plain.size()));
  ZSTD_outBuffer out{streamed.data(), streamed.size(), 0};
  ZSTD_inBuffer in{plain.data(), plain.size(), 0};
  ASSERT_EQ(ZSTD_compressStream2(cctx, &out, &in, ZSTD_e_end), 0u);
  streamed.resize(out.pos);
  ZSTD_freeCCtx(cctx);
  ASSERT_EQ(ZSTD_getFrameContentSize(streamed.data(), streamed.size()), ZSTD_CONTENTSIZE_UNKNOWN);
  EXPECT_EQ(decode_with(m.filter_class(), {}, streamed), plain);
  // Two frames, each with its size: the chunk is their concatenation.
  const size_t half = plain.size() / 2;
  Bytes two(ZSTD_compressBound(plain.size()));
  size_t a = ZSTD_compress(two.data(), two.size(), plain.data(), half, 3);
  size_t b = ZSTD_compress(two.data() + a, two.size() - a, plain.data() + half, plain.size() - half, 3);
  ASSERT_FALSE(ZSTD_isError(a) || ZSTD_isError(b));
  two.resize(a + b);
  EXPECT_EQ(decode_with(m.filter_class(), {}, two), plain);
  // Truncated in the second frame, and in the streamed one.
  EXPECT_EQ(decode_with(m.filter_class(), {}, Bytes(two.begin(), two.end() - 4)), std::nullopt);
  EXPECT_EQ(decode_with(m.filter_class(), {}, Bytes(streamed.begin(), streamed.end() - 4)), std::nullopt);
}

// ---- in this process -----------------------------------------------------------------------

TEST_F(Plugins, H5DreadReturnsWhatWasWritten) {
  for (const char* name : kDatasets) {
    SCOPED_TRACE(name);
    EXPECT_EQ(h5dread(path(), name), expected(name));
  }
}

TEST_F(Plugins, LzfRecordsH5pysCdValues) {
  Hid f(H5Fopen(path().c_str(), H5F_ACC_RDONLY, H5P_DEFAULT));
  Hid d(H5Dopen2(f.get(), "lzf_shuffle", H5P_DEFAULT));
  Hid dcpl(H5Dget_create_plist(d.get()));
  unsigned flags = 0, cd[8] = {};
  size_t n = 8;
  ASSERT_GE(H5Pget_filter_by_id2(dcpl.get(), kLzf, &flags, &n, cd, 0, nullptr, nullptr), 0);
  ASSERT_EQ(n, 3u);
  EXPECT_EQ(cd[0], 4u);                 // h5py's filter revision
  EXPECT_EQ(cd[1], unsigned(LZF_VERSION));
  EXPECT_EQ(cd[2], 16u * 32 * 4);       // chunk bytes
}

TEST_F(Plugins, IncompressibleLzfChunksAreRawWhenOptionalAndExpandedWhenMandatory) {
  const hsize_t chunk_bytes = 16 * 32 * 4;
  auto optional = chunk_infos(path(), "lzf_noise");
  ASSERT_EQ(optional.size(), 12u);  // ceil(50/16) * ceil(70/32)
  int interior = 0;
  for (const ChunkInfo& c : optional) {
    if (!c.interior()) continue;
    ++interior;
    EXPECT_EQ(c.mask, 1u);  // HDF5 skipped the failed optional filter
    EXPECT_EQ(c.size, chunk_bytes);
  }
  EXPECT_EQ(interior, 6);
  for (const ChunkInfo& c : chunk_infos(path(), "lzf_noise_mandatory")) {
    EXPECT_EQ(c.mask, 0u);
    if (c.interior()) {
      EXPECT_GT(c.size, chunk_bytes);  // a grown LZF stream: the filter may not fail
    }
  }
  for (const ChunkInfo& c : chunk_infos(path(), "lzf")) EXPECT_EQ(c.mask, 0u);
}

TEST_F(Plugins, StoredChunksAreTheStandardFraming) {
  // What the plugins store is what h5chunk's decoders (and the HDF Group's and h5py's filters)
  // expect: a zstd frame of the whole chunk, a raw LZF stream of it.
  Hid f(H5Fopen(path().c_str(), H5F_ACC_RDONLY, H5P_DEFAULT));
  for (const char* name : {"zstd", "lzf"}) {
    SCOPED_TRACE(name);
    Hid d(H5Dopen2(f.get(), name, H5P_DEFAULT));
    hsize_t offset[2] = {0, 0}, size = 0;
    ASSERT_GE(H5Dget_chunk_storage_size(d.get(), offset, &size), 0);
    Bytes stored(size);
    uint32_t mask = 0;
    ASSERT_GE(H5Dread_chunk(d.get(), H5P_DEFAULT, offset, &mask, stored.data()), 0);
    std::vector<int32_t> chunk(16 * 32);
    if (std::string(name) == "zstd") {
      ASSERT_GT(stored.size(), 4u);
      EXPECT_TRUE(stored[4] & 0x04) << "no content checksum in the frame header";
    }
    size_t got = std::string(name) == "zstd"
                     ? ZSTD_decompress(chunk.data(), chunk.size() * 4, stored.data(), stored.size())
                     : lzf_decompress(stored.data(), unsigned(stored.size()), chunk.data(), unsigned(chunk.size() * 4));
    ASSERT_EQ(got, chunk.size() * 4);
    const auto v = values();
    for (size_t r = 0; r < 16; ++r) {
      for (size_t c = 0; c < 32; ++c) ASSERT_EQ(chunk[r * 32 + c], v[r * kCols + c]) << r << "," << c;
    }
  }
}

h5chunk::Options quiet() {
  h5chunk::Options o;
  o.log = [](const std::string&) {};  // fallback notes are not what this test checks
  return o;
}

TEST_F(Plugins, H5chunkReadsThemFastAndThroughItsH5DreadFallback) {
  auto file = h5chunk::File::open(path(), quiet());
  ASSERT_TRUE(file.ok()) << file.status().message();
  for (const char* name : kDatasets) {
    SCOPED_TRACE(name);
    const std::vector<int32_t> want = expected(name);
    auto dset = file->dataset(std::string("/") + name);
    ASSERT_TRUE(dset.ok()) << dset.status().message();
    h5chunk::ReadOptions fast, reference;
    fast.route = h5chunk::Route::kFastPath;
    reference.route = h5chunk::Route::kH5Dread;
    for (const auto& options : {fast, reference}) {
      auto got = dset->read("...", options);
      ASSERT_TRUE(got.ok()) << got.status().message();
      EXPECT_EQ(got->stats.fast_path, options.route == h5chunk::Route::kFastPath) << got->stats.fallback_cause;
      ASSERT_EQ(got->nbytes(), want.size() * 4);
      EXPECT_EQ(std::memcmp(got->data(), want.data(), got->nbytes()), 0);
    }
    // A stepped slice read by H5Dread, through the plugins (the fast path reads it too, as
    // the first loop's routes do for "...").
    h5chunk::ReadOptions via_h5dread;
    via_h5dread.route = h5chunk::Route::kH5Dread;
    auto stepped = dset->read("1::3,::5", via_h5dread);
    ASSERT_TRUE(stepped.ok()) << stepped.status().message();
    EXPECT_FALSE(stepped->stats.fast_path);
    std::vector<int32_t> want_stepped;
    for (size_t r = 1; r < kRows; r += 3) {
      for (size_t c = 0; c < kCols; c += 5) want_stepped.push_back(want[r * kCols + c]);
    }
    ASSERT_EQ(stepped->nbytes(), want_stepped.size() * 4);
    EXPECT_EQ(std::memcmp(stepped->data(), want_stepped.data(), stepped->nbytes()), 0);
  }
}

// ---- corrupt chunks ------------------------------------------------------------------------

// Replaces chunk (0,0) of a fresh copy of `name` with `stored`, then reads it with H5Dread.
// Returns the HDF5 error text, or "" if the read succeeded.
std::string read_with_chunk0(const std::string& dir, const Configure& configure, const Bytes& stored) {
  const std::string p = dir + "/corrupt.h5";
  {
    Hid f(H5Fcreate(p.c_str(), H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT));
    write(f.get(), "x", values(), configure);
    Hid d(H5Dopen2(f.get(), "x", H5P_DEFAULT));
    hsize_t offset[2] = {0, 0};
    EXPECT_GE(H5Dwrite_chunk(d.get(), H5P_DEFAULT, 0, offset, stored.size(), stored.data()), 0);
  }
  Hid f(H5Fopen(p.c_str(), H5F_ACC_RDONLY, H5P_DEFAULT));
  Hid d(H5Dopen2(f.get(), "x", H5P_DEFAULT));
  std::vector<int32_t> v(kRows * kCols);
  h5chunk::QuietHdf5Errors quiet;
  if (H5Dread(d.get(), H5T_NATIVE_INT32, H5S_ALL, H5S_ALL, H5P_DEFAULT, v.data()) >= 0) return "";
  std::string text = error_stack_text();
  return text.empty() ? "(H5Dread failed with an empty error stack)" : text;
}

Bytes bytes_of(const std::vector<int32_t>& v, size_t n) {
  Bytes b(n * 4);
  std::memcpy(b.data(), v.data(), b.size());
  return b;
}

TEST(PluginErrors, CorruptZstdChunksFailWithAMessage) {
  hubfs::testing::TempDir dir;
  const Bytes plain = bytes_of(values(), 16 * 32);
  // Checksummed, as the plugin writes: without the checksum a flipped bit inside a literal
  // decodes to wrong data that no zstd decoder can notice.
  ZSTD_CCtx* cctx = ZSTD_createCCtx();
  ZSTD_CCtx_setParameter(cctx, ZSTD_c_checksumFlag, 1);
  Bytes frame(ZSTD_compressBound(plain.size()));
  frame.resize(ZSTD_compress2(cctx, frame.data(), frame.size(), plain.data(), plain.size()));
  ZSTD_freeCCtx(cctx);
  ASSERT_FALSE(ZSTD_isError(frame.size()));

  EXPECT_THAT(read_with_chunk0(dir.str(), zstd({}), Bytes(200, 0x42)), HasSubstr("zstd: chunk of 200 bytes is not a zstd frame"));
  EXPECT_THAT(read_with_chunk0(dir.str(), zstd({}), Bytes(frame.begin(), frame.end() - 7)), HasSubstr("zstd:"));
  Bytes flipped = frame;
  flipped[flipped.size() / 2] ^= 0xff;
  flipped[flipped.size() / 2 + 1] ^= 0x55;
  EXPECT_THAT(read_with_chunk0(dir.str(), zstd({}), flipped), HasSubstr("zstd:"));
  // A frame header claiming 2^40 bytes of content.
  Bytes huge = {0x28, 0xb5, 0x2f, 0xfd, 0xc0, 0, 0, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0};
  EXPECT_THAT(read_with_chunk0(dir.str(), zstd({}), huge), HasSubstr("zstd:"));
  // Sanity: the intact frame reads.
  EXPECT_EQ(read_with_chunk0(dir.str(), zstd({}), frame), "");
}

TEST(PluginErrors, CorruptLzfChunksFailWithAMessage) {
  hubfs::testing::TempDir dir;
  const Bytes plain = bytes_of(values(), 16 * 32);
  auto compress = [](const Bytes& in) {
    Bytes out(in.size() + in.size() / 16 + 64);
    out.resize(lzf_compress(in.data(), unsigned(in.size()), out.data(), unsigned(out.size())));
    return out;
  };
  const Bytes stream = compress(plain);
  ASSERT_FALSE(stream.empty());
  const Configure lzf_mandatory = lzf(H5Z_FLAG_MANDATORY, false);

  EXPECT_THAT(read_with_chunk0(dir.str(), lzf_mandatory, Bytes(200, 0xff)), HasSubstr("lzf:"));
  EXPECT_THAT(read_with_chunk0(dir.str(), lzf_mandatory, Bytes(stream.begin(), stream.end() - 5)),
              HasSubstr("lzf:"));
  // A valid stream of half a chunk, and one of a chunk and a bit: the wrong size.
  EXPECT_THAT(read_with_chunk0(dir.str(), lzf_mandatory, compress(Bytes(plain.begin(), plain.begin() + plain.size() / 2))),
              HasSubstr("lzf: decoded 1024 bytes, expected 2048"));
  Bytes longer = plain;
  longer.resize(plain.size() + 100, 7);
  EXPECT_THAT(read_with_chunk0(dir.str(), lzf_mandatory, compress(longer)), HasSubstr("lzf: decodes to more than"));
  EXPECT_EQ(read_with_chunk0(dir.str(), lzf_mandatory, stream), "");
}

// ---- other programs, through HDF5_PLUGIN_PATH ----------------------------------------------

TEST_F(Plugins, H5dumpPrintsTheValues) {
  // Also proves the modules are self-contained: h5dump links neither libzstd nor liblzf.
  for (const char* name : kDatasets) {
    SCOPED_TRACE(name);
    Ran r = run_with_plugins("h5dump -w 0 -d /" + std::string(name) + " '" + path() + "'");
    ASSERT_EQ(r.code, 0) << r.out;
    EXPECT_EQ(listed_numbers(h5dump_data(r.out)), expected(name));
  }
}

TEST_F(Plugins, H5lsPrintsTheValues) {
  Ran r = run_with_plugins("h5ls -d -S '" + path() + "/lzf_shuffle'");
  ASSERT_EQ(r.code, 0) << r.out;
  const size_t data = r.out.find("Data:");
  ASSERT_NE(data, std::string::npos) << r.out;
  EXPECT_EQ(listed_numbers(r.out.substr(data + 5)), values());
}

TEST_F(Plugins, H5repackWritesThroughThem) {
  // h5repack recompresses every dataset: zstd -> LZF (mandatory) and LZF -> zstd level 9.
  const std::string to_lzf = (*dir_ / "repacked_lzf.h5").string();
  const std::string to_zstd = (*dir_ / "repacked_zstd.h5").string();
  Ran a = run_with_plugins("h5repack -f UD=32000,0,0 '" + path() + "' '" + to_lzf + "'");
  ASSERT_EQ(a.code, 0) << a.out;
  Ran b = run_with_plugins("h5repack -f UD=32015,0,1,9 '" + to_lzf + "' '" + to_zstd + "'");
  ASSERT_EQ(b.code, 0) << b.out;
  for (const std::string& p : {to_lzf, to_zstd}) {
    Hid f(H5Fopen(p.c_str(), H5F_ACC_RDONLY, H5P_DEFAULT));
    Hid d(H5Dopen2(f.get(), "zstd", H5P_DEFAULT));
    Hid dcpl(H5Dget_create_plist(d.get()));
    ASSERT_EQ(H5Pget_nfilters(dcpl.get()), 1);
    unsigned flags = 0, cd[4] = {};
    size_t n = 4;
    EXPECT_EQ(H5Pget_filter2(dcpl.get(), 0, &flags, &n, cd, 0, nullptr, nullptr),
              H5Z_filter_t(p == to_lzf ? kLzf : kZstd));
    for (const char* name : kDatasets) {
      SCOPED_TRACE(p + " " + name);
      EXPECT_EQ(h5dread(p, name), expected(name));
    }
  }
}

TEST_F(Plugins, H5pyReadsThemAndWritesThroughTheZstdPlugin) {
  // h5py has LZF built in; zstd it can only read and write through our plugin.
  const std::string script = (*dir_ / "h5py_zstd.py").string();
  const std::string written = (*dir_ / "h5py_zstd.h5").string();
  std::ofstream(script) << R"PY(
import sys, h5py, numpy as np
src, out = sys.argv[1], sys.argv[2]
want = (np.arange(50 * 70, dtype=np.int64) * 7 % 1000 - 300).astype("i4").reshape(50, 70)
with h5py.File(src, "r") as f:
    for name in ["zstd", "zstd_default_level", "lzf", "lzf_shuffle"]:
        assert (f[name][()] == want).all(), name + " differs"
with h5py.File(out, "w") as f:
    f.create_dataset("z", data=want, chunks=(16, 32), compression=32015, compression_opts=(7,))
print("ok")
)PY";
  Ran r = run_with_plugins("/usr/bin/python3 '" + script + "' '" + path() + "' '" + written + "'");
  ASSERT_EQ(r.code, 0) << r.out;
  EXPECT_EQ(r.out, "ok\n");
  EXPECT_EQ(h5dread(written, "z"), values());
  auto file = h5chunk::File::open(written, quiet());
  ASSERT_TRUE(file.ok()) << file.status().message();
  auto dset = file->dataset("/z");
  ASSERT_TRUE(dset.ok());
  h5chunk::ReadOptions fast;
  fast.route = h5chunk::Route::kFastPath;
  auto got = dset->read("...", fast);
  ASSERT_TRUE(got.ok()) << got.status().message();
  EXPECT_TRUE(got->stats.fast_path);
  const auto want = values();
  EXPECT_EQ(std::memcmp(got->data(), want.data(), want.size() * 4), 0);
}

}  // namespace
