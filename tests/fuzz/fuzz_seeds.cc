// Writes the seed corpus of every decoder fuzz target: valid chunks of each codec, made by the
// codec libraries' own encoders (tests/h5chunk/codecs_test_util.h), in the input layout each
// target reads. libFuzzer mutates from these, so it starts inside the decoders' happy paths.
//
//   fuzz_seeds DIR   ->   DIR/<target>/seed-<n>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <string>
#include <vector>

#include "h5chunk/codecs_test_util.h"

namespace {

using h5chunk::codec_test::Bytes;
namespace ct = h5chunk::codec_test;

// fuzz_input.h's layout: flags (exact, capacity from header), u32 LE capacity, payload.
Bytes framed(const Bytes& payload, size_t capacity, bool from_header = false) {
  Bytes out = {uint8_t(1 | (from_header ? 2 : 0)), uint8_t(capacity), uint8_t(capacity >> 8),
               uint8_t(capacity >> 16), uint8_t(capacity >> 24)};
  out.insert(out.end(), payload.begin(), payload.end());
  return out;
}

Bytes le32(uint32_t v) { return {uint8_t(v), uint8_t(v >> 8), uint8_t(v >> 16), uint8_t(v >> 24)}; }

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) {
    std::cerr << "usage: fuzz_seeds DIR\n";
    return 2;
  }
  std::map<std::string, std::vector<Bytes>> seeds;
  const std::vector<Bytes> plains = {ct::floats(1024, 1), ct::bytes_pattern(3001, 2), ct::bytes_random(700, 3),
                                     Bytes(4096, 0), Bytes{}};
  for (const Bytes& p : plains) {
    for (auto [comp, shuffle] : {std::pair{"lz4", 1}, {"zstd", 2}, {"blosclz", 0}, {"zlib", 1}}) {
      seeds["blosc"].push_back(framed(ct::blosc_encode(p, 4, comp, shuffle, 5), p.size()));
    }
    seeds["lz4"].push_back(framed(ct::lz4_hdf5_encode(p, 0), p.size()));
    seeds["lz4"].push_back(framed(ct::lz4_hdf5_encode(p, 512), p.size(), true));
    seeds["zstd"].push_back(framed(ct::zstd_encode(p, 3), p.size()));
    seeds["zstd"].push_back(framed(ct::zstd_encode_streamed(p), p.size()));
    seeds["deflate"].push_back(framed(ct::deflate_encode(p, 4), p.size()));
    seeds["fletcher32"].push_back(ct::fletcher_append(p));
    for (uint8_t elem : {2, 4, 8, 3}) {
      Bytes s = {elem};
      Bytes sh = ct::reference_shuffle(p, elem);
      s.insert(s.end(), sh.begin(), sh.end());
      seeds["shuffle"].push_back(s);
    }
    // bitshuffle: parameters byte, elem byte, u16 block elems, then the common layout.
    for (auto [sel, code] : {std::pair{0, 0}, {1, 2}, {2, 3}}) {
      const size_t elem = 4, block = 64;
      Bytes s = {uint8_t(sel), uint8_t(elem), uint8_t(block), uint8_t(block >> 8)};
      Bytes payload = ct::bitshuffle_encode(p, elem, block, code);
      Bytes f = framed(payload, p.size() / elem * elem);
      s.insert(s.end(), f.begin(), f.end());
      if (p.size() % elem == 0) seeds["bitshuffle"].push_back(s);
    }
    // pipeline: shuffle + deflate, and fletcher32 + deflate, as HDF5 stacks them on write.
    {
      Bytes s = {1, /*shuffle*/ 1, 0, /*deflate*/ 0, 0, /*mask*/ 0, /*elem-1*/ 3};
      Bytes f = framed(ct::deflate_encode(ct::reference_shuffle(p, 4), 4), p.size());
      s.insert(s.end(), f.begin(), f.end());
      seeds["pipeline"].push_back(s);
      Bytes t = {1, /*deflate*/ 0, 0, /*fletcher32*/ 2, 0, 0, 0};
      Bytes g = framed(ct::fletcher_append(ct::deflate_encode(p, 4)), p.size());
      t.insert(t.end(), g.begin(), g.end());
      seeds["pipeline"].push_back(t);
      Bytes u = {0, /*blosc*/ 3, 0, 0, 0};
      Bytes h = framed(ct::blosc_encode(p, 4, "lz4", 1, 5), p.size());
      u.insert(u.end(), h.begin(), h.end());
      seeds["pipeline"].push_back(u);
      Bytes v = {0, /*bitshuffle*/ 5, 5};
      for (uint32_t cd : {0u, 3u, 4u, 64u, 2u}) {
        Bytes w = le32(cd);
        v.insert(v.end(), w.begin(), w.end());
      }
      v.push_back(0);
      v.push_back(3);
      if (p.size() % 4 == 0) {
        Bytes k = framed(ct::bitshuffle_encode(p, 4, 64, 2), p.size());
        v.insert(v.end(), k.begin(), k.end());
        seeds["pipeline"].push_back(v);
      }
    }
  }
  size_t total = 0;
  for (const auto& [target, list] : seeds) {
    const std::filesystem::path dir = std::filesystem::path(argv[1]) / target;
    std::filesystem::create_directories(dir);
    for (size_t i = 0; i < list.size(); ++i) {
      std::ofstream f(dir / ("seed-" + std::to_string(i)), std::ios::binary);
      f.write(reinterpret_cast<const char*>(list[i].data()), std::streamsize(list[i].size()));
      ++total;
    }
  }
  std::cout << "wrote " << total << " seeds for " << seeds.size() << " targets under " << argv[1] << "\n";
  return 0;
}
