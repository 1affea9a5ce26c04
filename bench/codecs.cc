// Single-thread decode throughput of h5chunk's codecs, in GB/s of decoded output.
//
//   build/bin/bench_codecs [MiB of data, default 64] [chunk KiB, default 1024]
//
// Each case decodes every chunk of the data set into one reused (pre-touched) output buffer,
// so page faults are not measured; the "fresh output" case shows what they cost. The best of
// several rounds is printed, with the compression ratio and, where one exists, the codec
// library's own decode call on the same bytes for comparison.
#include <blosc.h>
#include <lz4.h>
#include <zlib.h>
#include <sys/mman.h>
#include <zstd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <random>
#include <string>
#include <vector>

#include "h5chunk/codecs.h"
#include "bench_usage.h"

namespace {

using Bytes = std::vector<uint8_t>;
using h5chunk::FilterStep;
using Clock = std::chrono::steady_clock;

// Rounds per case: the best one is reported (the least disturbed by other load).
constexpr int kRounds = 5;

// A float32 signal like instrument data: smooth, with noise in the low mantissa bits.
Bytes make_data(size_t bytes) {
  std::mt19937 rng(1);
  std::normal_distribution<float> noise(0.f, 0.05f);
  size_t n = bytes / 4;
  Bytes out(n * 4);
  for (size_t i = 0; i < n; ++i) {
    float v = std::sin(float(i % 100000) * 0.0007f) * 50.f + noise(rng);
    std::memcpy(&out[i * 4], &v, 4);
  }
  return out;
}

FilterStep step(unsigned id, std::vector<unsigned> cd = {}) {
  FilterStep f;
  f.id = id;
  f.cd_values = std::move(cd);
  return f;
}

void put_be32(uint8_t* p, uint32_t v) {
  p[0] = uint8_t(v >> 24), p[1] = uint8_t(v >> 16), p[2] = uint8_t(v >> 8), p[3] = uint8_t(v);
}

Bytes blosc_encode(const Bytes& d, const char* comp, int shuffle, int clevel) {
  Bytes out(d.size() + BLOSC_MAX_OVERHEAD);
  int n = blosc_compress_ctx(clevel, shuffle, 4, d.size(), d.data(), out.data(), out.size(), comp, 0, 1);
  out.resize(size_t(std::max(n, 0)));
  return out;
}

Bytes zstd_encode(const Bytes& d, int level) {
  Bytes out(ZSTD_compressBound(d.size()));
  out.resize(ZSTD_compress(out.data(), out.size(), d.data(), d.size(), level));
  return out;
}

Bytes deflate_encode(const Bytes& d, int level) {
  uLongf n = compressBound(d.size());
  Bytes out(n);
  compress2(out.data(), &n, d.data(), d.size(), level);
  out.resize(n);
  return out;
}

// HDF5 lz4 filter framing, one block per chunk (the plugin's default).
Bytes lz4_encode(const Bytes& d) {
  Bytes out(12 + 4 + size_t(LZ4_compressBound(int(d.size()))));
  put_be32(out.data(), 0);
  put_be32(out.data() + 4, uint32_t(d.size()));
  put_be32(out.data() + 8, uint32_t(d.size()));
  int c = LZ4_compress_default(reinterpret_cast<const char*>(d.data()),
                               reinterpret_cast<char*>(out.data() + 16), int(d.size()), int(out.size() - 16));
  put_be32(out.data() + 12, uint32_t(c));
  out.resize(16 + size_t(c));
  return out;
}

Bytes shuffled(const Bytes& d) {
  Bytes out(d.size());
  h5chunk::codec::shuffle(d.data(), out.data(), d.size(), 4);
  return out;
}

// Bitshuffle + LZ4 payload with 8 KiB blocks (2048 float32), as bshuf_h5filter writes it.
Bytes bitshuffle_lz4_encode(const Bytes& d) {
  const size_t block = 2048, elem = 4, n = d.size() / elem;
  Bytes out(12);
  put_be32(out.data(), uint32_t(uint64_t(d.size()) >> 32));
  put_be32(out.data() + 4, uint32_t(d.size()));
  put_be32(out.data() + 8, uint32_t(block * elem));
  Bytes t(block * elem), c(size_t(LZ4_compressBound(int(block * elem))));
  size_t pos = 0;
  for (; pos + block <= n; pos += block) {
    h5chunk::codec::bit_transpose(&d[pos * elem], t.data(), block, elem);
    int k = LZ4_compress_default(reinterpret_cast<const char*>(t.data()), reinterpret_cast<char*>(c.data()),
                                 int(t.size()), int(c.size()));
    size_t at = out.size();
    out.resize(at + 4 + size_t(k));
    put_be32(&out[at], uint32_t(k));
    std::memcpy(&out[at + 4], c.data(), size_t(k));
  }
  // The bench's chunk sizes are multiples of the block: no partial block or leftovers.
  return out;
}

double seconds_since(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }

struct Case {
  std::string name;
  size_t stored_bytes;
  std::function<void(size_t chunk, uint8_t* out)> decode_one;
};

// Best GB/s over kRounds of decoding all chunks. fresh: each chunk goes to newly mapped pages
// (mmap, not malloc, which would hand back the pages just freed), so the decode also pays the
// page faults of first touch, as a reader decoding into a new user buffer does.
double measure(const Case& c, size_t n_chunks, size_t chunk_bytes, bool fresh) {
  Bytes out(chunk_bytes, 1);  // touched
  double best = 0;
  for (int r = 0; r < kRounds; ++r) {
    double elapsed = 0;
    for (size_t i = 0; i < n_chunks; ++i) {
      uint8_t* dst = out.data();
      if (fresh) {
        void* p = mmap(nullptr, chunk_bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        if (p == MAP_FAILED) std::exit(1);
        dst = static_cast<uint8_t*>(p);
      }
      auto t0 = Clock::now();
      c.decode_one(i, dst);
      elapsed += seconds_since(t0);
      if (fresh) munmap(dst, chunk_bytes);
    }
    best = std::max(best, double(n_chunks * chunk_bytes) / elapsed / 1e9);
  }
  return best;
}

}  // namespace

int main(int argc, char** argv) {
  hubfs::bench::positional_args_only(argc, argv, "[MiB of data, default 64] [chunk KiB, default 1024]");
  size_t mib = argc > 1 ? size_t(std::atol(argv[1])) : 64;
  size_t chunk_kib = argc > 2 ? size_t(std::atol(argv[2])) : 1024;
  size_t chunk_bytes = chunk_kib * 1024;
  size_t n_chunks = std::max<size_t>(1, mib * 1024 * 1024 / chunk_bytes);
  std::printf("h5chunk codecs, 1 thread, %zu chunks of %zu KiB float32 (%zu MiB), best of %d rounds\n",
              n_chunks, chunk_kib, n_chunks * chunk_kib / 1024, kRounds);

  std::vector<Bytes> plain;
  for (size_t i = 0; i < n_chunks; ++i) {
    Bytes all = make_data(chunk_bytes * 2);
    // Different chunks see different parts of the signal.
    plain.emplace_back(all.begin() + long((i % 7) * chunk_bytes / 8),
                       all.begin() + long((i % 7) * chunk_bytes / 8 + chunk_bytes));
  }

  h5chunk::DecodeScratch scratch;
  std::vector<Case> cases;
  auto add_pipeline = [&](const std::string& name, std::vector<FilterStep> pipeline,
                          const std::function<Bytes(const Bytes&)>& encode) {
    auto stored = std::make_shared<std::vector<Bytes>>();
    size_t total = 0;
    for (const Bytes& p : plain) {
      stored->push_back(encode(p));
      total += stored->back().size();
    }
    cases.push_back({name, total, [=, &scratch](size_t i, uint8_t* out) {
                       const Bytes& s = (*stored)[i];
                       h5chunk::Status st = h5chunk::decode_chunk(pipeline, 0, 4, s.data(), s.size(), out,
                                                                  chunk_bytes, scratch);
                       if (!st.ok()) {
                         std::fprintf(stderr, "%s: %s\n", name.c_str(), st.message().c_str());
                         std::exit(1);
                       }
                     }});
  };
  auto add_raw = [&](const std::string& name, std::function<Bytes(const Bytes&)> encode,
                     std::function<void(const Bytes&, uint8_t*)> decode) {
    auto stored = std::make_shared<std::vector<Bytes>>();
    size_t total = 0;
    for (const Bytes& p : plain) {
      stored->push_back(encode(p));
      total += stored->back().size();
    }
    cases.push_back({name, total, [=](size_t i, uint8_t* out) { decode((*stored)[i], out); }});
  };

  add_raw(
      "memcpy (baseline)", [](const Bytes& p) { return p; },
      [&](const Bytes& s, uint8_t* out) { std::memcpy(out, s.data(), s.size()); });
  add_pipeline("blosc lz4 clevel 5 + shuffle", {step(h5chunk::kBlosc)},
               [](const Bytes& p) { return blosc_encode(p, "lz4", BLOSC_SHUFFLE, 5); });
  add_raw(
      "  (blosc_decompress_ctx itself)",
      [](const Bytes& p) { return blosc_encode(p, "lz4", BLOSC_SHUFFLE, 5); },
      [&](const Bytes& s, uint8_t* out) { blosc_decompress_ctx(s.data(), out, chunk_bytes, 1); });
  add_pipeline("blosc zstd clevel 7 + bitshuffle", {step(h5chunk::kBlosc)},
               [](const Bytes& p) { return blosc_encode(p, "zstd", BLOSC_BITSHUFFLE, 7); });
  add_pipeline("zstd level 3", {step(h5chunk::kZstd)}, [](const Bytes& p) { return zstd_encode(p, 3); });
  add_pipeline("shuffle + zstd level 3", {step(h5chunk::kShuffle, {4}), step(h5chunk::kZstd)},
               [](const Bytes& p) { return zstd_encode(shuffled(p), 3); });
  add_pipeline("lz4 (HDF5 framing)", {step(h5chunk::kLz4)}, lz4_encode);
  add_pipeline("shuffle + deflate 4", {step(h5chunk::kShuffle, {4}), step(h5chunk::kDeflate)},
               [](const Bytes& p) { return deflate_encode(shuffled(p), 4); });
  add_pipeline("bitshuffle + lz4", {step(h5chunk::kBitshuffle, {0, 4, 4, 0, 2})}, bitshuffle_lz4_encode);
  add_pipeline("unshuffle alone (4-byte)", {step(h5chunk::kShuffle, {4})}, shuffled);
  add_pipeline("unshuffle alone (8-byte)", {step(h5chunk::kShuffle, {8})}, [](const Bytes& p) {
    Bytes out(p.size());
    h5chunk::codec::shuffle(p.data(), out.data(), p.size(), 8);
    return out;
  });
  add_pipeline("fletcher32 verify (+ copy)", {step(h5chunk::kFletcher32)}, [](const Bytes& p) {
    Bytes out = p;
    uint32_t sum = h5chunk::codec::fletcher32(p.data(), p.size());
    for (int i = 0; i < 4; ++i) out.push_back(uint8_t(sum >> (8 * i)));
    return out;
  });
  add_raw(
      "bit_untranspose alone (4-byte)",
      [](const Bytes& p) {
        Bytes out(p.size());
        for (size_t at = 0; at + 8192 <= p.size(); at += 8192) {
          h5chunk::codec::bit_transpose(p.data() + at, out.data() + at, 2048, 4);
        }
        return out;
      },
      [](const Bytes& s, uint8_t* out) {
        // Block by block, as the filter does (2048 float32 = 8 KiB blocks).
        static Bytes tmp(8192);
        for (size_t at = 0; at + 8192 <= s.size(); at += 8192) {
          h5chunk::codec::bit_untranspose(s.data() + at, out + at, 2048, 4, tmp.data());
        }
      });

  size_t plain_total = n_chunks * chunk_bytes;
  std::printf("%-34s %7s %12s %14s\n", "case", "ratio", "GB/s", "GB/s fresh out");
  for (const Case& c : cases) {
    double touched = measure(c, n_chunks, chunk_bytes, false);
    double fresh = measure(c, n_chunks, chunk_bytes, true);
    std::printf("%-34s %7.2f %12.2f %14.2f\n", c.name.c_str(), double(plain_total) / double(c.stored_bytes),
                touched, fresh);
  }
  return 0;
}
