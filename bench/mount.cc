// Benchmarks of the mount against the baselines measured in the same run, over the bundled local
// Hub server with a fixed per-request latency (default 20 ms). Prints ratios, asserts nothing:
//   1. cold sequential read through the mount vs the same bytes fetched directly with the same
//      number of parallel range requests (the limit);
//   2. the seeds' case: the same 5 frames of a Blosc HDF5 file read three times with H5Dread;
//   3. after a remount with the page cache dropped: sequential read vs a local file;
//   4. h5chunk vs H5Dread reading a whole Blosc dataset through the mount, cold cache.
//
// Usage: bench_mount [--size-mb N] [--latency-ms N] [--requests N]
#include <fcntl.h>
#include <hdf5.h>
#include <unistd.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <random>
#include <string>
#include <vector>

#include "h5chunk/h5chunk.h"
#include "hub/hub_client.h"
#include "net/curl_transport.h"
#include "net/range_fetcher.h"
#include "net/retrying_transport.h"
#include "support/local_hub.h"
#include "support/mount_harness.h"
#include "support/temp_dir.h"

using namespace hubfs;
using namespace hubfs::testing;
using Clock = std::chrono::steady_clock;

namespace {

double seconds_since(Clock::time_point t0) {
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

void write_random(const std::string& path, uint64_t bytes) {
  std::filesystem::create_directories(std::filesystem::path(path).parent_path());
  FILE* f = fopen(path.c_str(), "wb");
  std::mt19937_64 rng(1);
  std::vector<uint64_t> buf(1 << 17);
  for (uint64_t done = 0; done < bytes;) {
    for (auto& v : buf) v = rng();
    size_t n = std::min<uint64_t>(bytes - done, buf.size() * 8);
    fwrite(buf.data(), 1, n, f);
    done += n;
  }
  fclose(f);
}

// The zea-like file: float32 (16, 24, 2048, 64, 1), one frame per chunk, Blosc lz4
// clevel 5 byte shuffle; echo-like signal plus noise so it compresses like real data (~2x).
const hsize_t kDims[5] = {16, 24, 2048, 64, 1};
void write_zea_like(const std::string& path) {
  std::filesystem::create_directories(std::filesystem::path(path).parent_path());
  hsize_t chunk[5] = {1, 24, 2048, 64, 1};
  size_t frame = 24 * 2048 * 64;
  std::vector<float> data(frame);
  std::mt19937 rng(3);
  std::normal_distribution<float> noise(0.f, 0.02f);
  hid_t file = H5Fcreate(path.c_str(), H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT);
  hid_t group = H5Gcreate2(file, "data", H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
  hid_t space = H5Screate_simple(5, kDims, nullptr);
  hid_t dcpl = H5Pcreate(H5P_DATASET_CREATE);
  H5Pset_chunk(dcpl, 5, chunk);
  const unsigned cd[7] = {2, 2, 4, 0, 5, 1, 1};
  H5Pset_filter(dcpl, 32001, H5Z_FLAG_OPTIONAL, 7, cd);
  hid_t dset = H5Dcreate2(group, "raw_data", H5T_NATIVE_FLOAT, space, H5P_DEFAULT, dcpl, H5P_DEFAULT);
  for (hsize_t f = 0; f < kDims[0]; ++f) {
    for (size_t i = 0; i < frame; ++i) {
      size_t sample = (i / 64) % 2048;
      float t = float(sample) / 2048.f;
      data[i] = std::exp(-3.f * t) * std::sin(float(sample) * 0.35f + float(i % 64) * 0.1f + float(f)) +
                noise(rng);
    }
    hsize_t start[5] = {f, 0, 0, 0, 0};
    hid_t fs = H5Dget_space(dset);
    H5Sselect_hyperslab(fs, H5S_SELECT_SET, start, nullptr, chunk, nullptr);
    hid_t ms = H5Screate_simple(5, chunk, nullptr);
    H5Dwrite(dset, H5T_NATIVE_FLOAT, ms, fs, H5P_DEFAULT, data.data());
    H5Sclose(ms);
    H5Sclose(fs);
  }
  H5Dclose(dset);
  H5Pclose(dcpl);
  H5Sclose(space);
  H5Gclose(group);
  H5Fclose(file);
}

// Sequential read() of a whole file in 1 MiB pieces, as cat does; returns seconds.
double read_sequentially(const std::string& path, uint64_t* bytes_out) {
  int fd = open(path.c_str(), O_RDONLY);
  if (fd < 0) {
    perror(path.c_str());
    exit(1);
  }
  std::vector<char> buf(1 << 20);
  auto t0 = Clock::now();
  uint64_t total = 0;
  ssize_t n;
  while ((n = read(fd, buf.data(), buf.size())) > 0) total += static_cast<uint64_t>(n);
  double s = seconds_since(t0);
  close(fd);
  if (n < 0) {
    perror("read");
    exit(1);
  }
  *bytes_out = total;
  return s;
}

// H5Dread of frames [first, first + count) of /data/raw_data into out; returns seconds.
// With step > 1 it reads frame by frame (first, first + step, ...), one H5Dread each: HDF5's own
// strided hyperslab is far slower than that even on a local file, and would measure HDF5's CPU
// rather than the network.
double h5dread_frames(const std::string& path, hsize_t first, hsize_t count, std::vector<float>& out,
                      hsize_t step = 1) {
  auto t0 = Clock::now();
  hid_t file = H5Fopen(path.c_str(), H5F_ACC_RDONLY, H5P_DEFAULT);
  hid_t dset = H5Dopen2(file, "/data/raw_data", H5P_DEFAULT);
  const size_t frame = kDims[1] * kDims[2] * kDims[3] * kDims[4];
  out.resize(count * frame);
  herr_t rc = 0;
  const hsize_t per_call = step == 1 ? count : 1;
  for (hsize_t i = 0; i < count && rc >= 0; i += per_call) {
    hid_t fs = H5Dget_space(dset);
    hsize_t start[5] = {first + i * step, 0, 0, 0, 0};
    hsize_t cnt[5] = {per_call, kDims[1], kDims[2], kDims[3], kDims[4]};
    H5Sselect_hyperslab(fs, H5S_SELECT_SET, start, nullptr, cnt, nullptr);
    hid_t ms = H5Screate_simple(5, cnt, nullptr);
    rc = H5Dread(dset, H5T_NATIVE_FLOAT, ms, fs, H5P_DEFAULT, out.data() + i * frame);
    H5Sclose(ms);
    H5Sclose(fs);
  }
  H5Dclose(dset);
  H5Fclose(file);
  if (rc < 0) {
    fprintf(stderr, "H5Dread failed on %s\n", path.c_str());
    exit(1);
  }
  return seconds_since(t0);
}

long long requests(LocalHub& hub) { return hub.stats()["requests"].get<long long>(); }
long long data_requests(LocalHub& hub) {
  auto s = hub.stats();
  return s["resolve_requests"].get<long long>() + s["cdn_requests"].get<long long>();
}

// Waits until the server has had nothing in flight for a moment: read-ahead a read started may
// still be landing after the read returned, and it belongs to that read, not to the next.
void wait_until_quiet(LocalHub& hub) {
  int quiet = 0;
  for (int i = 0; i < 200 && quiet < 3; ++i) {
    quiet = hub.stats()["in_flight"].get<long long>() == 0 ? quiet + 1 : 0;
    usleep(50 * 1000);
  }
}

}  // namespace

int main(int argc, char** argv) {
  uint64_t size_mb = 200;
  int latency_ms = 20;
  int max_requests = 16;
  for (int i = 1; i + 1 < argc; i += 2) {
    std::string a = argv[i];
    if (a == "--size-mb") size_mb = std::stoull(argv[i + 1]);
    else if (a == "--latency-ms") latency_ms = std::stoi(argv[i + 1]);
    else if (a == "--requests") max_requests = std::stoi(argv[i + 1]);
  }
  bool can_drop = drop_page_cache();
  TempDir root;
  const std::string repo = "datasets/bench/data";
  const std::string repo_dir = root.str() + "/" + repo;
  const uint64_t size = size_mb << 20;
  printf("preparing: %llu MB random file and a zea-like Blosc HDF5 file...\n", (unsigned long long)size_mb);
  fflush(stdout);
  write_random(repo_dir + "/big.bin", size);
  write_zea_like(repo_dir + "/zea.hdf5");

  LocalHubOptions hub_options;
  hub_options.root = root.str();
  hub_options.latency_ms = latency_ms;
  auto hub = LocalHub::start(hub_options);
  std::string mount_requests = std::to_string(max_requests);
  printf("local Hub at %s, %d ms per request, %d requests in flight\n\n", hub->url().c_str(), latency_ms,
         max_requests);

  // 1. The limit: the same bytes over the same transport, every range in flight at once.
  double limit_s;
  {
    CurlOptions curl_options;
    curl_options.max_in_flight = max_requests;
    curl_options.env = &Env::real();
    CurlTransport curl(curl_options);
    RetryingTransport transport(curl, RetryPolicy{}, Env::real());
    HubConfig hub_config;
    hub_config.env = &Env::real();
    hub_config.endpoint = hub->url();
    HubClient client(hub_config, transport);
    RangeFetcherOptions fetcher_options;
    fetcher_options.env = &Env::real();
    RangeFetcher fetcher(transport, fetcher_options);
    auto parsed = parse_repo_ref(repo);
    RepoRef ref = *parsed;
    Locator locate = [&](bool refresh) { return client.locate(ref, "big.bin", refresh); };
    const uint64_t piece = 8u << 20;  // the mount's largest request (8 blocks of 1 MiB)
    std::vector<ByteRange> ranges;
    for (uint64_t off = 0; off < size; off += piece) ranges.push_back({off, std::min(piece, size - off)});
    auto t0 = Clock::now();
    auto results = fetcher.fetch(locate, size, ranges);
    limit_s = seconds_since(t0);
    for (auto& r : results) {
      if (!r.ok()) {
        fprintf(stderr, "direct fetch failed: %s\n", r.status().message().c_str());
        return 1;
      }
    }
  }
  TempDir cache;
  double cold_s, mbps_limit, mbps_cold;
  {
    auto m = HubfsMount::start(hub->url(), repo, cache.str() + "/c", {"--max-requests", mount_requests});
    uint64_t got = 0;
    cold_s = read_sequentially(*m / "big.bin", &got);
    if (got != size) {
      fprintf(stderr, "short read through the mount: %llu\n", (unsigned long long)got);
      return 1;
    }
  }
  mbps_limit = size / 1e6 / limit_s;
  mbps_cold = size / 1e6 / cold_s;
  printf("1. cold sequential read, %llu MB at %d ms/request\n", (unsigned long long)size_mb, latency_ms);
  printf("   direct parallel ranges (limit): %7.1f MB/s\n", mbps_limit);
  printf("   through hubfs, cold cache:      %7.1f MB/s   ratio %.2f of the limit (target >= 0.70)\n\n",
         mbps_cold, mbps_cold / mbps_limit);

  // 3. Remount over the same cache, page cache dropped: disk cache vs a local file.
  {
    auto m = HubfsMount::start(hub->url(), repo, cache.str() + "/c", {"--max-requests", mount_requests});
    uint64_t got = 0;
    drop_page_cache();
    hub->reset_stats();
    double warm_s = read_sequentially(*m / "big.bin", &got);
    long long reqs = data_requests(*hub);
    drop_page_cache();
    double local_s = read_sequentially(repo_dir + "/big.bin", &got);
    printf("3. after remount, page cache %s: sequential read\n", can_drop ? "dropped" : "NOT dropped (not root)");
    printf("   local file:              %7.1f MB/s\n", size / 1e6 / local_s);
    printf("   through hubfs (cached):  %7.1f MB/s   ratio %.2f of local, %lld upstream data requests\n\n",
           size / 1e6 / warm_s, local_s / warm_s, reqs);
  }

  // 2. The seeds' case: the same 5 frames, three times, through one mount.
  {
    TempDir cache2;
    auto m = HubfsMount::start(hub->url(), repo, cache2.str() + "/c", {"--max-requests", mount_requests});
    std::vector<float> out, reference;
    h5dread_frames(repo_dir + "/zea.hdf5", 3, 5, reference);
    double t[3];
    long long r[3];
    for (int i = 0; i < 3; ++i) {
      wait_until_quiet(*hub);
      hub->reset_stats();
      t[i] = h5dread_frames(*m / "zea.hdf5", 3, 5, out);
      r[i] = requests(*hub);
      if (out != reference) {
        fprintf(stderr, "frames read through the mount differ from the local file\n");
        return 1;
      }
    }
    // The floor for reads 2 and 3: the same H5Dread of a local file already in the page cache
    // (H5Dread decodes on one thread, so this is mostly Blosc decoding).
    double local_s = 1e9;
    for (int i = 0; i < 3; ++i) local_s = std::min(local_s, h5dread_frames(repo_dir + "/zea.hdf5", 3, 5, out));
    printf("2. 5 frames of a Blosc HDF5 file with H5Dread, three times (seeds: ~0.9 s each time)\n");
    for (int i = 0; i < 3; ++i) {
      printf("   read %d: %7.1f ms, %3lld upstream requests%s\n", i + 1, t[i] * 1e3, r[i],
             i ? (" (" + std::to_string(t[0] / t[i]).substr(0, 4) + "x faster than read 1)").c_str() : "");
    }
    printf("   the same H5Dread of the local file, warm: %.1f ms (the floor for reads 2 and 3)\n", local_s * 1e3);
    printf("\n");
  }

  // 4. h5chunk vs H5Dread through a cold mount: all frames (one sequential stream, which the
  //    mount's read-ahead already serves well), and every other frame (a stride the read-ahead
  //    cannot follow, so H5Dread's one-chunk-at-a-time reads each pay the latency).
  printf("4. h5chunk vs H5Dread through hubfs, cold cache each time, %d ms/request\n", latency_ms);
  struct Case {
    const char* name;
    hsize_t count, step;
    const char* selection;
  };
  for (const Case& c : {Case{"all 16 frames (201 MB)", 16, 1, ":"},
                        Case{"every other frame (8 frames, 101 MB)", 8, 2, "[0,2,4,6,8,10,12,14]"}}) {
    std::vector<float> via_h5dread;
    double h5dread_s, h5chunk_s;
    {
      TempDir cd;
      auto m = HubfsMount::start(hub->url(), repo, cd.str() + "/c", {"--max-requests", mount_requests});
      drop_page_cache();
      h5dread_s = h5dread_frames(*m / "zea.hdf5", 0, c.count, via_h5dread, c.step);
    }
    std::vector<float> via_h5chunk(via_h5dread.size());
    {
      TempDir cd;
      auto m = HubfsMount::start(hub->url(), repo, cd.str() + "/c", {"--max-requests", mount_requests});
      drop_page_cache();
      auto t0 = Clock::now();
      auto file = h5chunk::File::open(*m / "zea.hdf5");
      if (!file.ok()) {
        fprintf(stderr, "h5chunk: %s\n", file.status().message().c_str());
        return 1;
      }
      auto dset = file->dataset("/data/raw_data");
      auto selection = h5chunk::parse_selection(c.selection);
      auto stats = !dset.ok()        ? Result<h5chunk::ReadStats>(dset.status())
                   : !selection.ok() ? Result<h5chunk::ReadStats>(selection.status())
                                     : dset->read_into(*selection, via_h5chunk.data(),
                                                       via_h5chunk.size() * sizeof(float));
      h5chunk_s = seconds_since(t0);
      if (!stats.ok()) {
        fprintf(stderr, "h5chunk: %s\n", stats.status().message().c_str());
        return 1;
      }
      if (!stats->fast_path) printf("   (h5chunk fell back: %s)\n", stats->fallback_cause.c_str());
    }
    bool equal = via_h5chunk == via_h5dread;
    printf("   %-38s H5Dread %7.1f ms, h5chunk %7.1f ms: %.1fx, results %s\n", c.name, h5dread_s * 1e3,
           h5chunk_s * 1e3, h5dread_s / h5chunk_s, equal ? "equal" : "DIFFER");
    if (!equal) return 1;
  }
  return 0;
}
