// Xet-stored files read natively, end to end (docs/xet.md, "The read path"): a RepoSession over
// the local Hub's Xet model (tools/hub_server/xet.py, --xet), whose xorbs hubfs-xet-pack wrote
// with the spec's chunking and hashes. Exact bytes from V2 plans, one token per repo and no
// resolve per file, no Authorization on xorb requests, corrupted xorb bytes caught by the
// whole-file check (and never kept past it), a second revision fetching only its changed chunks,
// and the bridge as the fallback for a failing storage service.
#include <chrono>
#include <cstdlib>
#include <fstream>
#include <future>
#include <thread>

#include <gtest/gtest.h>

#include "cache/cache_admin.h"
#include "stack/hub_file.h"
#include "support/local_hub.h"
#include "support/pattern.h"
#include "support/temp_dir.h"
#include "support/wait_for.h"

namespace hubfs {
namespace HUBFS_UNITY_ID {

using testing::LocalHub;
using testing::LocalHubOptions;
using testing::TempDir;

constexpr uint64_t kSize = 3'000'000;  // ~46 chunks of ~64 KiB, 3 blocks of 1 MiB
constexpr uint64_t kSeed = 22;

// Revision c2: c1 with 1% of its bytes changed in three places.
std::string revision_two(const std::string& one) {
  std::string two = one;
  for (uint64_t at : {uint64_t(100'000), uint64_t(1'500'000), uint64_t(2'900'000)}) {
    for (uint64_t i = 0; i < 10'000; ++i) two[at + i] = static_cast<char>(two[at + i] ^ 0x5a);
  }
  return two;
}

// h5chunk's hf:// door (SessionConfig::xet_head_from_probe) on data/big.bin at v1, and its
// first read: 4 KiB at offset 0, inside the head. Faults meant for the head's bridge read must be
// added before (it is asked for as the probe answers).
struct HeadOpened {
  std::shared_ptr<RepoSession> session;
  std::string head;  // the first read's bytes
};

class XetSessionTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    root_ = new TempDir();
    const auto repo = root_->path() / "datasets" / "lab" / "xet";
    std::filesystem::create_directories(repo / "snapshots" / "c1" / "data");
    std::filesystem::create_directories(repo / "snapshots" / "c2" / "data");
    std::ofstream(repo / "hub.json") << R"({"refs": {"main": "c2", "v1": "c1"},
      "commits": {"c1": {"date": "2024-01-01T00:00:00Z"}, "c2": {"date": "2024-02-01T00:00:00Z"}}})";
    *one_ = testing::pattern_bytes(kSeed, 0, kSize);
    *two_ = revision_two(*one_);
    testing::write_file((repo / "snapshots" / "c1" / "data" / "big.bin").string(), *one_);
    testing::write_file((repo / "snapshots" / "c2" / "data" / "big.bin").string(), *two_);
    std::ofstream(repo / "snapshots" / "c1" / "README.md") << "# xet\n";
    std::ofstream(repo / "snapshots" / "c2" / "README.md") << "# xet\n";
    LocalHubOptions options;
    options.root = root_->str();
    options.xet = true;
    hub_ = LocalHub::start(options).release();
  }
  static void TearDownTestSuite() {
    delete hub_;
    delete root_;
  }
  void SetUp() override {
    hub_->clear_faults();
    hub_->reset_stats();
  }

  SessionConfig config(const std::string& cache = "cache") const {
    SessionConfig c;
    c.endpoint = hub_->url();
    c.cache_dir = (cache_.path() / cache).string();
    c.cache_size = 1ull << 30;
    c.read_timeout_s = 60;
    c.token = "";
    return c;
  }

  // first_file: as the hf:// doors pass the file they open (open_repo_session).
  std::shared_ptr<RepoSession> open(const std::string& revision, SessionConfig c, const std::string& first_file = "") {
    auto s = std::make_shared<RepoSession>(Env::real());
    RepoRef ref;
    ref.type = RepoType::kDataset;
    ref.id = "lab/xet";
    ref.revision = revision;
    Status st = open_repo_session(c, RepoSpec{ref, ""}, *s, {}, first_file);
    EXPECT_TRUE(st.ok()) << st.message();
    return st.ok() ? s : nullptr;
  }

  // HeadOpened's session and first read; the read must succeed.
  HeadOpened open_reading_the_head() {
    SessionConfig c = config();
    c.xet_head_from_probe = true;
    HeadOpened h{open("v1", c, "data/big.bin"), std::string(4096, '\0')};
    if (!h.session) return h;
    auto f = HubFile::open(h.session, "data/big.bin");
    EXPECT_TRUE(f.ok()) << f.status().message();
    if (!f.ok()) return h;
    auto got = (*f)->pread(h.head.data(), 0, h.head.size());
    EXPECT_TRUE(got.ok()) << got.status().message();
    return h;
  }

  // Reads the whole file in 1 MiB pieces: the bytes each piece returned that differ from
  // `want`, and how many pieces failed.
  struct Outcome {
    size_t wrong = 0;
    size_t failed = 0;
    std::string first_error;
  };
  static Outcome read_all(const std::shared_ptr<RepoSession>& s, const std::string& want) {
    Outcome o;
    auto f = HubFile::open(s, "data/big.bin");
    EXPECT_TRUE(f.ok()) << f.status().message();
    if (!f.ok()) return {want.size(), 1, f.status().message()};
    EXPECT_EQ((*f)->size(), want.size());
    std::string buf(1 << 20, '\0');
    for (uint64_t off = 0; off < want.size(); off += buf.size()) {
      const size_t n = std::min<uint64_t>(buf.size(), want.size() - off);
      auto got = (*f)->pread(buf.data(), off, n);
      if (!got.ok()) {
        ++o.failed;
        if (o.first_error.empty()) o.first_error = got.status().message();
        continue;
      }
      EXPECT_EQ(*got, n);
      for (size_t i = 0; i < *got; ++i) o.wrong += buf[i] != want[off + i];
    }
    return o;
  }

  static TempDir* root_;
  static LocalHub* hub_;
  static std::string* one_;
  static std::string* two_;
  TempDir cache_;
};
TempDir* XetSessionTest::root_ = nullptr;
LocalHub* XetSessionTest::hub_ = nullptr;
std::string* XetSessionTest::one_ = new std::string;
std::string* XetSessionTest::two_ = new std::string;

TEST_F(XetSessionTest, ReadsAXetFileNativelyWithOneTokenAndNoResolve) {
  auto s = open("v1", config());
  ASSERT_TRUE(s);
  Outcome o = read_all(s, *one_);
  EXPECT_EQ(o.failed, 0u) << o.first_error;
  EXPECT_EQ(o.wrong, 0u);
  auto stats = hub_->stats();
  EXPECT_EQ(stats["xet_token_requests"], 1) << stats.dump();
  EXPECT_GE(stats["xet_reconstructions"].get<int>(), 1);
  EXPECT_GE(stats["xorb_requests"].get<int>(), 1);
  EXPECT_EQ(stats["xorb_authorization_headers"], 0);
  EXPECT_EQ(stats["resolve_requests"], 0) << "a Xet file needs no Hub resolve";
  auto x = s->stack.xet->stats();
  EXPECT_EQ(x.token_requests, 1u);
  EXPECT_EQ(x.reconstruction_version, 2);
  EXPECT_EQ(x.unverified_bytes, 0u) << "the file was read whole: every byte is checked";
  EXPECT_EQ(x.retries, 0u);
  EXPECT_EQ(x.files_verified, 1u);
  EXPECT_EQ(s->stack.xet_router->fallbacks(), 0u);
  // The Xet check stood for the reader's SHA-256: the file counts as verified, unhashed.
  const ReaderStats r = s->stack.reader->stats();
  EXPECT_EQ(r.files_verified, 1u);
  EXPECT_EQ(r.files_verified_by_source, 1u);
  EXPECT_EQ(r.verify_failures, 0u);
}

// hf:// in 256 KiB blocks (a training loop's FrameDataset): a Xet file read whole is exact and
// verified by Xet's check, its head included (the probe's bridge read is of the session's block).
// The chunk cache recorded where its chunks lie in those blocks; a session of 1 MiB blocks on the
// same cache reads them back there, in the blocks their key names, and asks Xet for no chunk.
TEST_F(XetSessionTest, AXetFileInSmallerBlocksIsExactAndItsChunksServeASessionOfAnotherBlockSize) {
  SessionConfig small = config();
  small.block_size = 256u << 10;
  small.xet_head_from_probe = true;
  {
    auto s = open("v1", small, "data/big.bin");
    ASSERT_TRUE(s);
    Outcome o = read_all(s, *one_);
    EXPECT_EQ(o.failed, 0u) << o.first_error;
    EXPECT_EQ(o.wrong, 0u);
    EXPECT_EQ(s->stack.reader->stats().files_verified, 1u);
    EXPECT_EQ(s->stack.reader->stats().verify_failures, 0u);
    EXPECT_EQ(s->stack.xet_router->fallbacks(), 0u);
    s->stack.xet->shutdown();
  }
  hub_->reset_stats();
  auto s = open("v1", config());
  ASSERT_TRUE(s);
  Outcome o = read_all(s, *one_);
  EXPECT_EQ(o.failed, 0u) << o.first_error;
  EXPECT_EQ(o.wrong, 0u);
  const xet::ChunkCacheStats c = s->stack.chunk_cache->stats();
  EXPECT_EQ(c.damaged, 0u);
  EXPECT_GT(c.hit_bytes, 0u);
  EXPECT_EQ(hub_->stats()["xorb_requests"], 0) << hub_->stats().dump();
}

// One flipped byte in a xorb range answer: no chunk hash exists to catch it in the read that got
// it (the service gives none), so the whole-file check does. The file's blocks are all dropped, the
// read that completed the file fails, and the next whole read is exact and verified; nothing of
// the bad read reached the chunk cache.
TEST_F(XetSessionTest, ACorruptXorbByteFailsTheFileCheckAndNeverOutlivesIt) {
  auto s = open("v1", config());
  ASSERT_TRUE(s);
  hub_->add_fault({{"mode", "flip_byte"}, {"path_contains", "/xorbs/"}, {"count", 1}});
  Outcome bad = read_all(s, *one_);
  EXPECT_EQ(hub_->stats()["faults_injected"], 1);
  EXPECT_EQ(s->stack.reader->stats().verify_failures, 1u);
  EXPECT_GE(bad.failed, 1u) << "a front-to-back read of a file that failed its check never ends successfully";
  EXPECT_EQ(s->stack.chunk_cache->stats().stored, 0u);
  Outcome good = read_all(s, *one_);
  EXPECT_EQ(good.failed, 0u) << good.first_error;
  EXPECT_EQ(good.wrong, 0u);
  EXPECT_EQ(s->stack.reader->stats().verify_failures, 1u);
  EXPECT_EQ(s->stack.xet->stats().files_verified, 1u);
  EXPECT_GT(s->stack.chunk_cache->stats().stored, 0u);
  EXPECT_EQ(s->stack.xet_router->fallbacks(), 0u) << "wrong bytes are not a service error";
}

// The same through copy_file (`hubfs cp`'s path), with 3 corrupt xorb answers: the file's check
// fails at its last chunk, and the copy, whose sink can start over, starts over once on a fresh
// handle: the first copy is exact, at the price of the file fetched twice, and nothing of the
// corrupt answers is kept (a read after it is exact and fetches nothing).
TEST_F(XetSessionTest, CorruptXorbAnswersCostACopyARefetchNotAFailure) {
  auto s = open("v1", config());
  ASSERT_TRUE(s);
  hub_->add_fault({{"mode", "flip_byte"}, {"path_contains", "/xorbs/"}, {"count", 3}});
  auto f = HubFile::open(s, "data/big.bin");
  ASSERT_TRUE(f.ok()) << f.status().message();
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
  Status st = copy_file(**f, options);
  ASSERT_TRUE(st.ok()) << st.message();
  EXPECT_TRUE(got == *one_) << "exact on the first copy";
  EXPECT_EQ(hub_->stats()["faults_injected"], 3);
  EXPECT_LE(rewinds, 1);
  const uint64_t xorb_bytes = hub_->stats()["xorb_bytes"].get<uint64_t>();
  // Twice the file, plus the chunks two requests share at their edge (2.14x measured).
  EXPECT_LE(xorb_bytes, 2 * kSize + kSize / 4) << "the file twice, not more";
  EXPECT_EQ(s->stack.xet->stats().files_verified, 1u);
  EXPECT_EQ(s->stack.xet_router->fallbacks(), 0u);
  EXPECT_GT(s->stack.chunk_cache->stats().stored, 0u) << "the verified fetch's chunks";
  hub_->reset_stats();
  Outcome again = read_all(s, *one_);
  EXPECT_EQ(again.failed, 0u) << again.first_error;
  EXPECT_EQ(again.wrong, 0u);
  EXPECT_EQ(hub_->stats()["xorb_requests"], 0) << "served from what the exact copy cached";
}

TEST_F(XetSessionTest, XorbsCorruptedEveryTimeNeverPassTheFileCheck) {
  auto s = open("v1", config());
  ASSERT_TRUE(s);
  hub_->add_fault({{"mode", "flip_byte"}, {"path_contains", "/xorbs/"}, {"count", 100000}});
  Outcome o = read_all(s, *one_);
  EXPECT_GT(o.failed, 0u);
  EXPECT_EQ(s->stack.xet->stats().files_verified, 0u);
  EXPECT_GE(s->stack.xet->stats().file_hash_mismatches, 1u);
  EXPECT_EQ(s->stack.chunk_cache->stats().stored, 0u);
  EXPECT_EQ(s->stack.xet_router->fallbacks(), 0u);
  EXPECT_EQ(hub_->stats()["resolve_requests"], 0);
}

// A storage service that cuts every xorb body short is failing, not sending corrupt data: the
// reads go to the bridge (logged once), exact, with no error.
TEST_F(XetSessionTest, ShortXorbBodiesFallBackToTheBridge) {
  // Each Xet attempt may take a quarter of what the read has left (the transport retries the
  // short bodies until then): a short read timeout keeps the test short.
  SessionConfig c = config();
  c.read_timeout_s = 8;
  auto s = open("v1", c);
  ASSERT_TRUE(s);
  hub_->add_fault({{"mode", "truncate"}, {"path_contains", "/xorbs/"}, {"count", 100000}});
  Outcome o = read_all(s, *one_);
  EXPECT_EQ(o.failed, 0u) << o.first_error;
  EXPECT_EQ(o.wrong, 0u);
  EXPECT_GE(s->stack.xet_router->fallbacks(), 1u);
  EXPECT_GE(s->stack.xet->stats().service_errors, 1u);
}

TEST_F(XetSessionTest, SecondRevisionFetchesOnlyItsChangedChunks) {
  {
    auto s1 = open("v1", config());
    ASSERT_TRUE(s1);
    Outcome o = read_all(s1, *one_);
    ASSERT_EQ(o.failed, 0u) << o.first_error;
  }
  {
    // The chunks were recorded where they lie in revision 1's blocks, not copied: the chunk
    // cache holds their hashes and the few bytes at each run's ends, not the file a second time.
    auto usage = cache_admin::info(config().cache_dir);
    ASSERT_TRUE(usage.ok()) << usage.status().message();
    EXPECT_GT(usage->xet_chunks, 0u);
    EXPECT_LT(usage->xet_chunk_bytes, kSize / 4);
  }
  hub_->reset_stats();
  auto s2 = open("main", config());
  ASSERT_TRUE(s2);
  Outcome o = read_all(s2, *two_);
  EXPECT_EQ(o.failed, 0u) << o.first_error;
  EXPECT_EQ(o.wrong, 0u);
  auto stats = hub_->stats();
  const double fetched = stats["xorb_bytes"].get<double>();
  // 30 KB changed in three places: the chunks holding each edit are new (~4 chunks of 64-128
  // KiB, ~13% of this small file), every other chunk comes from the chunk cache. Without dedup it would be the whole file. (bench/xet_revision.cc measures the
  // issue's 300 MB case against its 5% target.)
  EXPECT_LT(fetched, 0.25 * kSize) << stats.dump();
  EXPECT_GT(fetched, 0) << stats.dump();
  const uint64_t served = s2->stack.chunk_cache->stats().hit_bytes;
  EXPECT_GT(served, kSize * 3 / 4);
  EXPECT_EQ(s2->stack.xet->stats().files_verified, 1u);
  // Once the session is gone, `hubfs cache info` reports what the chunk cache saved.
  s2.reset();
  auto usage = cache_admin::info(config().cache_dir);
  ASSERT_TRUE(usage.ok()) << usage.status().message();
  EXPECT_EQ(usage->xet_served_bytes, served);
  EXPECT_GT(usage->xet_served_chunks, 0u);
}

// A listing from the Hub that shows a Xet file fetches the read token then, before any read
// (XetReader::warm_token: a mount's first cold read waits for its plan only); a session whose
// listings come from the cache asks for none.
TEST_F(XetSessionTest, AListingFromTheHubFetchesTheTokenAndAStoredOneDoesNot) {
  {
    auto first = open("v1", config());
    ASSERT_TRUE(first);
    ASSERT_TRUE(HubFile::open(first, "data/big.bin").ok());  // lists data/ (or the root did)
    first->stack.xet->shutdown();  // the warm-up, on the reader's threads, is done
    auto stats = hub_->stats();
    EXPECT_EQ(stats["xet_token_requests"], 1) << stats.dump();
    EXPECT_EQ(stats["xet_reconstructions"], 0) << "no read, no plan: " << stats.dump();
  }
  hub_->reset_stats();
  auto second = open("v1", config());
  ASSERT_TRUE(second);
  ASSERT_TRUE(HubFile::open(second, "data/big.bin").ok());
  second->stack.xet->shutdown();
  auto stats = hub_->stats();
  EXPECT_EQ(stats["xet_token_requests"], 0) << "the listings were stored: " << stats.dump();
  EXPECT_EQ(stats["requests"], 1) << "only the revision name's pinning: " << stats.dump();
}

// A second session on the same cache finds the listing and every block there: it asks for no
// read token, no plan and no xorb; the one request left pins the revision name.
TEST_F(XetSessionTest, ASecondSessionOnAWarmCacheAsksNoTokenAndNoData) {
  {
    auto first = open("v1", config());
    ASSERT_TRUE(first);
    Outcome o = read_all(first, *one_);
    ASSERT_EQ(o.failed, 0u) << o.first_error;
    ASSERT_EQ(hub_->stats()["xet_token_requests"], 1);
  }  // shut down: its deferred block writes are on disk
  hub_->reset_stats();
  auto second = open("v1", config());
  ASSERT_TRUE(second);
  Outcome o = read_all(second, *one_);
  EXPECT_EQ(o.failed, 0u) << o.first_error;
  EXPECT_EQ(o.wrong, 0u);
  auto stats = hub_->stats();
  EXPECT_EQ(stats["xet_token_requests"], 0) << stats.dump();
  EXPECT_EQ(stats["xet_reconstructions"], 0) << stats.dump();
  EXPECT_EQ(stats["xorb_requests"], 0) << stats.dump();
  EXPECT_EQ(stats["resolve_requests"], 0) << stats.dump();
  EXPECT_EQ(stats["requests"], 1) << "only the revision name's pinning: " << stats.dump();
}

// An hf:// door's session probes its file instead of listing: the probe's X-Xet-Hash makes the
// read native (a token, plans, xorbs; no bridge), its token is fetched as for a listed Xet file,
// and the next session, finding the probe's record, asks for nothing but the pin.
TEST_F(XetSessionTest, AProbedXetFileIsReadNativelyAndItsRecordServesTheNextSession) {
  hub_->reset_stats();
  {
    auto first = open("v1", config(), "data/big.bin");
    ASSERT_TRUE(first);
    Outcome o = read_all(first, *one_);
    ASSERT_EQ(o.failed, 0u) << o.first_error;
    EXPECT_EQ(o.wrong, 0u);
    auto stats = hub_->stats();
    EXPECT_EQ(stats["resolve_requests"], 1) << "the probe, and no bridge read: " << stats.dump();
    EXPECT_EQ(stats["xet_token_requests"], 1) << stats.dump();
    EXPECT_GE(stats["xorb_requests"].get<int>(), 1) << stats.dump();
    for (const auto& [path, count] : stats["by_path"].items())
      EXPECT_EQ(path.find("/tree/"), std::string::npos) << "listed: " << path;
    EXPECT_EQ(first->stack.xet_router->fallbacks(), 0u);
  }
  hub_->reset_stats();
  auto second = open("v1", config(), "data/big.bin");
  ASSERT_TRUE(second);
  Outcome o = read_all(second, *one_);
  EXPECT_EQ(o.failed, 0u) << o.first_error;
  EXPECT_EQ(o.wrong, 0u);
  auto stats = hub_->stats();
  EXPECT_EQ(stats["requests"], 1) << "only the revision name's pinning: " << stats.dump();
}

// A probe that shows a Xet file fetches the read token as the session opens, before any read
// (as huggingface_hub fetches it once the HEAD shows X-Xet-Hash): an hf:// door's first read
// then waits for its plan only. A session whose first file the cache knows asks for none.
TEST_F(XetSessionTest, AProbedXetFileFetchesTheTokenAtTheOpenAndAStoredOneDoesNot) {
  hub_->reset_stats();
  {
    auto first = open("v1", config(), "data/big.bin");
    ASSERT_TRUE(first);
    first->stack.xet->shutdown();  // the warm-up, on the reader's threads, is done
    auto stats = hub_->stats();
    EXPECT_EQ(stats["resolve_requests"], 1) << "the probe: " << stats.dump();
    EXPECT_EQ(stats["xet_token_requests"], 1) << stats.dump();
    EXPECT_EQ(stats["xet_reconstructions"], 0) << "no read, no plan: " << stats.dump();
  }
  hub_->reset_stats();
  auto second = open("v1", config(), "data/big.bin");
  ASSERT_TRUE(second);
  second->stack.xet->shutdown();
  auto stats = hub_->stats();
  EXPECT_EQ(stats["xet_token_requests"], 0) << "the probe's record was stored: " << stats.dump();
  EXPECT_EQ(stats["requests"], 1) << "only the revision name's pinning: " << stats.dump();
}


// The bridge requests a session made: GETs of the CDN blob the resolve redirects to.
int bridge_requests(const nlohmann::json& stats) {
  int n = 0;
  for (const auto& [path, count] : stats["by_path"].items())
    if (path.find("/blobs/") != std::string::npos) n += count.get<int>();
  return n;
}

// Holds Xet's plan for the head 0.3 s at the server, so that the read takes the bridge's
// answer, which these tests are about. On loopback Xet's plan and range take ~3 ms, and the
// bridge's answer, though asked for at the probe, is handed to the read on a thread of its own:
// now and then Xet's came first (about 1 run in 40), nothing of the bridge was served, and the
// tests failed. At the Hub's 50 ms a round trip, Xet's two come well after the bridge's.
void hold_xets_head_plan(LocalHub& hub) {
  hub.add_fault({{"mode", "stall"}, {"stall_ms", 300}, {"path_contains", "/reconstructions/"},
                 {"range_regex", "^bytes=0-"}, {"count", 1}});
}

// h5chunk's hf:// door (SessionConfig::xet_head_from_probe): the probe's redirect names the
// bridge location, so the first block is asked for there as the probe answers, one request and
// no resolve, and the first read inside it takes that answer, beside Xet's plan and range for the
// same bytes; Xet's bytes equal the bridge's, so the
// file's Xet check stands for them and a whole read of the file is verified.
TEST_F(XetSessionTest, AProbedXetFilesHeadComesFromTheProbesBridgeLocation) {
  hub_->reset_stats();
  hold_xets_head_plan(*hub_);
  auto [s, head] = open_reading_the_head();
  ASSERT_TRUE(s);
  EXPECT_EQ(head, one_->substr(0, head.size()));
  auto stats = hub_->stats();
  EXPECT_EQ(stats["resolve_requests"], 1) << "the probe only: its location serves the head: " << stats.dump();
  EXPECT_EQ(bridge_requests(stats), 1) << stats.dump();
  EXPECT_EQ(s->stack.xet_router->head_reads(), 1u);
  Outcome o = read_all(s, *one_);
  EXPECT_EQ(o.failed, 0u) << o.first_error;
  EXPECT_EQ(o.wrong, 0u);
  stats = hub_->stats();
  EXPECT_EQ(bridge_requests(stats), 1) << "one head read; the rest from Xet: " << stats.dump();
  EXPECT_EQ(stats["resolve_requests"], 1) << stats.dump();
  EXPECT_EQ(s->stack.xet_router->head_reads(), 1u);
  EXPECT_EQ(s->stack.xet_router->fallbacks(), 0u);
  EXPECT_EQ(s->stack.reader->stats().files_verified, 1u) << "by Xet's check, or by the reader's own hash";
  EXPECT_EQ(s->stack.reader->stats().verify_failures, 0u);
  s->stack.xet->shutdown();  // Xet's read of the head is done
  EXPECT_EQ(s->stack.xet_router->heads_confirmed(), 1u);
}

// A bridge that serves a wrong byte in the head: that read is a partial read, not verified (as
// any partial read), but the file's Xet check never stands for it (Xet's bytes differ), so the
// reader hashes the file itself when it is read whole: it fails, its blocks are dropped, and the
// next whole read is exact.
TEST_F(XetSessionTest, AWrongByteInTheBridgesHeadNeverPassesTheFileCheck) {
  hub_->reset_stats();
  // Before the open: the head is asked for as soon as the probe answers.
  hub_->add_fault({{"mode", "flip_byte"}, {"path_contains", "/blobs/"}, {"count", 1}});
  hold_xets_head_plan(*hub_);
  auto s = open_reading_the_head().session;
  ASSERT_TRUE(s);
  for (const auto& f : hub_->pending_faults())  // (the held plan's may be too, by now)
    EXPECT_NE(f.value("mode", ""), "flip_byte") << "the bridge's head went out with its byte flipped";
  Outcome bad = read_all(s, *one_);
  EXPECT_GE(bad.failed, 1u) << "a front-to-back read of a file that failed its check never ends successfully";
  EXPECT_EQ(s->stack.reader->stats().verify_failures, 1u);
  EXPECT_EQ(s->stack.reader->stats().files_verified_by_source, 0u);
  Outcome good = read_all(s, *one_);
  EXPECT_EQ(good.failed, 0u) << good.first_error;
  EXPECT_EQ(good.wrong, 0u);
  EXPECT_EQ(s->stack.xet_router->head_reads(), 1u) << "the head's bridge read is the session's first only";
  EXPECT_EQ(s->stack.xet_router->heads_confirmed(), 0u);
}

// A bridge that refuses the probe's location: the head asked for at the probe is not resolved
// afresh (the revision as named may have moved since the probe), and the read takes Xet's bytes.
TEST_F(XetSessionTest, ARefusedBridgeHeadIsNotResolvedAgainAndTheReadTakesXetsBytes) {
  hub_->reset_stats();
  hub_->add_fault({{"status", 403}, {"path_contains", "/blobs/"}, {"count", 100000}});
  auto [s, head] = open_reading_the_head();
  ASSERT_TRUE(s);
  EXPECT_EQ(head, one_->substr(0, head.size()));
  auto stats = hub_->stats();
  EXPECT_EQ(stats["resolve_requests"], 1) << "the probe only, no fresh location: " << stats.dump();
  EXPECT_GE(bridge_requests(stats), 1) << stats.dump();
  EXPECT_EQ(s->stack.xet_router->head_reads(), 1u);
  EXPECT_EQ(s->stack.xet_router->heads_confirmed(), 0u) << "nothing of the bridge was served";
  Outcome o = read_all(s, *one_);
  EXPECT_EQ(o.failed, 0u) << o.first_error;
  EXPECT_EQ(o.wrong, 0u);
  EXPECT_EQ(s->stack.reader->stats().files_verified_by_source, 1u) << "every byte came from Xet";
}

// The storage service refusing plans while the head comes from the probe's bridge location: the
// Xet read of the head falls back to the bridge too, and those bytes (the bridge's again) confirm
// nothing. The file is then checked by the reader's own hash, never by a Xet check that saw none
// of its bytes.
TEST_F(XetSessionTest, AHeadWhoseXetReadFellBackToTheBridgeIsNotConfirmed) {
  hub_->reset_stats();
  hub_->add_fault({{"status", 403}, {"path_contains", "/reconstructions/"}, {"count", 100000}});
  auto [s, head] = open_reading_the_head();
  ASSERT_TRUE(s);
  EXPECT_EQ(head, one_->substr(0, head.size()));
  Outcome o = read_all(s, *one_);
  EXPECT_EQ(o.failed, 0u) << o.first_error;
  EXPECT_EQ(o.wrong, 0u);
  s->stack.xet->shutdown();  // the head's Xet read (its fallback) is done
  EXPECT_GE(s->stack.xet_router->fallbacks(), 1u);
  EXPECT_EQ(s->stack.xet_router->head_reads(), 1u);
  EXPECT_EQ(s->stack.xet_router->heads_confirmed(), 0u) << "a fallback's bytes are the bridge's: they confirm nothing";
  EXPECT_EQ(s->stack.reader->stats().files_verified_by_source, 0u);
  EXPECT_EQ(s->stack.reader->stats().files_verified, 1u) << "by the reader's own hash";
}

TEST_F(XetSessionTest, DisableXetReadsThroughTheBridge) {
  ::setenv("HF_HUB_DISABLE_XET", "1", 1);
  auto s = open("v1", config());
  ::unsetenv("HF_HUB_DISABLE_XET");
  ASSERT_TRUE(s);
  EXPECT_EQ(s->stack.xet, nullptr);
  Outcome o = read_all(s, *one_);
  EXPECT_EQ(o.failed, 0u) << o.first_error;
  EXPECT_EQ(o.wrong, 0u);
  auto stats = hub_->stats();
  EXPECT_EQ(stats["xorb_requests"], 0);
  EXPECT_GE(stats["resolve_requests"].get<int>(), 1);
}

TEST_F(XetSessionTest, AStorageServiceErrorFallsBackToTheBridge) {
  auto s = open("v1", config());
  ASSERT_TRUE(s);
  hub_->add_fault({{"status", 403}, {"path_contains", "/reconstructions/"}, {"count", 100000}});
  Outcome o = read_all(s, *one_);
  EXPECT_EQ(o.failed, 0u) << o.first_error;
  EXPECT_EQ(o.wrong, 0u);
  EXPECT_GE(s->stack.xet_router->fallbacks(), 1u);
  EXPECT_GE(hub_->stats()["resolve_requests"].get<int>(), 1);
  // The bridge's bytes are the reader's to hash.
  const ReaderStats r = s->stack.reader->stats();
  EXPECT_EQ(r.files_verified, 1u);
  EXPECT_EQ(r.files_verified_by_source, 0u);
}

// A read the session's own shutdown fails (its xorb range on the wire when the transport stops)
// is not the storage service failing: no warning, no minute of bridge reads, no fallback fetch.
TEST_F(XetSessionTest, AReadFailedByTheShutdownIsNotAStorageServiceError) {
  auto s = open("v1", config());
  ASSERT_TRUE(s);
  auto f = HubFile::open(s, "data/big.bin");
  ASSERT_TRUE(f.ok()) << f.status().message();
  // Held 30 s (the read's deadline is 60 s): only the shutdown ends this read early.
  hub_->add_fault({{"mode", "stall"}, {"stall_ms", 30000}, {"path_contains", "/xorbs/"}, {"count", 1000}});
  auto read = std::async(std::launch::async, [&f] {
    std::string buf(1 << 20, '\0');
    return (*f)->pread(buf.data(), 0, buf.size()).status();
  });
  // Waits for the server (another process) to hold a xorb request.
  for (int i = 0; i < 1000 && hub_->stats()["faults_injected"].get<int>() == 0; ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  ASSERT_GE(hub_->stats()["faults_injected"].get<int>(), 1);
  s->stack.shutdown();
  const Status st = read.get();
  EXPECT_FALSE(st.ok());
  EXPECT_EQ(s->stack.xet_router->fallbacks(), 0u) << st.message();
  EXPECT_EQ(hub_->stats()["resolve_requests"], 0) << "no bridge fetch on the way out";
}

// An hf:// file's head is read through Xet too (its plan, then its range), beside the bridge's
// answer, and that read may still be out when h5chunk's hint sends --max-requests reads: the
// transport keeps one slot more for it (build_stack), or the hint's last read waited for it to
// end. Here --max-requests 2, and the head's xorb range is held by the server, with its hedge's
// twin (the transport sends a stalled GET once more on another connection; a twin counts as a
// transfer): the two fill the two slots. A read of the file's last block must still go out
// beside them, while they are held, and come from Xet (without the slot it waited for the head's
// Xet read to give up, 15 s on: a quarter of the read's 60 s).
TEST_F(XetSessionTest, AReadAfterTheHeadDoesNotWaitForTheHeadsXetRead) {
  hub_->reset_stats();
  // Only the head's range starts at the xorb's first byte (one xorb: the file is 3 MB).
  hub_->add_fault({{"mode", "stall"}, {"stall_ms", 20000}, {"path_contains", "/xorbs/"},
                   {"range_regex", "^bytes=0-"}, {"count", 2}});
  SessionConfig c = config();
  c.xet_head_from_probe = true;
  c.max_requests = 2;
  auto s = open("v1", c, "data/big.bin");
  ASSERT_TRUE(s);
  auto f = HubFile::open(s, "data/big.bin");
  ASSERT_TRUE(f.ok()) << f.status().message();
  std::string head(4096, '\0');
  auto got = (*f)->pread(head.data(), 0, head.size());
  ASSERT_TRUE(got.ok()) << got.status().message();
  EXPECT_EQ(head, one_->substr(0, head.size())) << "from the bridge, at the probe's location";
  // The head's Xet range and its twin both held: every ordinary slot of --max-requests 2 taken.
  testing::wait_for_state([&] { return hub_->stats()["faults_injected"].get<int>() >= 2; });
  ASSERT_GE(s->stack.curl->stats().hedges, 1u) << "the head's range has its twin";
  const uint64_t block = s->stack.reader->options().block_size;
  const uint64_t last_block = (kSize - 1) / block * block;
  std::string tail(4096, '\0');
  got = (*f)->pread(tail.data(), last_block, tail.size());
  ASSERT_TRUE(got.ok()) << got.status().message();
  EXPECT_EQ(tail, one_->substr(last_block, tail.size()));
  EXPECT_GE(s->stack.curl->stats().in_flight, 2u)
      << "the head's range and its twin are still held: the read did not wait for them";
  EXPECT_EQ(s->stack.xet_router->fallbacks(), 0u) << "from Xet";
  EXPECT_EQ(s->stack.xet->stats().retries, 0u) << "the head's Xet read did not give up before it";
  EXPECT_EQ(bridge_requests(hub_->stats()), 1) << "the head's only";
}

}  // namespace
}  // namespace hubfs
