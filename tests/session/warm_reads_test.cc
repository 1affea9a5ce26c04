// Issue 42: nothing a warm read does needs the network. A partial read through one session (the
// hf:// door), then the same read through a new session over the same cache (as a new process
// would): the second makes no request beyond the branch's pin, for an LFS file read through the
// bridge and for a Xet-stored one (no read token either). The partial read is the case: its
// sequential pieces earn read-ahead, and warm read-ahead used to fetch past what the cache held.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "stack/hub_file.h"
#include "support/local_hub.h"
#include "support/pattern.h"
#include "support/temp_dir.h"

namespace hubfs {
namespace HUBFS_UNITY_ID {

using testing::LocalHub;
using testing::LocalHubOptions;
using testing::TempDir;

constexpr uint64_t kSize = 16ull << 20;
constexpr uint64_t kSeed = 42;
constexpr uint64_t kPartial = 6ull << 20;  // the partial read: its first 6 MiB

class WarmReadsTest : public ::testing::TestWithParam<bool> {
 protected:
  void SetUp() override {
    const auto repo = root_.path() / "datasets" / "lab" / "warm";
    testing::write_pattern_file((repo / "data" / "big.bin").string(), kSeed, kSize);
    LocalHubOptions options;
    options.root = root_.str();
    options.xet = GetParam();
    hub_ = LocalHub::start(options);
  }

  std::shared_ptr<RepoSession> open_session() {
    SessionConfig c;
    c.endpoint = hub_->url();
    c.cache_dir = (cache_.path() / "cache").string();
    c.cache_size = 1ull << 30;
    c.read_timeout_s = 60;
    c.token = "";
    auto s = std::make_shared<RepoSession>(Env::real());
    RepoRef ref;
    ref.type = RepoType::kDataset;
    ref.id = "lab/warm";
    ref.revision = "main";
    Status st = open_repo_session(c, RepoSpec{ref, ""}, *s, {}, "data/big.bin");
    EXPECT_TRUE(st.ok()) << st.message();
    return st.ok() ? s : nullptr;
  }

  // The partial read, in 256 KiB pieces front to back; the count of wrong bytes.
  static size_t read_partial(const std::shared_ptr<RepoSession>& s) {
    auto f = HubFile::open(s, "data/big.bin");
    EXPECT_TRUE(f.ok()) << f.status().message();
    if (!f.ok()) return kPartial;
    std::string buf(256 << 10, '\0');
    size_t wrong = 0;
    for (uint64_t off = 0; off < kPartial; off += buf.size()) {
      auto got = (*f)->pread(buf.data(), off, buf.size());
      EXPECT_TRUE(got.ok()) << (got.ok() ? "" : got.status().message());
      if (!got.ok()) return kPartial;
      wrong += testing::count_pattern_mismatches(kSeed, off, buf.data(), *got);
    }
    return wrong;
  }

  TempDir root_, cache_;
  std::unique_ptr<LocalHub> hub_;
};

TEST_P(WarmReadsTest, APartialReadAgainInANewSessionMakesNoRequestBeyondThePin) {
  {
    auto cold = open_session();
    ASSERT_NE(cold, nullptr);
    EXPECT_EQ(read_partial(cold), 0u);
  }  // the session ends: every block it fetched is on disk
  const auto cold_stats = hub_->stats();
  ASSERT_GT(cold_stats[GetParam() ? "xorb_requests" : "cdn_requests"].get<uint64_t>(), 0u) << cold_stats.dump();
  hub_->reset_stats();
  {
    auto warm = open_session();
    ASSERT_NE(warm, nullptr);
    EXPECT_EQ(read_partial(warm), 0u);
  }  // ended: anything it started has finished and been counted
  const auto trace = hub_->trace();
  size_t pins = 0;
  for (const auto& r : trace) {
    const std::string path = r["path"].get<std::string>();
    EXPECT_NE(path.find("/revision/"), std::string::npos) << "a warm read made a request: " << r.dump();
    ++pins;
  }
  EXPECT_LE(pins, 1u) << trace.dump();
  EXPECT_EQ(hub_->stats()["xet_token_requests"].get<uint64_t>(), 0u);
}

INSTANTIATE_TEST_SUITE_P(LfsAndXet, WarmReadsTest, ::testing::Values(false, true),
                         [](const ::testing::TestParamInfo<bool>& p) { return p.param ? "Xet" : "Lfs"; });

}  // namespace HUBFS_UNITY_ID
}  // namespace hubfs
