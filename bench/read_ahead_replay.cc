// h5py's cold read of a zea file through a mount, replayed against the read-ahead policy
// (core/reader/read_ahead.h) over a modelled link: no mount, no server, no threads, so the
// policy's round trips show without a loaded machine's noise (docs/benchmarks.md, session 30).
//
//   build/bin/bench_read_ahead_replay [--rtt-ms 20] [--decode-ms 80] [--gap-ms 0.3] [--jitter 0] [--seeds 8]
//
// The reader: the kernel reads the superblock (16 KiB at 0), then each chunk as h5py's one
// pread of it cut into pieces (16-512 KiB at the file's start, the kernel's ramp, then 1 MiB), one
// after another `gap` apart; h5py decodes for `decode` between chunks. The link: every block a
// read or read-ahead asks for arrives one round trip later (the file's first request two: the
// resolve), however many are in flight (no bandwidth cap, an ideal server). The facts the policy
// gets are BlockReader's: a miss, a block's read-ahead mark, a wait for a marked block still on
// its way, a pause (reader_pause, 5 ms). --jitter J: round trips and decodes up to (1 + J) times
// longer, and a piece now and then up to 20 ms late (a loaded machine), averaged over --seeds runs.
//
// Rows: this build's policy, and the same with one setting changed, each for 16 and 5 frames:
// the time h5py waited (in all and in the file's first 12 MiB), what was fetched, and what
// read-ahead fetched that no read used. The ratios compare each with this build's row.
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <random>
#include <string>
#include <vector>

#include "reader/read_ahead.h"

namespace {

using hubfs::ReadAheadOptions;
using hubfs::ReadAheadPolicy;
using hubfs::ReadAheadState;
using hubfs::ReadFacts;

constexpr uint64_t kMiB = 1 << 20;
// The zea file of bench/peer_bench.py: its 16 chunks' offsets, and the file's end.
constexpr uint64_t kChunks[17] = {6608,      10577196,  21149280,  31720098,  42289815,  52859383,
                                  63429533,  73999048,  84571641,  95143515,  105714052, 116284217,
                                  126853908, 137422498, 147992948, 158563711, 169134297};
constexpr uint64_t kFileSize = kChunks[16];

struct Link {
  double rtt_ms = 20, decode_ms = 80, gap_ms = 0.3, jitter = 0;
};

struct Outcome {
  double wait_ms = 0, wait_first_ms = 0;
  uint64_t fetched = 0, unread = 0;
};

Outcome replay(const ReadAheadOptions& options, int frames, const Link& link, unsigned seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<double> u(0, 1);
  const ReadAheadPolicy policy(options);
  ReadAheadState state;
  struct Block {
    bool claimed = false, marked = false, used = false;
    double arrives = 0;
  };
  std::vector<Block> blocks((kFileSize + kMiB - 1) / kMiB);
  Outcome out;
  double now = 0, last_return = -1e9, resolved = -1;
  auto fetch = [&](Block& b, uint64_t index) {
    if (resolved < 0) resolved = now + link.rtt_ms;  // the file's first request resolves it first
    b.claimed = true;
    b.arrives = std::max(now, resolved) + link.rtt_ms * (1 + link.jitter * u(rng));
    out.fetched += std::min(kMiB, kFileSize - index * kMiB);
  };
  auto piece = [&](uint64_t offset, uint64_t end) {
    end = std::min(end, kFileSize);
    ReadFacts facts;
    bool joined = false;
    double ready = now;
    for (uint64_t i = offset / kMiB; i <= (end - 1) / kMiB; ++i) {
      Block& b = blocks[i];
      if (b.marked) {
        facts.marked = true;
        b.marked = false;
      }
      if (!b.claimed) {
        fetch(b, i);
        facts.missed = true;
      } else if (b.arrives > now) {
        joined = true;
      }
      b.used = true;
      ready = std::max(ready, b.arrives);
    }
    facts.waited = facts.marked && joined;
    facts.paused = now - last_return >= 5;
    if (auto plan = policy.on_read(state, offset, end, kFileSize, facts); plan && plan->fetch) {
      for (uint64_t i = plan->blocks.first; i <= plan->blocks.last; ++i) {
        if (blocks[i].claimed) continue;
        fetch(blocks[i], i);
        blocks[i].marked = true;
      }
      state.prefetched_to = plan->blocks.last + 1;
    }
    out.wait_ms += ready - now;
    if (offset < 12 * kMiB) out.wait_first_ms += ready - now;
    now = last_return = ready;
  };
  piece(0, 16384);  // the superblock
  now += 1;
  uint64_t at = 16384;
  const uint64_t ramp[] = {64 << 10, 128 << 10, 256 << 10, 512 << 10};
  size_t ramped = 0;
  for (int c = 0; c < frames; ++c) {
    while (at < kChunks[c + 1]) {
      const uint64_t size = ramped < 4 ? ramp[ramped++] : kMiB;
      piece(at, at + size);
      at += size;
      now += link.gap_ms + (u(rng) < link.jitter * 0.3 ? 20 * u(rng) : 0);
    }
    now += link.decode_ms * (1 + link.jitter * u(rng));
  }
  for (uint64_t i = 0; i < blocks.size(); ++i)
    if (blocks[i].claimed && !blocks[i].used) out.unread += std::min(kMiB, kFileSize - i * kMiB);
  return out;
}

}  // namespace

int main(int argc, char** argv) {
  Link link;
  int seeds = 8;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string flag = argv[i];
    const double v = std::atof(argv[i + 1]);
    if (flag == "--rtt-ms") link.rtt_ms = v;
    else if (flag == "--decode-ms") link.decode_ms = v;
    else if (flag == "--gap-ms") link.gap_ms = v;
    else if (flag == "--jitter") link.jitter = v;
    else if (flag == "--seeds") seeds = std::max(1, int(v));
    else return std::fprintf(stderr, "unknown flag %s\n", argv[i]), 2;
  }
  if (link.jitter == 0) seeds = 1;
  ReadAheadOptions build;  // the mount's defaults
  build.round_trip_seconds = link.rtt_ms / 1000;
  struct Variant {
    const char* name;
    std::function<void(ReadAheadOptions&)> change;
  };
  const std::vector<Variant> variants = {
      {"this build", [](ReadAheadOptions&) {}},
      // A run earning read-ahead a block later: the piece after the one that reached block 1, as
      // before session 30's run rule.
      {"min_run_blocks 3", [](ReadAheadOptions& o) { o.min_run_blocks = 3; }},
      {"max_readahead_blocks 5", [](ReadAheadOptions& o) { o.max_readahead_blocks = 5; }},
      {"max_readahead_blocks 4", [](ReadAheadOptions& o) { o.max_readahead_blocks = 4; }},
  };
  std::printf("h5py through a mount, replayed: %.0f ms per request, no bandwidth cap, decode %.0f ms per chunk, "
              "pieces %.1f ms apart, jitter %.1f (%d runs)\n\n", link.rtt_ms, link.decode_ms, link.gap_ms,
              link.jitter, seeds);
  std::printf("%-24s %6s %10s %14s %10s %8s %10s %14s\n", "policy", "frames", "waits ms", "first 12 MiB", "fetched MB",
              "x needed", "unread MB", "waits vs build");
  for (int frames : {16, 5}) {
    double build_wait = 0;
    for (const Variant& v : variants) {
      ReadAheadOptions o = build;
      v.change(o);
      Outcome mean;
      for (int s = 0; s < seeds; ++s) {
        const Outcome r = replay(o, frames, link, unsigned(s + 1));
        mean.wait_ms += r.wait_ms / seeds, mean.wait_first_ms += r.wait_first_ms / seeds;
        mean.fetched += r.fetched / unsigned(seeds), mean.unread += r.unread / unsigned(seeds);
      }
      if (&v == &variants[0]) build_wait = mean.wait_ms;
      const double needed = double(kChunks[frames] - kChunks[0]);
      std::printf("%-24s %6d %10.1f %14.1f %10.1f %8.3f %10.1f %13.2fx\n", v.name, frames, mean.wait_ms,
                  mean.wait_first_ms, mean.fetched / 1e6, mean.fetched / needed, mean.unread / 1e6,
                  build_wait > 0 ? mean.wait_ms / build_wait : 0.0);
    }
  }
  return 0;
}
