// Scale-offset and n-bit chunks are checked before H5Dread decodes them (filter_checks.h):
// libhdf5 1.10.8's decoders trust a chunk's header, and a damaged one crashed H5Dread. A damaged
// chunk is an error naming it, in the library and from the command; sound ones read as H5Dread
// reads them.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>

#include "h5_fixture.h"
#include "h5chunk/filter_checks.h"
#include "hostile_util.h"
#include "support/temp_dir.h"

namespace h5chunk::testing {
namespace HUBFS_UNITY_ID {

using ::testing::HasSubstr;

FilterStep scaleoffset_int16(unsigned nelmts) {
  // As H5Pset_scaleoffset(H5Z_SO_INT, default minbits) stores them: type, factor, elements,
  // class (integer), size, sign, order, fill available, then the fill value.
  return {kScaleOffsetFilter, 0, {2, 0, nelmts, 0, 2, 1, 0, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0}, "scaleoffset"};
}

Bytes so_chunk(uint32_t minbits, size_t payload) {
  Bytes b(21 + payload, 0);
  for (int i = 0; i < 4; ++i) b[i] = uint8_t(minbits >> (8 * i));
  b[4] = 8;
  return b;
}

TEST(FilterChecks, ScaleOffsetHeaderAgainstTheFiltersParameters) {
  const FilterStep step = scaleoffset_int16(48);
  auto check = [&](const Bytes& in, uint64_t elems = 48) {
    return check_unchecked_filter_input(step, 2, elems, in.data(), in.size());
  };
  EXPECT_TRUE(check(so_chunk(5, 30)).ok());                                  // 48 x 5 bits = 30 bytes
  EXPECT_THAT(check(so_chunk(5, 29)).message(), HasSubstr("need 51"));       // one byte short
  EXPECT_THAT(check(so_chunk(17, 200)).message(), HasSubstr("17 bits per element, more than the 16"));
  EXPECT_THAT(check(so_chunk(16, 95)).message(), HasSubstr("need 117"));     // full precision: a copy
  EXPECT_TRUE(check(so_chunk(16, 96)).ok());
  EXPECT_THAT(check(Bytes(20, 0)).message(), HasSubstr("less than its 21-byte header"));
  EXPECT_THAT(check(so_chunk(5, 30), 40).message(), HasSubstr("48 elements of 2 bytes"));
  EXPECT_EQ(check(so_chunk(99, 0)).code(), hubfs::Code::kCorrupt);
}

TEST(FilterChecks, NbitSizesAgainstTheFiltersParameters) {
  // Atomic int16 at 12 bits of precision, offset 2.
  const FilterStep step{kNbitFilter, 0, {8, 0, 10, 1, 2, 0, 12, 2}, "nbit"};
  auto check = [&](size_t in_size, const FilterStep& s) {
    Bytes in(in_size, 0);
    return check_unchecked_filter_input(s, 2, 10, in.data(), in.size());
  };
  EXPECT_TRUE(check(15, step).ok());  // 10 x 12 bits
  EXPECT_THAT(check(14, step).message(), HasSubstr("need 15"));
  FilterStep wide = step;
  wide.cd_values[6] = 15;  // 15 bits at offset 2 do not fit 16
  EXPECT_THAT(check(30, wide).message(), HasSubstr("does not fit"));
  FilterStep other = step;
  other.cd_values[2] = 11;
  EXPECT_THAT(check(30, other).message(), HasSubstr("11 elements per chunk"));
}

TEST(FilterChecks, OnlyAChunkWhoseSoleFilterIsUncheckedIsChecked) {
  const std::vector<FilterStep> so_deflate = {scaleoffset_int16(4), {1, 0, {4}, "deflate"}};
  EXPECT_EQ(sole_unchecked_filter(so_deflate, 0), nullptr);           // its input is deflate's output
  EXPECT_EQ(sole_unchecked_filter(so_deflate, 2), &so_deflate[0]);    // deflate skipped
  EXPECT_EQ(sole_unchecked_filter({{1, 0, {4}, "deflate"}}, 0), nullptr);
}

// A scale-offset int16 dataset whose chunk 1 has a header asking for 200 bits per element.
class DamagedScaleOffset : public ::testing::Test {
 protected:
  void SetUp() override {
    spec.dtype = int16_t_();
    spec.shape = {16, 12};
    spec.chunk = {4, 12};
    spec.codec = Codec::kScaleOffset;
    data = make_data(spec);
    write_dataset(pristine, spec, data);
    Bytes bytes = read_file_bytes(pristine);
    const StoredChunk c = stored_chunk(pristine, "/data", {4, 0});
    ASSERT_GE(c.size, 21u);
    bytes[c.offset] = 200;  // minbits, little-endian
    bytes[c.offset + 1] = bytes[c.offset + 2] = bytes[c.offset + 3] = 0;
    write_file_bytes(damaged, bytes);
  }
  hubfs::testing::TempDir dir;
  std::string pristine = (dir / "so.h5").string(), damaged = (dir / "so_damaged.h5").string();
  DatasetSpec spec;
  Bytes data;
};

TEST_F(DamagedScaleOffset, SoundChunksReadAsH5DreadReadsThem) {
  auto file = File::open(pristine, quiet_options());
  ASSERT_TRUE(file.ok()) << file.status().message();
  auto d = file->dataset("/data");
  ASSERT_TRUE(d.ok());
  EXPECT_FALSE(d->info().fast_path_blocker.empty());  // H5Dread decodes scale-offset
  for (Route route : {Route::kAuto, Route::kH5Dread}) {
    auto a = d->read("", via(route));
    ASSERT_TRUE(a.ok()) << a.status().message();
    EXPECT_EQ(bytes_of(*a), h5dread_all(pristine, "/data", H5T_NATIVE_INT16, 2));
  }
}

TEST_F(DamagedScaleOffset, ADamagedHeaderIsAnErrorNamingTheChunk) {
  auto file = File::open(damaged, quiet_options());
  ASSERT_TRUE(file.ok()) << file.status().message();
  auto d = file->dataset("/data");
  ASSERT_TRUE(d.ok());
  for (const char* sel : {"", "5", "4:6, 3"}) {
    auto a = d->read(sel);
    ASSERT_FALSE(a.ok()) << sel;
    EXPECT_EQ(a.status().code(), hubfs::Code::kCorrupt);
    EXPECT_THAT(a.status().message(), HasSubstr("200 bits per element, more than the 16")) << sel;
    EXPECT_THAT(a.status().message(), HasSubstr("chunk")) << sel;
  }
  auto sound = d->read("0:4");  // chunk 0 is sound
  ASSERT_TRUE(sound.ok()) << sound.status().message();
  EXPECT_EQ(bytes_of(*sound), Bytes(data.begin(), data.begin() + 4 * 12 * 2));
}

TEST_F(DamagedScaleOffset, TheCommandGivesTheNamedErrorNotASegfault) {
  const std::string binary = std::string(HUBFS_BIN_DIR) + "/h5chunk";
  ASSERT_TRUE(std::filesystem::exists(binary)) << binary << " not built (test_h5chunk depends on it)";
  const std::string out = (dir / "out.bin").string();
  FILE* p = ::popen((binary + " read " + damaged + " /data 5 -o " + out + " 2>&1").c_str(), "r");
  std::string text;
  char buf[4096];
  for (size_t n; (n = std::fread(buf, 1, sizeof buf, p)) > 0;) text.append(buf, n);
  const int status = ::pclose(p);
  ASSERT_TRUE(WIFEXITED(status)) << "killed by a signal: " << text;
  EXPECT_EQ(WEXITSTATUS(status), 1) << text;
  EXPECT_THAT(text, HasSubstr("scale-offset: the chunk's header gives 200 bits per element"));
  EXPECT_THAT(text, HasSubstr("dataset '/data'"));
  EXPECT_FALSE(std::filesystem::exists(out));
}

// The filter's name comes from the file: damaged, it need not be UTF-8. The command's JSON line
// replaces the bad bytes (nlohmann::json threw on them, and the command aborted: mutants 100569
// and 100882 of the determinism corpus).
TEST_F(DamagedScaleOffset, TheCommandPrintsAFilterNameThatIsNotUtf8) {
  const std::string binary = std::string(HUBFS_BIN_DIR) + "/h5chunk";
  ASSERT_TRUE(std::filesystem::exists(binary)) << binary << " not built (test_h5chunk depends on it)";
  Bytes bytes = read_file_bytes(pristine);
  const std::string name = "scaleoffset";
  auto at = std::search(bytes.begin(), bytes.end(), name.begin(), name.end());
  ASSERT_NE(at, bytes.end()) << "the filter pipeline message names its filter";
  at[5] = 0xb8;  // "scale\xb8ffset"
  const std::string file = (dir / "bad_name.h5").string();
  write_file_bytes(file, bytes);
  FILE* p = ::popen((binary + " read " + file + " /data 5 2>/dev/null").c_str(), "r");
  std::string text;
  char buf[4096];
  for (size_t n; (n = std::fread(buf, 1, sizeof buf, p)) > 0;) text.append(buf, n);
  const int status = ::pclose(p);
  ASSERT_TRUE(WIFEXITED(status)) << "killed by a signal: " << text;
  EXPECT_EQ(WEXITSTATUS(status), 0) << text;
  EXPECT_THAT(text, HasSubstr("\"fallback\":\"is compressed with scale\xef\xbf\xbd" "ffset (6)"));
}

}  // namespace HUBFS_UNITY_ID
}  // namespace h5chunk::testing
