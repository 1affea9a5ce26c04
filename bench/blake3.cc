// BLAKE3 (core/xet/blake3.h) on the paths this CPU has: sixteen chunks at a time (AVX-512), eight
// (AVX2) and one (scalar), keyed as Xet hashes its chunks, over 64 KiB pieces (a Xet chunk's
// size) of a 256 MiB buffer already in memory; and Debian's b3sum over the same bytes in a file
// (page cache, one thread) as the peer. Best of 5 runs each; ratios from this run.
//
//   build/bin/bench_blake3 [MiB]
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <functional>
#include <random>
#include <string>
#include <vector>

#include "xet/blake3.h"
#include "bench_usage.h"

using hubfs::xet::Blake3;

namespace {

double best_seconds(int runs, const std::function<void()>& fn) {
  double best = 1e300;
  for (int i = 0; i < runs; ++i) {
    const auto t0 = std::chrono::steady_clock::now();
    fn();
    best = std::min(best, std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
  }
  return best;
}

}  // namespace

int main(int argc, char** argv) {
  hubfs::bench::positional_args_only(argc, argv, "[MiB, default 256]");
  const size_t mib = argc > 1 ? std::strtoul(argv[1], nullptr, 10) : 256;
  std::vector<uint8_t> data(mib << 20);
  std::mt19937_64 rng(5);
  for (size_t i = 0; i + 8 <= data.size(); i += 8) {
    const uint64_t v = rng();
    std::copy_n(reinterpret_cast<const uint8_t*>(&v), 8, data.data() + i);
  }
  hubfs::xet::Blake3Key key{};
  for (size_t i = 0; i < key.size(); ++i) key[i] = static_cast<uint8_t>(i * 7 + 1);
  constexpr size_t kPiece = 64 << 10;
  volatile uint8_t sink = 0;
  auto hash_all = [&] {
    for (size_t off = 0; off < data.size(); off += kPiece) {
      Blake3 h(key);
      h.update(data.data() + off, std::min(kPiece, data.size() - off));
      sink = sink ^ h.finalize()[0];
    }
  };
  const double gb = data.size() / 1e9;
  std::printf("{\"mib\": %zu, \"avx512\": %s", mib, Blake3::has_avx512() ? "true" : "false");
  double sixteen = 0;
  if (Blake3::has_avx512()) {
    sixteen = best_seconds(5, hash_all);
    std::printf(", \"sixteen_gbps\": %.2f", gb / sixteen);
  }
  Blake3::allow_avx512(false);
  const double eight = best_seconds(5, hash_all);
  Blake3::allow_simd(false);
  const double scalar = best_seconds(3, hash_all);
  Blake3::allow_simd(true);
  Blake3::allow_avx512(true);
  std::printf(", \"eight_gbps\": %.2f, \"scalar_gbps\": %.2f", gb / eight, gb / scalar);
  if (sixteen > 0) std::printf(", \"sixteen_vs_eight\": %.2f", eight / sixteen);

  // The peer: b3sum, one thread, the same bytes from the page cache (unkeyed, whole file: its
  // own tree over one input, which hashes the same way per chunk).
  const std::string path = "/tmp/bench_blake3." + std::to_string(getpid());
  std::ofstream(path, std::ios::binary).write(reinterpret_cast<const char*>(data.data()), std::streamsize(data.size()));
  const std::string cmd = "b3sum --num-threads 1 --no-mmap " + path + " > /dev/null 2>&1";
  if (std::system(cmd.c_str()) == 0) {
    const double b3 = best_seconds(5, [&] { (void)std::system(cmd.c_str()); });
    std::printf(", \"b3sum_gbps\": %.2f, \"ours_vs_b3sum\": %.2f", gb / b3, b3 / (sixteen > 0 ? sixteen : eight));
  }
  std::remove(path.c_str());
  // The digests' first bytes, folded: printed so the hashing cannot be optimized away.
  std::printf(", \"fold\": %u}\n", static_cast<unsigned>(sink));
  return 0;
}
