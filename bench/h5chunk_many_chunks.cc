// First read of a whole many-chunk dataset: h5chunk (chunk index read from the file, see
// core/h5chunk/chunk_index.h) against H5Dread, in the same run.
//
//   bench_h5chunk_many_chunks [--threads N] [--repeat R] [--dir DIR]
//
// Writes (once, into DIR, default /tmp/h5chunk_bench) float32 datasets of 16,384 chunks of
// 4 KiB and 100,000 chunks of 1 KiB, each uncompressed and shuffle + deflate level 1, in the
// default file format (v1 B-tree chunk index) and libver latest (fixed array index), plus a
// 100,000-chunk dataset with an unlimited axis (extensible array). Each timing opens the file
// afresh, so h5chunk pays for reading the chunk index and H5Dread for its own lookups; the file
// is in the page cache for both (read once beforehand). Best of R.
#include <hdf5.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include "h5chunk/h5chunk.h"

namespace {

using Clock = std::chrono::steady_clock;

double ms_since(Clock::time_point t0) {
  return std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
}

struct Case {
  std::string file, dataset;
  hsize_t chunks, chunk_elems;
  bool deflate, latest, unlimited;
};

bool exists(const std::string& p) { return ::access(p.c_str(), R_OK) == 0; }

void write_case(const std::string& path, const Case& c) {
  hid_t fapl = H5Pcreate(H5P_FILE_ACCESS);
  if (c.latest) H5Pset_libver_bounds(fapl, H5F_LIBVER_LATEST, H5F_LIBVER_LATEST);
  hid_t f = H5Fcreate(path.c_str(), H5F_ACC_TRUNC, H5P_DEFAULT, fapl);
  const hsize_t shape[2] = {c.chunks, c.chunk_elems}, chunk[2] = {1, c.chunk_elems};
  const hsize_t maxdims[2] = {c.unlimited ? H5S_UNLIMITED : c.chunks, c.chunk_elems};
  hid_t space = H5Screate_simple(2, shape, maxdims);
  hid_t dcpl = H5Pcreate(H5P_DATASET_CREATE);
  H5Pset_chunk(dcpl, 2, chunk);
  if (c.deflate) {
    H5Pset_shuffle(dcpl);
    H5Pset_deflate(dcpl, 1);
  }
  hid_t d = H5Dcreate2(f, c.dataset.c_str(), H5T_NATIVE_FLOAT, space, H5P_DEFAULT, dcpl, H5P_DEFAULT);
  std::vector<float> data(c.chunks * c.chunk_elems);
  for (size_t i = 0; i < data.size(); ++i) data[i] = std::round(100.f * std::sin(float(i) * 0.001f));
  if (H5Dwrite(d, H5T_NATIVE_FLOAT, H5S_ALL, H5S_ALL, H5P_DEFAULT, data.data()) < 0) {
    std::fprintf(stderr, "cannot write %s\n", path.c_str());
    std::exit(1);
  }
  H5Dclose(d);
  H5Pclose(dcpl);
  H5Sclose(space);
  H5Fclose(f);
  H5Pclose(fapl);
}

void warm(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::vector<char> buf(1 << 20);
  while (in.read(buf.data(), std::streamsize(buf.size())) || in.gcount() > 0) {
  }
}

double h5dread_ms(const std::string& path, const Case& c, std::vector<float>& out) {
  auto t0 = Clock::now();
  hid_t f = H5Fopen(path.c_str(), H5F_ACC_RDONLY, H5P_DEFAULT);
  hid_t d = H5Dopen2(f, c.dataset.c_str(), H5P_DEFAULT);
  const herr_t rc = H5Dread(d, H5T_NATIVE_FLOAT, H5S_ALL, H5S_ALL, H5P_DEFAULT, out.data());
  H5Dclose(d);
  H5Fclose(f);
  const double ms = ms_since(t0);
  if (rc < 0) {
    std::fprintf(stderr, "H5Dread failed on %s\n", path.c_str());
    std::exit(1);
  }
  return ms;
}

double h5chunk_ms(const std::string& path, const Case& c, unsigned threads, std::vector<float>& out,
                  std::string* route) {
  auto t0 = Clock::now();
  h5chunk::Options options;
  options.threads = threads;
  options.log = [](const std::string&) {};
  auto file = h5chunk::File::open(path, options);
  if (!file.ok()) {
    std::fprintf(stderr, "%s\n", file.status().message().c_str());
    std::exit(1);
  }
  auto dset = file->dataset(c.dataset);
  if (!dset.ok()) {
    std::fprintf(stderr, "%s\n", dset.status().message().c_str());
    std::exit(1);
  }
  // The automatic route, as a user gets it: it declines to H5Dread when locating would cost
  // more (before the chunk index was read from the file, every one of these did).
  auto stats = dset->read_into(h5chunk::Selection{}, out.data(), out.size() * sizeof(float));
  const double ms = ms_since(t0);
  if (!stats.ok()) {
    std::fprintf(stderr, "%s\n", stats.status().message().c_str());
    std::exit(1);
  }
  *route = stats->fast_path ? "fast path" : "H5Dread (" + stats->fallback_cause + ")";
  return ms;
}

}  // namespace

int main(int argc, char** argv) {
  unsigned threads = 0;  // h5chunk's default (Options::threads = 0)
  int repeat = 3;
  std::string dir = "/tmp/h5chunk_bench";
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--threads" && i + 1 < argc) threads = unsigned(std::stoul(argv[++i]));
    else if (a == "--repeat" && i + 1 < argc) repeat = std::stoi(argv[++i]);
    else if (a == "--dir" && i + 1 < argc) dir = argv[++i];
    else {
      std::fprintf(stderr, "usage: %s [--threads N] [--repeat R] [--dir DIR]\n", argv[0]);
      return 2;
    }
  }
  H5Eset_auto2(H5E_DEFAULT, nullptr, nullptr);
  std::vector<Case> cases;
  for (bool latest : {false, true}) {
    for (bool deflate : {false, true}) {
      const std::string tag = std::string(latest ? "latest" : "v1") + (deflate ? "_deflate" : "");
      cases.push_back({"many16k_" + tag + ".h5", "/data", 16384, 1024, deflate, latest, false});
      cases.push_back({"many100k_" + tag + ".h5", "/data", 100000, 256, deflate, latest, false});
    }
  }
  cases.push_back({"many100k_latest_unlimited.h5", "/data", 100000, 256, false, true, true});
  ::mkdir(dir.c_str(), 0755);
  std::printf("threads %s, best of %d, first read (fresh open) of the whole dataset\n",
              threads ? std::to_string(threads).c_str() : "default", repeat);
  std::printf("%-32s %8s %6s %10s %10s %7s  %s\n", "file", "chunks", "KiB/ch", "h5chunk ms", "H5Dread ms",
              "ratio", "h5chunk route");
  for (const Case& c : cases) {
    const std::string path = dir + "/" + c.file;
    if (!exists(path)) write_case(path, c);
    warm(path);
    std::vector<float> a(c.chunks * c.chunk_elems), b(a.size());
    std::memset(a.data(), 0, a.size() * sizeof(float));
    std::memset(b.data(), 0, b.size() * sizeof(float));
    double best_fast = 1e300, best_ref = 1e300;
    std::string route;
    for (int r = 0; r < repeat; ++r) {
      best_ref = std::min(best_ref, h5dread_ms(path, c, b));
      best_fast = std::min(best_fast, h5chunk_ms(path, c, threads, a, &route));
    }
    if (std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) != 0) {
      std::fprintf(stderr, "%s: h5chunk and H5Dread disagree\n", c.file.c_str());
      return 1;
    }
    std::printf("%-32s %8llu %6.1f %10.1f %10.1f %6.2fx  %s\n", c.file.c_str(), (unsigned long long)c.chunks,
                double(c.chunk_elems * 4) / 1024, best_fast, best_ref, best_ref / best_fast, route.c_str());
    std::fflush(stdout);
  }
  return 0;
}
