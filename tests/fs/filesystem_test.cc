// The filesystem without FUSE: a scripted Hub (listing, resolve, CDN) behind a FakeTransport,
// a real reader and cache in a temp dir. Every operation and every error it maps.
#include "fs/filesystem.h"

#include <fcntl.h>
#include <unistd.h>
#include <gtest/gtest.h>

#include <atomic>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "cache/block_cache.h"
#include "hub/hub_test_util.h"
#include "net/range_fetcher.h"
#include "support/fake_transport.h"
#include "support/temp_dir.h"
#include "support/fetcher_env.h"

namespace hubfs {
namespace HUBFS_UNITY_ID {

using testing::FakeTransport;
using testing::respond;
using testing::TempDir;

const std::string kCommit(40, 'c');
const std::string kBody = [] {
  std::string s(3 * 1024 * 1024 + 77, '\0');
  for (size_t i = 0; i < s.size(); ++i) s[i] = static_cast<char>((i * 7 + 3) % 253);
  return s;
}();

std::string tree_url(const std::string& dir) {
  return "https://hub.test/api/datasets/org/x/tree/" + kCommit + (dir.empty() ? "" : "/" + dir) +
         "?recursive=false&limit=1000";
}

std::string subtree_url(const std::string& dir) {
  return "https://hub.test/api/datasets/org/x/tree/" + kCommit + "/" + dir + "?recursive=true&limit=1000";
}

// A Hub with: data/ (a directory), data/big.bin (LFS), readme.md (a small file).
// The byte at `offset` of huge.bin (an entry tests may add to the root listing).
char huge_byte(uint64_t offset) { return static_cast<char>((offset * 13 + 5) % 251); }

struct FakeHub {
  std::atomic<bool> listing_fails{false};
  std::atomic<int> listings{0};
  // Appended to the root listing when set (set before the listing is asked for): ",{...}".
  std::string extra_root_entries;
  uint64_t huge_size = 0;  // the size the CDN gives huge.bin in Content-Range

  Result<HttpResponse> answer(const HttpRequest& req) {
    if (req.url == tree_url("")) {
      ++listings;
      if (listing_fails) return respond(503);
      return respond(200, R"([{"type":"directory","oid":"t1","size":0,"path":"data"},
                             {"type":"file","oid":"ce013625030ba8dba906f756967f9e9ca394464a","size":6,"path":"readme.md"})" +
                              extra_root_entries + "]");
    }
    if (req.url.find("/resolve/") != std::string::npos && req.url.find("huge.bin") != std::string::npos)
      return respond(302, "", {{"location", "https://cdn.test/huge"}});
    if (req.url == "https://cdn.test/huge") {
      auto range = find_header(req.headers, "Range");
      uint64_t a = 0, b = 0;
      if (!range || sscanf(range->c_str(), "bytes=%lu-%lu", &a, &b) != 2 || b < a || b - a > (64u << 20))
        return respond(400);
      std::string body(b - a + 1, '\0');
      for (uint64_t i = 0; i < body.size(); ++i) body[i] = huge_byte(a + i);
      return respond(206, body, {{"content-range", "bytes " + std::to_string(a) + "-" + std::to_string(b) + "/" +
                                                       std::to_string(huge_size)}});
    }
    // A directory below the root is listed with its subtree (recursive=true): here the same.
    if (req.url == tree_url("data") || req.url == subtree_url("data")) {
      ++listings;
      return respond(200, R"([{"type":"file","oid":"b1","size":)" + std::to_string(kBody.size()) +
                              R"(,"path":"data/big.bin","lfs":{"oid":")" + std::string(64, 'e') +
                              R"(","size":)" + std::to_string(kBody.size()) + "}}]");
    }
    if (req.url.find("/resolve/") != std::string::npos) {
      std::string target = req.url.find("readme.md") != std::string::npos ? "https://cdn.test/readme" : "https://cdn.test/big";
      return respond(302, "", {{"location", target}});
    }
    if (req.url.starts_with("https://cdn.test/")) {
      const std::string& content = req.url == "https://cdn.test/readme" ? std::string("hello\n") : kBody;
      auto range = find_header(req.headers, "Range");
      uint64_t a = 0, b = 0;
      if (!range || sscanf(range->c_str(), "bytes=%lu-%lu", &a, &b) != 2) return respond(400);
      return respond(206, content.substr(a, b - a + 1),
                     {{"content-range", "bytes " + std::to_string(a) + "-" + std::to_string(b) + "/" +
                                            std::to_string(content.size())}});
    }
    return respond(404, "{}", {{"x-error-code", "EntryNotFound"}});
  }
};

class FileSystemTest : public ::testing::Test {
 protected:
  FileSystemTest() {
    HubConfig config;
    config.env = &Env::real();
    config.endpoint = "https://hub.test";
    hub_client_ = std::make_unique<HubClient>(config, transport_);
    CacheOptions o;
    o.env = &Env::real();
    o.dir = (dir_.path() / "cache").string();
    cache_ = std::move(BlockCache::open(o)).value();
    reader_ = std::make_unique<BlockReader>(cache_.get(), fetcher_);
    FsOptions options;
    options.mtime = 1700000000;
    remount(options);
  }
  // Replaces the filesystem with one built with `options` (same Hub, reader and cache).
  void remount(FsOptions options) {
    fs_.reset();
    RepoRef repo{RepoType::kDataset, "org/x", kCommit};
    fs_ = std::make_unique<FileSystem>(*hub_client_, repo, *reader_, std::move(options));
  }
  ~FileSystemTest() override {
    fs_.reset();
    reader_->shutdown();
  }

  Ino lookup_ok(Ino parent, const std::string& name) {
    auto r = fs_->lookup(parent, name);
    EXPECT_TRUE(r.ok());
    return r.ok() ? r.value().ino : 0;
  }

  std::string read_all(Ino ino, uint64_t offset, size_t size) {
    auto h = fs_->open(ino, O_RDONLY);
    EXPECT_TRUE(h.ok());
    auto slices = fs_->read(h.value().handle, offset, size);
    std::string out;
    if (slices.ok())
      for (auto& s : slices.value()) out.append(s.data(), s.size());
    fs_->release(h.value().handle);
    return out;
  }

  TempDir dir_;
  FakeHub hub_;
  FakeTransport transport_{[this](const HttpRequest& r) { return hub_.answer(r); }};
  RangeFetcher fetcher_{transport_, testing::fetcher_on(Env::real())};
  std::unique_ptr<HubClient> hub_client_;
  std::unique_ptr<BlockCache> cache_;
  std::unique_ptr<BlockReader> reader_;
  std::unique_ptr<FileSystem> fs_;
};

TEST_F(FileSystemTest, LookupGivesAttributesAndNegativeEntries) {
  Ino data = lookup_ok(kRootIno, "data");
  ASSERT_NE(data, 0u);
  auto attr = fs_->getattr(data);
  ASSERT_TRUE(attr.ok());
  EXPECT_TRUE(S_ISDIR(attr.value().st_mode));
  Ino big = lookup_ok(data, "big.bin");
  ASSERT_NE(big, 0u);
  auto file = fs_->getattr(big);
  EXPECT_TRUE(S_ISREG(file.value().st_mode));
  EXPECT_EQ(file.value().st_mode & 0777, 0444u);
  EXPECT_EQ(static_cast<uint64_t>(file.value().st_size), kBody.size());
  EXPECT_EQ(file.value().st_mtim.tv_sec, 1700000000);
  // A missing name is a negative entry (ino 0), not an error, so the kernel can cache it.
  auto missing = fs_->lookup(kRootIno, "nope.h5");
  ASSERT_TRUE(missing.ok());
  EXPECT_EQ(missing.value().ino, 0u);
  // Each directory is listed once however often it is looked up in.
  lookup_ok(kRootIno, "readme.md");
  EXPECT_EQ(hub_.listings.load(), 2);
}

TEST_F(FileSystemTest, ErrnosForWrongKindsOfObjects) {
  Ino readme = lookup_ok(kRootIno, "readme.md");
  EXPECT_EQ(fs_->lookup(readme, "x").error().code, ENOTDIR);
  EXPECT_EQ(fs_->opendir(readme).error().code, ENOTDIR);
  EXPECT_EQ(fs_->open(lookup_ok(kRootIno, "data"), O_RDONLY).error().code, EISDIR);
  EXPECT_EQ(fs_->getattr(999).error().code, ENOENT);
  EXPECT_EQ(fs_->lookup(999, "x").error().code, ENOENT);
  for (int flags : {O_WRONLY, O_RDWR, O_RDONLY | O_TRUNC}) EXPECT_EQ(fs_->open(readme, flags).error().code, EROFS);
}

TEST_F(FileSystemTest, AListingFailureIsEioWithTheReasonAndIsRetried) {
  hub_.listing_fails = true;
  auto r = fs_->lookup(kRootIno, "data");
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().code, EIO);
  EXPECT_NE(r.error().reason.find("listing /"), std::string::npos) << r.error().reason;
  hub_.listing_fails = false;
  EXPECT_NE(lookup_ok(kRootIno, "data"), 0u);  // not remembered: the next access lists again
}

// A listed size no file can have fails the directory's listing (EIO naming the entry), never
// the daemon; the listing is not remembered, so once the Hub answers sanely it is listed.
TEST_F(FileSystemTest, AHostileSizeInTheHubsListingIsEioNamingTheEntry) {
  for (const char* size : {"9223372036854775807", "18446744073709551616", "-1", "\"12\"", "1.5"}) {
    hub_.extra_root_entries = std::string(R"(,{"type":"file","oid":"h","size":134,"path":"huge.bin","lfs":{"oid":")") +
                              std::string(64, 'f') + R"(","size":)" + size + "}}";
    remount(FsOptions{});
    auto r = fs_->lookup(kRootIno, "readme.md");
    ASSERT_FALSE(r.ok()) << size;
    EXPECT_EQ(r.error().code, EIO) << size;
    EXPECT_NE(r.error().reason.find("'huge.bin'"), std::string::npos) << r.error().reason;
  }
  hub_.extra_root_entries.clear();
  EXPECT_NE(lookup_ok(kRootIno, "readme.md"), 0u);
}

// The largest size a listing may claim (2^53 bytes): reads at its start and its end are exact,
// and nothing in the reader (the whole-file hash's bookkeeping) sizes itself by the claim.
TEST_F(FileSystemTest, AFileListedAtTwoToThe53BytesReadsWithoutAllocatingForIt) {
  hub_.huge_size = 1ull << 53;
  hub_.extra_root_entries = std::string(R"(,{"type":"file","oid":"h","size":134,"path":"huge.bin","lfs":{"oid":")") +
                            std::string(64, 'f') + R"(","size":9007199254740992}})";
  remount(FsOptions{});
  Ino huge = lookup_ok(kRootIno, "huge.bin");
  ASSERT_NE(huge, 0u);
  EXPECT_EQ(static_cast<uint64_t>(fs_->getattr(huge).value().st_size), hub_.huge_size);
  auto expected = [](uint64_t offset, size_t size) {
    std::string s(size, '\0');
    for (size_t i = 0; i < size; ++i) s[i] = huge_byte(offset + i);
    return s;
  };
  EXPECT_TRUE(read_all(huge, 0, 4096) == expected(0, 4096));
  EXPECT_TRUE(read_all(huge, 100, 5000) == expected(100, 5000));
  EXPECT_TRUE(read_all(huge, hub_.huge_size - 4096, 8192) == expected(hub_.huge_size - 4096, 4096));
}

TEST_F(FileSystemTest, ReaddirPagesFromAnyOffset) {
  auto h = fs_->opendir(kRootIno);
  ASSERT_TRUE(h.ok());
  auto all = fs_->readdir(h.value(), 0);
  ASSERT_EQ(all.size(), 4u);
  EXPECT_EQ(all[0].name, ".");
  EXPECT_EQ(all[1].name, "..");
  EXPECT_EQ(all[2].name, "data");
  EXPECT_TRUE(all[2].is_dir);
  EXPECT_EQ(all[3].name, "readme.md");
  EXPECT_FALSE(all[3].is_dir);
  auto rest = fs_->readdir(h.value(), all[2].next_offset);
  ASSERT_EQ(rest.size(), 1u);
  EXPECT_EQ(rest[0].name, "readme.md");
  EXPECT_TRUE(fs_->readdir(h.value(), all[3].next_offset).empty());
  fs_->releasedir(h.value());
}

TEST_F(FileSystemTest, ReadsReturnExactBytesCutAtEndOfFile) {
  Ino big = lookup_ok(lookup_ok(kRootIno, "data"), "big.bin");
  EXPECT_EQ(read_all(big, 0, 100), kBody.substr(0, 100));
  EXPECT_EQ(read_all(big, 1024 * 1024 - 10, 20), kBody.substr(1024 * 1024 - 10, 20));
  EXPECT_EQ(read_all(big, kBody.size() - 5, 4096), kBody.substr(kBody.size() - 5));
  EXPECT_EQ(read_all(big, kBody.size() + 10, 4096), "");
  Ino readme = lookup_ok(kRootIno, "readme.md");
  EXPECT_EQ(read_all(readme, 0, 4096), "hello\n");
}

TEST_F(FileSystemTest, XattrsNameTheContentIdentity) {
  Ino big = lookup_ok(lookup_ok(kRootIno, "data"), "big.bin");
  EXPECT_EQ(fs_->getxattr(big, "user.hubfs.sha256").value(), std::string(64, 'e'));
  EXPECT_EQ(fs_->getxattr(big, "user.hubfs.oid").error().code, ENODATA);
  EXPECT_EQ(fs_->listxattr(big).value(), std::string("user.hubfs.sha256") + '\0');
  Ino readme = lookup_ok(kRootIno, "readme.md");
  EXPECT_EQ(fs_->getxattr(readme, "user.hubfs.oid").value(), "ce013625030ba8dba906f756967f9e9ca394464a");
  EXPECT_EQ(fs_->listxattr(kRootIno).value(), "");
  EXPECT_EQ(fs_->getxattr(999, "user.hubfs.oid").error().code, ENOENT);
}

TEST_F(FileSystemTest, StatfsCountsKnownInodes) {
  lookup_ok(kRootIno, "data");
  struct statvfs st = fs_->statfs();
  EXPECT_EQ(st.f_bsize, 1u << 20);
  EXPECT_EQ(st.f_files, 4u);  // inode 0 placeholder, root, data, readme.md
}

}  // namespace
}  // namespace hubfs

namespace hubfs {
namespace HUBFS_UNITY_ID {

// A mount torn down under open files never gets their releases: the handles go with the
// FileSystem (the sanitizer pass would report them as leaks otherwise).
TEST_F(FileSystemTest, HandlesLeftOpenAreFreedWithTheFileSystem) {
  Ino readme = lookup_ok(kRootIno, "readme.md");
  ASSERT_TRUE(fs_->open(readme, O_RDONLY).ok());
  ASSERT_TRUE(fs_->opendir(kRootIno).ok());
  fs_.reset();
  SUCCEED();
}

}  // namespace
}  // namespace hubfs

namespace hubfs {
namespace HUBFS_UNITY_ID {

// big.bin's listed sha256 ('e' x 64) is not its content's: a whole read fails its hash. The
// handle that read it gets an error, and the next open tells the kernel to drop its cached
// pages of the file (keep_cache off), once.
TEST_F(FileSystemTest, AFileFailingItsHashIsNotKeptInTheKernelsCache) {
  Ino big = lookup_ok(lookup_ok(kRootIno, "data"), "big.bin");
  auto h = fs_->open(big, O_RDONLY);
  ASSERT_TRUE(h.ok());
  EXPECT_TRUE(h.value().keep_cache);
  bool failed = false;
  for (uint64_t off = 0; off < kBody.size() && !failed; off += 128 * 1024) {
    auto r = fs_->read(h.value().handle, off, 128 * 1024);
    if (!r.ok()) {
      EXPECT_EQ(r.error().code, EIO);
      failed = true;
    }
  }
  EXPECT_TRUE(failed) << "a whole read of a file failing its hash must not end without an error";
  fs_->release(h.value().handle);
  auto again = fs_->open(big, O_RDONLY);
  ASSERT_TRUE(again.ok());
  EXPECT_FALSE(again.value().keep_cache);
  fs_->release(again.value().handle);
  auto third = fs_->open(big, O_RDONLY);
  EXPECT_TRUE(third.value().keep_cache);
  fs_->release(third.value().handle);
}

TEST_F(FileSystemTest, StatusXattrOnTheRootComesFromTheProviderEveryTime) {
  int calls = 0;
  FsOptions options;
  options.status_json = [&calls] { return "{\"calls\":" + std::to_string(++calls) + "}"; };
  remount(options);
  EXPECT_EQ(fs_->listxattr(kRootIno).value(), std::string(kStatusXattr) + '\0');
  EXPECT_EQ(fs_->getxattr(kRootIno, "user.hubfs.status").value(), R"({"calls":1})");
  EXPECT_EQ(fs_->getxattr(kRootIno, "user.hubfs.status").value(), R"({"calls":2})");  // live, not cached
  EXPECT_EQ(fs_->getxattr(kRootIno, "user.hubfs.other").error().code, ENODATA);
  // Only the root has it.
  Ino data = lookup_ok(kRootIno, "data");
  EXPECT_EQ(fs_->getxattr(data, "user.hubfs.status").error().code, ENODATA);
  EXPECT_EQ(fs_->listxattr(data).value(), "");
  Ino readme = lookup_ok(kRootIno, "readme.md");
  EXPECT_EQ(fs_->getxattr(readme, "user.hubfs.status").error().code, ENODATA);
  EXPECT_EQ(calls, 2);
}

TEST_F(FileSystemTest, RootPathShowsThatDirectoryWithFullRepoPathsInside) {
  FsOptions options;
  options.root_path = "data";
  remount(options);
  EXPECT_EQ(lookup_ok(kRootIno, "readme.md"), 0u);  // outside the subfolder
  EXPECT_EQ(lookup_ok(kRootIno, "data"), 0u);
  Ino big = lookup_ok(kRootIno, "big.bin");
  ASSERT_NE(big, 0u);
  EXPECT_EQ(fs_->getattr(big).value().st_size, static_cast<off_t>(kBody.size()));
  auto dir = fs_->opendir(kRootIno);
  ASSERT_TRUE(dir.ok());
  std::vector<std::string> names;
  for (const DirEntry& e : fs_->readdir(dir.value(), 0)) names.push_back(e.name);
  fs_->releasedir(dir.value());
  EXPECT_EQ(names, (std::vector<std::string>{".", "..", "big.bin"}));
  // Located as data/big.bin in the repo (a part only: the scripted sha256 is not the body's).
  EXPECT_TRUE(read_all(big, 1000, 2 << 20) == kBody.substr(1000, 2 << 20));
  EXPECT_EQ(fs_->getxattr(big, "user.hubfs.sha256").value(), std::string(64, 'e'));
  EXPECT_EQ(fs_->listxattr(kRootIno).value(), "");  // no status provider: no attribute
}

}  // namespace
}  // namespace hubfs

namespace hubfs {
namespace HUBFS_UNITY_ID {

// --- Listings kept with the cache (fs/listing_cache.h) and --offline -------------------------

// A door that probed the one file it opens (open_repo_session's first_file) tells the
// FileSystem: that path is then looked up without a listing; anything else lists as before, and
// the listing keeps the known node. A directory already listed is not second-guessed.
TEST_F(FileSystemTest, AKnownFileIsLookedUpWithoutListingAndKeptByTheListing) {
  fs_->know_file(TreeEntry{"data/big.bin", false, kBody.size(), "b1", std::string(64, 'e'), std::nullopt});
  Ino data = lookup_ok(kRootIno, "data");
  ASSERT_NE(data, 0u);
  Ino big = lookup_ok(data, "big.bin");
  ASSERT_NE(big, 0u);
  EXPECT_EQ(hub_.listings.load(), 0);
  EXPECT_EQ(static_cast<uint64_t>(fs_->getattr(big).value().st_size), kBody.size());
  EXPECT_EQ(fs_->getxattr(big, "user.hubfs.sha256").value(), std::string(64, 'e'));
  EXPECT_EQ(read_all(big, 5, 100), kBody.substr(5, 100));
  EXPECT_EQ(hub_.listings.load(), 0);

  EXPECT_NE(lookup_ok(kRootIno, "readme.md"), 0u);  // another name: the root is listed
  EXPECT_EQ(hub_.listings.load(), 1);
  auto dir = fs_->opendir(data);  // the whole directory: listed, the known node kept
  ASSERT_TRUE(dir.ok());
  EXPECT_EQ(hub_.listings.load(), 2);
  std::vector<std::pair<std::string, Ino>> names;
  for (const DirEntry& e : fs_->readdir(dir.value(), 0))
    if (e.name != "." && e.name != "..") names.emplace_back(e.name, e.ino);
  fs_->releasedir(dir.value());
  ASSERT_EQ(names.size(), 1u);
  EXPECT_EQ(names[0], std::make_pair(std::string("big.bin"), big));

  // The root is listed now: a file it does not hold is not made up by a late probe.
  fs_->know_file(TreeEntry{"ghost.bin", false, 5, std::string(40, 'a'), std::nullopt, std::nullopt});
  EXPECT_EQ(lookup_ok(kRootIno, "ghost.bin"), 0u);
}

// Files and directories show the owner the FileSystem was made with: the process's, read once,
// or FsOptions::owner.
TEST_F(FileSystemTest, EverythingShowsTheOwnerItWasMadeWith) {
  EXPECT_EQ(fs_->getattr(kRootIno).value().st_uid, getuid());
  EXPECT_EQ(fs_->getattr(kRootIno).value().st_gid, getgid());
  FsOptions options;
  options.owner = std::make_pair(uid_t{1234}, gid_t{5678});
  remount(options);
  const Ino data = lookup_ok(kRootIno, "data");
  for (Ino ino : {kRootIno, data, lookup_ok(data, "big.bin")}) {
    auto attr = fs_->getattr(ino);
    ASSERT_TRUE(attr.ok());
    EXPECT_EQ(attr.value().st_uid, 1234u);
    EXPECT_EQ(attr.value().st_gid, 5678u);
  }
  auto entry = fs_->lookup(data, "big.bin");
  ASSERT_TRUE(entry.ok());
  EXPECT_EQ(entry.value().attr.st_uid, 1234u);
}

// A directory's listing handed over (open_repo_session reads the first file's while its pin is
// out) is that directory's: its lookups and readdir list nothing, a name it lacks is missing at
// once, and the node the first file had is kept. Nothing is taken for a directory not known yet.
TEST_F(FileSystemTest, AKnownListingAnswersTheDirectoryWithoutListing) {
  const TreeEntry big{"data/big.bin", false, kBody.size(), "b1", std::string(64, 'e'), std::nullopt};
  const TreeEntry other{"data/other.bin", false, 3, "o1", std::string(64, 'f'), std::nullopt};
  EXPECT_FALSE(fs_->finds_without_listing("data/big.bin"));
  fs_->know_listing("data", {big, other});  // data/ is not known yet: nothing taken
  EXPECT_FALSE(fs_->finds_without_listing("data/other.bin"));
  fs_->know_file(big);
  EXPECT_TRUE(fs_->finds_without_listing("data/big.bin"));
  EXPECT_FALSE(fs_->finds_without_listing("data/other.bin"));
  Ino data = lookup_ok(kRootIno, "data");
  const Ino big_ino = lookup_ok(data, "big.bin");
  fs_->know_listing("data", {big, other});
  EXPECT_TRUE(fs_->finds_without_listing("data/other.bin"));
  EXPECT_TRUE(fs_->finds_without_listing("data/missing.bin"));
  EXPECT_TRUE(fs_->finds_without_listing("data/big.bin/x")) << "a file is no directory: ENOTDIR without listing";
  EXPECT_FALSE(fs_->finds_without_listing("readme.md")) << "the root is not listed";
  EXPECT_NE(lookup_ok(data, "other.bin"), 0u);
  EXPECT_EQ(lookup_ok(data, "missing.bin"), 0u);
  EXPECT_EQ(lookup_ok(data, "big.bin"), big_ino);
  auto dir = fs_->opendir(data);
  ASSERT_TRUE(dir.ok());
  size_t names = 0;
  for (const DirEntry& e : fs_->readdir(dir.value(), 0)) names += e.name != "." && e.name != "..";
  fs_->releasedir(dir.value());
  EXPECT_EQ(names, 2u);
  EXPECT_EQ(hub_.listings.load(), 0);
  // The root's listing handed over too: "" is the root.
  fs_->know_listing("", {TreeEntry{"data", true, 0, "", std::nullopt, std::nullopt},
                         TreeEntry{"readme.md", false, 2, "r1", std::nullopt, std::nullopt}});
  EXPECT_TRUE(fs_->finds_without_listing("readme.md"));
  EXPECT_NE(lookup_ok(kRootIno, "readme.md"), 0u);
  EXPECT_EQ(lookup_ok(kRootIno, "data"), data);
  EXPECT_EQ(hub_.listings.load(), 0);
}

class ListingCacheTest : public FileSystemTest {
 protected:
  std::shared_ptr<ListingCache> listings() {
    return std::make_shared<ListingCache>((dir_.path() / "cache").string(), "https://hub.test",
                                          RepoRef{RepoType::kDataset, "org/x", "main"});
  }
  FsOptions with(std::shared_ptr<ListingCache> l, bool offline) {
    FsOptions o;
    o.listings = std::move(l);
    o.offline = offline;
    return o;
  }
  // A Hub that answers the pin of dataset org/x's main with kCommit (private), or refuses every
  // connection while `unreachable`.
  struct RevisionHub {
    static HubConfig config() {
      HubConfig c;
      c.env = &Env::real();
      c.endpoint = "https://hub.test";
      return c;
    }
    std::atomic<bool> unreachable{false};
    testing::FakeTransport transport{[this](const HttpRequest& req) -> Result<HttpResponse> {
      if (unreachable) return Unavailable("connection refused");
      if (req.url.find("/api/datasets/org/x/revision/main") != std::string::npos)
        return respond(200, R"({"sha":")" + kCommit + R"(","lastModified":"2024-01-01T00:00:00Z","private":true})");
      return respond(404, "{}", {{"x-error-code", "RevisionNotFound"}});
    }};
    HubClient client{config(), transport};
  };
};

TEST_F(ListingCacheTest, ARemountOfTheSameCommitListsNothing) {
  remount(with(listings(), false));
  Ino data = lookup_ok(kRootIno, "data");
  ASSERT_NE(lookup_ok(data, "big.bin"), 0u);
  EXPECT_EQ(hub_.listings.load(), 2);
  remount(with(listings(), false));  // a fresh FileSystem, as after a remount
  data = lookup_ok(kRootIno, "data");
  Ino big = lookup_ok(data, "big.bin");
  ASSERT_NE(big, 0u);
  EXPECT_EQ(hub_.listings.load(), 2);  // both directories came from the cache
  EXPECT_EQ(fs_->getxattr(big, "user.hubfs.sha256").value(), std::string(64, 'e'));
  EXPECT_EQ(static_cast<uint64_t>(fs_->getattr(big).value().st_size), kBody.size());
  EXPECT_EQ(read_all(big, 5, 100), kBody.substr(5, 100));
}

TEST_F(ListingCacheTest, StoredDocumentsRoundTripAndArePrivateToTheUser) {
  auto l = listings();
  std::vector<TreeEntry> entries = {{"d/a.bin", false, 123, "o1", std::string(64, 'a'), std::nullopt},
                                    {"d/sub", true, 0, "t1", std::nullopt, std::nullopt},
                                    {"d/small.txt", false, 6, "o2", std::nullopt, std::nullopt}};
  ASSERT_TRUE(l->save_dir(kCommit, "d", entries).ok());
  auto back = l->load_dir(kCommit, "d");
  ASSERT_TRUE(back.has_value());
  ASSERT_EQ(back->size(), 3u);
  for (size_t i = 0; i < 3; ++i) {
    EXPECT_EQ((*back)[i].path, entries[i].path);
    EXPECT_EQ((*back)[i].is_dir, entries[i].is_dir);
    EXPECT_EQ((*back)[i].size, entries[i].size);
    EXPECT_EQ((*back)[i].oid, entries[i].oid);
    EXPECT_EQ((*back)[i].lfs_sha256, entries[i].lfs_sha256);
  }
  EXPECT_FALSE(l->load_dir(kCommit, "other").has_value());
  EXPECT_FALSE(l->load_dir(std::string(40, 'd'), "d").has_value());
  // Another endpoint or repo never sees it.
  ListingCache elsewhere((dir_.path() / "cache").string(), "https://other.test", RepoRef{RepoType::kDataset, "org/x"});
  EXPECT_FALSE(elsewhere.load_dir(kCommit, "d").has_value());
  ListingCache model((dir_.path() / "cache").string(), "https://hub.test", RepoRef{RepoType::kModel, "org/x"});
  EXPECT_FALSE(model.load_dir(kCommit, "d").has_value());

  ASSERT_TRUE(l->save_ref("main", PinnedRevision{kCommit, 1700000000, true, false, 1700000100, std::nullopt}).ok());
  auto ref = l->load_ref("main");
  ASSERT_TRUE(ref.has_value());
  EXPECT_EQ(ref->commit, kCommit);
  EXPECT_EQ(ref->last_modified, 1700000000);
  EXPECT_TRUE(ref->is_private);
  EXPECT_EQ(ref->resolved_at, 1700000100);
  EXPECT_FALSE(l->load_ref("v1").has_value());

  // One file's record (a probe's): only for its own commit and path, never mistaken for a listing.
  const TreeEntry file{"d/e/w.bin", false, 77, "", std::string(64, 'c'), std::string(64, '1')};
  ASSERT_TRUE(l->save_file(kCommit, file).ok());
  auto rec = l->load_file(kCommit, "d/e/w.bin");
  ASSERT_TRUE(rec.has_value());
  EXPECT_EQ(rec->path, file.path);
  EXPECT_EQ(rec->size, 77u);
  EXPECT_EQ(rec->content_id(), "sha256:" + std::string(64, 'c'));
  EXPECT_EQ(rec->xet_hash, file.xet_hash);
  EXPECT_FALSE(l->load_file(kCommit, "d/e/x.bin").has_value());
  EXPECT_FALSE(l->load_file(std::string(40, 'd'), "d/e/w.bin").has_value());
  EXPECT_FALSE(l->load_dir(kCommit, "d/e").has_value());
  EXPECT_FALSE(elsewhere.load_file(kCommit, "d/e/w.bin").has_value());

  // Every file is the user's alone, every directory too (listings of private repos).
  for (auto& e : std::filesystem::recursive_directory_iterator(dir_.path() / "cache" / "listings")) {
    struct stat st {};
    ASSERT_EQ(::stat(e.path().c_str(), &st), 0);
    EXPECT_EQ(st.st_mode & 077, 0u) << e.path();
  }
}

TEST_F(ListingCacheTest, ADamagedDocumentReadsAsAbsentAndIsListedAgain) {
  remount(with(listings(), false));
  lookup_ok(kRootIno, "data");
  ASSERT_EQ(hub_.listings.load(), 1);
  std::vector<std::filesystem::path> docs;
  for (auto& e : std::filesystem::recursive_directory_iterator(dir_.path() / "cache" / "listings"))
    if (e.is_regular_file()) docs.push_back(e.path());
  ASSERT_EQ(docs.size(), 1u);  // the root's listing (no ref: the FileSystem is given a commit)
  std::ifstream in(docs[0], std::ios::binary);
  const std::string whole((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  auto damaged = [&](const std::string& text) {
    {
      std::ofstream(docs[0], std::ios::trunc | std::ios::binary) << text;
    }
    return !listings()->load_dir(kCommit, "").has_value();
  };
  EXPECT_TRUE(damaged(whole.substr(0, whole.size() / 2)));  // torn JSON
  EXPECT_TRUE(damaged(""));
  EXPECT_TRUE(damaged("\x01garbage"));
  auto j = nlohmann::json::parse(whole);  // an entry gone, the count unchanged
  j["entries"].erase(j["entries"].begin());
  EXPECT_TRUE(damaged(j.dump()));
  auto k = nlohmann::json::parse(whole);
  k["entries"][0]["path"] = "elsewhere/data";  // not a child of the root
  EXPECT_TRUE(damaged(k.dump()));
  auto c = nlohmann::json::parse(whole);
  c["commit"] = std::string(40, 'd');
  EXPECT_TRUE(damaged(c.dump()));
  EXPECT_FALSE(damaged(whole));  // the original still reads

  damaged("{\"format\": 1, \"entries\": [");
  remount(with(listings(), false));
  EXPECT_NE(lookup_ok(kRootIno, "data"), 0u);  // listed again, never crashed
  EXPECT_EQ(hub_.listings.load(), 2);
  EXPECT_TRUE(listings()->load_dir(kCommit, "").has_value());  // and stored again, whole
}

// A stored listing whose sizes were edited (by hand, by a hostile user of a shared cache
// directory) is damaged: never shown as 0, never believed, listed again from the Hub and stored
// again whole.
TEST_F(ListingCacheTest, AStoredListingWithAHostileSizeIsListedAgain) {
  remount(with(listings(), false));
  Ino data = lookup_ok(kRootIno, "data");
  ASSERT_NE(lookup_ok(data, "big.bin"), 0u);
  ASSERT_EQ(hub_.listings.load(), 2);
  std::filesystem::path doc;
  for (auto& e : std::filesystem::recursive_directory_iterator(dir_.path() / "cache" / "listings")) {
    if (!e.is_regular_file()) continue;
    std::ifstream in(e.path());
    if (std::string((std::istreambuf_iterator<char>(in)), {}).find("big.bin") != std::string::npos) doc = e.path();
  }
  ASSERT_FALSE(doc.empty()) << "data/'s stored listing";
  std::ifstream in(doc, std::ios::binary);
  const std::string whole((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  int expected_listings = 2;
  for (const char* size : {"-1", "\"12\"", "1.5", "18446744073709551616", "9223372036854775807", "null"}) {
    for (const char* field : {"size", "lfs"}) {
      auto j = nlohmann::json::parse(whole);
      auto& entry = j["entries"][0];
      auto& target = std::string(field) == "size" ? entry["size"] : entry["lfs"]["size"];
      target = nlohmann::json::parse(size);
      {
        std::ofstream(doc, std::ios::trunc | std::ios::binary) << j.dump();
      }
      EXPECT_FALSE(listings()->load_dir(kCommit, "data").has_value()) << field << " " << size;
      remount(with(listings(), false));
      data = lookup_ok(kRootIno, "data");
      Ino big = lookup_ok(data, "big.bin");
      ASSERT_NE(big, 0u) << field << " " << size;
      EXPECT_EQ(static_cast<uint64_t>(fs_->getattr(big).value().st_size), kBody.size()) << field << " " << size;
      EXPECT_EQ(hub_.listings.load(), ++expected_listings) << "listed again from the Hub: " << field << " " << size;
      EXPECT_TRUE(listings()->load_dir(kCommit, "data").has_value()) << "stored again, whole";
    }
  }
}

TEST_F(ListingCacheTest, OfflineServesCachedListingsAndBlocksAndFailsTheRestAtOnce) {
  // Online first: list the root and data/, read the readme (big.bin is never read).
  remount(with(listings(), false));
  Ino data = lookup_ok(kRootIno, "data");
  Ino big = lookup_ok(data, "big.bin");
  ASSERT_EQ(read_all(lookup_ok(kRootIno, "readme.md"), 0, 100), "hello\n");
  fs_.reset();
  reader_->shutdown();  // nothing in the reader's memory: what follows comes from disk
  reader_ = std::make_unique<BlockReader>(cache_.get(), fetcher_);

  const size_t requests_before = transport_.request_count();
  remount(with(listings(), true));
  data = lookup_ok(kRootIno, "data");
  big = lookup_ok(data, "big.bin");
  ASSERT_NE(big, 0u);
  EXPECT_EQ(read_all(lookup_ok(kRootIno, "readme.md"), 0, 100), "hello\n");  // from the disk cache
  EXPECT_EQ(static_cast<uint64_t>(fs_->getattr(big).value().st_size), kBody.size());
  // big.bin was never fetched: EIO with the cause, at once.
  auto h = fs_->open(big, O_RDONLY);
  ASSERT_TRUE(h.ok());
  auto r = fs_->read(h.value().handle, 0, 4096);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().code, EIO);
  EXPECT_NE(r.error().reason.find("--offline"), std::string::npos) << r.error().reason;
  fs_->release(h.value().handle);
  EXPECT_EQ(transport_.request_count(), requests_before);  // offline: not one request
  EXPECT_EQ(hub_.listings.load(), 2);
}

TEST_F(ListingCacheTest, OfflineADirectoryNeverListedIsEioSayingSo) {
  remount(with(listings(), true));
  auto r = fs_->lookup(kRootIno, "data");
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().code, EIO);
  EXPECT_NE(r.error().reason.find("never listed"), std::string::npos) << r.error().reason;
  EXPECT_EQ(transport_.request_count(), 0u);
}

TEST_F(ListingCacheTest, PinRevisionRemembersTheCommitForOfflineAndHintsAtItWhenUnreachable) {
  RevisionHub hub;
  std::atomic<bool>& unreachable = hub.unreachable;
  testing::FakeTransport& hub_transport = hub.transport;
  HubClient& client = hub.client;
  RepoRef repo{RepoType::kDataset, "org/x", "main"};
  auto l = listings();

  // Offline before any online mount: nothing to go on.
  auto none = pin_revision(client, repo, l.get(), /*offline=*/true);
  ASSERT_FALSE(none.ok());
  EXPECT_EQ(none.status().code(), Code::kNotFound);
  EXPECT_NE(none.status().message().find("without --offline"), std::string::npos) << none.status().message();
  EXPECT_EQ(hub_transport.request_count(), 0u);

  auto online = pin_revision(client, repo, l.get(), false);
  ASSERT_TRUE(online.ok()) << online.status().message();
  EXPECT_EQ(online->commit, kCommit);

  unreachable = true;
  auto down = pin_revision(client, repo, l.get(), false);
  ASSERT_FALSE(down.ok());
  EXPECT_NE(down.status().message().find("add --offline"), std::string::npos) << down.status().message();
  EXPECT_NE(down.status().message().find(kCommit), std::string::npos);

  const size_t before = hub_transport.request_count();
  auto offline = pin_revision(client, repo, l.get(), true);
  ASSERT_TRUE(offline.ok());
  EXPECT_EQ(offline->commit, kCommit);  // main resolves to what it pointed at last time
  EXPECT_EQ(offline->last_modified, 1704067200);
  EXPECT_TRUE(offline->is_private);
  EXPECT_EQ(hub_transport.request_count(), before);
  EXPECT_EQ(pin_revision(client, repo, nullptr, true).status().code(), Code::kInvalidArgument);

  // A commit never moves: the online pin of a branch stored its record under the commit too,
  // and pinning that commit online answers from it, with no request.
  unreachable = false;
  const size_t before_sha = hub_transport.request_count();
  auto by_sha = pin_revision(client, RepoRef{RepoType::kDataset, "org/x", kCommit}, l.get(), false);
  ASSERT_TRUE(by_sha.ok()) << by_sha.status().message();
  EXPECT_EQ(by_sha->commit, kCommit);
  EXPECT_TRUE(by_sha->is_private);
  EXPECT_EQ(hub_transport.request_count(), before_sha);
}

TEST_F(ListingCacheTest, PinStoresANewCommitsRecordAtOnceAndLeavesRefreshesForLater) {
  RevisionHub hub;
  HubClient& client = hub.client;
  RepoRef repo{RepoType::kDataset, "org/x", "main"};
  auto l = listings();
  std::function<void()> later;

  // A commit new to the cache: its record is there when the pin returns (a worker handed the
  // commit opens from it without asking); the branch's own record is stored by `later`.
  auto first = pin_revision_storing_later(client, repo, l.get(), &later);
  ASSERT_TRUE(first.ok()) << first.status().message();
  auto commit_record = l->load_ref(kCommit);
  ASSERT_TRUE(commit_record.has_value());
  EXPECT_EQ(commit_record->commit, kCommit);
  EXPECT_TRUE(commit_record->is_private);
  EXPECT_FALSE(l->load_ref("main").has_value());
  ASSERT_TRUE(later);
  later();
  ASSERT_TRUE(l->load_ref("main").has_value());
  EXPECT_EQ(l->load_ref("main")->commit, kCommit);

  // The cache holds the same answer: nothing is rewritten before the pin returns; `later`
  // refreshes both records' time of resolution.
  PinnedRevision old = *commit_record;
  old.resolved_at = 1;
  ASSERT_TRUE(l->save_ref("main", old).ok());
  ASSERT_TRUE(l->save_ref(kCommit, old).ok());
  ASSERT_TRUE(pin_revision_storing_later(client, repo, l.get(), &later).ok());
  EXPECT_EQ(l->load_ref("main")->resolved_at, 1);
  EXPECT_EQ(l->load_ref(kCommit)->resolved_at, 1);
  ASSERT_TRUE(later);
  later();
  EXPECT_GT(l->load_ref("main")->resolved_at, 1);
  EXPECT_GT(l->load_ref(kCommit)->resolved_at, 1);

  // The commit's record says something else (public): corrected before the pin returns.
  PinnedRevision other = old;
  other.is_private = false;
  ASSERT_TRUE(l->save_ref(kCommit, other).ok());
  ASSERT_TRUE(l->save_ref("main", other).ok());
  ASSERT_TRUE(pin_revision_storing_later(client, repo, l.get(), &later).ok());
  EXPECT_TRUE(l->load_ref(kCommit)->is_private);
  EXPECT_FALSE(l->load_ref("main")->is_private);  // the branch's record: still for `later`
  later();
  EXPECT_TRUE(l->load_ref("main")->is_private);

  // No cache: nothing to store.
  ASSERT_TRUE(pin_revision_storing_later(client, repo, nullptr, &later).ok());
  EXPECT_FALSE(later);
}

}  // namespace
}  // namespace hubfs
