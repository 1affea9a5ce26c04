// BLAKE3 against the specification's official test vectors and against Debian's b3sum (the
// reference implementation's CLI) on random input.
#include "xet/blake3.h"

#include <gtest/gtest.h>

#include <cstdio>
#include <cstring>
#include <fstream>
#include <random>
#include <string>
#include <vector>

#include "support/temp_dir.h"
#include "blake3_vectors.h"

namespace hubfs::xet {
namespace HUBFS_UNITY_ID {

std::string to_hex(const uint8_t* p, size_t n) {
  static const char* kDigits = "0123456789abcdef";
  std::string s;
  for (size_t i = 0; i < n; ++i) {
    s += kDigits[p[i] >> 4];
    s += kDigits[p[i] & 15];
  }
  return s;
}

std::vector<uint8_t> vector_input(size_t n) {
  std::vector<uint8_t> v(n);
  for (size_t i = 0; i < n; ++i) v[i] = static_cast<uint8_t>(i % 251);
  return v;
}

Blake3Key vector_key() {
  Blake3Key k;
  std::memcpy(k.data(), test::kBlake3VectorKey, k.size());
  return k;
}

std::string extended(const Blake3& h, size_t n) {
  std::vector<uint8_t> out(n);
  h.finalize(out.data(), n);
  return to_hex(out.data(), n);
}

TEST(Blake3Test, OfficialVectorsOneShot) {
  for (const auto& v : test::kBlake3Vectors) {
    const auto in = vector_input(v.input_len);
    const std::string want(v.hash_hex);
    const std::string want_keyed(v.keyed_hash_hex);
    const auto d = Blake3::hash(in.data(), in.size());
    EXPECT_EQ(to_hex(d.data(), d.size()), want.substr(0, 64)) << "len " << v.input_len;
    const auto k = Blake3::keyed_hash(vector_key(), in.data(), in.size());
    EXPECT_EQ(to_hex(k.data(), k.size()), want_keyed.substr(0, 64)) << "keyed len " << v.input_len;
  }
}

TEST(Blake3Test, OfficialVectorsExtendedOutput) {
  for (const auto& v : test::kBlake3Vectors) {
    const auto in = vector_input(v.input_len);
    const std::string want(v.hash_hex);
    Blake3 plain;
    plain.update(in.data(), in.size());
    EXPECT_EQ(extended(plain, want.size() / 2), want) << "len " << v.input_len;
    Blake3 keyed(vector_key());
    keyed.update(in.data(), in.size());
    EXPECT_EQ(extended(keyed, want.size() / 2), std::string(v.keyed_hash_hex)) << "keyed len " << v.input_len;
  }
}

// Every split point style: byte by byte, odd pieces straddling block and chunk edges, and
// finalize() in the middle (it must not disturb the state).
TEST(Blake3Test, IncrementalMatchesOneShotForEverySplit) {
  for (const auto& v : test::kBlake3Vectors) {
    const auto in = vector_input(v.input_len);
    const std::string want = std::string(v.keyed_hash_hex).substr(0, 64);
    for (size_t piece : {size_t(1), size_t(63), size_t(64), size_t(65), size_t(1000), size_t(1024), size_t(1025),
                         size_t(4097)}) {
      Blake3 h(vector_key());
      for (size_t off = 0; off < in.size(); off += piece) {
        h.update(in.data() + off, std::min(piece, in.size() - off));
        if (piece != 1) (void)h.finalize();
      }
      const auto d = h.finalize();
      ASSERT_EQ(to_hex(d.data(), d.size()), want) << "len " << v.input_len << " piece " << piece;
    }
  }
}

// Long input is hashed sixteen chunks at a time where the CPU has AVX-512, eight where it has
// AVX2 (the official vectors above reach 8193, 16384, 31744 and 102400 bytes, so they cover the
// path the CPU takes): the digest must not depend on the path, whatever the length, the chunk
// counter's starting point or the key.
TEST(Blake3Test, EightChunksAtOnceGiveTheScalarDigest) {
  std::mt19937 rng(7);
  std::vector<uint8_t> in(300 * 1024 + 77);
  for (auto& b : in) b = static_cast<uint8_t>(rng());
  for (size_t n : {size_t(2 * 1024 + 1), size_t(3 * 1024), size_t(5 * 1024 + 9), size_t(8 * 1024),
                   size_t(8 * 1024 + 1), size_t(9 * 1024), size_t(10 * 1024 + 1), size_t(16 * 1024), size_t(16 * 1024 + 1),
                   size_t(17 * 1024 + 5), size_t(33 * 1024),
                   size_t(64 * 1024), size_t(100 * 1024 + 3), in.size()}) {
    for (size_t prefix : {size_t(0), size_t(1024), size_t(3000)}) {  // later chunk counters, partial chunks
      if (prefix + n > in.size()) continue;
      auto digest = [&](bool simd, bool avx512 = true) {
        Blake3::allow_simd(simd);
        Blake3::allow_avx512(avx512);
        Blake3 h(vector_key());
        h.update(in.data(), prefix);
        h.update(in.data() + prefix, n);
        Blake3 plain;
        plain.update(in.data() + prefix, n);
        const auto a = h.finalize(), b = plain.finalize();
        return to_hex(a.data(), a.size()) + to_hex(b.data(), b.size());
      };
      const std::string fast = digest(true), eight = digest(true, false), scalar = digest(false);
      Blake3::allow_simd(true);
      Blake3::allow_avx512(true);
      EXPECT_EQ(fast, scalar) << "length " << n << " after " << prefix;
      EXPECT_EQ(eight, scalar) << "eight lanes, length " << n << " after " << prefix;
    }
  }
}

TEST(Blake3Test, FinalizeTwiceAndContinue) {
  const auto in = vector_input(3000);
  Blake3 h;
  h.update(in.data(), 1500);
  EXPECT_EQ(h.finalize(), h.finalize());
  EXPECT_EQ(h.finalize(), Blake3::hash(in.data(), 1500));
  h.update(in.data() + 1500, 1500);
  EXPECT_EQ(h.finalize(), Blake3::hash(in.data(), in.size()));
}

// b3sum hashes a file; --keyed takes the 32 raw key bytes on stdin (given here from a file).
std::string b3sum(const std::string& file, const Blake3Key* key) {
  std::string cmd = "b3sum --no-names ";
  if (key) {
    const std::string key_file = file + ".key";
    std::ofstream(key_file, std::ios::binary).write(reinterpret_cast<const char*>(key->data()), key->size());
    cmd += "--keyed '" + file + "' < '" + key_file + "'";
  } else {
    cmd += "'" + file + "'";
  }
  FILE* p = popen(cmd.c_str(), "r");
  if (!p) return "popen failed";
  std::string out;
  char buf[256];
  while (fgets(buf, sizeof buf, p)) out += buf;
  if (pclose(p) != 0) return "b3sum failed: " + cmd;
  while (!out.empty() && (out.back() == '\n' || out.back() == ' ')) out.pop_back();
  return out;
}

TEST(Blake3Test, MatchesB3sumOnRandomInput) {
  ASSERT_EQ(system("b3sum --version > /dev/null 2>&1"), 0)
      << "b3sum is missing: install Debian's b3sum package (scripts/deps.sh lists it)";
  testing::TempDir dir;
  std::mt19937_64 rng(22);
  // Sizes around the chunk-tree edges plus a few up to 3 MiB (a tree about 12 levels deep).
  std::vector<size_t> sizes = {0, 1, 64, 1024, 1025, 2047, 65536, 65537, 1 << 20, 3 * (1 << 20) + 777};
  for (int i = 0; i < 6; ++i) sizes.push_back(rng() % (3 << 20));
  for (size_t n : sizes) {
    std::vector<uint8_t> data(n);
    for (auto& b : data) b = static_cast<uint8_t>(rng());
    Blake3Key key;
    for (auto& b : key) b = static_cast<uint8_t>(rng());
    const std::string path = (dir / ("in" + std::to_string(n))).string();
    std::ofstream(path, std::ios::binary).write(reinterpret_cast<const char*>(data.data()), n);

    const auto d = Blake3::hash(data.data(), n);
    EXPECT_EQ(to_hex(d.data(), d.size()), b3sum(path, nullptr)) << "len " << n;
    // Incremental in uneven pieces, keyed.
    Blake3 h(key);
    size_t off = 0;
    while (off < n) {
      const size_t piece = std::min<size_t>(n - off, 1 + rng() % 5000);
      h.update(data.data() + off, piece);
      off += piece;
    }
    const auto k = h.finalize();
    EXPECT_EQ(to_hex(k.data(), k.size()), b3sum(path, &key)) << "keyed len " << n;
  }
}

}  // namespace
}  // namespace hubfs::xet
