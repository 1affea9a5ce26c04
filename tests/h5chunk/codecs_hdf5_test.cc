// Interop with real HDF5: chunks written by the HDF5 library and its filter plugins, read raw
// with H5Dread_chunk, must decode (decode_chunk) to what H5Dread returns. For zstd and
// bitshuffle, which have no plugin on this system, chunks are written with H5Dwrite_chunk from
// arrays the test knows.
#include <hdf5.h>
#include <gtest/gtest.h>

#include <cstring>
#include <string>
#include <vector>

#include "codecs_test_util.h"
#include "h5chunk/codecs.h"
#include "h5chunk/hdf5_handle.h"
#include "support/temp_dir.h"

namespace h5chunk {
namespace HUBFS_UNITY_ID {

using Bytes = std::vector<uint8_t>;
using namespace codec_test;

// Owns one HDF5 id; closes it with the matching H5?close.
class Id {
 public:
  Id(hid_t id, herr_t (*close)(hid_t)) : id_(id), close_(close) {}
  ~Id() {
    if (id_ >= 0) close_(id_);
  }
  Id(const Id&) = delete;
  Id& operator=(const Id&) = delete;
  operator hid_t() const { return id_; }  // NOLINT: an Id is used where HDF5 wants a hid_t
  bool ok() const { return id_ >= 0; }

 private:
  hid_t id_;
  herr_t (*close_)(hid_t);
};

constexpr unsigned kBloscFilter = 32001, kLz4Filter = 32004;
// The dataset: 2-D float32, chunks that do not divide it (so edge chunks exist).
constexpr hsize_t kRows = 150, kCols = 200, kChunkRows = 64, kChunkCols = 48;
constexpr size_t kChunkBytes = kChunkRows * kChunkCols * sizeof(float);

// Smooth data, except one chunk's worth of noise so optional compressors skip that chunk
// (exercising the filter mask).
std::vector<float> dataset_values() {
  std::vector<float> v(kRows * kCols);
  Bytes noise = bytes_random(v.size() * 4, 99);
  for (hsize_t r = 0; r < kRows; ++r) {
    for (hsize_t c = 0; c < kCols; ++c) {
      size_t i = r * kCols + c;
      if (r >= 64 && r < 128 && c >= 48 && c < 96) {
        std::memcpy(&v[i], &noise[i * 4], 4);
        if (v[i] != v[i]) v[i] = 0;  // NaN would fail the == comparison of H5Dread's copy
      } else {
        v[i] = float(r) * 0.5f + float(c % 17);
      }
    }
  }
  return v;
}

std::vector<FilterStep> pipeline_of(hid_t dset) {
  Id dcpl(H5Dget_create_plist(dset), H5Pclose);
  return filter_pipeline(dcpl);
}

struct RawChunk {
  hsize_t offset[2];
  uint32_t mask = 0;
  Bytes bytes;
};

std::vector<RawChunk> raw_chunks(hid_t dset) {
  Id space(H5Dget_space(dset), H5Sclose);
  hsize_t n = 0;
  EXPECT_GE(H5Dget_num_chunks(dset, space, &n), 0);
  std::vector<RawChunk> out;
  for (hsize_t i = 0; i < n; ++i) {
    RawChunk c;
    unsigned mask = 0;
    haddr_t addr = 0;
    hsize_t size = 0;
    EXPECT_GE(H5Dget_chunk_info(dset, space, i, c.offset, &mask, &addr, &size), 0);
    c.bytes.resize(size);
    uint32_t read_mask = 0;
    EXPECT_GE(H5Dread_chunk(dset, H5P_DEFAULT, c.offset, &read_mask, c.bytes.data()), 0);
    EXPECT_EQ(read_mask, mask);
    c.mask = read_mask;
    out.push_back(std::move(c));
  }
  return out;
}

// What H5Dread returns for the part of the chunk inside the dataset.
std::vector<float> h5dread_region(hid_t dset, const hsize_t offset[2], hsize_t count[2]) {
  count[0] = std::min(kChunkRows, kRows - offset[0]);
  count[1] = std::min(kChunkCols, kCols - offset[1]);
  Id file_space(H5Dget_space(dset), H5Sclose);
  H5Sselect_hyperslab(file_space, H5S_SELECT_SET, offset, nullptr, count, nullptr);
  Id mem_space(H5Screate_simple(2, count, nullptr), H5Sclose);
  std::vector<float> v(count[0] * count[1]);
  EXPECT_GE(H5Dread(dset, H5T_NATIVE_FLOAT, mem_space, file_space, H5P_DEFAULT, v.data()), 0);
  return v;
}

// The part of a decoded full chunk that lies inside the dataset.
std::vector<float> chunk_region(const Bytes& chunk, const hsize_t count[2]) {
  std::vector<float> v(count[0] * count[1]);
  for (hsize_t r = 0; r < count[0]; ++r) {
    std::memcpy(&v[r * count[1]], &chunk[r * kChunkCols * 4], count[1] * 4);
  }
  return v;
}

struct Written {
  hubfs::testing::TempDir dir;
  std::string path;
};

// Writes the test dataset with the filters `configure` sets on the dataset creation list.
// Returns false if HDF5 refused (a plugin missing).
template <typename Configure>
bool write_dataset(const std::string& path, Configure configure) {
  Id file(H5Fcreate(path.c_str(), H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT), H5Fclose);
  hsize_t dims[2] = {kRows, kCols}, chunk[2] = {kChunkRows, kChunkCols};
  Id space(H5Screate_simple(2, dims, nullptr), H5Sclose);
  Id dcpl(H5Pcreate(H5P_DATASET_CREATE), H5Pclose);
  H5Pset_chunk(dcpl, 2, chunk);
  if (!configure(hid_t(dcpl))) return false;
  Id dset(H5Dcreate2(file, "x", H5T_NATIVE_FLOAT, space, H5P_DEFAULT, dcpl, H5P_DEFAULT), H5Dclose);
  if (!dset.ok()) return false;
  std::vector<float> v = dataset_values();
  return H5Dwrite(dset, H5T_NATIVE_FLOAT, H5S_ALL, H5S_ALL, H5P_DEFAULT, v.data()) >= 0;
}

// Decodes every chunk of /x and compares with H5Dread; returns how many chunks had a mask bit
// set. flip_check: also verify a flipped bit is rejected.
int expect_chunks_match_h5dread(const std::string& path, bool flip_check = false) {
  Id file(H5Fopen(path.c_str(), H5F_ACC_RDONLY, H5P_DEFAULT), H5Fclose);
  Id dset(H5Dopen2(file, "x", H5P_DEFAULT), H5Dclose);
  std::vector<FilterStep> pipeline = pipeline_of(dset);
  EXPECT_EQ(unsupported_filter(pipeline), "");
  DecodeScratch scratch;
  int masked = 0;
  std::vector<RawChunk> chunks = raw_chunks(dset);
  EXPECT_EQ(chunks.size(), 15u);  // ceil(150/64) * ceil(200/48)
  for (const RawChunk& c : chunks) {
    masked += c.mask != 0;
    Bytes out(kChunkBytes);
    Status st =
        decode_chunk(pipeline, c.mask, 4, c.bytes.data(), c.bytes.size(), out.data(), out.size(), scratch);
    EXPECT_TRUE(st.ok()) << st.message() << " at chunk " << c.offset[0] << "," << c.offset[1];
    hsize_t count[2];
    std::vector<float> want = h5dread_region(dset, c.offset, count);
    EXPECT_EQ(chunk_region(out, count), want) << "chunk " << c.offset[0] << "," << c.offset[1];
    if (flip_check) {
      Bytes bad = c.bytes;
      bad[bad.size() / 3] ^= 0x01;
      Status st2 = decode_chunk(pipeline, c.mask, 4, bad.data(), bad.size(), out.data(), out.size(), scratch);
      EXPECT_EQ(st2.code(), hubfs::Code::kCorrupt)
          << "flipped bit accepted in chunk " << c.offset[0] << "," << c.offset[1];
    }
  }
  return masked;
}

TEST(CodecsHdf5, ShuffleDeflateFletcher32) {
  hubfs::testing::TempDir dir;
  std::string path = (dir / "a.h5").string();
  ASSERT_TRUE(write_dataset(path, [](hid_t dcpl) {
    return H5Pset_shuffle(dcpl) >= 0 && H5Pset_deflate(dcpl, 4) >= 0 && H5Pset_fletcher32(dcpl) >= 0;
  }));
  expect_chunks_match_h5dread(path, /*flip_check=*/true);
}

TEST(CodecsHdf5, Fletcher32AloneMatchesHdf5Checksum) {
  hubfs::testing::TempDir dir;
  std::string path = (dir / "f.h5").string();
  ASSERT_TRUE(write_dataset(path, [](hid_t dcpl) { return H5Pset_fletcher32(dcpl) >= 0; }));
  expect_chunks_match_h5dread(path, /*flip_check=*/true);
}

TEST(CodecsHdf5, ShuffleDeflate) {
  hubfs::testing::TempDir dir;
  std::string path = (dir / "b.h5").string();
  ASSERT_TRUE(write_dataset(
      path, [](hid_t dcpl) { return H5Pset_shuffle(dcpl) >= 0 && H5Pset_deflate(dcpl, 6) >= 0; }));
  expect_chunks_match_h5dread(path);
}

TEST(CodecsHdf5, BloscPlugin) {
  // cd_values as h5py/hdf5plugin pass them: the first four are filled in by the filter's
  // set_local (version, version, typesize, chunk bytes); then clevel, shuffle, compressor.
  struct Config {
    unsigned shuffle, compressor;
  };
  for (Config cfg : {Config{1, 1}, Config{2, 5}, Config{1, 0}, Config{0, 4}}) {
    hubfs::testing::TempDir dir;
    std::string path = (dir / "c.h5").string();
    bool written = write_dataset(path, [&](hid_t dcpl) {
      unsigned cd[7] = {0, 0, 0, 0, 5, cfg.shuffle, cfg.compressor};
      return H5Pset_filter(dcpl, kBloscFilter, H5Z_FLAG_OPTIONAL, 7, cd) >= 0;
    });
    // scripts/deps.sh installs the plugin: its absence is a broken setup, not a reason to pass.
    ASSERT_TRUE(written && H5Zfilter_avail(kBloscFilter) > 0)
        << "the blosc HDF5 plugin is missing: apt-get install hdf5-filter-plugin-blosc-serial";
    SCOPED_TRACE("blosc shuffle " + std::to_string(cfg.shuffle) + " compressor " +
                 std::to_string(cfg.compressor));
    // The noise chunk does not compress: the plugin fails on it and HDF5 stores it raw with
    // mask bit 0 set.
    EXPECT_EQ(expect_chunks_match_h5dread(path), 1);
  }
}

TEST(CodecsHdf5, Lz4Plugin) {
  for (unsigned block : {0u, 1024u}) {
    hubfs::testing::TempDir dir;
    std::string path = (dir / "d.h5").string();
    bool written = write_dataset(path, [&](hid_t dcpl) {
      unsigned cd[1] = {block};
      return H5Pset_filter(dcpl, kLz4Filter, H5Z_FLAG_OPTIONAL, 1, cd) >= 0;
    });
    ASSERT_TRUE(written && H5Zfilter_avail(kLz4Filter) > 0)
        << "the lz4 HDF5 plugin is missing: apt-get install hdf5-filter-plugin";
    SCOPED_TRACE("lz4 block " + std::to_string(block));
    expect_chunks_match_h5dread(path);
  }
}

// Element sizes other than 4 through the shuffle fast paths (2, 8) and the generic one (3 is
// not an HDF5 native size, so 16: a compound of two doubles stands in for "other").
TEST(CodecsHdf5, ShuffleDeflateFletcher32OtherElementSizes) {
  struct Type {
    hid_t type;
    size_t size;
  };
  hid_t pair = H5Tcreate(H5T_COMPOUND, 16);
  H5Tinsert(pair, "re", 0, H5T_NATIVE_DOUBLE);
  H5Tinsert(pair, "im", 8, H5T_NATIVE_DOUBLE);
  for (Type t :
       {Type{H5T_NATIVE_INT16, 2}, Type{H5T_NATIVE_DOUBLE, 8}, Type{pair, 16}, Type{H5T_NATIVE_INT8, 1}}) {
    SCOPED_TRACE("element size " + std::to_string(t.size));
    hubfs::testing::TempDir dir;
    std::string path = (dir / "t.h5").string();
    const hsize_t n = 10000, chunk = 3000;  // 4 chunks, the last one partial
    Bytes values = floats(n * t.size / 4 + 1, 3);
    values.resize(n * t.size);
    for (size_t i = 0; i < values.size(); i += 8) values[i] = 0;  // no NaN doubles
    {
      Id file(H5Fcreate(path.c_str(), H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT), H5Fclose);
      Id space(H5Screate_simple(1, &n, nullptr), H5Sclose);
      Id dcpl(H5Pcreate(H5P_DATASET_CREATE), H5Pclose);
      H5Pset_chunk(dcpl, 1, &chunk);
      H5Pset_shuffle(dcpl);
      H5Pset_deflate(dcpl, 4);
      H5Pset_fletcher32(dcpl);
      Id dset(H5Dcreate2(file, "x", t.type, space, H5P_DEFAULT, dcpl, H5P_DEFAULT), H5Dclose);
      ASSERT_GE(H5Dwrite(dset, t.type, H5S_ALL, H5S_ALL, H5P_DEFAULT, values.data()), 0);
    }
    Id file(H5Fopen(path.c_str(), H5F_ACC_RDONLY, H5P_DEFAULT), H5Fclose);
    Id dset(H5Dopen2(file, "x", H5P_DEFAULT), H5Dclose);
    Bytes via_h5dread(values.size());
    ASSERT_GE(H5Dread(dset, t.type, H5S_ALL, H5S_ALL, H5P_DEFAULT, via_h5dread.data()), 0);
    ASSERT_EQ(via_h5dread, values);
    std::vector<FilterStep> pipeline = pipeline_of(dset);
    DecodeScratch scratch;
    Id fspace(H5Dget_space(dset), H5Sclose);
    hsize_t n_chunks = 0;
    H5Dget_num_chunks(dset, fspace, &n_chunks);
    ASSERT_EQ(n_chunks, 4u);
    for (hsize_t i = 0; i < n_chunks; ++i) {
      hsize_t offset = 0, size = 0;
      unsigned mask = 0;
      haddr_t addr = 0;
      ASSERT_GE(H5Dget_chunk_info(dset, fspace, i, &offset, &mask, &addr, &size), 0);
      Bytes raw(size);
      uint32_t read_mask = 0;
      ASSERT_GE(H5Dread_chunk(dset, H5P_DEFAULT, &offset, &read_mask, raw.data()), 0);
      Bytes out(chunk * t.size);
      Status st =
          decode_chunk(pipeline, read_mask, t.size, raw.data(), raw.size(), out.data(), out.size(), scratch);
      ASSERT_TRUE(st.ok()) << st.message();
      size_t inside = std::min(chunk, n - offset) * t.size;
      EXPECT_TRUE(
          std::equal(out.begin(), out.begin() + long(inside), via_h5dread.begin() + long(offset * t.size)))
          << "chunk at " << offset;
    }
  }
  H5Tclose(pair);
}

// A chunk written with deflate's mask bit set holds shuffled bytes only; H5Dread must agree
// with decode_chunk on what that means.
TEST(CodecsHdf5, MaskedDeflateChunkWrittenRaw) {
  hubfs::testing::TempDir dir;
  std::string path = (dir / "m.h5").string();
  Bytes plain = floats(kChunkRows * kChunkCols, 5);
  {
    Id file(H5Fcreate(path.c_str(), H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT), H5Fclose);
    hsize_t dims[2] = {kChunkRows, kChunkCols}, chunk[2] = {kChunkRows, kChunkCols};
    Id space(H5Screate_simple(2, dims, nullptr), H5Sclose);
    Id dcpl(H5Pcreate(H5P_DATASET_CREATE), H5Pclose);
    H5Pset_chunk(dcpl, 2, chunk);
    H5Pset_shuffle(dcpl);
    H5Pset_deflate(dcpl, 4);
    Id dset(H5Dcreate2(file, "x", H5T_NATIVE_FLOAT, space, H5P_DEFAULT, dcpl, H5P_DEFAULT), H5Dclose);
    Bytes stored = reference_shuffle(plain, 4);
    hsize_t offset[2] = {0, 0};
    ASSERT_GE(
        H5Dwrite_chunk(dset, H5P_DEFAULT, /*filters skipped:*/ 0b10, offset, stored.size(), stored.data()),
        0);
  }
  Id file(H5Fopen(path.c_str(), H5F_ACC_RDONLY, H5P_DEFAULT), H5Fclose);
  Id dset(H5Dopen2(file, "x", H5P_DEFAULT), H5Dclose);
  std::vector<RawChunk> chunks = raw_chunks(dset);
  ASSERT_EQ(chunks.size(), 1u);
  EXPECT_EQ(chunks[0].mask, 0b10u);
  DecodeScratch scratch;
  Bytes out(kChunkBytes);
  Status st = decode_chunk(pipeline_of(dset), chunks[0].mask, 4, chunks[0].bytes.data(),
                           chunks[0].bytes.size(), out.data(), out.size(), scratch);
  ASSERT_TRUE(st.ok()) << st.message();
  EXPECT_EQ(out, plain);
  Bytes via_h5dread(kChunkBytes);
  ASSERT_GE(H5Dread(dset, H5T_NATIVE_FLOAT, H5S_ALL, H5S_ALL, H5P_DEFAULT, via_h5dread.data()), 0);
  EXPECT_EQ(out, via_h5dread);
}

// No zstd or bitshuffle plugin here: declare the filter (optional, so HDF5 accepts it without
// the plugin), write each chunk's encoded bytes with H5Dwrite_chunk, read them back with
// H5Dread_chunk, and check decode_chunk returns the chunk the test encoded.
void expect_written_chunks_decode(unsigned filter, std::vector<unsigned> cd, Bytes (*encode)(const Bytes&)) {
  hubfs::testing::TempDir dir;
  std::string path = (dir / "e.h5").string();
  const hsize_t rows = 128, cols = 96;
  std::vector<Bytes> plain;
  {
    Id file(H5Fcreate(path.c_str(), H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT), H5Fclose);
    hsize_t dims[2] = {rows, cols}, chunk[2] = {kChunkRows, kChunkCols};
    Id space(H5Screate_simple(2, dims, nullptr), H5Sclose);
    Id dcpl(H5Pcreate(H5P_DATASET_CREATE), H5Pclose);
    H5Pset_chunk(dcpl, 2, chunk);
    ASSERT_GE(H5Pset_filter(dcpl, filter, H5Z_FLAG_OPTIONAL, cd.size(), cd.data()), 0);
    Id dset(H5Dcreate2(file, "x", H5T_NATIVE_FLOAT, space, H5P_DEFAULT, dcpl, H5P_DEFAULT), H5Dclose);
    ASSERT_TRUE(dset.ok());
    for (hsize_t r = 0; r < rows; r += kChunkRows) {
      for (hsize_t c = 0; c < cols; c += kChunkCols) {
        Bytes p = floats(kChunkRows * kChunkCols, uint32_t(r * 1000 + c));
        Bytes stored = encode(p);
        hsize_t offset[2] = {r, c};
        ASSERT_GE(H5Dwrite_chunk(dset, H5P_DEFAULT, 0, offset, stored.size(), stored.data()), 0);
        plain.push_back(std::move(p));
      }
    }
  }
  Id file(H5Fopen(path.c_str(), H5F_ACC_RDONLY, H5P_DEFAULT), H5Fclose);
  Id dset(H5Dopen2(file, "x", H5P_DEFAULT), H5Dclose);
  std::vector<FilterStep> pipeline = pipeline_of(dset);
  ASSERT_EQ(pipeline.size(), 1u);
  EXPECT_EQ(pipeline[0].id, filter);
  EXPECT_EQ(pipeline[0].cd_values, cd);
  EXPECT_EQ(unsupported_filter(pipeline), "");
  std::vector<RawChunk> chunks = raw_chunks(dset);
  ASSERT_EQ(chunks.size(), plain.size());
  DecodeScratch scratch;
  for (size_t i = 0; i < chunks.size(); ++i) {
    Bytes out(kChunkBytes);
    Status st = decode_chunk(pipeline, chunks[i].mask, 4, chunks[i].bytes.data(), chunks[i].bytes.size(),
                             out.data(), out.size(), scratch);
    ASSERT_TRUE(st.ok()) << st.message();
    size_t index = size_t(chunks[i].offset[0] / kChunkRows * 2 + chunks[i].offset[1] / kChunkCols);
    EXPECT_EQ(out, plain[index]) << "chunk " << i;
  }
}

TEST(CodecsHdf5, ZstdChunksWrittenRaw) {
  expect_written_chunks_decode(32015, {3}, [](const Bytes& p) { return zstd_encode(p, 3); });
}

TEST(CodecsHdf5, BitshuffleLz4ChunksWrittenRaw) {
  // cd_values as bshuf_h5filter's set_local leaves them: version, version, elem size, block
  // size (0: default), compression 2 = LZ4.
  expect_written_chunks_decode(32008, {0, 4, 4, 0, 2},
                               [](const Bytes& p) { return bitshuffle_encode(p, 4, 2048, 2); });
}

TEST(CodecsHdf5, BitshuffleZstdChunksWrittenRaw) {
  expect_written_chunks_decode(32008, {0, 5, 4, 0, 3, 1},
                               [](const Bytes& p) { return bitshuffle_encode(p, 4, 2048, 3); });
}

}  // namespace
}  // namespace h5chunk
