// The CPU a native Xet read spends on one xorb range after its last byte arrived
// (core/xet/xorb_fetch.h, decode_listed_range): decoded in its own buffer, every chunk hashed for
// the whole-file check, and the read's bytes cut out of it. Two ways, on the same ranges:
//   three passes  decode, then hash each chunk, then erase the chunk bytes before the read
//                 (the read path before DecodeExtras);
//   one pass      DecodeExtras: each chunk hashed just before it moves to its place, the bytes
//                 before the read never written.
// A range of MiB (default 16, one hint request's size) of 64 KiB chunks, nine in ten of them
// random (stored as-is, as Blosc-compressed data is) and one in ten compressible (LZ4); the
// read starts 1000 bytes into the first chunk. Each run decodes fresh copies of the range (made
// before the clock starts, their pages touched, as the transport's body is). CPU time of the
// thread (preemption on a shared machine does not count), best of 15 runs each, alternating;
// ratios from this run. Every run's output is checked against the content.
//
// And from the bytes' arrival on (the transport hands a body over in pieces of `piece` KiB,
// default 64): the CPU from the first piece to the decoded, hashed, cut range. Each way fills
// one range-sized buffer (a body, or the output), which the allocator hands out again from run
// to run, so the page faults of a cold read's fresh memory (the same for both) are not counted:
//   body, then one pass  each piece appended to a body buffer (HttpResponse::body), then one pass
//                        (the read path before HttpRequest::body_sink);
//   streamed             each piece fed to ChunkStreamDecoder, every chunk decoded and hashed as
//                        its last byte is in, stored-as-is chunks written straight to the output.
//
//   build/bin/bench_xet_decode [MiB] [piece KiB]
#include <time.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <string>
#include <vector>

#include "xet/hash.h"
#include "xet/xorb.h"
#include "xet/xorb_fetch.h"
#include "bench_usage.h"

using namespace hubfs::xet;

namespace {

std::string content_of(size_t n, uint64_t seed, bool compressible) {
  std::mt19937_64 rng(seed);
  std::string s(n, '\0');
  if (!compressible) {
    for (auto& c : s) c = static_cast<char>(rng());
    return s;
  }
  uint32_t words[16];
  for (auto& w : words) w = 0x3f000000u | static_cast<uint32_t>(rng() & 0x00ffffff);
  for (size_t i = 0; i + 4 <= n; i += 4) {
    const uint32_t w = words[rng() % 16];
    for (int k = 0; k < 4; ++k) s[i + k] = static_cast<char>(w >> (8 * k));
  }
  return s;
}

// This thread's CPU time: on a shared machine, preemption would count in wall time.
double thread_cpu_seconds() {
  timespec ts{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return ts.tv_sec + ts.tv_nsec / 1e9;
}

}  // namespace

int main(int argc, char** argv) {
  hubfs::bench::positional_args_only(argc, argv, "[MiB of the range, default 16] [piece KiB, default 64]");
  const size_t mib = argc > 1 ? std::strtoul(argv[1], nullptr, 10) : 16;
  const size_t piece = (argc > 2 ? std::strtoul(argv[2], nullptr, 10) : 64) << 10;
  XorbBuilder builder(CompressionScheme::kLz4);
  std::string content;
  for (uint64_t i = 0; content.size() < (mib << 20); ++i) {
    const std::string chunk = content_of(64 << 10, i, i % 10 == 9);
    content += chunk;
    if (!builder.add_chunk(chunk.data(), chunk.size()).ok()) return 1;
  }
  const std::string stored = builder.finish(false);
  const uint32_t chunks = static_cast<uint32_t>(builder.chunk_count());
  const XorbRange listed{{0, chunks}, {0, stored.size() - 1}};
  const size_t headroom = listed_range_headroom(listed, content.size(), 0);
  const uint64_t skip = 1000;
  const std::string want = content.substr(skip);

  auto fresh_body = [&] {
    std::string body;
    body.reserve(stored.size() + headroom);
    body.assign(stored);  // touched, as the transport's append touches it
    return body;
  };
  auto three_passes = [&](std::string body) {
    auto d = decode_listed_range(std::move(body), MerkleHash(), listed);
    if (!d.ok()) return false;
    std::vector<MerkleHash> hashes;
    for (size_t k = 0; k < d->count(); ++k) {
      const uint64_t a = k ? d->ends[k - 1] : 0;
      hashes.push_back(chunk_hash(d->data.data() + a, d->ends[k] - a));
    }
    d->data.erase(0, skip);
    return d->data == want && hashes.size() == chunks;
  };
  auto one_pass = [&](std::string body) {
    DecodeExtras extras;
    extras.hash = true;
    extras.keep_skip = skip;
    auto d = decode_listed_range(std::move(body), MerkleHash(), listed, extras);
    return d.ok() && d->data == want && d->hashes.size() == chunks;
  };
  double best_three = 1e300, best_one = 1e300;
  for (int run = 0; run < 15; ++run) {
    for (int which = 0; which < 2; ++which) {
      const bool one = (run + which) % 2 == 0;
      std::string body = fresh_body();
      const double t0 = thread_cpu_seconds();
      const bool ok = one ? one_pass(std::move(body)) : three_passes(std::move(body));
      const double s = thread_cpu_seconds() - t0;
      if (!ok) {
        std::fprintf(stderr, "wrong bytes or hashes\n");
        return 1;
      }
      (one ? best_one : best_three) = std::min(one ? best_one : best_three, s);
    }
  }
  // From arrival: the pieces come from `stored` (the network's bytes).
  auto body_then_one_pass = [&] {
    std::string body;
    body.reserve(stored.size() + headroom);
    for (size_t at = 0; at < stored.size(); at += piece) body.append(stored, at, std::min(piece, stored.size() - at));
    return one_pass(std::move(body));
  };
  auto streamed = [&] {
    DecodeExtras extras;
    extras.hash = true;
    extras.keep_skip = skip;
    ChunkStreamDecoder d(0, chunks, stored.size(), size_t(chunks) * kMaxChunkSize,
                         listed_range_output_bound(content.size(), 0), extras);
    for (size_t at = 0; at < stored.size(); at += piece)
      d.feed(reinterpret_cast<const uint8_t*>(stored.data()) + at, std::min(piece, stored.size() - at));
    auto r = d.finish();
    return r.ok() && r->data == want && r->hashes.size() == chunks;
  };
  double best_body = 1e300, best_streamed = 1e300;
  for (int run = 0; run < 15; ++run) {
    for (int which = 0; which < 2; ++which) {
      const bool stream = (run + which) % 2 == 0;
      const double t0 = thread_cpu_seconds();
      const bool ok = stream ? streamed() : body_then_one_pass();
      const double s = thread_cpu_seconds() - t0;
      if (!ok) {
        std::fprintf(stderr, "wrong bytes or hashes (%s)\n", stream ? "streamed" : "body");
        return 1;
      }
      (stream ? best_streamed : best_body) = std::min(stream ? best_streamed : best_body, s);
    }
  }
  const double mb = content.size() / 1e6;
  std::printf("xorb range: %.1f MB decoded from %.1f MB stored, %u chunks\n", mb, stored.size() / 1e6, chunks);
  std::printf("three passes (decode, hash, trim): %.4f s  %.0f MB/s\n", best_three, mb / best_three);
  std::printf("one pass (DecodeExtras):           %.4f s  %.0f MB/s\n", best_one, mb / best_one);
  std::printf("one pass vs three: %.2fx\n", best_three / best_one);
  std::printf("from arrival, %zu KiB pieces:\n", piece >> 10);
  std::printf("body, then one pass:               %.4f s  %.0f MB/s\n", best_body, mb / best_body);
  std::printf("streamed (ChunkStreamDecoder):     %.4f s  %.0f MB/s\n", best_streamed, mb / best_streamed);
  std::printf("streamed vs body then one pass: %.2fx\n", best_body / best_streamed);
  return 0;
}
