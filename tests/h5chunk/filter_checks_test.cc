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
#include <tuple>

#include "h5_fixture.h"
#include "h5chunk/filter_checks.h"
#include "hostile_util.h"
#include "mutation_harness.h"
#include "support/mount_harness.h"
#include "support/temp_dir.h"

namespace h5chunk::testing {
namespace HUBFS_UNITY_ID {

using ::testing::HasSubstr;
using codec_test::deflate_encode;
using codec_test::fletcher_append;
using codec_test::reference_shuffle;

// Environment for a command whose helper is to die of SIGSEGV: a sanitizer build's SEGV handler
// would otherwise report it and exit with a status, where an ordinary build dies of the signal.
const std::string kSignalsAsSignals =
    "ASAN_OPTIONS=handle_segv=0:$ASAN_OPTIONS TSAN_OPTIONS=handle_segv=0:$TSAN_OPTIONS ";

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

TEST(FilterChecks, TheUncheckedFiltersInputIsWhatTheFiltersAfterItLeave) {
  const FilterStep deflate{1, 0, {4}, "deflate"}, shuffle{2, 0, {2}, "shuffle"}, fletcher{3, 0, {}, "fletcher32"};
  const FilterStep szip{4, 0, {}, "szip"};  // a filter h5chunk does not decode
  const std::vector<FilterStep> so_deflate = {scaleoffset_int16(4), deflate};
  UncheckedStage s = unchecked_stage(so_deflate, 0);
  ASSERT_EQ(s.step, &so_deflate[0]);
  EXPECT_TRUE(s.undo_after);  // its input is deflate's output
  ASSERT_EQ(s.after.size(), 1u);
  EXPECT_EQ(s.after[0].id, 1u);
  s = unchecked_stage(so_deflate, 2);  // deflate skipped for this chunk
  EXPECT_EQ(s.step, &so_deflate[0]);
  EXPECT_FALSE(s.undo_after);
  const std::vector<FilterStep> shuffle_so = {shuffle, scaleoffset_int16(4)};
  s = unchecked_stage(shuffle_so, 0);  // last applied: the stored bytes are its output
  EXPECT_EQ(s.step, &shuffle_so[1]);
  EXPECT_FALSE(s.undo_after);
  const std::vector<FilterStep> all = {scaleoffset_int16(4), shuffle, deflate, fletcher};
  s = unchecked_stage(all, 0b0100);  // deflate skipped: shuffle and fletcher32 undone
  EXPECT_EQ(s.step, &all[0]);
  EXPECT_EQ(s.after_mask, 0b010u);
  EXPECT_TRUE(s.undo_after);
  EXPECT_EQ(unchecked_stage({scaleoffset_int16(4), szip}, 0).step, nullptr);  // its input cannot be had
  EXPECT_EQ(unchecked_stage({deflate}, 0).step, nullptr);
  EXPECT_EQ(unchecked_stage(so_deflate, 1).step, nullptr);  // scale-offset skipped
}

// Scale-offset and n-bit among other filters: a chunk whose scale-offset header (or n-bit size)
// is damaged is refused, though the filters after it must be undone to see it; sound chunks read
// as H5Dread reads them. Without the stage (filter_checks.h), such chunks went to H5Dread unchecked.
TEST(FilterChecks, AmongOtherFiltersTheHeaderIsCheckedAfterTheFiltersAfterIt) {
  hubfs::testing::TempDir dir;
  const Bytes so = so_chunk(200, 96);  // 200 bits per element of an int16 chunk
  const struct {
    Codec codec;
    Bytes stored;  // chunk 1, damaged, as the pipeline stores it
    const char* error;
  } cases[] = {
      {Codec::kScaleOffsetShuffleDeflate, deflate_encode(reference_shuffle(so, 2), 4), "200 bits per element"},
      {Codec::kShuffleScaleOffset, so, "200 bits per element"},
      {Codec::kScaleOffsetFletcher, fletcher_append(so), "200 bits per element"},
      {Codec::kNbitDeflate, deflate_encode(Bytes(3, 0), 4), "n-bit: "},
  };
  for (const auto& c : cases) {
    SCOPED_TRACE(codec_name(c.codec));
    DatasetSpec spec;
    spec.dtype = int16_t_();
    spec.shape = {16, 12};
    spec.chunk = {4, 12};
    spec.codec = c.codec;
    const Bytes data = make_data(spec);
    const std::string pristine = (dir / (std::string(codec_name(c.codec)) + ".h5")).string();
    const std::string damaged = (dir / (std::string(codec_name(c.codec)) + "_damaged.h5")).string();
    write_dataset(pristine, spec, data);
    write_dataset(damaged, spec, data);
    write_raw_chunk(damaged, "/data", {4, 0}, 0, c.stored);
    {
      auto file = File::open(pristine, quiet_options());
      ASSERT_TRUE(file.ok()) << file.status().message();
      auto d = file->dataset("/data");
      ASSERT_TRUE(d.ok());
      for (Route route : {Route::kAuto, Route::kH5Dread}) {
        auto a = d->read("", via(route));
        ASSERT_TRUE(a.ok()) << a.status().message();
        EXPECT_EQ(bytes_of(*a), h5dread_all(pristine, "/data", H5T_NATIVE_INT16, 2));
      }
    }
    auto file = File::open(damaged, quiet_options());
    ASSERT_TRUE(file.ok()) << file.status().message();
    auto d = file->dataset("/data");
    ASSERT_TRUE(d.ok());
    auto a = d->read("5");
    ASSERT_FALSE(a.ok());
    EXPECT_EQ(a.status().code(), hubfs::Code::kCorrupt);
    EXPECT_THAT(a.status().message(), HasSubstr(c.error));
    EXPECT_THAT(a.status().message(), HasSubstr("chunk"));
    auto sound = d->read("0:4");  // chunk 0 is sound
    ASSERT_TRUE(sound.ok()) << sound.status().message();
    EXPECT_EQ(bytes_of(*sound), Bytes(data.begin(), data.begin() + 4 * 12 * 2));
  }
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

// The command runs H5Dread of a scale-offset dataset in a helper process (tools/h5chunk_helper.h):
// a crash there (made by the helper's test switch, as a damaged file can make libhdf5 crash) is an
// error naming the dataset and the signal, exit status 1, no output file; an exit without a result
// is one too. Sound, the helper's bytes are H5Dread's.
TEST_F(DamagedScaleOffset, TheCommandNamesACrashOfItsHelperProcess) {
  const std::string binary = std::string(HUBFS_BIN_DIR) + "/h5chunk";
  ASSERT_TRUE(std::filesystem::exists(binary)) << binary << " not built (test_h5chunk depends on it)";
  const std::string out = (dir / "out.bin").string();
  auto run = [&](const std::string& env, const std::string& sel) {
    const hubfs::testing::CommandResult r = hubfs::testing::run_command(
        kSignalsAsSignals + env + " " + binary + " read " + pristine + " /data '" + sel + "' -o " + out);
    return std::make_pair(r.exit_code, r.output);
  };
  auto [code, text] = run("H5CHUNK_HELPER_TEST_FAULT=segv", "");
  EXPECT_EQ(code, 1) << text;
  EXPECT_THAT(text, HasSubstr("dataset '/data': libhdf5 crashed reading it (signal 11, SIGSEGV)"));
  EXPECT_THAT(text, HasSubstr("scale-offset"));
  EXPECT_FALSE(std::filesystem::exists(out));
  std::tie(code, text) = run("H5CHUNK_HELPER_TEST_FAULT=exit", "");
  EXPECT_EQ(code, 1) << text;
  EXPECT_THAT(text, HasSubstr("helper process for H5Dread ended with status 3 and no result"));
  EXPECT_FALSE(std::filesystem::exists(out));
  // Sound: exact, whatever slabs the helper cuts the read into (here 1 to 3 rows of 24 bytes).
  const Bytes all = h5dread_all(pristine, "/data", H5T_NATIVE_INT16, 2);
  for (const char* slab : {"24", "50", "100000"}) {
    std::tie(code, text) = run(std::string("H5CHUNK_HELPER_TEST_SLAB_BYTES=") + slab, "");
    ASSERT_EQ(code, 0) << text;
    EXPECT_THAT(text, HasSubstr("\"helper_process\":\"the scale-offset filter"));
    EXPECT_EQ(read_file_bytes(out), all) << slab;
  }
  // Reversed, stepped and listed axes: rows 14, 11, ..., 2 and columns 7, 0, 7.
  std::tie(code, text) = run("H5CHUNK_HELPER_TEST_SLAB_BYTES=10", "14:0:-3, [7,0,7]");
  ASSERT_EQ(code, 0) << text;
  Bytes want;
  for (int r = 14; r > 0; r -= 3) {
    for (int col : {7, 0, 7}) want.insert(want.end(), all.begin() + (r * 12 + col) * 2, all.begin() + (r * 12 + col) * 2 + 2);
  }
  EXPECT_EQ(read_file_bytes(out), want);
}

// A real file libhdf5 crashes on: mutant 100239 of the determinism corpus, the shuffle+scale-offset
// float seed file with three bits of its dataset's object header flipped. h5chunk's checks see
// nothing wrong, and H5Dread (h5py's too) dies of SIGSEGV; the command, whose H5Dread runs in its
// helper process, fails with an error naming the dataset and the signal instead.
TEST(FilterChecks, TheCommandSurvivesAFileOnWhichH5DreadCrashes) {
  const std::string binary = std::string(HUBFS_BIN_DIR) + "/h5chunk";
  ASSERT_TRUE(std::filesystem::exists(binary)) << binary << " not built (test_h5chunk depends on it)";
  hubfs::testing::TempDir dir;
  DatasetSpec spec;
  spec.name = "/d";
  spec.dtype = float32_();
  spec.shape = {16, 12};
  spec.chunk = {8, 6};
  spec.codec = Codec::kShuffleScaleOffset;
  const mutation::Fixture fx = mutation::make_fixture_from(dir.path().string(), "v1_shuffle_scaleoffset_float", {spec}, false);
  Bytes bytes = fx.bytes;
  ASSERT_GT(bytes.size(), 986u);
  bytes[986] ^= 224;  // as the corpus's mutant describes it: @986^224 @928^64 @805^2
  bytes[928] ^= 64;
  bytes[805] ^= 2;
  const std::string file = (dir / "m100239.h5").string();
  write_file_bytes(file, bytes);
  using hubfs::testing::run_command;
  // The premise: H5Dread crashes on this file, in a fresh process: the helper itself, run directly
  // (exec'd by the shell, so its parent is this test, as --parent says). Not in a forked child of
  // this test: whether the damaged read faults there depends on the heap and libhdf5 state the
  // earlier tests of this program left behind (it did not after BufferPool's and Cancel's tests).
  const auto premise =
      run_command(kSignalsAsSignals + "exec " + binary + " h5dread-helper " + file + " /d --parent \"$PPID\" </dev/null");
  // (Under AddressSanitizer its SEGV handler, or the overflow check before it, reports and ends it.)
  ASSERT_TRUE(WIFSIGNALED(premise.wait_status) || premise.output.find("AddressSanitizer") != std::string::npos)
      << "status " << premise.wait_status << ": " << premise.output;
  const std::string out = (dir / "out.bin").string();
  const auto command = run_command(kSignalsAsSignals + binary + " read " + file + " /d -o " + out);
  const int status = command.wait_status;
  const std::string& text = command.output;
  ASSERT_TRUE(WIFEXITED(status)) << "the command was killed by a signal: " << text;
  EXPECT_EQ(WEXITSTATUS(status), 1) << text;
  // SIGSEGV; under AddressSanitizer SIGABRT, which catches the overflow before it faults.
  EXPECT_THAT(text, HasSubstr("dataset '/d': libhdf5 crashed reading it (signal "));
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
