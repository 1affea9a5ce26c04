// The read path's hot paths in one process, no FUSE, no network wait: reads served from the
// memory tier (the kernel's 128 KiB pieces of blocks already in memory: what a warm mount and
// every piece after a block's first do) and range hints that find their blocks in memory (h5chunk
// hints every chunk it reads). A scripted transport answers at once; no disk cache. Prints the
// median ns per call over --rounds rounds, one thread and --threads threads at once (contention
// on the reader's locks). Run it against two builds of the reader to compare them in one run.
//
// Usage: bench_reader_hot_path [--rounds 7] [--threads 4] [--reads 200000]
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "net/range_fetcher.h"
#include "reader/block_reader.h"
#include "support/fake_transport.h"

using namespace hubfs;
using Clock = std::chrono::steady_clock;

namespace {

constexpr uint64_t kFileSize = 64ull << 20;  // within the 256 MiB memory tier
constexpr size_t kPiece = 128 * 1024;

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

}  // namespace

int main(int argc, char** argv) {
  int rounds = 7, threads = 4;
  uint64_t reads = 200'000;
  for (int i = 1; i + 1 < argc; i += 2) {
    std::string a = argv[i];
    if (a == "--rounds") rounds = std::stoi(argv[i + 1]);
    if (a == "--threads") threads = std::stoi(argv[i + 1]);
    if (a == "--reads") reads = std::stoull(argv[i + 1]);
  }
  std::string content(kFileSize, '\0');
  std::mt19937_64 rng(3);
  for (size_t i = 0; i + 8 <= content.size(); i += 8) {
    uint64_t v = rng();
    memcpy(&content[i], &v, 8);
  }
  hubfs::testing::FakeTransport transport([&](const HttpRequest& req) -> Result<HttpResponse> {
    HttpResponse r;
    auto range = find_header(req.headers, "Range");
    uint64_t a = 0, b = 0;
    if (!range || sscanf(range->c_str(), "bytes=%lu-%lu", &a, &b) != 2) return Unavailable("no range");
    r.status = 206;
    r.body = content.substr(a, b - a + 1);
    r.headers.emplace_back("content-range", "bytes " + std::to_string(a) + "-" + std::to_string(b) + "/" +
                                                std::to_string(content.size()));
    return r;
  });
  RangeFetcherOptions fetcher_options;
  fetcher_options.env = &Env::real();
  RangeFetcher fetcher(transport, fetcher_options);
  RemoteFile file;
  file.path = "bench.bin";
  file.content_id = "sha256:" + std::string(64, 'e');  // not its hash: whole reads are not hashed here
  file.size = content.size();
  file.locate = [](bool) { return Result<Location>(Location{"http://cdn.test/blob", {}, {}}); };
  ReaderOptions options;
  options.verify_whole_files = false;
  BlockReader reader(nullptr, fetcher, options);
  std::vector<char> out(8 * kPiece);
  // Warm: every block in memory.
  for (uint64_t off = 0; off < file.size; off += 8 * kPiece) {
    if (!reader.read(file, off, 8 * kPiece, out.data(), nullptr).ok()) return 1;
  }
  const uint64_t requests_after_warm = reader.stats().requests;

  auto hit_reads = [&](int nthreads) {
    std::vector<double> per_round;
    for (int r = 0; r < rounds; ++r) {
      const uint64_t each = reads / nthreads;
      auto start = Clock::now();
      std::vector<std::thread> ts;
      for (int t = 0; t < nthreads; ++t) {
        ts.emplace_back([&, t] {
          std::vector<char> buf(kPiece);
          ReadState state;  // sequential pieces, as the kernel sends them
          uint64_t off = (t * (file.size / nthreads)) % file.size;
          for (uint64_t i = 0; i < each; ++i) {
            if (!reader.read(file, off, kPiece, buf.data(), &state).ok()) abort();
            off = (off + kPiece) % file.size;
          }
        });
      }
      for (auto& t : ts) t.join();
      per_round.push_back(std::chrono::duration<double, std::nano>(Clock::now() - start).count() / (each * nthreads));
    }
    return median(per_round);
  };
  auto hints = [&](int nthreads) {
    std::vector<double> per_round;
    const uint64_t calls = reads / 20;
    for (int r = 0; r < rounds; ++r) {
      const uint64_t each = calls / nthreads;
      auto start = Clock::now();
      std::vector<std::thread> ts;
      for (int t = 0; t < nthreads; ++t) {
        ts.emplace_back([&, t] {
          std::mt19937_64 pick(t + 1);
          for (uint64_t i = 0; i < each; ++i) {
            // Three chunks of ~2 MiB each, as h5chunk hints a few chunks at a time.
            std::vector<ByteRange> ranges;
            for (int c = 0; c < 3; ++c) ranges.push_back({pick() % (file.size - (2 << 20)), 2 << 20});
            if (!reader.prefetch(file, ranges).ok()) abort();
          }
        });
      }
      for (auto& t : ts) t.join();
      per_round.push_back(std::chrono::duration<double, std::nano>(Clock::now() - start).count() / (each * nthreads));
    }
    return median(per_round);
  };
  const double hit1 = hit_reads(1), hitn = hit_reads(threads);
  const double hint1 = hints(1), hintn = hints(threads);
  printf("memory hit, 128 KiB read: %.0f ns/read (1 thread), %.0f ns/read (%d threads)\n", hit1, hitn, threads);
  printf("hint of 3 x 2 MiB in memory: %.0f ns/hint (1 thread), %.0f ns/hint (%d threads)\n", hint1, hintn, threads);
  printf("requests after warm-up: %llu (want 0)\n",
         (unsigned long long)(reader.stats().requests - requests_after_warm));
  return 0;
}
