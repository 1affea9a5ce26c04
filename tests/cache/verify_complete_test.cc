// `hubfs cache verify --complete` (cache_admin::verify_content with a HubSource): partly cached
// files completed from a fake Hub and verified whole; a corrupted partial block found, purged
// (from the disk cache and the shared tier) and fetched again exact; files with no Hub URL, a
// Hub that cannot be reached and a Hub that keeps serving wrong bytes reported as such.
#include <gtest/gtest.h>

#include <map>
#include <mutex>
#include <string>
#include <vector>

#include "cache/block_cache.h"
#include "cache/cache_admin.h"
#include "cache/cache_index.h"
#include "cache/content_verifier.h"
#include "shared/shared_store.h"
#include "support/pattern.h"
#include "support/temp_dir.h"

namespace hubfs {
namespace HUBFS_UNITY_ID {

using testing::TempDir;
using cache_admin::ContentVerifyOptions;
using cache_admin::HubSource;
constexpr uint64_t kMiB = 1u << 20;
const std::string kCommit(40, 'c');

std::string sha256_id(const std::string& data) {
  auto v = ContentVerifier::for_content("sha256:" + std::string(64, '0'), data.size());
  v->update(data);
  return "sha256:" + v->finish().computed;
}

// The support library's pattern: optimized and uninstrumented in the sanitizer builds, where a
// per-byte generator in this file (-O0, instrumented) cost ~1 s per 10 MiB.
std::string content(size_t size, unsigned seed) { return testing::pattern_bytes(seed, 0, size); }

// Records the deletes; answers nothing.
struct RecordingTier : SharedStore {
  std::vector<std::pair<std::string, size_t>> removed;
  std::vector<std::optional<std::string>> get(const std::vector<SharedGet>& items, const Deadline&) override {
    return std::vector<std::optional<std::string>>(items.size());
  }
  void put(std::string, std::string) override {}
  void remove(std::string key, size_t value_size) override { removed.emplace_back(std::move(key), value_size); }
  SharedStoreStats stats() const override { return {}; }
  std::string describe() const override { return "recording"; }
};

// The Hub: each content id's true bytes (or `served` ones, to model a corrupting path).
struct FakeHub {
  std::map<std::string, std::string> files;   // content id -> bytes served
  std::vector<std::pair<uint64_t, uint64_t>> ranges;  // every fetch asked
  std::optional<Status> fail;                 // every fetch fails so, when set
  std::map<std::string, Status> unmappable;   // path -> why it has no URL

  HubSource source() {
    return HubSource{
        [this](const IndexRecord& r) {
          auto it = unmappable.find(r.path);
          return it == unmappable.end() ? Status::Ok() : it->second;
        },
        [this](const IndexRecord& r, uint64_t offset, uint64_t length) -> Result<std::string> {
          ranges.emplace_back(offset, length);
          if (fail) return *fail;
          return files.at(r.content_id).substr(offset, length);
        }};
  }
};

class VerifyCompleteTest : public ::testing::Test {
 protected:
  void SetUp() override {
    CacheOptions options;
    options.env = &Env::real();
    options.dir = dir_.str();
    options.budget_bytes = 1ull << 30;
    auto cache = BlockCache::open(options);
    ASSERT_TRUE(cache.ok()) << cache.status().message();
    cache_ = std::move(cache).value();
  }
  // Caches the given blocks of `bytes` (1 MiB each) under `id`, and records the file.
  void cache_blocks(const std::string& path, const std::string& id, const std::string& bytes,
                    const std::vector<uint64_t>& blocks) {
    for (uint64_t i : blocks) cache_->put(id, i, std::string_view(bytes).substr(i * kMiB, kMiB));
    ASSERT_TRUE(cache_index::record(dir_.str(), {"datasets/o/r", "main", kCommit, path, id, bytes.size()}).ok());
  }
  // The file as the cache holds it now, or "" if any block is missing.
  std::string cached_file(const std::string& id, uint64_t size) {
    std::string out;
    for (uint64_t i = 0; i * kMiB < size; ++i) {
      auto b = cache_->get(id, i);
      if (!b) return "";
      out += *b;
    }
    return out;
  }
  TempDir dir_;
  std::unique_ptr<BlockCache> cache_;
};

TEST_F(VerifyCompleteTest, APartlyCachedFileIsCompletedInFewRequestsAndVerified) {
  const std::string truth = content(10 * kMiB + 17, 1);
  const std::string id = sha256_id(truth);
  cache_blocks("big.bin", id, truth, {0, 9});
  FakeHub hub;
  hub.files[id] = truth;
  ContentVerifyOptions options;
  options.hub = hub.source();
  std::vector<std::pair<uint64_t, uint64_t>> progress;
  options.progress = [&](uint64_t done, uint64_t total) { progress.emplace_back(done, total); };

  auto v = cache_admin::verify_content(dir_.str(), Env::real(), options);
  ASSERT_TRUE(v.ok()) << v.status().message();
  EXPECT_EQ(v->files_completed, 1u);
  EXPECT_EQ(v->files_checked, 1u);
  EXPECT_EQ(v->files_bad, 0u);
  EXPECT_EQ(v->files_incomplete, 0u);
  EXPECT_TRUE(v->unverifiable_files.empty());
  EXPECT_EQ(v->bytes_fetched, truth.size() - kMiB - kMiB);
  // Blocks 1..8 in one 8 MiB request, then the 17-byte tail block 10; the cached 0 and 9 are used.
  std::vector<std::pair<uint64_t, uint64_t>> want = {{kMiB, 8 * kMiB}, {10 * kMiB, 17}};
  EXPECT_EQ(hub.ranges, want);
  EXPECT_EQ(cached_file(id, truth.size()), truth);
  // Progress never goes back and ends at the total.
  ASSERT_FALSE(progress.empty());
  for (size_t i = 1; i < progress.size(); ++i) EXPECT_LE(progress[i - 1].first, progress[i].first);
  EXPECT_EQ(progress.back().first, truth.size());
  EXPECT_EQ(progress.back().second, truth.size());
}

// The target: a byte flipped in a block a partial read cached (its CRC is of the flipped
// bytes, so the block check passes). Without --complete it is unverifiable; with it the whole
// file is judged, found bad, purged here and in the shared tier, and fetched again exact.
TEST_F(VerifyCompleteTest, ACorruptedPartialBlockIsFoundPurgedAndRefetchedExact) {
  const std::string truth = content(3 * kMiB + 5, 2);
  const std::string id = sha256_id(truth);
  std::string flipped = truth;
  flipped[kMiB + 1234] ^= 0x5a;
  cache_blocks("data.bin", id, flipped, {1});

  auto plain = cache_admin::verify_content(dir_.str(), Env::real());
  ASSERT_TRUE(plain.ok());
  EXPECT_EQ(plain->files_bad, 0u);
  EXPECT_EQ(plain->files_incomplete, 1u);
  EXPECT_EQ(plain->unverifiable_bytes, kMiB);
  ASSERT_TRUE(cache_->get(id, 1).has_value()) << "a plain verify must not delete what it cannot judge";

  FakeHub hub;
  hub.files[id] = truth;
  RecordingTier tier;
  ContentVerifyOptions options;
  options.hub = hub.source();
  options.shared = &tier;
  auto key = SharedStoreKey::from_bytes(std::string(32, 'k'));
  ASSERT_TRUE(key.ok());
  options.shared_key = *key;
  auto v = cache_admin::verify_content(dir_.str(), Env::real(), options);
  ASSERT_TRUE(v.ok()) << v.status().message();
  EXPECT_EQ(v->files_bad, 1u);
  EXPECT_EQ(v->files_refetched, 1u);
  EXPECT_EQ(v->files_completed, 0u);
  EXPECT_EQ(v->files_incomplete, 0u);
  ASSERT_EQ(v->bad_files.size(), 1u);
  EXPECT_NE(v->bad_files[0].find("data.bin"), std::string::npos) << v->bad_files[0];
  EXPECT_NE(v->bad_files[0].find("fetched again from the Hub: exact"), std::string::npos) << v->bad_files[0];
  EXPECT_EQ(cached_file(id, truth.size()), truth);
  // Every block's key in the tier deleted, each with its envelope's size.
  ASSERT_EQ(tier.removed.size(), 4u);
  EXPECT_EQ(v->shared_blocks_deleted, 4u);
  for (uint64_t i = 0; i < 4; ++i) {
    const std::string k = SharedBlockKey{key->id(), id, static_cast<uint32_t>(kMiB), i}.str();
    EXPECT_EQ(tier.removed[i].first, k);
    EXPECT_EQ(tier.removed[i].second, shared_envelope::size(k, i < 3 ? kMiB : 5));
  }
  // Completing fetched blocks 0, 2, 3 (1 was cached); the refetch all four.
  std::vector<std::pair<uint64_t, uint64_t>> want = {{0, kMiB}, {2 * kMiB, kMiB + 5}, {0, 3 * kMiB + 5}};
  EXPECT_EQ(hub.ranges, want);

  // Now the file is whole and right: a plain verify says so.
  auto again = cache_admin::verify_content(dir_.str(), Env::real());
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(again->files_checked, 1u);
  EXPECT_EQ(again->files_bad, 0u);
  EXPECT_EQ(again->files_incomplete, 0u);
}

// A complete file whose hash fails is fetched again too; a Hub (or a path to it) that keeps
// serving other bytes than the content id leaves nothing cached.
TEST_F(VerifyCompleteTest, AFileTheHubKeepsServingWrongIsPurgedAgain) {
  const std::string truth = content(2 * kMiB, 3);
  const std::string id = sha256_id(truth);
  std::string wrong = truth;
  wrong[10] ^= 1;
  cache_blocks("w.bin", id, wrong, {0, 1});
  FakeHub hub;
  hub.files[id] = wrong;
  ContentVerifyOptions options;
  options.hub = hub.source();
  auto v = cache_admin::verify_content(dir_.str(), Env::real(), options);
  ASSERT_TRUE(v.ok());
  EXPECT_EQ(v->files_bad, 1u);
  EXPECT_EQ(v->files_refetched, 0u);
  ASSERT_EQ(v->bad_files.size(), 1u);
  EXPECT_NE(v->bad_files[0].find("still hashes to"), std::string::npos) << v->bad_files[0];
  EXPECT_FALSE(cache_->get(id, 0).has_value());
  EXPECT_FALSE(cache_->get(id, 1).has_value());
}

// No URL for a file, and a Hub that does not answer: the files stay unverifiable (nothing is
// deleted), each saying why, and after the first unreachable answer no other file is tried.
TEST_F(VerifyCompleteTest, UnmappableFilesAndAnUnreachableHubLeaveFilesUnverifiedWithTheReason) {
  const std::string a = content(2 * kMiB, 4), b = content(2 * kMiB, 5), c = content(2 * kMiB, 6);
  cache_blocks("nourl.bin", sha256_id(a), a, {0});
  cache_blocks("b.bin", sha256_id(b), b, {0});
  cache_blocks("c.bin", sha256_id(c), c, {1});
  FakeHub hub;
  hub.unmappable["nourl.bin"] = InvalidArgument("its index entry records no commit");
  hub.fail = Status(Code::kUnavailable, "cannot reach http://hub.test: connection refused; check the network");
  ContentVerifyOptions options;
  options.hub = hub.source();
  auto v = cache_admin::verify_content(dir_.str(), Env::real(), options);
  ASSERT_TRUE(v.ok());
  EXPECT_EQ(v->files_incomplete, 3u);
  EXPECT_EQ(v->files_unmappable, 1u);
  EXPECT_EQ(v->files_bad, 0u);
  EXPECT_EQ(v->unverifiable_bytes, 3 * kMiB);
  EXPECT_EQ(hub.ranges.size(), 1u) << "the Hub was asked again after it could not be reached";
  ASSERT_EQ(v->fetch_errors.size(), 1u);
  EXPECT_NE(v->fetch_errors[0].find("connection refused"), std::string::npos) << v->fetch_errors[0];
  std::string all;
  for (const std::string& line : v->unverifiable_files) all += line + "\n";
  EXPECT_NE(all.find("nourl.bin"), std::string::npos) << all;
  EXPECT_NE(all.find("no Hub URL for it: its index entry records no commit"), std::string::npos) << all;
  EXPECT_NE(all.find("not tried: cannot reach"), std::string::npos) << all;
  EXPECT_TRUE(cache_->get(sha256_id(a), 0).has_value());
  EXPECT_TRUE(cache_->get(sha256_id(c), 1).has_value());
}

// A repo the Hub refuses (private, no token) is asked once: its other files are not tried, and
// the cause with its fix is reported once; nothing is deleted.
TEST_F(VerifyCompleteTest, ARefusedRepoIsAskedOnceAndItsFilesStayUnverified) {
  const std::string a = content(2 * kMiB, 7), b = content(2 * kMiB, 8);
  cache_blocks("a.bin", sha256_id(a), a, {0});
  cache_blocks("b.bin", sha256_id(b), b, {1});
  FakeHub hub;
  hub.fail = Status(Code::kNotFound, "repository datasets/o/r not found, or private: set HF_TOKEN");
  ContentVerifyOptions options;
  options.hub = hub.source();
  auto v = cache_admin::verify_content(dir_.str(), Env::real(), options);
  ASSERT_TRUE(v.ok());
  EXPECT_EQ(hub.ranges.size(), 1u);
  EXPECT_EQ(v->files_incomplete, 2u);
  EXPECT_EQ(v->files_bad, 0u);
  ASSERT_EQ(v->fetch_errors.size(), 1u);
  EXPECT_NE(v->fetch_errors[0].find("set HF_TOKEN"), std::string::npos) << v->fetch_errors[0];
  EXPECT_TRUE(cache_->get(sha256_id(a), 0).has_value());
  EXPECT_TRUE(cache_->get(sha256_id(b), 1).has_value());
}

}  // namespace
}  // namespace hubfs
