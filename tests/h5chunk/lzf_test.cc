// LZF (32000), h5py's compression="lzf": the decoder on chunks made with liblzf's own
// compressor, corrupt input, and whole files written by Debian's h5py (which has LZF built in)
// read through h5chunk and compared with what h5py reads back.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <hdf5.h>
#include <lzf.h>
#include <sys/wait.h>

#include <cstdio>
#include <fstream>
#include <iterator>
#include <random>
#include <string>
#include <vector>

#include "codecs_test_util.h"
#include "h5_fixture.h"
#include "h5chunk/codecs.h"
#include "support/temp_dir.h"

namespace h5chunk {
namespace HUBFS_UNITY_ID {

using Bytes = std::vector<uint8_t>;
using namespace codec_test;
using namespace h5chunk::testing;
using ::testing::HasSubstr;

// What h5py's lzf_filter.c stores: lzf_compress into a buffer no larger than the input; if
// that fails the filter fails and HDF5 stores the chunk raw (empty result here).
Bytes lzf_encode(const Bytes& data) {
  Bytes out(data.size());
  unsigned n = lzf_compress(data.data(), unsigned(data.size()), out.data(), unsigned(out.size()));
  out.resize(n);
  return out;
}

// cd_values as h5py's lzf_set_local records them: filter revision 4, LZF API 1.5, chunk bytes.
FilterStep lzf_step(size_t chunk_bytes) {
  return FilterStep{kLzf, 1, {4, 0x0105, unsigned(chunk_bytes)}, "lzf"};
}

Status decode(const std::vector<FilterStep>& pipeline, const Bytes& stored, size_t out_size,
              size_t elem_size, Bytes* out, uint32_t mask = 0) {
  DecodeScratch scratch;
  // Exactly sized heap input so ASan sees a read past its end.
  std::unique_ptr<uint8_t[]> in(new uint8_t[std::max<size_t>(stored.size(), 1)]);
  if (!stored.empty()) std::memcpy(in.get(), stored.data(), stored.size());
  out->assign(out_size, 0xAB);
  return decode_chunk(pipeline, mask, elem_size, in.get(), stored.size(), out->data(), out_size, scratch);
}

// ---- the codec -----------------------------------------------------------------------------

TEST(Lzf, IsASupportedFilter) {
  EXPECT_EQ(unsupported_filter({lzf_step(4000)}), "");
  EXPECT_EQ(unsupported_filter({FilterStep{kShuffle, 0, {4}, "shuffle"}, lzf_step(4000)}), "");
}

TEST(Lzf, RoundTripsManySizes) {
  for (size_t n : {1ul, 2ul, 7ul, 64ul, 1000ul, 4096ul, 65537ul, 1ul << 20}) {
    SCOPED_TRACE(n);
    Bytes data = bytes_pattern(n, uint32_t(n));
    Bytes stored = lzf_encode(data);
    if (stored.empty()) continue;  // tiny inputs do not shrink: h5py would store them raw
    Bytes out;
    Status st = decode({lzf_step(n)}, stored, n, 1, &out);
    ASSERT_TRUE(st.ok()) << st.message();
    EXPECT_EQ(out, data);
  }
}

TEST(Lzf, ShuffledFloatsRoundTrip) {
  Bytes data = floats(10000);
  Bytes stored = lzf_encode(reference_shuffle(data, 4));
  ASSERT_FALSE(stored.empty());
  Bytes out;
  Status st = decode({FilterStep{kShuffle, 0, {4}, "shuffle"}, lzf_step(data.size())}, stored, data.size(), 4, &out);
  ASSERT_TRUE(st.ok()) << st.message();
  EXPECT_EQ(out, data);
}

TEST(Lzf, MaskedChunkIsTheRawBytes) {
  // Noise does not compress: h5py's filter fails on it, HDF5 stores it raw, mask bit 1 (lzf
  // after shuffle) set.
  Bytes noise = bytes_random(8000, 5);
  ASSERT_TRUE(lzf_encode(noise).empty());
  Bytes stored = reference_shuffle(noise, 8);
  Bytes out;
  Status st =
      decode({FilterStep{kShuffle, 0, {8}, "shuffle"}, lzf_step(noise.size())}, stored, noise.size(), 8, &out, 0b10);
  ASSERT_TRUE(st.ok()) << st.message();
  EXPECT_EQ(out, noise);
}

TEST(Lzf, WrongSizeEmptyAndGarbageAreCorrupt) {
  Bytes data = bytes_pattern(20000, 2);
  Bytes stored = lzf_encode(data);
  ASSERT_FALSE(stored.empty());
  Bytes out;
  Status bigger = decode({lzf_step(data.size())}, stored, data.size() - 1, 4, &out);
  EXPECT_EQ(bigger.code(), hubfs::Code::kCorrupt);
  EXPECT_THAT(bigger.message(), HasSubstr("more than the expected"));
  Status smaller = decode({lzf_step(data.size())}, stored, data.size() + 1, 4, &out);
  EXPECT_EQ(smaller.code(), hubfs::Code::kCorrupt);
  EXPECT_THAT(smaller.message(), HasSubstr("expected"));
  EXPECT_EQ(decode({lzf_step(100)}, {}, 100, 4, &out).code(), hubfs::Code::kCorrupt);
  // A back reference before the start of the output.
  EXPECT_EQ(decode({lzf_step(100)}, {0x20, 0x05}, 100, 1, &out).code(), hubfs::Code::kCorrupt);
  // A literal run longer than the input.
  EXPECT_EQ(decode({lzf_step(100)}, {0x1f, 1, 2, 3}, 100, 1, &out).code(), hubfs::Code::kCorrupt);
}

// Flip bytes and truncate at many lengths: decoding fails, or (LZF has no checksum) succeeds
// with exactly the chunk's size, never touching memory outside the buffers (ASan).
TEST(Lzf, FuzzedInputNeverOverruns) {
  Bytes data = bytes_pattern(12000, 3);
  Bytes stored = lzf_encode(data);
  ASSERT_FALSE(stored.empty());
  std::mt19937 rng(7);
  Bytes out;
  for (size_t i = 0; i < stored.size(); i += 1 + stored.size() / 400) {
    Bytes b = stored;
    b[i] ^= uint8_t(1 + rng() % 255);
    (void)decode({lzf_step(data.size())}, b, data.size(), 4, &out);
    Bytes cut(stored.begin(), stored.begin() + i);
    EXPECT_FALSE(decode({lzf_step(data.size())}, cut, data.size(), 4, &out).ok()) << "truncated to " << i;
  }
}

// ---- files written by h5py -----------------------------------------------------------------

// Writes lzf.h5 with h5py (every integer and float size, with and without shuffle, edge chunks
// in every axis, an incompressible dataset whose chunks h5py stores raw) and, for each dataset,
// NAME.bin: the C-order bytes h5py reads back.
constexpr const char* kWriter = R"PY(
import sys, h5py, numpy as np
out = sys.argv[1]
rng = np.random.default_rng(3)
names = []
with h5py.File(out + "/lzf.h5", "w") as f:
    for dt in ["i1", "u1", "i2", "u2", "i4", "u4", "i8", "u8", "f4", "f8"]:
        for shuffle in (False, True):
            base = np.arange(37 * 53).reshape(37, 53) % 97
            noise = rng.integers(0, 4, size=base.shape)
            data = (base * 3 + noise - 40).astype(dt)
            name = f"{dt}_{'shuffle' if shuffle else 'plain'}"
            f.create_dataset(name, data=data, chunks=(8, 16), compression="lzf", shuffle=shuffle)
            names.append(name)
    f.create_dataset("noise", data=rng.integers(0, 2**32, size=(3000,), dtype="u4"),
                     chunks=(512,), compression="lzf")
    names.append("noise")
    v = np.sin(np.arange(5 * 30 * 70) * 0.01).astype("f4").reshape(5, 30, 70)
    f.create_dataset("cube", data=v, chunks=(2, 7, 32), compression="lzf", shuffle=True)
    names.append("cube")
with h5py.File(out + "/lzf.h5", "r") as f:
    for name in names:
        with open(out + "/" + name + ".bin", "wb") as b:
            b.write(np.ascontiguousarray(f[name][()]).tobytes())
)PY";

Bytes read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return Bytes(std::istreambuf_iterator<char>(in), {});
}

int run_python(const std::string& script_path, const std::string& arg, std::string* output) {
  std::string cmd = "/usr/bin/python3 " + script_path + " " + arg + " 2>&1";
  FILE* p = ::popen(cmd.c_str(), "r");
  if (!p) return -1;
  char buf[4096];
  size_t n;
  while ((n = std::fread(buf, 1, sizeof buf, p)) > 0) output->append(buf, n);
  int status = ::pclose(p);
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

class LzfH5py : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = new hubfs::testing::TempDir;
    const std::string script = (*dir_ / "write_lzf.py").string();
    std::ofstream(script) << kWriter;
    std::string output;
    int rc = run_python(script, dir_->str(), &output);
    // Debian's python3-h5py is a declared dependency (scripts/deps.sh): failing here is a
    // broken setup, never a reason to pass.
    ASSERT_EQ(rc, 0) << "h5py could not write the LZF test file (apt-get install python3-h5py): " << output;
  }
  static void TearDownTestSuite() {
    delete dir_;
    dir_ = nullptr;
  }
  static std::string path(const std::string& name) { return (*dir_ / name).string(); }

  // Reads `selection` of dataset `name` through the fast path and compares with h5py's bytes.
  void expect_matches_h5py(File& file, const std::string& name, const char* selection) {
    SCOPED_TRACE(name + "[" + selection + "]");
    const Bytes h5py_bytes = read_file(path(name + ".bin"));
    auto dset = file.dataset("/" + name);
    ASSERT_TRUE(dset.ok()) << dset.status().message();
    EXPECT_EQ(dset->info().fast_path_blocker, "");
    auto sel = parse_selection(selection);
    ASSERT_TRUE(sel.ok());
    auto norm = normalize(*sel, dset->info().shape);
    ASSERT_TRUE(norm.ok()) << norm.status().message();
    const size_t elem = dtype_size(dset->info().dtype);
    ASSERT_EQ(h5py_bytes.size(), num_elements(dset->info().shape) * elem);
    auto got = dset->read(*sel, via(Route::kFastPath));
    ASSERT_TRUE(got.ok()) << got.status().message();
    EXPECT_TRUE(got->stats.fast_path) << got->stats.fallback_cause;
    EXPECT_EQ(bytes_of(*got), index_reference(h5py_bytes, dset->info().shape, elem, *norm));
  }

  static uint64_t num_elements(const std::vector<uint64_t>& shape) {
    uint64_t n = 1;
    for (uint64_t d : shape) n *= d;
    return n;
  }

  static hubfs::testing::TempDir* dir_;
};
hubfs::testing::TempDir* LzfH5py::dir_ = nullptr;

TEST_F(LzfH5py, EveryDtypeWithAndWithoutShuffleMatchesH5py) {
  auto file = File::open(path("lzf.h5"), quiet_options());
  ASSERT_TRUE(file.ok()) << file.status().message();
  for (const char* dt : {"i1", "u1", "i2", "u2", "i4", "u4", "i8", "u8", "f4", "f8"}) {
    for (const char* variant : {"_plain", "_shuffle"}) {
      const std::string name = std::string(dt) + variant;
      expect_matches_h5py(*file, name, "...");
      expect_matches_h5py(*file, name, "5:36,17:53");  // edge chunks on both axes
      expect_matches_h5py(*file, name, "-1");
    }
  }
}

TEST_F(LzfH5py, FilterIsRecordedTheWayH5pyWritesIt) {
  auto file = File::open(path("lzf.h5"), quiet_options());
  ASSERT_TRUE(file.ok()) << file.status().message();
  auto dset = file->dataset("/i4_shuffle");
  ASSERT_TRUE(dset.ok());
  const auto& filters = dset->info().filters;
  ASSERT_EQ(filters.size(), 2u);
  EXPECT_EQ(filters[0].id, unsigned(kShuffle));
  EXPECT_EQ(filters[1].id, unsigned(kLzf));
  // [filter revision, LZF API version 1.5, chunk bytes = 8 * 16 * 4]
  EXPECT_EQ(filters[1].cd_values, (std::vector<unsigned>{4, 0x0105, 8 * 16 * 4}));
}

TEST_F(LzfH5py, IncompressibleChunksStoredRawMatchH5py) {
  // Prove the file really holds raw (masked) chunks, so the test covers them.
  hid_t f = H5Fopen(path("lzf.h5").c_str(), H5F_ACC_RDONLY, H5P_DEFAULT);
  ASSERT_GE(f, 0);
  hid_t d = H5Dopen2(f, "noise", H5P_DEFAULT);
  hsize_t offset[1] = {0};
  unsigned mask = 0;
  haddr_t addr = 0;
  hsize_t size = 0;
  hid_t space = H5Dget_space(d);
  EXPECT_GE(H5Dget_chunk_info(d, space, 0, offset, &mask, &addr, &size), 0);
  H5Sclose(space);
  H5Dclose(d);
  H5Fclose(f);
  EXPECT_EQ(mask, 1u);
  EXPECT_EQ(size, 512u * 4);

  auto file = File::open(path("lzf.h5"), quiet_options());
  ASSERT_TRUE(file.ok()) << file.status().message();
  expect_matches_h5py(*file, "noise", "...");
  expect_matches_h5py(*file, "noise", "100:2900");
}

TEST_F(LzfH5py, ThreeDimensionalWithEdgeChunksMatchesH5py) {
  auto file = File::open(path("lzf.h5"), quiet_options(3));
  ASSERT_TRUE(file.ok()) << file.status().message();
  expect_matches_h5py(*file, "cube", "...");
  expect_matches_h5py(*file, "cube", "1:5,3:29,10:70");
  expect_matches_h5py(*file, "cube", "4,:,[0,33,69]");
}

TEST_F(LzfH5py, SmallReadsTakeTheFastPathUnlessH5DreadHasAnLzfPlugin) {
  // h5chunk decodes LZF itself; while H5Dread has no LZF plugin (Debian's is broken), even a
  // tiny automatic read must not be handed to it. With one loaded, H5Dread serves small reads.
  const bool h5dread_has_lzf = H5Zfilter_avail(kLzf) > 0;
  auto file = File::open(path("lzf.h5"), quiet_options());
  ASSERT_TRUE(file.ok()) << file.status().message();
  auto dset = file->dataset("/f8_plain");
  ASSERT_TRUE(dset.ok());
  auto got = dset->read("2,3:5");
  ASSERT_TRUE(got.ok()) << got.status().message();
  EXPECT_EQ(got->stats.fast_path, !h5dread_has_lzf) << got->stats.fallback_cause;
  const Bytes all = read_file(path("f8_plain.bin"));
  EXPECT_EQ(bytes_of(*got), Bytes(all.begin() + (2 * 53 + 3) * 8, all.begin() + (2 * 53 + 5) * 8));
}

}  // namespace
}  // namespace h5chunk
