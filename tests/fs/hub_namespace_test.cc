// The whole-Hub namespace without FUSE: fixed top levels, ORG/NAME[@REV] pinned on first touch
// through a scripted Hub, repos kept apart by inode and handle numbers, missing repos ENOENT and
// remembered for a while (a clock the test moves), the status xattr on the root.
#include "fs/hub_namespace.h"

#include <fcntl.h>
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "cache/block_cache.h"
#include "hub/hub_test_util.h"
#include "net/range_fetcher.h"
#include "support/manual_env.h"
#include "support/fake_transport.h"
#include "support/temp_dir.h"
#include "support/fetcher_env.h"

namespace hubfs {
namespace HUBFS_UNITY_ID {

using testing::FakeTransport;
using testing::respond;
using testing::TempDir;

const std::string kMain(40, 'a');  // datasets/org/x at main
const std::string kV1(40, 'b');    // datasets/org/x at v1

// datasets/org/x: main has readme.md ("hello\n"), v1 has old.txt ("old\n"). models/org/m: main
// has w.txt. Anything else: RepoNotFound.
struct FakeHub {
  std::atomic<int> repo_infos{0};
  std::atomic<bool> down{false};

  Result<HttpResponse> answer(const HttpRequest& req) {
    const std::string& u = req.url;
    if (u.find("/revision/") != std::string::npos) {
      ++repo_infos;
      if (down) return Unavailable("connection refused");
      if (u == "https://hub.test/api/datasets/org/x/revision/main") return respond(200, R"({"sha":")" + kMain + R"("})");
      if (u == "https://hub.test/api/datasets/org/x/revision/v1") return respond(200, R"({"sha":")" + kV1 + R"("})");
      if (u == "https://hub.test/api/datasets/org/x/revision/refs%2Fpr%2F1") return respond(200, R"({"sha":")" + kV1 + R"("})");
      if (u == "https://hub.test/api/models/org/m/revision/main") return respond(200, R"({"sha":")" + kMain + R"("})");
      return respond(404, R"({"error":"Repository not found"})", {{"x-error-code", "RepoNotFound"}});
    }
    if (u == "https://hub.test/api/datasets/org/x/tree/" + kMain + "?recursive=false&limit=1000")
      return respond(200, R"([{"type":"file","oid":"ce013625030ba8dba906f756967f9e9ca394464a","size":6,"path":"readme.md"}])");
    if (u == "https://hub.test/api/datasets/org/x/tree/" + kV1 + "?recursive=false&limit=1000")
      return respond(200, R"([{"type":"file","oid":"3367afdbbf91e638efe983616377c60477cc6612","size":4,"path":"old.txt"}])");
    if (u == "https://hub.test/api/models/org/m/tree/" + kMain + "?recursive=false&limit=1000")
      return respond(200, R"([{"type":"file","oid":"e556b830cfd4d2bf3f4501b4ff7cf2ce00c052ef","size":2,"path":"w.txt"}])");
    if (u.find("/resolve/") != std::string::npos) {
      std::string body = u.find("readme.md") != std::string::npos ? "hello\n"
                         : u.find("old.txt") != std::string::npos ? "old\n"
                                                                  : "w\n";
      auto range = find_header(req.headers, "Range");
      uint64_t a = 0, b = 0;
      if (!range || sscanf(range->c_str(), "bytes=%lu-%lu", &a, &b) != 2) return respond(200, body);
      return respond(206, body.substr(a, b - a + 1),
                     {{"content-range", "bytes " + std::to_string(a) + "-" + std::to_string(b) + "/" +
                                            std::to_string(body.size())}});
    }
    return respond(404, "{}", {{"x-error-code", "EntryNotFound"}});
  }
};

class HubNamespaceTest : public ::testing::Test {
 protected:
  HubNamespaceTest() {
    HubConfig config;
    config.env = &Env::real();
    config.endpoint = "https://hub.test";
    client_ = std::make_unique<HubClient>(config, transport_);
    CacheOptions o;
    o.env = &Env::real();
    o.dir = (dir_.path() / "cache").string();
    cache_ = std::move(BlockCache::open(o)).value();
    reader_ = std::make_unique<BlockReader>(cache_.get(), fetcher_);
    HubNamespaceOptions options;
    options.pin = [this](const RepoRef& repo) {
      ++pins_;
      return pin_revision(*client_, repo, nullptr, false);
    };
    options.repo_options = [](const RepoRef&, const PinnedRevision&) { return FsOptions{}; };
    options.status_json = [] { return std::string(R"({"repo":"hub"})"); };
    options.negative_ttl = std::chrono::seconds(30);
    env_.steady = [this] { return std::chrono::steady_clock::time_point(std::chrono::seconds(now_s_.load())); };
    options.env = &env_;
    ns_ = std::make_unique<HubNamespace>(*client_, *reader_, std::move(options));
  }
  ~HubNamespaceTest() override {
    ns_.reset();
    reader_->shutdown();
  }

  Ino lookup_ok(Ino parent, const std::string& name) {
    auto r = ns_->lookup(parent, name);
    EXPECT_TRUE(r.ok()) << name << ": " << (r.ok() ? "" : r.error().reason);
    return r.ok() ? r.value().ino : 0;
  }
  Ino repo_root(const std::string& type, const std::string& org, const std::string& name) {
    return lookup_ok(lookup_ok(lookup_ok(kRootIno, type), org), name);
  }
  std::string read_file(Ino ino) {
    auto h = ns_->open(ino, O_RDONLY);
    EXPECT_TRUE(h.ok());
    if (!h.ok()) return "";
    auto slices = ns_->read(h.value().handle, 0, 4096);
    std::string out;
    if (slices.ok())
      for (auto& s : slices.value()) out.append(s.data(), s.size());
    ns_->release(h.value().handle);
    return out;
  }
  std::vector<std::string> names(Ino dir) {
    auto h = ns_->opendir(dir);
    EXPECT_TRUE(h.ok());
    std::vector<std::string> out;
    if (!h.ok()) return out;
    for (const DirEntry& e : ns_->readdir(h.value(), 0))
      if (e.name != "." && e.name != "..") out.push_back(e.name);
    ns_->releasedir(h.value());
    return out;
  }

  TempDir dir_;
  FakeHub hub_;
  FakeTransport transport_{[this](const HttpRequest& r) { return hub_.answer(r); }};
  RangeFetcher fetcher_{transport_, testing::fetcher_on(Env::real())};
  std::unique_ptr<HubClient> client_;
  std::unique_ptr<BlockCache> cache_;
  std::unique_ptr<BlockReader> reader_;
  std::atomic<int> pins_{0};
  std::atomic<int64_t> now_s_{1000};
  testing::FunctionEnv env_;  // reads now_s_
  std::unique_ptr<HubNamespace> ns_;
};

// NAME@%2e%2e decodes to "..": were it sent, /tree/.. would be normalised to the repo's main.
// Such names (and "." or a ".." part, however spelt) are ENOENT without a request.
TEST_F(HubNamespaceTest, DotRevisionsAreEnoentWithoutARequest) {
  Ino org = lookup_ok(lookup_ok(kRootIno, "datasets"), "org");
  for (const char* name : {"x@..", "x@.", "x@%2e%2e", "x@%2E%2E", "x@%2e", "x@.%2e", "x@refs%2F..%2Fmain",
                           "x@a%2F.%2Fb"}) {
    auto r = ns_->lookup(org, name);
    ASSERT_TRUE(r.ok()) << name << ": " << r.error().reason;
    EXPECT_EQ(r.value().ino, 0u) << name;
  }
  EXPECT_EQ(pins_.load(), 0);
  EXPECT_EQ(transport_.request_count(), 0u);
  EXPECT_NE(lookup_ok(org, "x@main"), 0u);  // a real revision still resolves
}

TEST_F(HubNamespaceTest, TopLevelsAreFixedAndReposResolveOnFirstTouch) {
  EXPECT_EQ(names(kRootIno), (std::vector<std::string>{"datasets", "models", "spaces"}));
  EXPECT_EQ(ns_->lookup(kRootIno, "other").value().ino, 0u);
  Ino datasets = lookup_ok(kRootIno, "datasets");
  EXPECT_TRUE(names(datasets).empty());  // nothing touched yet: the Hub is not listed
  EXPECT_EQ(hub_.repo_infos.load(), 0);
  Ino x = repo_root("datasets", "org", "x");
  ASSERT_NE(x, 0u);
  EXPECT_EQ(pins_.load(), 1);
  EXPECT_TRUE(S_ISDIR(ns_->getattr(x).value().st_mode));
  EXPECT_EQ(ns_->getattr(x).value().st_ino, x);
  EXPECT_EQ(names(x), (std::vector<std::string>{"readme.md"}));
  Ino readme = lookup_ok(x, "readme.md");
  ASSERT_NE(readme, 0u);
  EXPECT_EQ(ns_->getattr(readme).value().st_ino, readme);
  EXPECT_EQ(ns_->getattr(readme).value().st_size, 6);
  EXPECT_EQ(read_file(readme), "hello\n");
  EXPECT_EQ(ns_->getxattr(readme, "user.hubfs.oid").value(), "ce013625030ba8dba906f756967f9e9ca394464a");
  // Kept: a second lookup asks nothing, and the touched repo is listed now.
  EXPECT_EQ(repo_root("datasets", "org", "x"), x);
  EXPECT_EQ(pins_.load(), 1);
  EXPECT_EQ(names(datasets), (std::vector<std::string>{"org"}));
  EXPECT_EQ(names(lookup_ok(datasets, "org")), (std::vector<std::string>{"x"}));
  // The namespace's directories gain entries; a repo's never change.
  EXPECT_FALSE(ns_->listing_is_stable(datasets));
  EXPECT_TRUE(ns_->listing_is_stable(x));
  ASSERT_EQ(ns_->touched().size(), 1u);
  EXPECT_EQ(ns_->touched()[0].path, "datasets/org/x");
  EXPECT_EQ(ns_->touched()[0].commit, kMain);
}

TEST_F(HubNamespaceTest, RevisionsAndTypesAreSeparateReposWithSeparateNumbers) {
  Ino main_root = repo_root("datasets", "org", "x");
  Ino v1_root = repo_root("datasets", "org", "x@v1");
  Ino pr_root = repo_root("datasets", "org", "x@refs%2Fpr%2F1");
  Ino model_root = repo_root("models", "org", "m");
  std::set<Ino> roots = {main_root, v1_root, pr_root, model_root};
  EXPECT_EQ(roots.size(), 4u);
  EXPECT_EQ(names(v1_root), (std::vector<std::string>{"old.txt"}));
  EXPECT_EQ(names(pr_root), (std::vector<std::string>{"old.txt"}));
  EXPECT_EQ(names(model_root), (std::vector<std::string>{"w.txt"}));
  Ino readme = lookup_ok(main_root, "readme.md");
  Ino old = lookup_ok(v1_root, "old.txt");
  Ino w = lookup_ok(model_root, "w.txt");
  EXPECT_EQ(std::set<Ino>({readme, old, w}).size(), 3u);
  // Handles of files open in different repos at once route to their own repo.
  auto h1 = ns_->open(readme, O_RDONLY);
  auto h2 = ns_->open(old, O_RDONLY);
  auto h3 = ns_->open(w, O_RDONLY);
  ASSERT_TRUE(h1.ok() && h2.ok() && h3.ok());
  EXPECT_EQ(std::set<uint64_t>({h1.value().handle, h2.value().handle, h3.value().handle}).size(), 3u);
  auto text = [&](uint64_t h) {
    std::string out;
    auto r = ns_->read(h, 0, 100);
    if (r.ok())
      for (auto& s : r.value()) out.append(s.data(), s.size());
    return out;
  };
  EXPECT_EQ(text(h2.value().handle), "old\n");
  EXPECT_EQ(text(h3.value().handle), "w\n");
  EXPECT_EQ(text(h1.value().handle), "hello\n");
  for (auto* h : {&h1, &h2, &h3}) ns_->release(h->value().handle);
  EXPECT_EQ(ns_->read(h1.value().handle, 0, 10).error().code, EBADF);
  EXPECT_EQ(names(lookup_ok(lookup_ok(kRootIno, "datasets"), "org")),
            (std::vector<std::string>{"x", "x@refs%2Fpr%2F1", "x@v1"}));
  // Writes are refused everywhere, directories are not files.
  EXPECT_EQ(ns_->open(readme, O_WRONLY).error().code, EROFS);
  EXPECT_EQ(ns_->open(lookup_ok(kRootIno, "models"), O_RDONLY).error().code, EISDIR);
}

TEST_F(HubNamespaceTest, AMissingRepoIsEnoentAtOnceAndRememberedBriefly) {
  Ino org = lookup_ok(lookup_ok(kRootIno, "datasets"), "org");
  auto missing = ns_->lookup(org, "nope");
  ASSERT_TRUE(missing.ok());
  EXPECT_EQ(missing.value().ino, 0u);
  EXPECT_EQ(missing.value().timeout_s, 30.0);
  EXPECT_EQ(hub_.repo_infos.load(), 1);
  now_s_ += 20;
  auto again = ns_->lookup(org, "nope");
  EXPECT_EQ(again.value().ino, 0u);
  EXPECT_EQ(again.value().timeout_s, 10.0);  // what is left of the 30 s
  EXPECT_EQ(hub_.repo_infos.load(), 1);      // remembered: no request
  now_s_ += 11;
  EXPECT_EQ(ns_->lookup(org, "nope").value().ino, 0u);
  EXPECT_EQ(hub_.repo_infos.load(), 2);  // forgotten: asked again
  // Names that can never be repos or orgs are refused without a request.
  for (const char* bad : {".git", ".Trash-0", "a b", "..x", "-x", "x@"}) {
    EXPECT_EQ(ns_->lookup(org, bad).value().ino, 0u) << bad;
  }
  EXPECT_EQ(ns_->lookup(lookup_ok(kRootIno, "models"), ".hidden").value().ino, 0u);
  EXPECT_EQ(hub_.repo_infos.load(), 2);
  EXPECT_TRUE(names(org).empty());
}

TEST_F(HubNamespaceTest, AnUnreachableHubIsEioAndNotRemembered) {
  Ino org = lookup_ok(lookup_ok(kRootIno, "datasets"), "org");
  hub_.down = true;
  auto r = ns_->lookup(org, "x");
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().code, EIO);
  EXPECT_NE(r.error().reason.find("datasets/org/x"), std::string::npos) << r.error().reason;
  hub_.down = false;
  EXPECT_NE(lookup_ok(org, "x"), 0u);
}

TEST_F(HubNamespaceTest, TheStatusXattrIsOnTheRootOnly) {
  EXPECT_EQ(ns_->getxattr(kRootIno, "user.hubfs.status").value(), R"({"repo":"hub"})");
  EXPECT_EQ(ns_->listxattr(kRootIno).value(), std::string("user.hubfs.status") + '\0');
  Ino x = repo_root("datasets", "org", "x");
  EXPECT_EQ(ns_->getxattr(x, "user.hubfs.status").error().code, ENODATA);
  EXPECT_EQ(ns_->getxattr(lookup_ok(kRootIno, "datasets"), "user.hubfs.status").error().code, ENODATA);
  EXPECT_EQ(ns_->getattr(12345).error().code, ENOENT);
  EXPECT_EQ(ns_->getattr(uint64_t{7} << HubNamespace::kLocalBits | 1).error().code, ENOENT);
}

TEST_F(HubNamespaceTest, ConcurrentFirstLookupsOfOneRepoPinItOnce) {
  Ino org = lookup_ok(lookup_ok(kRootIno, "datasets"), "org");
  std::vector<std::thread> threads;
  std::vector<Ino> seen(8);
  for (int i = 0; i < 8; ++i)
    threads.emplace_back([&, i] {
      auto r = ns_->lookup(org, "x");
      seen[i] = r.ok() ? r.value().ino : 0;
    });
  for (auto& t : threads) t.join();
  EXPECT_EQ(pins_.load(), 1);
  for (Ino ino : seen) EXPECT_EQ(ino, seen[0]);
  EXPECT_NE(seen[0], 0u);
}

}  // namespace
}  // namespace hubfs
