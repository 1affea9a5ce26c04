// Bad input is an error naming the file, the dataset and the chunk: never a crash, never garbage
// returned as success. Also the fallback notes and the progress callback.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <atomic>
#include <fstream>
#include <thread>

#include "h5_fixture.h"
#include "h5chunk/hdf5_handle.h"
#include "support/temp_dir.h"

namespace h5chunk::testing {
namespace HUBFS_UNITY_ID {

using ::testing::HasSubstr;

void overwrite(const std::string& path, uint64_t offset, const Bytes& bytes) {
  std::fstream f(path, std::ios::in | std::ios::out | std::ios::binary);
  f.seekp(std::streamoff(offset));
  f.write(reinterpret_cast<const char*>(bytes.data()), std::streamsize(bytes.size()));
}

struct Corruptible {
  hubfs::testing::TempDir dir;
  std::string path = (dir / "c.h5").string();
  DatasetSpec spec;
  Bytes data;
  explicit Corruptible(Codec codec) {
    spec.shape = {4, 8, 256};
    spec.chunk = {1, 8, 256};
    spec.codec = codec;
    data = make_data(spec);
    write_dataset(path, spec, data);
  }
  // The error a fast read of everything gives after `damage` hits chunk 2's stored bytes.
  Status read_after(const std::function<void(const StoredChunk&)>& damage) {
    damage(stored_chunk(path, spec.name, {2, 0, 0}));
    auto file = File::open(path, quiet_options());
    if (!file.ok()) return file.status();
    auto dset = file->dataset(spec.name);
    if (!dset.ok()) return dset.status();
    auto got = dset->read(":", via(Route::kFastPath));
    return got.ok() ? Status::Ok() : got.status();
  }
};

void expect_names_chunk(const Status& s, const std::string& path) {
  EXPECT_FALSE(s.ok());
  EXPECT_EQ(s.code(), hubfs::Code::kCorrupt) << s.message();
  EXPECT_THAT(s.message(), HasSubstr(path));
  EXPECT_THAT(s.message(), HasSubstr("'/data'"));
  EXPECT_THAT(s.message(), HasSubstr("chunk [2, 0, 0]"));
}

// libhdf5 puts memory addresses in some messages: they differ from run to run (ASLR), so two
// runs over the same damaged file gave different error text. They are replaced; shorter hex
// numbers (flags, sizes, file offsets) stay.
TEST(Errors, Hdf5MessagesKeepNoMemoryAddresses) {
  EXPECT_EQ(without_pointers("can't unprotect entry 0x55d0c3a1b2c0 at 0x7ffd1234abcd."),
            "can't unprotect entry <pointer> at <pointer>.");
  EXPECT_EQ(without_pointers("flags 0x1f, address 0x12345678, 0X10000000a"), "flags 0x1f, address 0x12345678, <pointer>");
  EXPECT_EQ(without_pointers("0x"), "0x");
  EXPECT_EQ(without_pointers(""), "");
}

TEST(Errors, CorruptBloscChunk) {
  for (Codec codec : {Codec::kBloscLz4, Codec::kBloscZstdBit, Codec::kLz4, Codec::kDeflateShuffle,
                      Codec::kZstdDirect, Codec::kBitshuffleDirect}) {
    SCOPED_TRACE(codec_name(codec));
    Corruptible c(codec);
    Status s = c.read_after([&](const StoredChunk& chunk) {
      if (codec == Codec::kLz4) {
        // This data does not lz4-compress, so the block is stored raw and any payload is
        // "valid": break the block's size field instead.
        overwrite(c.path, chunk.offset + 12, {0x7f, 0xff, 0xff, 0xff});
        return;
      }
      // Garbage over the payload after the first 16 bytes (headers stay plausible).
      overwrite(c.path, chunk.offset + 16, codec_test::bytes_random(chunk.size - 16, 5));
    });
    expect_names_chunk(s, c.path);
  }
}

TEST(Errors, CorruptHeaderClaimingAWrongSize) {
  Corruptible c(Codec::kBloscLz4);
  Status s = c.read_after([&](const StoredChunk& chunk) {
    overwrite(c.path, chunk.offset + 4, {0x10, 0, 0, 0});  // blosc nbytes = 16
  });
  expect_names_chunk(s, c.path);
}

TEST(Errors, Fletcher32Mismatch) {
  Corruptible c(Codec::kFletcherDeflate);
  Status s = c.read_after([&](const StoredChunk& chunk) {
    overwrite(c.path, chunk.offset + chunk.size - 1, {0x5a});  // flip the checksum
  });
  expect_names_chunk(s, c.path);
}

TEST(Errors, TruncatedFile) {
  Corruptible c(Codec::kBloscLz4);
  auto file = File::open(c.path, quiet_options());
  auto dset = file->dataset("/data");
  ASSERT_TRUE(dset.ok());
  ASSERT_TRUE(dset->read(":", via(Route::kFastPath)).ok());  // the manifest is now remembered
  // Cut the file inside the last chunk.
  StoredChunk last = stored_chunk(c.path, "/data", {3, 0, 0});
  StoredChunk third = stored_chunk(c.path, "/data", {2, 0, 0});
  const StoredChunk& cut = last.offset > third.offset ? last : third;
  ASSERT_EQ(::truncate(c.path.c_str(), off_t(cut.offset + cut.size / 2)), 0);
  auto got = dset->read(":", via(Route::kFastPath));
  ASSERT_FALSE(got.ok());
  EXPECT_EQ(got.status().code(), hubfs::Code::kCorrupt);
  EXPECT_THAT(got.status().message(), HasSubstr("truncated"));
  EXPECT_THAT(got.status().message(), HasSubstr(c.path));
  // And opened afresh, HDF5 itself refuses the file with a message naming it.
  auto again = File::open(c.path, quiet_options());
  if (again.ok()) {
    auto d = again->dataset("/data");
    if (d.ok()) {
      EXPECT_FALSE(d->read(":", via(Route::kFastPath)).ok());
    }
  } else {
    EXPECT_THAT(again.status().message(), HasSubstr(c.path));
  }
}

TEST(Errors, BadRequestsAreInvalidArgumentNotCrashes) {
  Corruptible c(Codec::kBloscLz4);
  auto file = File::open(c.path, quiet_options());
  auto dset = file->dataset("/data");
  ASSERT_TRUE(dset.ok());
  for (const char* bad : {"4", "-5", "0,0,0,0", "...,...", "[0,4],::-1", "::0", "[0,9]", "a", "0:1:2:3", "[3,1],[8]",
                          "[True,False]", "[[0]]"}) {
    SCOPED_TRACE(bad);
    auto got = dset->read(bad, via(Route::kFastPath));
    ASSERT_FALSE(got.ok());
    EXPECT_EQ(got.status().code(), hubfs::Code::kInvalidArgument) << got.status().message();
  }
  std::vector<uint8_t> small(10);
  auto s = dset->read_into(Selection{}, small.data(), small.size());
  EXPECT_EQ(s.status().code(), hubfs::Code::kInvalidArgument);
  EXPECT_EQ(file->dataset("/nope").status().code(), hubfs::Code::kNotFound);
  EXPECT_EQ(File::open((c.dir / "missing.h5").string()).status().code(), hubfs::Code::kNotFound);
  std::ofstream((c.dir / "text.h5").string()) << "not hdf5";
  EXPECT_FALSE(File::open((c.dir / "text.h5").string()).ok());
}

TEST(Errors, VariableLengthDatasetIsRefusedWithAReason) {
  hubfs::testing::TempDir dir;
  const std::string path = (dir / "s.h5").string();
  hid_t f = open_for_write(path);
  hid_t t = H5Tcopy(H5T_C_S1);
  H5Tset_size(t, H5T_VARIABLE);
  hsize_t n = 3;
  hid_t space = H5Screate_simple(1, &n, nullptr);
  hid_t d = H5Dcreate2(f, "/names", t, space, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
  H5Dclose(d);
  hid_t fixed_type = H5Tcopy(H5T_C_S1);
  H5Tset_size(fixed_type, 8);  // fixed-length strings are read (as numpy 'S8')
  d = H5Dcreate2(f, "/fixed", fixed_type, space, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
  H5Dclose(d);
  H5Tclose(fixed_type);
  H5Sclose(space);
  H5Tclose(t);
  H5Fclose(f);
  auto file = File::open(path, quiet_options());
  auto dset = file->dataset("names");
  ASSERT_TRUE(dset.ok());
  EXPECT_FALSE(dset->info().numeric);
  EXPECT_FALSE(dset->info().readable);
  EXPECT_EQ(dset->info().unsupported_type, "variable-length string");
  auto got = dset->read(":");
  EXPECT_EQ(got.status().code(), hubfs::Code::kUnsupported);
  EXPECT_THAT(got.status().message(), HasSubstr("variable-length string"));
  auto fixed = file->dataset("fixed");
  ASSERT_TRUE(fixed.ok());
  EXPECT_TRUE(fixed->info().readable);
  EXPECT_EQ(fixed->info().unsupported_type, "");
  EXPECT_EQ(fixed->info().element.numpy, "'|S8'");
  auto strings = fixed->read(":");
  ASSERT_TRUE(strings.ok()) << strings.status().message();
  EXPECT_EQ(strings->nbytes(), 24u);
}

TEST(Notes, OncePerDatasetAndCauseNamingFileDatasetSizeCauseAndFix) {
  hubfs::testing::TempDir dir;
  const std::string path = (dir / "n.h5").string();
  DatasetSpec chunked;
  chunked.shape = {8, 64};
  chunked.chunk = {1, 64};
  chunked.codec = Codec::kBloscLz4;
  write_dataset(path, chunked, make_data(chunked));
  {
    // Integers of 24 bits in 4 bytes: H5Dread converts them, with a note.
    hid_t f = open_for_write(path);
    hsize_t shape[] = {8, 64};
    hid_t space = H5Screate_simple(2, shape, nullptr);
    hid_t t = H5Tcopy(H5T_STD_I32LE);
    H5Tset_precision(t, 24);
    hid_t d = H5Dcreate2(f, "/flat", t, space, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
    std::vector<int32_t> v(8 * 64, 7);
    H5Dwrite(d, H5T_NATIVE_INT32, H5S_ALL, H5S_ALL, H5P_DEFAULT, v.data());
    H5Dclose(d);
    H5Tclose(t);
    H5Sclose(space);
    H5Fclose(f);
  }

  std::vector<std::string> lines;
  Options options;
  options.log = [&](const std::string& line) { lines.push_back(line); };
  auto file = File::open(path, options);
  auto flat = file->dataset("/flat");
  auto data = file->dataset("/data");
  ASSERT_TRUE(flat.ok() && data.ok());
  for (int i = 0; i < 3; ++i) {
    ASSERT_TRUE(flat->read(":").ok());
    ASSERT_TRUE(flat->read("::-2,[3,1]").ok());  // the same cause: no second note
    ASSERT_TRUE(data->read("0:2").ok());  // small: H5Dread, but nothing to fix, so no note
    // Every selection maps to chunks: nothing to note, and forced, the fast path reads them.
    for (const char* sel : {"::2", "[3,1]", "::-1,[5,5,0]"}) {
      auto got = data->read(sel, via(Route::kFastPath));
      ASSERT_TRUE(got.ok()) << sel;
      EXPECT_TRUE(got->stats.fast_path) << sel << ": " << got->stats.fallback_cause;
    }
  }
  ASSERT_EQ(lines.size(), 1u);
  EXPECT_THAT(lines[0], HasSubstr(path));
  EXPECT_THAT(lines[0], HasSubstr("/flat"));
  EXPECT_THAT(lines[0], HasSubstr("2.0 KB"));
  EXPECT_THAT(lines[0], HasSubstr("precision"));
  EXPECT_THAT(lines[0], HasSubstr("re-save"));
}

TEST(Progress, ReportsEveryChunksCompressedSize) {
  hubfs::testing::TempDir dir;
  const std::string path = (dir / "p.h5").string();
  DatasetSpec spec;
  spec.shape = {12, 32, 32};
  spec.chunk = {1, 32, 32};
  spec.codec = Codec::kBloscLz4;
  write_dataset(path, spec, make_data(spec));
  uint64_t expected = 0;
  for (hsize_t i = 0; i < 12; ++i) expected += stored_chunk(path, "/data", {i, 0, 0}).size;

  auto file = File::open(path, quiet_options());
  auto dset = file->dataset("/data");
  std::atomic<uint64_t> calls{0}, bytes{0};
  ReadOptions ro = via(Route::kFastPath);
  ro.progress = [&](uint64_t b) {
    calls += 1;
    bytes += b;
  };
  auto got = dset->read(":", ro);
  ASSERT_TRUE(got.ok());
  EXPECT_EQ(calls.load(), 12u);
  EXPECT_EQ(bytes.load(), expected);
  EXPECT_EQ(got->stats.compressed_bytes, expected);
  EXPECT_EQ(got->stats.chunks, 12u);
}

TEST(Threads, CompressedBytesInFlightStayUnderTheLimit) {
  hubfs::testing::TempDir dir;
  const std::string path = (dir / "b.h5").string();
  DatasetSpec spec;
  spec.shape = {24, 64, 64};
  spec.chunk = {1, 64, 64};
  spec.codec = Codec::kBloscLz4;
  const Bytes data = make_data(spec);
  write_dataset(path, spec, data);
  uint64_t largest = 0, total = 0;
  for (hsize_t i = 0; i < 24; ++i) {
    auto c = stored_chunk(path, "/data", {i, 0, 0});
    largest = std::max<uint64_t>(largest, c.size);
    total += c.size;
  }
  for (uint64_t limit : {uint64_t(1), largest * 2, total * 2}) {
    SCOPED_TRACE(limit);
    Options options = quiet_options(4);
    options.max_bytes_in_flight = limit;
    auto file = File::open(path, options);
    auto dset = file->dataset("/data");
    auto got = dset->read(":", via(Route::kFastPath));
    ASSERT_TRUE(got.ok());
    EXPECT_EQ(bytes_of(*got), data);
    EXPECT_LE(got->stats.peak_bytes_in_flight, std::max(limit, largest));  // one chunk always fits
    EXPECT_GT(got->stats.peak_bytes_in_flight, 0u);
  }
}

TEST(Threads, ConcurrentReadsOfOneDatasetAgree) {
  hubfs::testing::TempDir dir;
  const std::string path = (dir / "t.h5").string();
  DatasetSpec spec;
  spec.shape = {16, 16, 64};
  spec.chunk = {1, 16, 64};
  spec.codec = Codec::kBloscZstdBit;
  const Bytes data = make_data(spec);
  write_dataset(path, spec, data);
  auto file = File::open(path, quiet_options(3));
  auto dset = file->dataset("/data");
  ASSERT_TRUE(dset.ok());
  std::atomic<int> bad{0};
  std::vector<std::thread> readers;
  for (int t = 0; t < 4; ++t) {
    readers.emplace_back([&] {
      for (int i = 0; i < 10; ++i) {
        auto got = dset->read(":", via(Route::kFastPath));
        if (!got.ok() || bytes_of(*got) != data) ++bad;
      }
    });
  }
  for (auto& r : readers) r.join();
  EXPECT_EQ(bad.load(), 0);
}

}  // namespace
}  // namespace h5chunk::testing
