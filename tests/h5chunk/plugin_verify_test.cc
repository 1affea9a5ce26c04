// Chunks of datasets filtered by third-party plugins (LZ4, Blosc, Zstd, bitshuffle) are checked
// by h5chunk's own decoders before H5Dread is handed them. Those plugins do not all check their
// input: given a chunk whose stored size a damaged index understated, Debian's LZ4 plugin
// returned heap bytes, different on each run (mutation fuzz seed 21077). Here such a chunk is
// made on purpose: a valid stored chunk cut short and written back with H5Dwrite_chunk, so the
// index records the shorter size. Every route but Route::kH5Dread must refuse every read that
// touches it, naming the chunk, and still serve the chunks around it exactly.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>

#include "h5_fixture.h"
#include "h5chunk/hdf5_handle.h"
#include "hostile_util.h"
#include "support/temp_dir.h"

namespace h5chunk::testing {
namespace HUBFS_UNITY_ID {

using ::testing::HasSubstr;

// The chunk whose stored bytes are cut short: row 3 of an (8, 256) dataset in one-row chunks.
constexpr hsize_t kShortRow = 3;

// Cuts the stored bytes of the chunk at `origin` to two thirds of their length.
void shorten_chunk(const std::string& path, const std::string& name, const std::vector<hsize_t>& origin) {
  const StoredChunk at = stored_chunk(path, name, origin);
  const Bytes file = read_file_bytes(path);
  ASSERT_LE(at.offset + at.size, file.size());
  ASSERT_GT(at.size, 48u) << "the chunk must be long enough to cut";
  const Bytes cut(file.begin() + long(at.offset), file.begin() + long(at.offset + at.size * 2 / 3));
  write_raw_chunk(path, name, origin, at.mask, cut);
  ASSERT_EQ(stored_chunk(path, name, origin).size, cut.size());
}

struct ShortChunkFile {
  hubfs::testing::TempDir dir;
  std::string path = (dir / "short.h5").string();
  DatasetSpec spec;
  Bytes data;

  explicit ShortChunkFile(Codec codec, DType dtype = float32_()) {
    spec.shape = {8, 256};
    spec.chunk = {1, 256};
    spec.dtype = dtype;
    spec.codec = codec;
    data = make_data(spec, 7);
    write_dataset(path, spec, data);
    shorten_chunk(path, spec.name, {kShortRow, 0});
  }

  Bytes rows(hsize_t first, hsize_t end) const {
    const size_t row = spec.shape[1] * spec.dtype.size;
    return Bytes(data.begin() + long(first * row), data.begin() + long(end * row));
  }
};

class ShortStoredChunk : public ::testing::TestWithParam<Codec> {};

TEST_P(ShortStoredChunk, IsAnErrorNamingTheChunkOnEveryRouteButH5Dread) {
  ShortChunkFile f(GetParam());
  auto file = File::open(f.path, quiet_options());
  ASSERT_TRUE(file.ok()) << file.status().message();
  auto ds = file->dataset(f.spec.name);
  ASSERT_TRUE(ds.ok()) << ds.status().message();
  for (Route route : {Route::kAuto, Route::kFastPath, Route::kFastOnly}) {
    SCOPED_TRACE("route " + std::to_string(int(route)));
    // Each read is small (1 KiB per row): on the automatic route H5Dread serves it.
    for (const char* sel : {"3", "2:5", ":", "3, 7:9", "-5"}) {
      SCOPED_TRACE(sel);
      auto r = ds->read(sel, via(route));
      ASSERT_FALSE(r.ok()) << "read returned " << r->nbytes() << " bytes from a chunk cut short";
      EXPECT_THAT(r.status().message(), HasSubstr("chunk [3, 0] (elements from (3, 0))"));
    }
    // The chunks around it read exactly, on the route they always took.
    auto before = ds->read("0:3", via(route));
    ASSERT_TRUE(before.ok()) << before.status().message();
    EXPECT_EQ(bytes_of(*before), f.rows(0, 3));
    auto after = ds->read("4:8", via(route));
    ASSERT_TRUE(after.ok()) << after.status().message();
    EXPECT_EQ(bytes_of(*after), f.rows(4, 8));
    if (route == Route::kAuto && h5dread_can_decode(GetParam())) {
      // Still H5Dread's read (its chunk cache serves loops of small reads), after the check.
      EXPECT_THAT(after->stats.fallback_cause, HasSubstr("small read"));
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Plugins, ShortStoredChunk,
                         ::testing::Values(Codec::kLz4, Codec::kBloscLz4, Codec::kBloscZstdBit,
                                           Codec::kZstdDirect, Codec::kBitshuffleDirect),
                         [](const auto& info) { return std::string(codec_name(info.param)); });

// Fuzz seed 21077's damage itself: the v1 B-tree key of an LZ4 chunk patched to a smaller
// stored size (the tree has no checksum; libhdf5's lookup reads the same key, so the cross-check
// agrees). The chunk's bytes stay where they were, longer than the key says.
TEST(ShortStoredChunkSize, PatchedIntoAV1BTreeKeyIsAnErrorOnEveryRouteButH5Dread) {
  hubfs::testing::TempDir dir;
  const std::string path = (dir / "key.h5").string();
  DatasetSpec spec;
  spec.shape = {8, 256};
  spec.chunk = {1, 256};
  spec.codec = Codec::kLz4;
  const Bytes data = make_data(spec, 7);
  write_dataset(path, spec, data);
  const StoredChunk at = stored_chunk(path, spec.name, {kShortRow, 0});
  // A v1 B-tree chunk key: stored size (u32), filter mask (u32), then the chunk's origin and a
  // trailing 0 for the element axis (u64 each), all little-endian.
  Bytes key(8 + 3 * 8, 0);
  for (int i = 0; i < 4; ++i) key[i] = uint8_t(at.size >> (8 * i));
  for (int i = 0; i < 4; ++i) key[4 + i] = uint8_t(at.mask >> (8 * i));
  put_le64(&key[8], kShortRow);
  Bytes file = read_file_bytes(path);
  auto hit = std::search(file.begin(), file.end(), key.begin(), key.end());
  ASSERT_NE(hit, file.end()) << "no v1 B-tree key for chunk (3, 0) in " << path;
  ASSERT_EQ(std::search(hit + 1, file.end(), key.begin(), key.end()), file.end()) << "the key is not unique";
  const uint32_t smaller = uint32_t(at.size * 2 / 3);
  for (int i = 0; i < 4; ++i) hit[i] = uint8_t(smaller >> (8 * i));
  write_file_bytes(path, file);
  ASSERT_EQ(stored_chunk(path, spec.name, {kShortRow, 0}).size, smaller);

  auto f = File::open(path, quiet_options());
  ASSERT_TRUE(f.ok()) << f.status().message();
  auto ds = f->dataset(spec.name);
  ASSERT_TRUE(ds.ok()) << ds.status().message();
  for (Route route : {Route::kAuto, Route::kFastPath, Route::kFastOnly}) {
    SCOPED_TRACE("route " + std::to_string(int(route)));
    for (const char* sel : {"3", ":", "3, 0"}) {
      SCOPED_TRACE(sel);
      auto r = ds->read(sel, via(route));
      ASSERT_FALSE(r.ok()) << "read returned " << r->nbytes() << " bytes from a chunk whose size was cut";
      EXPECT_THAT(r.status().message(), HasSubstr("chunk [3, 0] (elements from (3, 0))"));
      EXPECT_THAT(r.status().message(), HasSubstr("lz4"));
    }
    auto fine = ds->read("4:8", via(route));
    ASSERT_TRUE(fine.ok()) << fine.status().message();
    const size_t row = spec.shape[1] * spec.dtype.size;
    EXPECT_EQ(bytes_of(*fine), Bytes(data.begin() + long(4 * row), data.end()));
  }
}

// A dataset the fast path cannot return (space-padded strings: H5Dread converts them) still
// has LZ4 chunks h5chunk can decode: every read H5Dread serves, small or not, is checked first.
TEST(ShortStoredChunkOfAnH5DreadOnlyType, IsRefusedBeforeH5Dread) {
  Hid type(H5Tcopy(H5T_C_S1));
  H5Tset_size(type.get(), 8);  // make_data writes 8-byte values into other types
  H5Tset_strpad(type.get(), H5T_STR_SPACEPAD);
  ShortChunkFile f(Codec::kLz4, DType{type.get(), 8, "space-padded string"});
  auto file = File::open(f.path, quiet_options());
  ASSERT_TRUE(file.ok()) << file.status().message();
  auto ds = file->dataset(f.spec.name);
  ASSERT_TRUE(ds.ok()) << ds.status().message();
  ASSERT_FALSE(ds->info().fast_path_blocker.empty()) << "space-padded strings now take the fast path: pick another type";
  for (const char* sel : {"3", ":"}) {
    SCOPED_TRACE(sel);
    auto r = ds->read(sel);
    ASSERT_FALSE(r.ok()) << "read returned " << r->nbytes() << " bytes from a chunk cut short";
    EXPECT_THAT(r.status().message(), HasSubstr("chunk [3, 0]"));
  }
  auto fine = ds->read("0:3");
  ASSERT_TRUE(fine.ok()) << fine.status().message();
  EXPECT_FALSE(fine->stats.fallback_cause.empty());
}

}  // namespace
}  // namespace h5chunk::testing
