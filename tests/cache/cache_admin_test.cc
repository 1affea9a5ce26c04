// `hubfs cache` operations (cache_admin) and the index the mount writes (cache_index), over a
// real directory filled by a real BlockCache.
#include "cache/cache_admin.h"
#include "cache/content_verifier.h"

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <utime.h>

#include <filesystem>
#include <fstream>
#include <set>
#include <thread>

#include "cache/block_cache.h"
#include "cache/block_file.h"
#include "cache/cache_key.h"
#include "cache/cache_index.h"
#include "cache/listing_store.h"
#include "common/counter_file.h"
#include "support/temp_dir.h"

namespace hubfs {
namespace HUBFS_UNITY_ID {

namespace fs = std::filesystem;
using testing::TempDir;

const std::string kA = "sha256:" + std::string(64, 'a');
const std::string kB = "sha256:" + std::string(64, 'b');
const std::string kShared = "oid:" + std::string(40, 'c');
constexpr size_t kBlock = 1000;
const uint64_t kFileBytes = block_file::kHeaderSize + kBlock;  // one block file on disk

std::string block_path(const fs::path& dir, const std::string& id, uint64_t index) {
  auto d = block_file::digest_content_id(id);
  return (dir / "blocks" / block_file::shard_name(d) / block_file::file_name(id, d, index)).string();
}

class CacheAdminTest : public ::testing::Test {
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
  void put(const std::string& id, uint64_t blocks) {
    for (uint64_t i = 0; i < blocks; ++i) cache_->put(id, i, std::string(kBlock, static_cast<char>('0' + i)));
  }
  void record(const std::string& repo, const std::string& path, const std::string& id) {
    ASSERT_TRUE(cache_index::record(dir_.str(), {repo, "main", "c0ffee", path, id, 4000}).ok());
  }
  // Sets a block file's mtime (the LRU clock) to `seconds_ago`.
  void age(const std::string& id, uint64_t index, int seconds_ago) {
    struct utimbuf t;
    t.actime = t.modtime = time(nullptr) - seconds_ago;
    ASSERT_EQ(utime(block_path(dir_.path(), id, index).c_str(), &t), 0);
  }
  // The usual picture: repo x has a.bin (A, 3 blocks) and shared.txt, repo y has b.bin (B,
  // 2 blocks) and the same shared.txt content (1 block).
  void fill() {
    put(kA, 3);
    put(kB, 2);
    put(kShared, 1);
    record("datasets/org/x", "a.bin", kA);
    record("datasets/org/x", "shared.txt", kShared);
    record("models/org/y", "b.bin", kB);
    record("models/org/y", "copy/shared.txt", kShared);
  }

  TempDir dir_;
  std::unique_ptr<BlockCache> cache_;
};

TEST_F(CacheAdminTest, InfoCountsBlocksByRepoAndFile) {
  fill();
  ASSERT_TRUE(cache_index::write_budget(dir_.str(), 5ull << 30).ok());
  auto usage = cache_admin::info(dir_.str());
  ASSERT_TRUE(usage.ok()) << usage.status().message();
  EXPECT_EQ(usage->blocks, 6u);
  EXPECT_EQ(usage->total_bytes, 6 * kFileBytes);
  ASSERT_TRUE(usage->budget_bytes.has_value());
  EXPECT_EQ(*usage->budget_bytes, 5ull << 30);
  EXPECT_EQ(usage->unindexed_blocks, 0u);
  ASSERT_EQ(usage->repos.size(), 2u);
  EXPECT_EQ(usage->repos[0].repo, "datasets/org/x");  // largest first
  EXPECT_EQ(usage->repos[0].bytes, 4 * kFileBytes);
  EXPECT_EQ(usage->repos[1].repo, "models/org/y");
  EXPECT_EQ(usage->repos[1].bytes, 3 * kFileBytes);
  ASSERT_EQ(usage->repos[0].files.size(), 2u);
  EXPECT_EQ(usage->repos[0].files[0].record.path, "a.bin");
  EXPECT_EQ(usage->repos[0].files[0].blocks, 3u);

  nlohmann::json j = cache_admin::to_json(*usage);
  EXPECT_EQ(j["total_bytes"], 6 * kFileBytes);
  EXPECT_EQ(j["blocks"], 6);
  EXPECT_EQ(j["budget_bytes"], 5ull << 30);
  EXPECT_EQ(j["repos"][1]["repo"], "models/org/y");
  EXPECT_EQ(j["repos"][1]["bytes"], 3 * kFileBytes);
  EXPECT_NE(cache_admin::to_text(*usage).find("datasets/org/x"), std::string::npos);
}

TEST_F(CacheAdminTest, InfoReportsBlocksNoEntryNamesAndNoBudget) {
  put(kA, 2);
  auto usage = cache_admin::info(dir_.str());
  ASSERT_TRUE(usage.ok());
  EXPECT_TRUE(usage->repos.empty());
  EXPECT_EQ(usage->unindexed_blocks, 2u);
  EXPECT_FALSE(usage->budget_bytes.has_value());
  EXPECT_TRUE(cache_admin::to_json(*usage)["budget_bytes"].is_null());
}

TEST_F(CacheAdminTest, RecordNeverRewritesAnExistingEntry) {
  record("datasets/org/x", "a.bin", kA);
  ASSERT_TRUE(cache_index::record(dir_.str(), {"datasets/org/x", "v2", "other", "a.bin", kA, 4000}).ok());
  auto entries = cache_index::read_all(dir_.str());
  ASSERT_EQ(entries.size(), 1u);
  EXPECT_EQ(entries[0].record.revision, "main");
}

// An index record edited to a size no file has, or a field of the wrong type, is damaged:
// skipped, never a crash of `hubfs cache info` (json::value throws on a type mismatch).
TEST_F(CacheAdminTest, IndexRecordsWithHostileFieldsAreSkipped) {
  ASSERT_TRUE(cache_index::record(dir_.str(), {"datasets/org/x", "main", "c", "a.bin", kA, 4000}).ok());
  std::string file;
  for (auto& e : fs::recursive_directory_iterator(cache_index::index_dir(dir_.str())))
    if (e.path().filename().string().find('~') != std::string::npos) file = e.path().string();  // a record
  ASSERT_FALSE(file.empty());
  std::ifstream in(file);
  const auto whole = nlohmann::json::parse(in);
  for (const char* edit : {R"({"size": -1})", R"({"size": "12"})", R"({"size": 1.5})", R"({"size": 18446744073709551615})",
                           R"({"size": 9223372036854775807})", R"({"size": null})", R"({"repo": 5})", R"({"path": []})"}) {
    nlohmann::json j = whole;
    j.merge_patch(nlohmann::json::parse(edit));
    std::ofstream(file, std::ios::trunc) << j.dump();
    std::vector<IndexEntry> entries;
    ASSERT_NO_THROW(entries = cache_index::read_all(dir_.str())) << edit;
    if (std::string(edit).find("path") != std::string::npos) {
      ASSERT_EQ(entries.size(), 1u) << edit;  // a path is not required, only its type is checked
      EXPECT_EQ(entries[0].record.path, "") << edit;
    } else {
      EXPECT_TRUE(entries.empty()) << edit;
    }
    ASSERT_TRUE(cache_admin::info(dir_.str()).ok()) << edit;
  }
  std::ofstream(file, std::ios::trunc) << whole.dump();
  ASSERT_EQ(cache_index::read_all(dir_.str()).size(), 1u);
}

TEST_F(CacheAdminTest, ConcurrentRecordersLeaveWholeEntries) {
  std::vector<std::thread> threads;
  for (int t = 0; t < 8; ++t)
    threads.emplace_back([&] {
      for (int i = 0; i < 50; ++i)
        (void)cache_index::record(dir_.str(), {"datasets/org/x", "main", "c", "f" + std::to_string(i), kA, 1});
    });
  for (auto& t : threads) t.join();
  auto entries = cache_index::read_all(dir_.str());
  std::set<std::string> paths;
  for (const auto& e : entries) paths.insert(e.record.path);
  EXPECT_EQ(entries.size(), 50u);
  EXPECT_EQ(paths.size(), 50u);
}

TEST_F(CacheAdminTest, MissingDirectoryIsAnErrorNamingIt) {
  auto usage = cache_admin::info((dir_.path() / "nope").string());
  ASSERT_FALSE(usage.ok());
  EXPECT_NE(usage.status().message().find("nope"), std::string::npos);
  fs::create_directories(dir_.path() / "plain");
  auto cleared = cache_admin::clear(Env::real(), (dir_.path() / "plain").string());
  ASSERT_FALSE(cleared.ok());
  EXPECT_NE(cleared.status().message().find("not a hubfs cache"), std::string::npos);
}

TEST_F(CacheAdminTest, PruneEvictsLeastRecentlyUsedFirst) {
  fill();
  age(kA, 0, 300);
  age(kA, 1, 200);
  age(kA, 2, 100);
  auto removed = cache_admin::prune(Env::real(), dir_.str(), 4 * kFileBytes);
  ASSERT_TRUE(removed.ok());
  EXPECT_EQ(removed->blocks, 2u);
  EXPECT_EQ(removed->total_bytes_after, 4 * kFileBytes);
  EXPECT_FALSE(fs::exists(block_path(dir_.path(), kA, 0)));
  EXPECT_FALSE(fs::exists(block_path(dir_.path(), kA, 1)));
  EXPECT_TRUE(fs::exists(block_path(dir_.path(), kA, 2)));
  // The cache that wrote them only misses now, and refills.
  EXPECT_FALSE(cache_->get(kA, 0).has_value());
  EXPECT_TRUE(cache_->get(kB, 1).has_value());

  ASSERT_TRUE(cache_admin::prune(Env::real(), dir_.str(), 0).ok());
  auto usage = cache_admin::info(dir_.str());
  EXPECT_EQ(usage->blocks, 0u);
  EXPECT_EQ(usage->total_bytes, 0u);
}

TEST_F(CacheAdminTest, ClearRepoKeepsContentAnotherRepoUses) {
  fill();
  auto removed = cache_admin::clear(Env::real(), dir_.str(), "datasets/org/x");
  ASSERT_TRUE(removed.ok()) << removed.status().message();
  EXPECT_EQ(removed->blocks, 3u);  // a.bin
  EXPECT_EQ(removed->kept_shared_blocks, 1u);
  EXPECT_EQ(removed->index_entries, 2u);
  EXPECT_FALSE(cache_->get(kA, 0).has_value());
  EXPECT_TRUE(cache_->get(kShared, 0).has_value());
  EXPECT_TRUE(cache_->get(kB, 0).has_value());
  auto usage = cache_admin::info(dir_.str());
  ASSERT_EQ(usage->repos.size(), 1u);
  EXPECT_EQ(usage->repos[0].repo, "models/org/y");
  EXPECT_EQ(usage->repos[0].bytes, 3 * kFileBytes);

  EXPECT_FALSE(cache_admin::clear(Env::real(), dir_.str(), "datasets/org/x").ok());  // nothing of it left
  ASSERT_TRUE(cache_admin::clear(Env::real(), dir_.str()).ok());
  usage = cache_admin::info(dir_.str());
  EXPECT_EQ(usage->blocks, 0u);
  EXPECT_TRUE(usage->repos.empty());
  // A mount writing into the cleared directory still works.
  cache_->put(kA, 0, "again");
  EXPECT_EQ(cache_->get(kA, 0).value_or(""), "again");
}

TEST_F(CacheAdminTest, VerifyDeletesExactlyTheBadBlocks) {
  fill();
  auto clean = cache_admin::verify(dir_.str());
  ASSERT_TRUE(clean.ok());
  EXPECT_EQ(clean->checked, 6u);
  EXPECT_EQ(clean->bad, 0u);

  {  // one flipped data byte, one truncated file, one stray file named like no block
    std::fstream f(block_path(dir_.path(), kB, 1), std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(block_file::kHeaderSize + 10);
    f.put('X');
  }
  fs::resize_file(block_path(dir_.path(), kA, 2), 20);
  std::ofstream(fs::path(block_path(dir_.path(), kA, 0)).parent_path() / "junk") << "junk";
  auto v = cache_admin::verify(dir_.str());
  ASSERT_TRUE(v.ok());
  EXPECT_EQ(v->checked, 7u);
  EXPECT_EQ(v->bad, 3u);
  EXPECT_FALSE(fs::exists(block_path(dir_.path(), kB, 1)));
  EXPECT_FALSE(fs::exists(block_path(dir_.path(), kA, 2)));
  EXPECT_TRUE(fs::exists(block_path(dir_.path(), kB, 0)));
  auto again = cache_admin::verify(dir_.str());
  EXPECT_EQ(again->checked, 4u);
  EXPECT_EQ(again->bad, 0u);
}

TEST_F(CacheAdminTest, VerifyAcceptsEveryNamingForm) {
  // An id escaping cannot name (a '/'), so its blocks are named by digest ("_h<hex>"), and one
  // with '_' and ':' that escaping spells out.
  const std::string odd = "weird/id", escaped = "x_y:z";
  cache_->put(odd, 7, "odd");
  cache_->put(escaped, 0, "esc");
  auto v = cache_admin::verify(dir_.str());
  ASSERT_TRUE(v.ok());
  EXPECT_EQ(v->checked, 2u);
  EXPECT_EQ(v->bad, 0u) << (v->bad_files.empty() ? "" : v->bad_files[0]);
}

}  // namespace
}  // namespace hubfs

namespace hubfs {
namespace HUBFS_UNITY_ID {

std::string sha256_id(const std::string& data) {
  auto v = ContentVerifier::for_content("sha256:" + std::string(64, '0'), data.size());
  v->update(data);
  return "sha256:" + v->finish().computed;
}

// Whole files: blocks whose checksums are fine but whose content was corrupt on arrival are
// caught by re-hashing a completely cached file; partly cached files are not judged.
TEST_F(CacheAdminTest, VerifyContentRehashesCompleteFilesAndDeletesBadOnes) {
  const uint64_t mib = 1u << 20;
  std::string good(2 * mib + 10, 'g');
  good[mib + 3] = 'x';
  std::string bad_content = good;
  bad_content[5] = 'y';  // what arrived: one byte off, stored with a valid block checksum
  const std::string good_id = sha256_id(good);
  const std::string bad_id = sha256_id(good + "?");  // the Hub's id for a file we hold wrongly
  std::string bad_file = good + "?";
  bad_file[7] = 'z';
  for (uint64_t i = 0; i * mib < good.size(); ++i) {
    cache_->put(good_id, i, std::string_view(good).substr(i * mib, mib));
  }
  for (uint64_t i = 0; i * mib < bad_file.size(); ++i) {
    cache_->put(bad_id, i, std::string_view(bad_file).substr(i * mib, mib));
  }
  const std::string partial_id = sha256_id(std::string(3 * mib, 'p'));
  cache_->put(partial_id, 0, std::string(mib, 'p'));
  ASSERT_TRUE(cache_index::record(dir_.str(), {"datasets/o/r", "main", "c", "good.bin", good_id, good.size()}).ok());
  ASSERT_TRUE(cache_index::record(dir_.str(), {"datasets/o/r", "main", "c", "bad.bin", bad_id, bad_file.size()}).ok());
  ASSERT_TRUE(cache_index::record(dir_.str(), {"datasets/o/r", "main", "c", "part.bin", partial_id, 3 * mib}).ok());

  auto v = cache_admin::verify_content(dir_.str(), Env::real());
  ASSERT_TRUE(v.ok()) << v.status().message();
  EXPECT_EQ(v->files_checked, 2u);
  EXPECT_EQ(v->files_bad, 1u);
  EXPECT_EQ(v->files_incomplete, 1u);
  ASSERT_EQ(v->bad_files.size(), 1u);
  EXPECT_NE(v->bad_files[0].find("bad.bin"), std::string::npos);
  EXPECT_FALSE(cache_->get(bad_id, 0).has_value());
  EXPECT_FALSE(cache_->get(bad_id, 2).has_value());
  EXPECT_TRUE(cache_->get(good_id, 0).has_value());
  EXPECT_TRUE(cache_->get(partial_id, 0).has_value());
  // The partly cached file is reported as unverifiable, with how much of it is cached.
  ASSERT_EQ(v->unverifiable_files.size(), 1u);
  EXPECT_NE(v->unverifiable_files[0].find("part.bin"), std::string::npos);
  EXPECT_NE(v->unverifiable_files[0].find("1048576 of 3145728 bytes cached"), std::string::npos)
      << v->unverifiable_files[0];
  EXPECT_EQ(v->unverifiable_bytes, mib);
}

// hf:// may read in blocks other than a mount's 1 MiB (SessionConfig::block_size): their key says
// the size, and every tool reads the file's blocks at that size.
TEST_F(CacheAdminTest, FilesCachedInBlocksOfAnotherSizeAreCountedClearedAndVerified) {
  const uint32_t block = 4096;
  std::string good(3 * block + 100, 'g');
  good[block + 7] = 'x';
  std::string held_wrongly = good;
  held_wrongly[2 * block + 1] = 'y';  // stored with valid block checksums, one byte off
  const std::string good_key = cache_key(sha256_id(good), block);
  const std::string bad_key = cache_key(sha256_id(good + "?"), block);  // the Hub's id: another file
  for (uint64_t i = 0; i * block < good.size(); ++i) {
    cache_->put(good_key, i, std::string_view(good).substr(i * block, block));
    cache_->put(bad_key, i, std::string_view(held_wrongly).substr(i * block, block));
  }
  ASSERT_TRUE(cache_index::record(dir_.str(), {"datasets/o/r", "main", "c", "good.bin", good_key, good.size()}).ok());
  ASSERT_TRUE(cache_index::record(dir_.str(), {"datasets/o/r", "main", "c", "bad.bin", bad_key, good.size() + 1}).ok());

  auto usage = cache_admin::info(dir_.str());
  ASSERT_TRUE(usage.ok()) << usage.status().message();
  EXPECT_EQ(usage->unindexed_blocks, 0u);  // attributed through the keys the index names
  ASSERT_EQ(usage->repos.size(), 1u);
  EXPECT_EQ(usage->repos[0].blocks, 8u);
  EXPECT_NE(cache_admin::to_text(*usage).find("4 blocks of 4.0 KiB"), std::string::npos) << cache_admin::to_text(*usage);

  // The wrong file's last block is one byte short of what its size says at 4 KiB blocks:
  // incomplete, so reported, not judged. Give it the byte it lacks and it is judged bad.
  cache_->put(bad_key, 3, std::string_view(held_wrongly + "?").substr(3 * block));
  auto v = cache_admin::verify_content(dir_.str(), Env::real());
  ASSERT_TRUE(v.ok()) << v.status().message();
  EXPECT_EQ(v->files_checked, 2u);
  EXPECT_EQ(v->files_bad, 1u);
  ASSERT_EQ(v->bad_files.size(), 1u);
  EXPECT_NE(v->bad_files[0].find("bad.bin"), std::string::npos);
  EXPECT_FALSE(cache_->get(bad_key, 0).has_value());
  EXPECT_TRUE(cache_->get(good_key, 3).has_value());

  auto removed = cache_admin::clear(Env::real(), dir_.str(), "datasets/o/r");
  ASSERT_TRUE(removed.ok()) << removed.status().message();
  EXPECT_EQ(removed->blocks, 4u);  // the good file's: the bad one's went at the verify
  EXPECT_FALSE(cache_->get(good_key, 0).has_value());
}

TEST(CacheKey, NamesTheBlockSizeUnlessItIsTheDefault) {
  const std::string id = "sha256:" + std::string(64, 'a');
  EXPECT_EQ(cache_key(id, kDefaultBlockSize), id);
  EXPECT_EQ(cache_key(id, 256u << 10), id + ".bs262144");
  for (uint32_t size : {4096u, 256u << 10, kDefaultBlockSize}) {
    const ParsedCacheKey p = parse_cache_key(cache_key(id, size));
    EXPECT_EQ(p.content_id, id);
    EXPECT_EQ(p.block_size, size);
  }
  // Not a suffix a reader writes: the key is a content id of the default size.
  for (const std::string& odd : {id + ".bs", id + ".bs0", id + ".bs300000", id + ".bs04096", id + ".bs1048576",
                                 id + ".bs-4096", id + ".bs4096x"}) {
    EXPECT_EQ(parse_cache_key(odd).content_id, odd) << odd;
    EXPECT_EQ(parse_cache_key(odd).block_size, kDefaultBlockSize) << odd;
  }
}

// Stored listings (cache/listing_store.h): counted by info, kept by prune, dropped by clear (one
// repo's under every endpoint, or all), and a cache holding only listings is still a cache.
TEST_F(CacheAdminTest, ListingsAreCountedKeptByPruneAndDroppedByClear) {
  auto doc = [&](const std::string& endpoint, const std::string& repo, const std::string& dir) {
    const std::string path =
        listing_store::dir_document(listing_store::repo_dir(dir_.str(), endpoint, repo), std::string(40, 'f'), dir);
    ASSERT_TRUE(listing_store::write(path, "{\"listing\": \"" + dir + "\"}\n").ok());
    ASSERT_EQ(listing_store::read(path).value_or(""), "{\"listing\": \"" + dir + "\"}\n");
  };
  doc("https://a.test", "datasets/org/x", "");
  doc("https://a.test", "datasets/org/x", "sub");
  doc("https://b.test", "datasets/org/x", "");
  doc("https://a.test", "datasets/org/y", "");
  doc("https://a.test", "datasets/org/x.y", "");  // a name x's key is a prefix of
  put(kA, 2);
  record("datasets/org/x", "a.bin", kA);

  auto usage = cache_admin::info(dir_.str());
  ASSERT_TRUE(usage.ok());
  EXPECT_EQ(usage->listing_files, 5u);
  EXPECT_GT(usage->listing_bytes, 0u);
  EXPECT_EQ(cache_admin::to_json(*usage)["listing_files"], 5);

  ASSERT_TRUE(cache_admin::prune(Env::real(), dir_.str(), 0).ok());
  EXPECT_EQ(cache_admin::info(dir_.str())->listing_files, 5u);

  auto cleared = cache_admin::clear(Env::real(), dir_.str(), "datasets/org/x");
  ASSERT_TRUE(cleared.ok()) << cleared.status().message();
  EXPECT_EQ(cleared->listing_files, 3u);  // both endpoints' documents of x, nothing of y or x.y
  EXPECT_EQ(listing_store::usage(dir_.str(), "datasets/org/y").files, 1u);
  EXPECT_EQ(listing_store::usage(dir_.str(), "datasets/org/x.y").files, 1u);
  // A repo known only by its listings can be cleared by name too.
  EXPECT_EQ(cache_admin::clear(Env::real(), dir_.str(), "datasets/org/y")->listing_files, 1u);
  EXPECT_FALSE(cache_admin::clear(Env::real(), dir_.str(), "datasets/org/y").ok());  // nothing left of it
  EXPECT_EQ(cache_admin::clear(Env::real(), dir_.str())->listing_files, 1u);
  EXPECT_EQ(cache_admin::info(dir_.str())->listing_files, 0u);
}

// What the Xet chunk cache served instead of the network (its <dir>.saved count, which the mount
// writes: xet/chunk_cache.h) shows in info, and a whole clear resets it with the chunks.
TEST_F(CacheAdminTest, XetServedCountIsReportedAndClearedWithTheChunks) {
  put(kA, 1);
  record("datasets/org/x", "a.bin", kA);
  const std::string chunks = dir_.str() + "/" + cache_admin::kXetChunkDir;
  fs::create_directories(chunks + "/ab");
  std::ofstream(chunks + "/ab/ab12.40-45") << std::string(100, 'c');  // a run of chunks 40..44
  std::ofstream(chunks + "/ab/ab12.45-50.tmp7.1") << std::string(100, 'c');  // a put in progress
  ASSERT_TRUE(counter_file::add(dir_.str() + "/" + cache_admin::kXetSavedFile, {{"chunks", 7}, {"bytes", 458752}}).ok());

  auto usage = cache_admin::info(dir_.str());
  ASSERT_TRUE(usage.ok()) << usage.status().message();
  EXPECT_EQ(usage->xet_chunks, 5u);
  EXPECT_EQ(usage->xet_served_chunks, 7u);
  EXPECT_EQ(usage->xet_served_bytes, 458752u);
  EXPECT_EQ(cache_admin::to_json(*usage)["xet_served_bytes"], 458752);
  const std::string text = cache_admin::to_text(*usage);
  EXPECT_NE(text.find("instead of the network"), std::string::npos) << text;
  EXPECT_NE(text.find("in 7 chunks"), std::string::npos) << text;

  ASSERT_TRUE(cache_admin::clear(Env::real(), dir_.str(), "datasets/org/x").ok());  // one repo: chunks stay
  EXPECT_EQ(cache_admin::info(dir_.str())->xet_served_chunks, 7u);
  ASSERT_TRUE(cache_admin::clear(Env::real(), dir_.str()).ok());  // everything: the count starts again
  usage = cache_admin::info(dir_.str());
  EXPECT_EQ(usage->xet_served_chunks, 0u);
  EXPECT_EQ(cache_admin::to_text(*usage).find("instead of the network"), std::string::npos);
}

// FrameDataset plans leave one empty marker file per file they planned (python/h5chunk/
// _inflight.py): one repo's clear keeps them (they are named by a hash, not by repo), a whole
// clear takes them.
TEST_F(CacheAdminTest, AWholeClearTakesThePlansMarkerFiles) {
  put(kA, 1);
  record("datasets/org/x", "a.bin", kA);
  const std::string markers = dir_.str() + "/" + cache_admin::kInflightDir;
  fs::create_directories(markers);
  std::ofstream(markers + "/0123456789abcdef0123456789abcdef").flush();
  ASSERT_TRUE(cache_admin::clear(Env::real(), dir_.str(), "datasets/org/x").ok());
  EXPECT_TRUE(fs::exists(markers + "/0123456789abcdef0123456789abcdef"));
  ASSERT_TRUE(cache_admin::clear(Env::real(), dir_.str()).ok());
  EXPECT_FALSE(fs::exists(markers));
  EXPECT_TRUE(cache_admin::info(dir_.str()).ok()) << "still a cache directory";
}

TEST(ListingStore, RepoKeysCannotLeaveTheirDirectory) {
  EXPECT_EQ(listing_store::repo_key("datasets/org/name"), "datasets~org~name");
  EXPECT_EQ(listing_store::repo_key("models/o/a b"), "models~o~a%20b");
  EXPECT_EQ(listing_store::repo_key(".."), "%2E..");
  EXPECT_EQ(listing_store::repo_key(""), "%2E");
  EXPECT_EQ(listing_store::repo_key("x/../../etc").find('/'), std::string::npos);
}

}  // namespace
}  // namespace hubfs
