// The doors into a repo without a mount (stack/session.h, stack/hub_file.h): hf:// URLs, a RepoSession over the
// bundled local Hub server (127.0.0.1, started here), HubFile reads, listings, errors, and the
// cache shared between sessions (what makes a mount's reads warm for hubfs.open).
#include "stack/hub_file.h"

#include <fstream>
#include <thread>

#include <gtest/gtest.h>

#include "support/local_hub.h"
#include "support/pattern.h"
#include "support/temp_dir.h"

namespace hubfs {
namespace HUBFS_UNITY_ID {

using testing::LocalHub;
using testing::LocalHubOptions;
using testing::TempDir;

TEST(HfUrlTest, ParsesHfFileSystemSpellings) {
  auto a = parse_hf_url("hf://datasets/lab/scans/recordings/scan.hdf5");
  ASSERT_TRUE(a.ok()) << a.status().message();
  EXPECT_EQ(a->repo.type, RepoType::kDataset);
  EXPECT_EQ(a->repo.id, "lab/scans");
  EXPECT_EQ(a->repo.revision, "main");
  EXPECT_EQ(a->path, "recordings/scan.hdf5");

  auto b = parse_hf_url("hf://lab/model@v1/weights/a.bin");
  ASSERT_TRUE(b.ok()) << b.status().message();
  EXPECT_EQ(b->repo.type, RepoType::kModel);
  EXPECT_EQ(b->repo.id, "lab/model");
  EXPECT_EQ(b->repo.revision, "v1");
  EXPECT_EQ(b->path, "weights/a.bin");

  // HfFileSystem percent-encodes a revision holding '/'.
  auto c = parse_hf_url("hf://spaces/lab/demo@refs%2Fpr%2F3/app.py");
  ASSERT_TRUE(c.ok()) << c.status().message();
  EXPECT_EQ(c->repo.type, RepoType::kSpace);
  EXPECT_EQ(c->repo.revision, "refs/pr/3");
  EXPECT_EQ(c->path, "app.py");

  // A legacy id takes a path only after its revision; the scheme is optional; the root is "".
  auto d = parse_hf_url("gpt2@main/config.json");
  ASSERT_TRUE(d.ok()) << d.status().message();
  EXPECT_EQ(d->repo.id, "gpt2");
  EXPECT_EQ(d->path, "config.json");
  auto e = parse_hf_url("hf://datasets/lab/scans/");
  ASSERT_TRUE(e.ok());
  EXPECT_EQ(e->path, "");
}

TEST(HfUrlTest, RevisionOptionAndBadUrls) {
  auto a = parse_hf_url("hf://datasets/lab/scans/x.bin", std::string("v2"));
  ASSERT_TRUE(a.ok());
  EXPECT_EQ(a->repo.revision, "v2");
  auto same = parse_hf_url("hf://datasets/lab/scans@v2/x.bin", std::string("v2"));
  EXPECT_TRUE(same.ok());
  auto conflict = parse_hf_url("hf://datasets/lab/scans@v1/x.bin", std::string("v2"));
  ASSERT_FALSE(conflict.ok());
  EXPECT_NE(conflict.status().message().find("give one of them"), std::string::npos);
  EXPECT_FALSE(parse_hf_url("hf://datasets/lab/scans/a/../b").ok());
  EXPECT_FALSE(parse_hf_url("hf://datasets/lab/scans@%2E%2E/x").ok());  // ".." once decoded
  EXPECT_FALSE(parse_hf_url("hf://").ok());
}

TEST(StatusOfTest, ErrnoRoundTrips) {
  EXPECT_EQ(status_of(FsError{ENOENT, ""}, "x").code(), Code::kNotFound);
  EXPECT_EQ(status_of(FsError{EACCES, "gated"}, "x").code(), Code::kPermissionDenied);
  EXPECT_EQ(status_of(FsError{EIO, "boom"}, "reading").message(), "reading: boom");
  EXPECT_EQ(errno_of(NotFound("x")), ENOENT);
  EXPECT_EQ(errno_of(PermissionDenied("x")), EACCES);
  EXPECT_EQ(errno_of(Corrupt("x")), EIO);
}

constexpr uint64_t kBigSize = 3'300'000;  // LFS (served by the CDN origin), 4 blocks of 1 MiB
constexpr uint64_t kBigSeed = 11;

class SessionTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    root_ = new TempDir();
    const auto repo = root_->path() / "datasets" / "lab" / "scans";
    testing::write_pattern_file((repo / "data" / "big.bin").string(), kBigSeed, kBigSize);
    std::ofstream(repo / "README.md") << "# scans\n";
    std::filesystem::create_directories(root_->path() / "datasets" / "lab" / "tiny");
    std::ofstream(root_->path() / "datasets" / "lab" / "tiny" / "empty.txt");
    const auto secret = root_->path() / "datasets" / "lab" / "secret";
    std::filesystem::create_directories(secret / "snapshots" / "c1");
    std::ofstream(secret / "hub.json")
        << R"({"refs": {"main": "c1"}, "commits": {"c1": {"date": "2024-01-01T00:00:00Z"}}, "private": true})";
    std::ofstream(secret / "snapshots" / "c1" / "x.txt") << "secret\n";
    const auto gated = root_->path() / "datasets" / "lab" / "gated";
    std::filesystem::create_directories(gated / "snapshots" / "c1");
    std::ofstream(gated / "hub.json")
        << R"({"refs": {"main": "c1"}, "commits": {"c1": {"date": "2024-01-01T00:00:00Z"}}, "gated": true})";
    std::ofstream(gated / "snapshots" / "c1" / "x.txt") << "gated\n";
    LocalHubOptions options;
    options.root = root_->str();
    options.tokens = {"hf_sessiontoken"};
    hub_ = LocalHub::start(options).release();
  }
  static void TearDownTestSuite() {
    delete hub_;
    delete root_;
  }

  SessionConfig config() const {
    SessionConfig c;
    c.endpoint = hub_->url();
    c.cache_dir = (cache_.path() / "cache").string();
    c.cache_size = 1ull << 30;
    c.read_timeout_s = 30;
    c.token = "";  // the environment's token (if any) is not this test's business
    return c;
  }

  // first_file: as the hf:// doors pass the file they open (open_repo_session).
  std::shared_ptr<RepoSession> open(const std::string& url, SessionConfig c, const std::string& first_file = "") {
    auto parsed = parse_hf_url(url);
    EXPECT_TRUE(parsed.ok()) << parsed.status().message();
    auto s = std::make_shared<RepoSession>(Env::real());
    Status st = open_repo_session(c, RepoSpec{parsed->repo, ""}, *s, {}, first_file);
    if (!st.ok()) {
      last_error_ = st;
      return nullptr;
    }
    return s;
  }

  // Opens `url` (naming data/big.bin as its first file when asked) and reads big.bin whole,
  // checking every byte.
  void read_big_exactly(const std::string& url, SessionConfig c, bool name_first_file = false) {
    auto s = open(url, c, name_first_file ? "data/big.bin" : "");
    ASSERT_TRUE(s) << last_error_.message();
    auto f = HubFile::open(s, "data/big.bin");
    ASSERT_TRUE(f.ok()) << f.status().message();
    std::string buf(kBigSize, '\0');
    auto n = (*f)->pread(buf.data(), 0, buf.size());
    ASSERT_TRUE(n.ok()) << n.status().message();
    ASSERT_EQ(*n, kBigSize);
    EXPECT_EQ(testing::count_pattern_mismatches(kBigSeed, 0, buf.data(), *n), 0u);
  }

  static TempDir* root_;
  static LocalHub* hub_;
  TempDir cache_;
  Status last_error_ = Status::Ok();
};
TempDir* SessionTest::root_ = nullptr;
LocalHub* SessionTest::hub_ = nullptr;

TEST_F(SessionTest, ReadsExactBytesAtAnyOffsetAndEndOfFile) {
  auto s = open("hf://datasets/lab/scans", config());
  ASSERT_TRUE(s) << last_error_.message();
  auto f = HubFile::open(s, "data/big.bin");
  ASSERT_TRUE(f.ok()) << f.status().message();
  EXPECT_EQ((*f)->size(), kBigSize);
  for (uint64_t offset : {uint64_t{0}, uint64_t{1048575}, uint64_t{2'000'001}, kBigSize - 10}) {
    std::string buf(70'000, '\0');
    auto n = (*f)->pread(buf.data(), offset, buf.size());
    ASSERT_TRUE(n.ok()) << n.status().message();
    EXPECT_EQ(*n, std::min<uint64_t>(buf.size(), kBigSize - offset));
    EXPECT_EQ(testing::count_pattern_mismatches(kBigSeed, offset, buf.data(), *n), 0u) << offset;
  }
  char c;
  auto eof = (*f)->pread(&c, kBigSize, 1);
  ASSERT_TRUE(eof.ok());
  EXPECT_EQ(*eof, 0u);
  auto hinted = (*f)->hint({{0, 100}, {3'000'000, 200'000}});
  EXPECT_TRUE(hinted.ok()) << hinted.status().message();
}

TEST_F(SessionTest, ASessionReadsInTheBlockItIsGivenAndRefusesASizeNotTaken) {
  // hf:// may take blocks smaller than a mount's 1 MiB (hubfs.open's block_size): the reader, the
  // first file's probe and the cache all use the one given, and every byte is the same.
  for (uint32_t block : {64u << 10, 256u << 10}) {
    SessionConfig c = config();
    c.block_size = block;
    read_big_exactly("hf://datasets/lab/scans", c, /*name_first_file=*/true);
    auto s = open("hf://datasets/lab/scans", c);
    ASSERT_TRUE(s) << last_error_.message();
    ASSERT_TRUE(s->stack.reader);
    EXPECT_EQ(s->stack.reader->options().block_size, block);
  }
  for (uint32_t bad : {0u, 300'000u, 32u << 10, 2u << 20}) {
    SessionConfig c = config();
    c.block_size = bad;
    EXPECT_FALSE(open("hf://datasets/lab/scans", c)) << bad;
    EXPECT_EQ(last_error_.code(), Code::kInvalidArgument) << bad;
    EXPECT_NE(last_error_.message().find("power of two from 64K to 1M"), std::string::npos) << last_error_.message();
  }
}

TEST_F(SessionTest, ConcurrentReadsOfOneFileAreExact) {
  auto s = open("hf://datasets/lab/scans", config());
  ASSERT_TRUE(s) << last_error_.message();
  auto f = HubFile::open(s, "data/big.bin");
  ASSERT_TRUE(f.ok());
  HubFile& file = **f;
  std::atomic<size_t> bad{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < 8; ++i) {
        const uint64_t offset = (static_cast<uint64_t>(t) * 811'111 + static_cast<uint64_t>(i) * 97'003) % kBigSize;
        std::string buf(50'000, '\0');
        auto n = file.pread(buf.data(), offset, buf.size());
        if (!n.ok() || testing::count_pattern_mismatches(kBigSeed, offset, buf.data(), *n) != 0) ++bad;
      }
    });
  }
  for (auto& th : threads) th.join();
  EXPECT_EQ(bad.load(), 0u);
}

TEST_F(SessionTest, ListsAndStatsPathsAndNamesWhatIsMissing) {
  auto s = open("hf://datasets/lab/scans", config());
  ASSERT_TRUE(s) << last_error_.message();
  auto root = list_dir(*s, "");
  ASSERT_TRUE(root.ok()) << root.status().message();
  ASSERT_EQ(root->size(), 2u);
  EXPECT_EQ((*root)[0].path, "README.md");
  EXPECT_FALSE((*root)[0].is_dir);
  EXPECT_EQ((*root)[0].size, 8u);
  EXPECT_EQ((*root)[1].path, "data");
  EXPECT_TRUE((*root)[1].is_dir);
  auto data = list_dir(*s, "/data/");
  ASSERT_TRUE(data.ok());
  ASSERT_EQ(data->size(), 1u);
  EXPECT_EQ((*data)[0].path, "data/big.bin");
  EXPECT_EQ((*data)[0].size, kBigSize);
  auto info = stat_path(*s, "data/big.bin");
  ASSERT_TRUE(info.ok());
  EXPECT_EQ(info->size, kBigSize);

  auto missing = HubFile::open(s, "data/nope.bin");
  ASSERT_FALSE(missing.ok());
  EXPECT_EQ(missing.status().code(), Code::kNotFound);
  EXPECT_NE(missing.status().message().find("data/nope.bin"), std::string::npos);
  auto under_file = stat_path(*s, "README.md/x");
  EXPECT_EQ(under_file.status().code(), Code::kNotFound);
  auto dir = HubFile::open(s, "data");
  EXPECT_EQ(dir.status().code(), Code::kInvalidArgument);
  EXPECT_EQ(list_dir(*s, "README.md").status().code(), Code::kInvalidArgument);
}

// As the Hub: a private repo is not found without its token (the message says to set one); a
// gated repo lists, and its files are refused.
TEST_F(SessionTest, PrivateRepoNeedsItsTokenAndGatedFilesAreRefused) {
  auto refused = open("hf://datasets/lab/secret", config());
  ASSERT_FALSE(refused);
  EXPECT_EQ(last_error_.code(), Code::kNotFound) << last_error_.message();
  EXPECT_NE(last_error_.message().find("HF_TOKEN"), std::string::npos) << last_error_.message();
  auto gated = open("hf://datasets/lab/gated", config());
  ASSERT_TRUE(gated) << last_error_.message();
  auto g = HubFile::open(gated, "x.txt");
  ASSERT_TRUE(g.ok()) << g.status().message();
  char byte;
  auto denied = (*g)->pread(&byte, 0, 1);
  ASSERT_FALSE(denied.ok());
  EXPECT_EQ(denied.status().code(), Code::kPermissionDenied) << denied.status().message();
  SessionConfig c = config();
  c.token = "hf_sessiontoken";
  auto s = open("hf://datasets/lab/secret", c);
  ASSERT_TRUE(s) << last_error_.message();
  auto f = HubFile::open(s, "x.txt");
  ASSERT_TRUE(f.ok()) << f.status().message();
  std::string buf(16, '\0');
  auto n = (*f)->pread(buf.data(), 0, buf.size());
  ASSERT_TRUE(n.ok()) << n.status().message();
  EXPECT_EQ(buf.substr(0, *n), "secret\n");
}

TEST_F(SessionTest, MissingRepoIsNotFound) {
  auto s = open("hf://datasets/lab/nothing", config());
  ASSERT_FALSE(s);
  EXPECT_EQ(last_error_.code(), Code::kNotFound) << last_error_.message();
}

// `hubfs cp`'s core: the whole file in order, hashed against its content id. A byte flipped on
// the wire never makes a wrong copy; the next run, fault gone, copies exact bytes.
TEST_F(SessionTest, CopyFileVerifiesAndStops) {
  auto s = open("hf://datasets/lab/scans", config());
  ASSERT_TRUE(s) << last_error_.message();
  auto f = HubFile::open(s, "data/big.bin");
  ASSERT_TRUE(f.ok());
  EXPECT_EQ((*f)->content_id().rfind("sha256:", 0), 0u) << (*f)->content_id();

  hub_->add_fault({{"mode", "flip_byte"}, {"path_contains", "/blobs/"}, {"count", 1}});
  std::string got;
  CopyOptions options;
  options.sink = [&got](const char* data, size_t n) {
    got.append(data, n);
    return Status::Ok();
  };
  hub_->reset_stats();
  Status first = copy_file(**f, options);
  EXPECT_GE(hub_->stats()["faults_injected"].get<int>(), 1);
  hub_->clear_faults();
  // Failed (the hash caught it), or retried into the right bytes: never a wrong copy.
  if (first.ok()) {
    EXPECT_EQ(testing::count_pattern_mismatches(kBigSeed, 0, got.data(), got.size()), 0u);
  } else {
    // The reader's own hash fails the read (EIO), or copy_file's (kCorrupt).
    EXPECT_TRUE(first.code() == Code::kIo || first.code() == Code::kCorrupt) << first.message();
  }

  auto again = HubFile::open(s, "data/big.bin");
  ASSERT_TRUE(again.ok());
  got.clear();
  uint64_t last_done = 0;
  options.progress = [&last_done](uint64_t done, uint64_t total) {
    EXPECT_EQ(total, kBigSize);
    EXPECT_GT(done, last_done);
    last_done = done;
  };
  Status ok = copy_file(**again, options);
  ASSERT_TRUE(ok.ok()) << ok.message();
  EXPECT_EQ(got.size(), kBigSize);
  EXPECT_EQ(testing::count_pattern_mismatches(kBigSeed, 0, got.data(), got.size()), 0u);
  EXPECT_EQ(last_done, kBigSize);

  CopyOptions stopping;
  stopping.stop = [] { return true; };
  Status stopped = copy_file(**again, stopping);
  EXPECT_EQ(stopped.code(), Code::kUnavailable);
  EXPECT_NE(stopped.message().find("interrupted"), std::string::npos);
}

// As `hubfs cp` runs it: the reader does not hash (the copy's own hash covers the same bytes).
// A byte flipped on the wire fails the copy, and the bad block does not stay cached: the next
// copy, fault gone, fetches it again and is exact (without the copy's discard it read the bad
// block back from the disk cache and failed again, every time).
TEST_F(SessionTest, ACopyWhoseReaderDoesNotHashDropsBadBlocksItFinds) {
  SessionConfig c = config();
  c.verify_whole_files = false;
  auto s = open("hf://datasets/lab/scans", c);
  ASSERT_TRUE(s) << last_error_.message();
  std::string got;
  CopyOptions options;
  options.sink = [&got](const char* data, size_t n) {
    got.append(data, n);
    return Status::Ok();
  };
  hub_->add_fault({{"mode", "flip_byte"}, {"path_contains", "/blobs/"}, {"count", 1}});
  auto f = HubFile::open(s, "data/big.bin");
  ASSERT_TRUE(f.ok());
  Status first = copy_file(**f, options);
  hub_->clear_faults();
  ASSERT_EQ(first.code(), Code::kCorrupt) << first.message();
  EXPECT_NE(first.message().find("cached blocks were dropped"), std::string::npos) << first.message();

  auto again = HubFile::open(s, "data/big.bin");
  ASSERT_TRUE(again.ok());
  got.clear();
  Status ok = copy_file(**again, options);
  ASSERT_TRUE(ok.ok()) << ok.message();
  EXPECT_EQ(got.size(), kBigSize);
  EXPECT_EQ(testing::count_pattern_mismatches(kBigSeed, 0, got.data(), got.size()), 0u);
}

// A copy whose sink can start over (`hubfs cp` truncates its temp file) is not refused for a byte
// flipped on the wire: the failed hash drops the file's blocks and the copy starts over once, so
// the first copy is exact. A flip on every answer fails the second try too.
TEST_F(SessionTest, ACopyThatFailsItsHashStartsOverOnceWhenItsSinkCan) {
  for (bool reader_hashes : {true, false}) {
    SCOPED_TRACE(reader_hashes);
    SessionConfig c = config();
    c.verify_whole_files = reader_hashes;
    c.cache_dir = (cache_.path() / (reader_hashes ? "hashing" : "not-hashing")).string();
    auto s = open("hf://datasets/lab/scans", c);
    ASSERT_TRUE(s) << last_error_.message();
    std::string got;
    int rewinds = 0;
    CopyOptions options;
    options.sink = [&got](const char* data, size_t n) {
      got.append(data, n);
      return Status::Ok();
    };
    options.rewind = [&] {
      ++rewinds;
      got.clear();
      return Status::Ok();
    };
    hub_->reset_stats();
    hub_->add_fault({{"mode", "flip_byte"}, {"path_contains", "/blobs/"}, {"count", 1}});
    auto f = HubFile::open(s, "data/big.bin");
    ASSERT_TRUE(f.ok());
    Status first = copy_file(**f, options);
    ASSERT_TRUE(first.ok()) << first.message();
    EXPECT_EQ(hub_->stats()["faults_injected"].get<int>(), 1);
    EXPECT_EQ(rewinds, 1);
    EXPECT_EQ(got.size(), kBigSize);
    EXPECT_EQ(testing::count_pattern_mismatches(kBigSeed, 0, got.data(), got.size()), 0u);

    hub_->add_fault({{"mode", "flip_byte"}, {"path_contains", "/blobs/"}, {"count", 1000}});
    (*f)->discard_cached();  // fetched again, every answer flipped
    auto g = HubFile::open(s, "data/big.bin");
    ASSERT_TRUE(g.ok());
    rewinds = 0;
    Status bad = copy_file(**g, options);
    hub_->clear_faults();
    EXPECT_FALSE(bad.ok());
    EXPECT_EQ(rewinds, 1) << "once, not more: " << bad.message();
  }
}

// A file with no block: nothing is read, and the copy's check of zero bytes against its
// content id passes.
TEST_F(SessionTest, AnEmptyFileCopiesAndChecks) {
  auto s = open("hf://datasets/lab/tiny", config());
  ASSERT_TRUE(s) << last_error_.message();
  auto f = HubFile::open(s, "empty.txt");
  ASSERT_TRUE(f.ok()) << f.status().message();
  size_t sunk = 0;
  CopyOptions options;
  options.sink = [&sunk](const char*, size_t n) {
    sunk += n;
    return Status::Ok();
  };
  Status st = copy_file(**f, options);
  ASSERT_TRUE(st.ok()) << st.message();
  EXPECT_EQ(sunk, 0u);
}

// A second session on the same cache directory (a second process, or a mount after hubfs.open)
// reads the whole file without one data request, and, pinned to the commit, without any request.
TEST_F(SessionTest, SecondSessionOnTheSameCacheMakesNoDataRequest) {
  std::string commit;
  {
    auto s = open("hf://datasets/lab/scans", config());
    ASSERT_TRUE(s) << last_error_.message();
    commit = s->info.commit;
    auto f = HubFile::open(s, "data/big.bin");
    ASSERT_TRUE(f.ok());
    std::string buf(kBigSize, '\0');
    auto n = (*f)->pread(buf.data(), 0, buf.size());
    ASSERT_TRUE(n.ok());
    ASSERT_EQ(*n, kBigSize);
  }  // the session's cache writes are finished when it is gone
  hub_->reset_stats();
  read_big_exactly("hf://datasets/lab/scans", config());
  nlohmann::json st = hub_->stats();
  EXPECT_EQ(st["cdn_requests"].get<int>(), 0) << st.dump();
  EXPECT_EQ(st["resolve_requests"].get<int>(), 0) << st.dump();
  EXPECT_LE(st["requests"].get<int>(), 1) << st.dump();  // at most the branch's resolution
  hub_->reset_stats();
  read_big_exactly("hf://datasets/lab/scans@" + commit, config());
  st = hub_->stats();
  EXPECT_EQ(st["requests"].get<int>(), 0) << st.dump();
}

// Requests the server saw whose path contains `part`.
int requests_for(const nlohmann::json& stats, const std::string& part) {
  int n = 0;
  for (const auto& [path, count] : stats["by_path"].items())
    if (path.find(part) != std::string::npos) n += count.get<int>();
  return n;
}

// The hf:// doors name the file they open: a cold session resolves it beside the pin (one round
// trip for both) and lists nothing, the read goes straight to the CDN location that resolve
// gave; the next session, online or offline, opens it from its stored record without a request.
TEST_F(SessionTest, AColdOpenResolvesItsFileBesideThePinAndListsNothing) {
  hub_->reset_stats();
  std::string commit;
  {
    auto s = open("hf://datasets/lab/scans", config(), "data/big.bin");
    ASSERT_TRUE(s) << last_error_.message();
    commit = s->info.commit;
    auto f = HubFile::open(s, "data/big.bin");
    ASSERT_TRUE(f.ok()) << f.status().message();
    EXPECT_EQ((*f)->size(), kBigSize);
    EXPECT_EQ((*f)->content_id().rfind("sha256:", 0), 0u) << (*f)->content_id();
    std::string buf(kBigSize, '\0');
    auto n = (*f)->pread(buf.data(), 0, buf.size());
    ASSERT_TRUE(n.ok()) << n.status().message();
    ASSERT_EQ(*n, kBigSize);
    EXPECT_EQ(testing::count_pattern_mismatches(kBigSeed, 0, buf.data(), *n), 0u);
    nlohmann::json st = hub_->stats();
    EXPECT_EQ(requests_for(st, "/tree/"), 0) << st.dump();
    EXPECT_EQ(requests_for(st, "/paths-info/"), 0) << st.dump();
    EXPECT_EQ(st["resolve_requests"].get<int>(), 1) << st.dump();  // the probe, by branch name
    EXPECT_EQ(requests_for(st, "/resolve/main/data/big.bin"), 1) << st.dump();
    // Everything else lists as before, and shows the same file.
    auto data = list_dir(*s, "data");
    ASSERT_TRUE(data.ok()) << data.status().message();
    ASSERT_EQ(data->size(), 1u);
    EXPECT_EQ((*data)[0].size, kBigSize);
    auto root = list_dir(*s, "");
    ASSERT_TRUE(root.ok()) << root.status().message();
    EXPECT_EQ(root->size(), 2u);
    EXPECT_GE(requests_for(hub_->stats(), "/tree/"), 1);
  }
  // This cache dir never listed the repo: the file's own record answers.
  hub_->reset_stats();
  read_big_exactly("hf://datasets/lab/scans", config(), /*name_first_file=*/true);
  nlohmann::json st = hub_->stats();
  EXPECT_EQ(st["requests"].get<int>(), 1) << st.dump();  // the branch's pin, nothing else
  SessionConfig offline = config();
  offline.offline = true;
  read_big_exactly("hf://datasets/lab/scans", offline, true);
  hub_->reset_stats();
  read_big_exactly("hf://datasets/lab/scans@" + commit, config(), true);
  EXPECT_EQ(hub_->stats()["requests"].get<int>(), 0) << hub_->stats().dump();
}

TEST_F(SessionTest, AFirstFileInAStoredDirectoryListingNeedsOnlyThePin) {
  // The cache holds data/'s listing but not the root's (an earlier session opened data/big.bin
  // and listed data/ alone): the next session knows the file from that listing and lists nothing.
  {
    auto s = open("hf://datasets/lab/scans", config(), "data/big.bin");
    ASSERT_TRUE(s) << last_error_.message();
    ASSERT_TRUE(list_dir(*s, "data").ok());
  }
  hub_->reset_stats();
  read_big_exactly("hf://datasets/lab/scans", config(), /*name_first_file=*/true);
  nlohmann::json st = hub_->stats();
  EXPECT_EQ(st["api_requests"].get<int>(), 1) << st.dump();  // the branch's pin; the rest is the data
  EXPECT_EQ(requests_for(st, "/tree/"), 0) << st.dump();
  EXPECT_EQ(requests_for(st, "/paths-info/"), 0) << st.dump();
}

TEST_F(SessionTest, ASessionKnowsWhenItsBuildAsksTheHubNothing) {
  const RepoRef main_ref = parse_hf_url("hf://datasets/lab/scans").value().repo;
  EXPECT_FALSE(session_needs_no_request(config(), RepoSpec{main_ref, ""}, "data/big.bin"));  // a branch: pinned
  SessionConfig offline = config();
  offline.offline = true;
  EXPECT_TRUE(session_needs_no_request(offline, RepoSpec{main_ref, ""}, "data/big.bin"));
  std::string commit;
  {
    auto s = open("hf://datasets/lab/scans", config(), "data/big.bin");  // stores the pin and the file's record
    ASSERT_TRUE(s) << last_error_.message();
    commit = s->info.commit;
  }
  RepoRef at_commit = main_ref;
  at_commit.revision = commit;
  EXPECT_TRUE(session_needs_no_request(config(), RepoSpec{at_commit, ""}, "data/big.bin"));
  EXPECT_FALSE(session_needs_no_request(config(), RepoSpec{at_commit, ""}, "README.md"));  // not known: probed
  EXPECT_FALSE(session_needs_no_request(config(), RepoSpec{at_commit, ""}, ""));  // the root is not stored
  EXPECT_FALSE(session_needs_no_request(config(), RepoSpec{at_commit, "data"}, "big.bin"));  // a subfolder is checked
  SessionConfig elsewhere = config();
  elsewhere.cache_dir = (cache_.path() / "other").string();
  EXPECT_FALSE(session_needs_no_request(elsewhere, RepoSpec{at_commit, ""}, "data/big.bin"));
  // What it says holds: that session makes no request.
  hub_->reset_stats();
  auto s = open("hf://datasets/lab/scans@" + commit, config(), "data/big.bin");
  ASSERT_TRUE(s) << last_error_.message();
  ASSERT_TRUE(HubFile::open(s, "data/big.bin").ok());
  EXPECT_EQ(hub_->stats()["requests"].get<int>(), 0) << hub_->stats().dump();
}

// A probe held somewhere (a stalled connection, the resolvers' quota) is not waited for past a
// short grace after the pin: the session lists instead, and its end is not held by the probe.
TEST_F(SessionTest, AProbeThatDoesNotAnswerIsNotWaitedFor) {
  hub_->reset_stats();
  hub_->add_fault({{"mode", "stall"}, {"stall_ms", 5000}, {"method", "HEAD"},
                   {"path_contains", "scans/resolve/main/data/big.bin"}});
  {
    auto s = open("hf://datasets/lab/scans", config(), "data/big.bin");
    ASSERT_TRUE(s) << last_error_.message();
    nlohmann::json st = hub_->stats();
    EXPECT_EQ(st["faults_injected"].get<int>(), 1) << st.dump();
    EXPECT_EQ(st["in_flight"].get<int>(), 1) << "the probe, still held: " << st.dump();
    EXPECT_GE(requests_for(st, "/tree/"), 1) << st.dump();
    auto f = HubFile::open(s, "data/big.bin");
    ASSERT_TRUE(f.ok()) << f.status().message();
    std::string buf(100'000, '\0');
    auto n = (*f)->pread(buf.data(), 1'000'000, buf.size());
    ASSERT_TRUE(n.ok()) << n.status().message();
    EXPECT_EQ(testing::count_pattern_mismatches(kBigSeed, 1'000'000, buf.data(), *n), 0u);
  }  // the session's shutdown ends the probe's request
}

// A repo of two commits, c1 and c2 (its snapshots/ directories), with its branch main at `main`:
// moving it between them is a push that changes what the branch reads.
void write_main_ref(const std::filesystem::path& repo, const char* main) {
  std::ofstream(repo / "hub.json") << R"({"refs": {"main": ")" << main
                                   << R"("}, "commits": {"c1": {"date": "2024-01-01T00:00:00Z"},)"
                                   << R"( "c2": {"date": "2024-02-01T00:00:00Z"}}})";
}

// The probe asks by branch name and the pin may see the branch before it moved: a probe served
// from another commit than the pinned one is not believed, and the session lists that commit.
TEST_F(SessionTest, AProbeFromAnotherCommitThanThePinIsNotBelieved) {
  const auto repo = root_->path() / "datasets" / "lab" / "moving";
  testing::write_pattern_file((repo / "snapshots" / "c1" / "x.bin").string(), 21, 40'000);
  testing::write_pattern_file((repo / "snapshots" / "c2" / "x.bin").string(), 22, 50'000);
  write_main_ref(repo, "c1");
  hub_->reset_stats();
  // The probe is held at the server until the pin has been answered and main has moved on, and
  // not so long that the session stops waiting for it (kProbeGrace, a second).
  hub_->add_fault({{"mode", "stall"}, {"stall_ms", 700}, {"method", "HEAD"},
                   {"path_contains", "moving/resolve/main/x.bin"}});
  std::thread mover([&] {
    for (int i = 0; i < 2000; ++i) {
      bool pinned = false;
      for (const auto& r : hub_->trace())
        if (r.value("path", "").find("moving/revision/main") != std::string::npos && r.contains("end")) pinned = true;
      if (pinned) break;
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
    write_main_ref(repo, "c2");
  });
  auto s = open("hf://datasets/lab/moving", config(), "x.bin");
  mover.join();
  ASSERT_TRUE(s) << last_error_.message();
  EXPECT_EQ(hub_->stats()["faults_injected"].get<int>(), 1);
  bool probe_answered = false;  // before the session was open: its answer was heard, and refused
  for (const auto& r : hub_->trace())
    if (r.value("method", "") == "HEAD" && r.contains("end")) probe_answered = true;
  EXPECT_TRUE(probe_answered) << hub_->trace().dump();
  auto f = HubFile::open(s, "x.bin");
  ASSERT_TRUE(f.ok()) << f.status().message();
  EXPECT_EQ((*f)->size(), 40'000u);  // c1's, as pinned
  std::string buf(40'000, '\0');
  auto n = (*f)->pread(buf.data(), 0, buf.size());
  ASSERT_TRUE(n.ok()) << n.status().message();
  ASSERT_EQ(*n, 40'000u);
  EXPECT_EQ(testing::count_pattern_mismatches(21, 0, buf.data(), *n), 0u);
  EXPECT_GE(requests_for(hub_->stats(), "/tree/"), 1);  // listed, as without a probe
}

// The pin runs beside the session's local build (the reader, the disk cache): a branch that moved
// since the cache last saw it is read at its new commit, never at the one the cache knew, though
// the cache held that commit's record of the file before the pin answered.
TEST_F(SessionTest, ABranchThatMovedIsReadAtItsNewCommitThoughTheCacheKnewTheOld) {
  const auto repo = root_->path() / "datasets" / "lab" / "moved";
  testing::write_pattern_file((repo / "snapshots" / "c1" / "x.bin").string(), 31, 40'000);
  testing::write_pattern_file((repo / "snapshots" / "c2" / "x.bin").string(), 32, 50'000);
  write_main_ref(repo, "c1");
  std::string first_commit;
  {
    auto s = open("hf://datasets/lab/moved", config(), "x.bin");  // stores main -> c1 and x.bin's record at c1
    ASSERT_TRUE(s) << last_error_.message();
    first_commit = s->info.commit;
    auto f = HubFile::open(s, "x.bin");
    ASSERT_TRUE(f.ok()) << f.status().message();
    std::string buf(40'000, '\0');
    ASSERT_TRUE((*f)->pread(buf.data(), 0, buf.size()).ok());  // c1's blocks in the disk cache
  }
  write_main_ref(repo, "c2");
  auto s = open("hf://datasets/lab/moved", config(), "x.bin");
  ASSERT_TRUE(s) << last_error_.message();
  EXPECT_NE(s->info.commit, first_commit);
  auto f = HubFile::open(s, "x.bin");
  ASSERT_TRUE(f.ok()) << f.status().message();
  EXPECT_EQ((*f)->size(), 50'000u);
  std::string buf(50'000, '\0');
  auto n = (*f)->pread(buf.data(), 0, buf.size());
  ASSERT_TRUE(n.ok()) << n.status().message();
  ASSERT_EQ(*n, 50'000u);
  EXPECT_EQ(testing::count_pattern_mismatches(32, 0, buf.data(), *n), 0u);
}

// Until the reader has loaded `blocks` blocks from the disk cache in all (the blocks a session
// warms while its pin is out load on the reader's workers). Bounded, so a reader that never gets
// there fails the test instead of hanging it.
bool wait_for_disk_hits(const BlockReader& reader, uint64_t blocks) {
  const auto give_up = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  while (reader.stats().disk_hits < blocks) {
    if (std::chrono::steady_clock::now() > give_up) return false;
    std::this_thread::yield();
  }
  return true;
}

// Writes `n` one-block files f00.bin... of `size` bytes (seeds seed_base + k) into `dir`.
void write_small_files(const std::filesystem::path& dir, int n, size_t size, uint32_t seed_base = 100) {
  for (int k = 0; k < n; ++k) {
    char name[16];
    std::snprintf(name, sizeof name, "f%02d.bin", k);
    testing::write_pattern_file((dir / name).string(), seed_base + static_cast<uint32_t>(k), size);
  }
}

// While a branch's pin is out, the session loads the first blocks of the file it opens and of
// the files after it in their directory's stored listing from the disk cache into memory (at
// most 16): the opens after the pin find them there. Nothing is fetched for it: a file the disk
// cache lacks stays cold until it is read, and the pin is the session's only request.
TEST_F(SessionTest, WhileThePinIsOutTheNextFilesFirstBlocksLoadFromDisk) {
  const auto repo = root_->path() / "datasets" / "lab" / "many";
  write_small_files(repo / "d", 20, 70'000);
  auto path = [](int k) {
    char name[16];
    std::snprintf(name, sizeof name, "d/f%02d.bin", k);
    return std::string(name);
  };
  auto read_exactly = [&](const std::shared_ptr<RepoSession>& s, int k) {
    auto f = HubFile::open(s, path(k));
    ASSERT_TRUE(f.ok()) << f.status().message();
    std::string buf(70'000, '\0');
    auto n = (*f)->pread(buf.data(), 0, buf.size());
    ASSERT_TRUE(n.ok()) << n.status().message();
    ASSERT_EQ(*n, 70'000u);
    EXPECT_EQ(testing::count_pattern_mismatches(100 + k, 0, buf.data(), *n), 0u) << path(k);
  };
  {
    auto s = open("hf://datasets/lab/many", config(), path(0));
    ASSERT_TRUE(s) << last_error_.message();
    ASSERT_TRUE(list_dir(*s, "d").ok());  // d/'s listing stored
    for (int k = 0; k < 20; ++k)
      if (k != 3) read_exactly(s, k);  // f03 never reaches the disk cache
  }
  hub_->reset_stats();
  auto s = open("hf://datasets/lab/many", config(), path(0));
  ASSERT_TRUE(s) << last_error_.message();
  // f00 and the 15 after it, less f03, which the disk cache lacks.
  ASSERT_TRUE(wait_for_disk_hits(*s->stack.reader, 15)) << s->stack.reader->stats().disk_hits;
  const ReaderStats warmed = s->stack.reader->stats();
  EXPECT_EQ(warmed.disk_hits, 15u);  // none past the 16th file
  EXPECT_EQ(warmed.hints, 0u);      // not a hint: the files' read-ahead is left as it was
  for (int k = 0; k < 16; ++k)
    if (k != 3) read_exactly(s, k);
  const ReaderStats read = s->stack.reader->stats();
  EXPECT_EQ(read.disk_hits, 15u);  // every one of them from memory
  EXPECT_EQ(read.memory_hits - warmed.memory_hits, 15u);
  nlohmann::json st = hub_->stats();
  EXPECT_EQ(st["requests"].get<int>(), 1) << st.dump();  // the pin
  read_exactly(s, 3);  // then fetched when read (its one block), and exact
  EXPECT_EQ(hub_->stats()["cdn_requests"].get<int>(), 1) << hub_->stats().dump();
}

// The blocks warmed while the pin is out are those of the commit the cache knew; a branch that
// moved since changes a file's content, not its name: the file is read at the new commit, and the
// old content's block, in memory by then, is not what it reads.
TEST_F(SessionTest, FirstBlocksWarmedAtTheOldCommitAreNotReadAfterTheBranchMoved) {
  const auto repo = root_->path() / "datasets" / "lab" / "moving";
  write_small_files(repo / "snapshots" / "c1" / "d", 3, 60'000, 200);
  write_small_files(repo / "snapshots" / "c2" / "d", 3, 60'000, 300);  // the same names and sizes
  auto read_all = [&](const std::shared_ptr<RepoSession>& s, uint32_t seed_base) {
    for (int k = 0; k < 3; ++k) {
      const std::string path = "d/f0" + std::to_string(k) + ".bin";
      auto f = HubFile::open(s, path);
      ASSERT_TRUE(f.ok()) << f.status().message();
      std::string buf(60'000, '\0');
      auto n = (*f)->pread(buf.data(), 0, buf.size());
      ASSERT_TRUE(n.ok()) << n.status().message();
      ASSERT_EQ(*n, 60'000u);
      EXPECT_EQ(testing::count_pattern_mismatches(seed_base + k, 0, buf.data(), *n), 0u) << path;
    }
  };
  write_main_ref(repo, "c1");
  {
    auto s = open("hf://datasets/lab/moving", config(), "d/f00.bin");
    ASSERT_TRUE(s) << last_error_.message();
    ASSERT_TRUE(list_dir(*s, "d").ok());
    read_all(s, 200);  // c1's blocks on disk, d/ listed at c1
  }
  write_main_ref(repo, "c2");
  auto s = open("hf://datasets/lab/moving", config(), "d/f00.bin");
  ASSERT_TRUE(s) << last_error_.message();
  ASSERT_TRUE(wait_for_disk_hits(*s->stack.reader, 3));  // c1's three first blocks, in memory
  read_all(s, 300);
}

// A pin that fails is the session's error. Into a cache directory not made yet it leaves nothing
// (the reader waits for the pin); beside a cache already there, the reader is built first, and
// the session (its reader, its background executor) goes away cleanly; the next try pins again.
TEST_F(SessionTest, APinThatFailsIsTheSessionsErrorAndLeavesNoNewCacheBehind) {
  const std::filesystem::path dir = config().cache_dir;
  ASSERT_FALSE(std::filesystem::exists(dir));
  hub_->add_fault({{"status", 404}, {"count", 1}, {"path_contains", "scans/revision/main"}});
  EXPECT_FALSE(open("hf://datasets/lab/scans", config(), "data/big.bin"));
  EXPECT_EQ(last_error_.code(), Code::kNotFound) << last_error_.message();
  EXPECT_FALSE(std::filesystem::exists(dir / "blocks")) << "a cache directory made for a repo that was not found";
  read_big_exactly("hf://datasets/lab/scans", config(), /*name_first_file=*/true);
  ASSERT_TRUE(std::filesystem::is_directory(dir / "blocks"));
  hub_->reset_stats();
  hub_->add_fault({{"status", 404}, {"count", 1}, {"path_contains", "scans/revision/main"}});
  EXPECT_FALSE(open("hf://datasets/lab/scans", config(), "data/big.bin"));
  EXPECT_EQ(last_error_.code(), Code::kNotFound) << last_error_.message();
  EXPECT_EQ(hub_->stats()["faults_injected"].get<int>(), 1);
  read_big_exactly("hf://datasets/lab/scans", config(), /*name_first_file=*/true);
}

// The Hub answers a small file's resolve with a relative 307 to /api/resolve-cache/, which serves
// the bytes (docs/hub-http-contract.md section 7): the session follows it with the token, reads
// exact bytes, and both hops are resolver calls. The revision is percent-encoded, as hf:// URLs
// and mount specs may carry it.
TEST(SessionResolveCache, ASmallFileIsReadThroughTheResolveCacheHop) {
  TempDir root;
  const auto repo = root.path() / "datasets" / "lab" / "notes";
  std::filesystem::create_directories(repo / "snapshots" / "c1");
  std::ofstream(repo / "hub.json") << R"({"refs": {"main": "c1", "refs/pr/2": "c1"}, "commits": {"c1": {}}})";
  std::string text;
  for (int i = 0; i < 300; ++i) text += "line " + std::to_string(i) + "\n";
  std::ofstream(repo / "snapshots" / "c1" / "notes.txt") << text;
  LocalHubOptions options;
  options.root = root.str();
  options.extra_args = {"--resolve-cache"};
  auto hub = LocalHub::start(options);
  TempDir cache;
  SessionConfig c;
  c.endpoint = hub->url();
  c.cache_dir = (cache.path() / "cache").string();
  c.cache_size = 1ull << 30;
  c.read_timeout_s = 30;
  c.token = "";
  auto parsed = parse_hf_url("hf://datasets/lab/notes@refs%2Fpr%2F2");
  ASSERT_TRUE(parsed.ok()) << parsed.status().message();
  EXPECT_EQ(parsed->repo.revision, "refs/pr/2");
  auto s = std::make_shared<RepoSession>(Env::real());
  Status st = open_repo_session(c, RepoSpec{parsed->repo, ""}, *s, {}, "");
  ASSERT_TRUE(st.ok()) << st.message();
  auto f = HubFile::open(s, "notes.txt");
  ASSERT_TRUE(f.ok()) << f.status().message();
  std::string buf(text.size() + 10, '\0');
  auto n = (*f)->pread(buf.data(), 0, buf.size());
  ASSERT_TRUE(n.ok()) << n.status().message();
  buf.resize(*n);
  EXPECT_EQ(buf, text);
  auto stats = hub->stats();
  int hops = 0;
  for (const auto& [path, count] : stats["by_path"].items()) {
    if (path.rfind("/api/resolve-cache/datasets/lab/notes/", 0) == 0) hops += count.get<int>();
  }
  EXPECT_GE(hops, 2) << stats.dump();  // the resolve's HEAD and the read both go there
  EXPECT_GE(stats["resolve_requests"].get<int>(), 3) << stats.dump();
}

}  // namespace
}  // namespace hubfs
