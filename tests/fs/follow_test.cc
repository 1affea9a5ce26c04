// `--follow` without FUSE: a FileSystem whose view moves to a newer commit (FileSystem::advance)
// and the BranchFollower that polls for it, over a scripted Hub with two commits, on a manual
// Env (no sleeps: time moves by advance()).
#include "fs/follow.h"

#include <fcntl.h>
#include <gtest/gtest.h>

#include <atomic>
#include <map>
#include <mutex>
#include <set>
#include <string>
#include <vector>

#include "cache/block_cache.h"
#include "hub/hub_test_util.h"
#include "net/range_fetcher.h"
#include "support/digest.h"
#include "support/fake_transport.h"
#include "support/fetcher_env.h"
#include "support/manual_env.h"
#include "support/temp_dir.h"

namespace hubfs {
namespace HUBFS_UNITY_ID {

using testing::FakeTransport;
using testing::ManualEnv;
using testing::respond;
using testing::TempDir;

const std::string kOld(40, 'a');
const std::string kNew(40, 'b');

std::string bytes_of(char seed, size_t n) {
  std::string s(n, '\0');
  for (size_t i = 0; i < n; ++i) s[i] = static_cast<char>((i * 31 + seed) % 251);
  return s;
}

// Two commits of datasets/org/x (every file LFS, so its content id is the SHA-256 of its bytes):
//   old: keep.bin, change.bin (v1), gone.bin, sub/inner.bin
//   new: keep.bin, change.bin (v2, another size), sub/inner.bin, added.bin
struct TwoCommitHub {
  std::map<std::string, std::map<std::string, std::string>> files = {
      {kOld,
       {{"keep.bin", bytes_of(1, 3000)},
        {"change.bin", bytes_of(2, (2u << 20) + 5)},
        {"gone.bin", bytes_of(3, 700)},
        {"sub/inner.bin", bytes_of(4, 900)}}},
      {kNew,
       {{"keep.bin", bytes_of(1, 3000)},
        {"change.bin", bytes_of(5, (1u << 20) + 9)},
        {"sub/inner.bin", bytes_of(4, 900)},
        {"added.bin", bytes_of(6, 1234)}}},
  };
  std::mutex mu;
  std::string main = kOld;  // where the branch points
  bool revision_fails = false;
  int revision_calls = 0;

  static std::string entry(const std::string& path, const std::string& bytes) {
    return R"({"type":"file","oid":"x","size":)" + std::to_string(bytes.size()) + R"(,"path":")" + path +
           R"(","lfs":{"oid":")" + testing::sha256_hex(bytes) + R"(","size":)" + std::to_string(bytes.size()) + "}}";
  }

  Result<HttpResponse> answer(const HttpRequest& req) {
    std::lock_guard<std::mutex> lock(mu);
    const std::string api = "https://hub.test/api/datasets/org/x/";
    if (req.url == api + "revision/main") {
      ++revision_calls;
      if (revision_fails) return respond(503);
      return respond(200, R"({"sha":")" + main + R"(","lastModified":"2026-01-0)" + (main == kOld ? "1" : "2") +
                              R"(T00:00:00.000Z","private":false})");
    }
    for (const auto& [commit, tree] : files) {
      if (req.url.starts_with(api + "tree/" + commit)) {
        const bool sub = req.url.find("/" + commit + "/sub") != std::string::npos;
        std::string out = "[";
        if (!sub) out += R"({"type":"directory","oid":"t","size":0,"path":"sub"})";
        for (const auto& [path, bytes] : tree) {
          if ((path.find('/') != std::string::npos) != sub) continue;
          out += (out.size() > 1 ? "," : "") + entry(path, bytes);
        }
        return respond(200, out + "]");
      }
      const std::string resolve = "https://hub.test/datasets/org/x/resolve/" + commit + "/";
      if (req.url.starts_with(resolve))
        return respond(302, "", {{"location", "https://cdn.test/" + commit + "/" + req.url.substr(resolve.size())}});
      const std::string cdn = "https://cdn.test/" + commit + "/";
      if (req.url.starts_with(cdn)) {
        auto it = tree.find(req.url.substr(cdn.size()));
        if (it == tree.end()) return respond(404);
        auto range = find_header(req.headers, "Range");
        uint64_t a = 0, b = 0;
        if (!range || sscanf(range->c_str(), "bytes=%lu-%lu", &a, &b) != 2) return respond(400);
        b = std::min<uint64_t>(b, it->second.size() - 1);
        return respond(206, it->second.substr(a, b - a + 1),
                       {{"content-range", "bytes " + std::to_string(a) + "-" + std::to_string(b) + "/" +
                                              std::to_string(it->second.size())}});
      }
    }
    return respond(404, "{}", {{"x-error-code", "EntryNotFound"}});
  }
};

class FollowTest : public ::testing::Test {
 protected:
  FollowTest() {
    env_.inline_executors(true);
    HubConfig config;
    config.endpoint = "https://hub.test";
    config.env = &env_;
    hub_client_ = std::make_unique<HubClient>(config, transport_);
    CacheOptions o;
    o.env = &Env::real();
    o.dir = (dir_.path() / "cache").string();
    cache_ = std::move(BlockCache::open(o)).value();
    reader_ = std::make_unique<BlockReader>(cache_.get(), fetcher_);
    FsOptions options;
    options.mtime = 1700000000;
    options.follow = true;
    fs_ = std::make_unique<FileSystem>(*hub_client_, RepoRef{RepoType::kDataset, "org/x", kOld}, *reader_, options);
  }
  ~FollowTest() override {
    follower_.reset();
    fs_.reset();
    reader_->shutdown();
  }

  Ino lookup(Ino parent, const std::string& name) {
    auto r = fs_->lookup(parent, name);
    EXPECT_TRUE(r.ok()) << name;
    return r.ok() ? r.value().ino : 0;
  }
  std::string read_whole(uint64_t handle, uint64_t size) {
    std::string out;
    while (out.size() < size) {
      auto slices = fs_->read(handle, out.size(), 1u << 20);
      EXPECT_TRUE(slices.ok());
      if (!slices.ok() || slices.value().empty()) break;
      for (auto& s : slices.value()) out.append(s.data(), s.size());
    }
    return out;
  }
  std::set<std::string> listing(Ino dir) {
    auto h = fs_->opendir(dir);
    EXPECT_TRUE(h.ok());
    std::set<std::string> names;
    for (const DirEntry& e : fs_->readdir(h.value(), 0))
      if (e.name != "." && e.name != "..") names.insert(e.name);
    fs_->releasedir(h.value());
    return names;
  }
  void push_new_commit() {
    std::lock_guard<std::mutex> lock(hub_.mu);
    hub_.main = kNew;
  }

  ManualEnv env_;
  TempDir dir_;
  TwoCommitHub hub_;
  FakeTransport transport_{[this](const HttpRequest& r) { return hub_.answer(r); }};
  RangeFetcher fetcher_{transport_, testing::fetcher_on(env_)};
  std::unique_ptr<HubClient> hub_client_;
  std::unique_ptr<BlockCache> cache_;
  std::unique_ptr<BlockReader> reader_;
  std::unique_ptr<FileSystem> fs_;
  std::unique_ptr<BranchFollower> follower_;
};

TEST_F(FollowTest, ANewCommitGivesChangedPathsNewInodesKeepsTheSameAndHidesTheDeleted) {
  const Ino keep = lookup(kRootIno, "keep.bin"), change = lookup(kRootIno, "change.bin");
  const Ino gone = lookup(kRootIno, "gone.bin"), sub = lookup(kRootIno, "sub");
  const Ino inner = lookup(sub, "inner.bin");
  EXPECT_EQ(lookup(kRootIno, "added.bin"), 0u);  // a negative entry, remembered for invalidation
  EXPECT_EQ(listing(kRootIno), (std::set<std::string>{"change.bin", "gone.bin", "keep.bin", "sub"}));

  const ViewChange change_set = fs_->advance(kNew, 1800000000, false);
  EXPECT_EQ(change_set.old_commit, kOld);
  EXPECT_EQ(change_set.new_commit, kNew);
  EXPECT_EQ(fs_->current_commit(), kNew);
  // Everything the kernel was told of the old view: found and missing names, and directories.
  std::set<std::pair<Ino, std::string>> told(change_set.entries.begin(), change_set.entries.end());
  for (const auto& e : {std::pair<Ino, std::string>{kRootIno, "keep.bin"}, {kRootIno, "change.bin"},
                        {kRootIno, "gone.bin"}, {kRootIno, "sub"}, {kRootIno, "added.bin"}, {sub, "inner.bin"}})
    EXPECT_TRUE(told.count(e)) << e.second;
  EXPECT_EQ(std::set<Ino>(change_set.dirs.begin(), change_set.dirs.end()), (std::set<Ino>{kRootIno, sub}));

  EXPECT_EQ(lookup(kRootIno, "keep.bin"), keep);  // unchanged: the same inode (the kernel's pages stay)
  EXPECT_EQ(lookup(kRootIno, "sub"), sub);
  EXPECT_EQ(lookup(sub, "inner.bin"), inner);
  const Ino changed = lookup(kRootIno, "change.bin");
  EXPECT_NE(changed, 0u);
  EXPECT_NE(changed, change);  // changed: a new inode
  EXPECT_EQ(lookup(kRootIno, "gone.bin"), 0u);
  const Ino added = lookup(kRootIno, "added.bin");
  EXPECT_NE(added, 0u);
  EXPECT_NE(added, gone);
  EXPECT_EQ(static_cast<uint64_t>(fs_->getattr(changed).value().st_size), hub_.files[kNew]["change.bin"].size());
  EXPECT_EQ(fs_->getattr(changed).value().st_mtim.tv_sec, 1800000000);
  EXPECT_EQ(listing(kRootIno), (std::set<std::string>{"added.bin", "change.bin", "keep.bin", "sub"}));
  // The new bytes, fetched at the new commit.
  auto h = fs_->open(changed, O_RDONLY);
  ASSERT_TRUE(h.ok());
  EXPECT_EQ(read_whole(h.value().handle, hub_.files[kNew]["change.bin"].size()), hub_.files[kNew]["change.bin"]);
  fs_->release(h.value().handle);
  // Advancing to the commit already shown changes nothing.
  EXPECT_TRUE(fs_->advance(kNew, 1800000000, false).empty());
}

TEST_F(FollowTest, AnOpenFileReadsTheCommitItWasOpenedAtToItsEndChangedOrDeleted) {
  const Ino change = lookup(kRootIno, "change.bin"), gone = lookup(kRootIno, "gone.bin");
  auto c = fs_->open(change, O_RDONLY);
  auto g = fs_->open(gone, O_RDONLY);
  ASSERT_TRUE(c.ok() && g.ok());
  const std::string& old_change = hub_.files[kOld]["change.bin"];
  // The first megabyte before the push, the rest after it.
  auto first = fs_->read(c.value().handle, 0, 1u << 20);
  ASSERT_TRUE(first.ok());
  (void)fs_->advance(kNew, 1800000000, false);
  std::string got;
  for (auto& s : first.value()) got.append(s.data(), s.size());
  while (got.size() < old_change.size()) {
    auto more = fs_->read(c.value().handle, got.size(), 1u << 20);
    ASSERT_TRUE(more.ok()) << more.error().reason;
    if (more.value().empty()) break;
    for (auto& s : more.value()) got.append(s.data(), s.size());
  }
  EXPECT_EQ(got, old_change);  // the old bytes exactly, to the old end
  // A file deleted by the new commit: its open handle reads it whole, without an error.
  EXPECT_EQ(read_whole(g.value().handle, 700), hub_.files[kOld]["gone.bin"]);
  fs_->release(c.value().handle);
  fs_->release(g.value().handle);
  EXPECT_EQ(lookup(kRootIno, "gone.bin"), 0u);  // gone for new opens
}

TEST_F(FollowTest, AReplacedViewInUseIsToldAgainUntilTwoPollsFindItIdle) {
  (void)lookup(kRootIno, "keep.bin");
  (void)fs_->advance(kNew, 1800000000, false);
  // No operation holds the replaced view: its names are told at two polls, then it is forgotten.
  EXPECT_FALSE(fs_->retired_names().empty());
  EXPECT_FALSE(fs_->retired_names().empty());
  EXPECT_TRUE(fs_->retired_names().empty());
  EXPECT_FALSE(fs_->listing_is_stable(kRootIno));  // with follow the kernel caches no listing
}

TEST_F(FollowTest, ADirectoryHandleKeepsTheListingItWasOpenedWith) {
  auto h = fs_->opendir(kRootIno);
  ASSERT_TRUE(h.ok());
  (void)fs_->advance(kNew, 1800000000, false);
  std::set<std::string> names;
  for (const DirEntry& e : fs_->readdir(h.value(), 0)) names.insert(e.name);
  fs_->releasedir(h.value());
  EXPECT_EQ(names, (std::set<std::string>{".", "..", "change.bin", "gone.bin", "keep.bin", "sub"}));
  EXPECT_EQ(listing(kRootIno), (std::set<std::string>{"added.bin", "change.bin", "keep.bin", "sub"}));
}

TEST_F(FollowTest, TheFollowerPollsOncePerIntervalAndInvalidatesAfterInstallingTheNewView) {
  std::vector<ViewChange> told;
  std::vector<std::string> commit_when_told;
  (void)lookup(kRootIno, "keep.bin");
  follower_ = std::make_unique<BranchFollower>(*hub_client_, RepoRef{RepoType::kDataset, "org/x", "main"}, nullptr,
                                               *fs_, env_, std::chrono::seconds(5), [&](const ViewChange& c) {
                                                 told.push_back(c);
                                                 commit_when_told.push_back(fs_->current_commit());
                                               });
  env_.advance(std::chrono::milliseconds(4999));
  EXPECT_EQ(hub_.revision_calls, 0);
  env_.advance(std::chrono::milliseconds(1));
  EXPECT_EQ(hub_.revision_calls, 1);  // one request per interval
  EXPECT_TRUE(told.empty());          // same commit: nothing to tell
  EXPECT_NE(follower_->state().checked_at, 0);
  push_new_commit();
  env_.advance(std::chrono::seconds(5));
  EXPECT_EQ(hub_.revision_calls, 2);
  ASSERT_EQ(told.size(), 1u);
  EXPECT_EQ(commit_when_told[0], kNew);  // told after the new view was installed
  EXPECT_EQ(told[0].old_commit, kOld);
  EXPECT_EQ(follower_->state().commit, kNew);
  EXPECT_EQ(follower_->state().changes, 1u);
  // The next polls tell the replaced view's names again (a lookup racing the swap may have
  // answered the kernel after the first invalidation), until two polls found nothing using it.
  env_.advance(std::chrono::seconds(5));
  ASSERT_EQ(told.size(), 2u);
  EXPECT_EQ(told[1].old_commit, kOld);
  env_.advance(std::chrono::seconds(5));
  EXPECT_EQ(told.size(), 3u);
  env_.advance(std::chrono::seconds(5));
  EXPECT_EQ(told.size(), 3u);
  EXPECT_EQ(hub_.revision_calls, 5);
}

TEST_F(FollowTest, AFailingPollKeepsTheCommitAndLogsOnceUntilItAnswers) {
  follower_ = std::make_unique<BranchFollower>(*hub_client_, RepoRef{RepoType::kDataset, "org/x", "main"}, nullptr,
                                               *fs_, env_, std::chrono::seconds(5), [](const ViewChange&) {});
  {
    std::lock_guard<std::mutex> lock(hub_.mu);
    hub_.revision_fails = true;
    hub_.main = kNew;
  }
  // Each failing poll retries within the transport (its backoffs on the manual timer run as
  // time moves); the follower keeps the commit it shows.
  for (int i = 0; i < 3; ++i) env_.advance(std::chrono::seconds(30));
  EXPECT_EQ(fs_->current_commit(), kOld);
  EXPECT_FALSE(follower_->state().last_error.empty());
  EXPECT_GE(follower_->state().polls, 1u);
  {
    std::lock_guard<std::mutex> lock(hub_.mu);
    hub_.revision_fails = false;
  }
  for (int i = 0; i < 3 && fs_->current_commit() != kNew; ++i) env_.advance(std::chrono::seconds(30));
  EXPECT_EQ(fs_->current_commit(), kNew);
  EXPECT_TRUE(follower_->state().last_error.empty());
}

}  // namespace HUBFS_UNITY_ID
}  // namespace hubfs
