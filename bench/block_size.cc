// Chooses the block size by measurement: the read path (BlockReader over the real transport and
// cache) against the local Hub server at 20 ms per request, for several block sizes, on two
// workloads: a cold sequential stream (kernel-sized 128 KiB reads with read-ahead, as through the
// mount) and cold random 4 KiB reads (HDF5 metadata lookups). Prints MB/s, bytes fetched per byte
// read, and requests. No FUSE involved.
//
// Usage: bench_block_size [--size-mb 64] [--latency-ms 20]
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <random>
#include <string>
#include <vector>

#include "cache/block_cache.h"
#include "hub/hub_client.h"
#include "net/curl_transport.h"
#include "net/range_fetcher.h"
#include "net/retrying_transport.h"
#include "reader/block_reader.h"
#include "support/local_hub.h"
#include "support/temp_dir.h"

using namespace hubfs;
using namespace hubfs::testing;
using Clock = std::chrono::steady_clock;

int main(int argc, char** argv) {
  uint64_t size_mb = 64;
  int latency_ms = 20;
  for (int i = 1; i + 1 < argc; i += 2) {
    std::string a = argv[i];
    if (a == "--size-mb") size_mb = std::stoull(argv[i + 1]);
    if (a == "--latency-ms") latency_ms = std::stoi(argv[i + 1]);
  }
  const uint64_t size = size_mb << 20;
  TempDir root;
  std::string content(size, '\0');
  std::mt19937_64 rng(5);
  for (size_t i = 0; i + 8 <= size; i += 8) {
    uint64_t v = rng();
    memcpy(&content[i], &v, 8);
  }
  write_file(root.str() + "/models/bench/blocks/file.bin", content);
  LocalHubOptions o;
  o.root = root.str();
  o.latency_ms = latency_ms;
  auto hub = LocalHub::start(o);

  CurlOptions curl_options;
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
  RepoRef ref = *parse_repo_ref("bench/blocks");

  printf("block size bench: %llu MB file, %d ms per request\n", (unsigned long long)size_mb, latency_ms);
  printf("%10s | %22s | %34s\n", "block", "sequential cold MB/s", "random 4 KiB reads: ms/read, fetched/read");
  for (uint32_t block : {256u << 10, 1u << 20, 4u << 20}) {
    TempDir cache_dir;
    CacheOptions co;
    co.env = &Env::real();
    co.dir = cache_dir.str();
    auto cache = std::move(BlockCache::open(co)).value();
    ReaderOptions ro;
    ro.block_size = block;
    // Keep the request size (not the block count) constant across block sizes: 8 MiB.
    ro.max_blocks_per_request = std::max(1u, (8u << 20) / block);
    ro.max_readahead_blocks = std::max(4u, (64u << 20) / block);
    ro.min_readahead_blocks = std::max(1u, (4u << 20) / block);
    BlockReader reader(cache.get(), fetcher, ro);
    RemoteFile file{"file.bin", "sha256:" + std::to_string(block), size,
                    [&](bool refresh) { return client.locate(ref, "file.bin", refresh); }, nullptr};
    std::vector<char> buf(128 << 10);
    ReadState state;
    auto t0 = Clock::now();
    for (uint64_t off = 0; off < size; off += buf.size()) {
      auto n = reader.read(file, off, buf.size(), buf.data(), &state);
      if (!n.ok() || memcmp(buf.data(), content.data() + off, *n) != 0) {
        fprintf(stderr, "bad read at %llu\n", (unsigned long long)off);
        return 1;
      }
    }
    double seq_s = std::chrono::duration<double>(Clock::now() - t0).count();
    uint64_t seq_requests = reader.stats().requests;

    // Random reads on a file the cache has never seen.
    file.content_id += "-random";
    uint64_t before = reader.stats().bytes_fetched;
    std::mt19937_64 pick(9);
    // One read per 4 MiB stretch, so no read lands in a block an earlier one fetched.
    const int kReads = static_cast<int>(size / (4u << 20));
    t0 = Clock::now();
    for (int i = 0; i < kReads; ++i) {
      uint64_t off = uint64_t(i) * (4u << 20) + pick() % ((4u << 20) - 4096);
      auto n = reader.read(file, off, 4096, buf.data(), nullptr);
      if (!n.ok() || memcmp(buf.data(), content.data() + off, 4096) != 0) return 1;
    }
    double rnd_s = std::chrono::duration<double>(Clock::now() - t0).count();
    uint64_t fetched = reader.stats().bytes_fetched - before;
    printf("%7u KiB | %10.1f (%4llu req) | %14.1f ms, %8.0f KiB fetched\n", block >> 10, size / 1e6 / seq_s,
           (unsigned long long)seq_requests,
           rnd_s * 1e3 / kReads, fetched / 1024.0 / kReads);
  }
  return 0;
}
