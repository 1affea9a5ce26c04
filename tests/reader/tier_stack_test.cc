// The tiers stacked (TierStack) over fake disk and shared tiers, and the deferred writes, on a
// manual Env and executors the test runs itself: no sleeps, no network (threads only where a
// test waits on one).
#include "reader/tier_stack.h"

#include <atomic>
#include <map>
#include <thread>

#include <gtest/gtest.h>

#include "support/manual_env.h"

namespace hubfs {
namespace HUBFS_UNITY_ID {

using namespace std::chrono_literals;
// Tasks handed to an executor, run when the test says so.
struct ManualExecutor {
  std::vector<std::function<void()>> tasks;
  bool refuse = false;
  DeferredWrites::PostFn fn() {
    return [this](std::function<void()> t) {
      if (refuse) return false;
      tasks.push_back(std::move(t));
      return true;
    };
  }
  void run_all() {
    auto now = std::move(tasks);
    tasks.clear();
    for (auto& t : now) t();
  }
};

// A tier in a map, counting its calls.
class FakeTier : public BlockTier {
 public:
  std::optional<BlockBytes> get(const BlockId& id) override {
    ++gets;
    auto it = blocks.find(key(id));
    if (it == blocks.end() || it->second.size() != id.length) return std::nullopt;
    return BlockBytes{std::make_shared<const std::string>(it->second), 0, it->second.size()};
  }
  std::vector<std::optional<BlockBytes>> get_many(const std::vector<BlockId>& ids, const Deadline& d) override {
    ++lookups;
    return BlockTier::get_many(ids, d);
  }
  void put(const BlockId& id, const BlockBytes& bytes) override {
    log.push_back("put " + std::to_string(id.index));
    blocks[key(id)] = std::string(bytes.view());
  }
  void remove(const BlockId& id) override {
    log.push_back("remove " + std::to_string(id.index));
    blocks.erase(key(id));
  }
  static std::string key(const BlockId& id) { return std::string(id.cache_id) + "#" + std::to_string(id.index); }

  std::map<std::string, std::string> blocks;
  std::vector<std::string> log;
  int gets = 0, lookups = 0;
};

BlockBytes bytes(const std::string& s) { return BlockBytes{std::make_shared<const std::string>(s), 0, s.size()}; }

class TierStackTest : public ::testing::Test {
 protected:
  void make(TierStackOptions options = {}, bool with_disk = true, bool with_shared = true) {
    auto disk = std::make_unique<FakeTier>();
    auto shared = std::make_unique<FakeTier>();
    disk_ = with_disk ? disk.get() : nullptr;
    shared_ = with_shared ? shared.get() : nullptr;
    tiers_ = std::make_unique<TierStack>(env_, with_disk ? std::move(disk) : nullptr, with_shared ? std::move(shared) : nullptr,
                                         options, disk_work_.fn(), writer_.fn());
  }
  std::vector<BlockId> ids(std::initializer_list<uint64_t> indices) {
    std::vector<BlockId> out;
    for (uint64_t i : indices) out.push_back(BlockId{id_, i, 4});
    return out;
  }
  // What `serve` got, batch by batch.
  TierStack::Serve record() {
    return [this](const std::vector<std::pair<uint64_t, BlockBytes>>& batch) {
      std::vector<uint64_t> got;
      for (const auto& [index, b] : batch) got.push_back(index);
      served_.push_back(got);
    };
  }

  const std::string id_ = "sha256:f";
  testing::ManualEnv env_;
  ManualExecutor disk_work_, writer_;
  FakeTier* disk_ = nullptr;
  FakeTier* shared_ = nullptr;
  std::unique_ptr<TierStack> tiers_;
  std::vector<std::vector<uint64_t>> served_;
};

TEST_F(TierStackTest, DiskFirstThenOneSharedLookupThenTheRestAreMisses) {
  make();
  disk_->blocks[id_ + "#1"] = "d001";
  shared_->blocks[id_ + "#2"] = "s002";
  shared_->blocks[id_ + "#3"] = "s003";
  disk_->blocks[id_ + "#4"] = "short";  // the wrong length: not this block
  std::vector<uint64_t> misses = tiers_->fill_from_lower(ids({0, 1, 2, 3, 4}), 0, Deadline::never(), record());
  EXPECT_EQ(misses, (std::vector<uint64_t>{0, 4}));
  // The disk hit served alone, as it was read; the shared hits together.
  EXPECT_EQ(served_, (std::vector<std::vector<uint64_t>>{{1}, {2, 3}}));
  EXPECT_EQ(shared_->lookups, 1);
  EXPECT_EQ(tiers_->disk_hits(), 1u);
}

TEST_F(TierStackTest, NoSharedLookupWhenTheDiskHadEverything) {
  make();
  disk_->blocks[id_ + "#0"] = "d000";
  EXPECT_TRUE(tiers_->fill_from_lower(ids({0}), 0, Deadline::never(), record()).empty());
  EXPECT_EQ(shared_->lookups, 0);
}

// Blocks from the shared tier reach the disk once reading pauses, not while it goes on.
TEST_F(TierStackTest, SharedHitsArePromotedToDiskOnceReadingPauses) {
  TierStackOptions o;
  o.deferred_write_quiet = 50ms;
  make(o);
  shared_->blocks[id_ + "#0"] = "s000";
  tiers_->note_activity();
  tiers_->fill_from_lower(ids({0}), 0, Deadline::never(), record());
  EXPECT_EQ(tiers_->deferred_writes(), 1u);
  EXPECT_FALSE(tiers_->deferred().run_due() == std::nullopt);
  EXPECT_TRUE(disk_->log.empty()) << "written while reading went on";
  env_.advance(40ms);
  tiers_->note_activity();  // another read: the pause starts again
  env_.advance(40ms);
  auto next = tiers_->deferred().run_due();
  ASSERT_TRUE(next);
  EXPECT_EQ(*next, env_.now() + 10ms);
  EXPECT_TRUE(disk_->log.empty());
  env_.advance(10ms);
  EXPECT_EQ(tiers_->deferred().run_due(), std::nullopt);
  EXPECT_EQ(disk_->log, (std::vector<std::string>{"put 0"}));
  EXPECT_EQ(disk_->blocks[id_ + "#0"], "s000");
  EXPECT_EQ(tiers_->deferred().queued_bytes(), 0u);
}

TEST_F(TierStackTest, APromotionIsSkippedWhenTheFileFailedItsHashMeanwhile) {
  make();
  shared_->blocks[id_ + "#0"] = "s000";
  tiers_->fill_from_lower(ids({0}), 0, Deadline::never(), record());
  // The file failed its hash: the block may be one of the bad bytes.
  tiers_->drop_failed_file(id_, id_, 0, 4, 4);
  env_.advance(1h);
  tiers_->deferred().run_due();
  EXPECT_EQ(disk_->log, (std::vector<std::string>{"remove 0"}));
}

// Past the deferred budget (or with none), a promotion goes to the disk workers at once.
TEST_F(TierStackTest, PastTheDeferredBudgetWritesGoToTheDiskWorkers) {
  TierStackOptions o;
  o.max_deferred_write_bytes = 4;  // one block's buffer
  make(o);
  shared_->blocks[id_ + "#0"] = "s000";
  shared_->blocks[id_ + "#1"] = "s001";
  tiers_->fill_from_lower(ids({0, 1}), 0, Deadline::never(), record());
  EXPECT_EQ(tiers_->deferred_writes(), 1u);
  ASSERT_EQ(disk_work_.tasks.size(), 1u);
  disk_work_.run_all();
  EXPECT_EQ(disk_->log, (std::vector<std::string>{"put 1"}));
  // Without disk workers left (shut down), on the calling thread.
  disk_work_.refuse = true;
  shared_->blocks[id_ + "#2"] = "s002";
  tiers_->fill_from_lower(ids({2}), 0, Deadline::never(), record());
  EXPECT_EQ(disk_->log, (std::vector<std::string>{"put 1", "put 2"}));
}

TEST_F(TierStackTest, ShutdownRunsTheWaitingWritesAtOnce) {
  make();
  shared_->blocks[id_ + "#0"] = "s000";
  tiers_->note_activity();
  tiers_->fill_from_lower(ids({0}), 0, Deadline::never(), record());
  tiers_->shutdown();  // no time passed: due because stopping
  EXPECT_EQ(disk_->log, (std::vector<std::string>{"put 0"}));
  // Later promotions are written at once (by the disk workers, or here).
  shared_->blocks[id_ + "#1"] = "s001";
  tiers_->fill_from_lower(ids({1}), 0, Deadline::never(), record());
  disk_work_.run_all();
  EXPECT_EQ(disk_->log, (std::vector<std::string>{"put 0", "put 1"}));
}

// Hub blocks: offered to the shared tier before any disk write; nothing of a read that began
// before the file failed its hash is stored after the failure.
TEST_F(TierStackTest, HubBlocksAreOfferedThenWrittenAndNeverStoredAfterAFailure) {
  make();
  std::vector<std::pair<uint64_t, BlockBytes>> blocks{{0, bytes("h000")}, {1, bytes("h001")}, {2, bytes("h002")}};
  tiers_->store_fetched(id_, 0, blocks, {true, false, true});  // block 1 was not served
  EXPECT_EQ(shared_->log, (std::vector<std::string>{"put 0", "put 2"}));
  EXPECT_EQ(disk_->log, (std::vector<std::string>{"put 0", "put 2"}));
  tiers_->drop_failed_file(id_, id_, 0, 16, 4);
  tiers_->store_fetched(id_, 0, {{3, bytes("h003")}}, {true});
  EXPECT_EQ(shared_->blocks.count(id_ + "#3"), 0u);
  EXPECT_EQ(disk_->blocks.count(id_ + "#3"), 0u);
  EXPECT_EQ(disk_->log.back(), "remove 3");  // the cleanup's: no write after it
  // A read of the new epoch stores as before.
  tiers_->store_fetched(id_, 1, {{3, bytes("h003")}}, {true});
  EXPECT_EQ(disk_->blocks.count(id_ + "#3"), 1u);
}

// A Hub block released to its waiters (then evictable from a small memory tier) before its disk
// write landed is found below memory all the same, not fetched a second time: the training
// loop's planner with a 32 MiB tier fetched 73-76 blocks twice. Once written, the disk serves it.
TEST_F(TierStackTest, AHubBlockIsFoundBelowMemoryBetweenItsReleaseAndItsDiskWrite) {
  make({}, /*with_disk=*/true, /*with_shared=*/false);
  std::vector<std::pair<uint64_t, BlockBytes>> blocks{{0, bytes("h000")}, {1, bytes("h001")}};
  tiers_->expect_writes(id_, 0, blocks);
  EXPECT_EQ(tiers_->writes_waiting(), 2u);
  // Not in memory (evicted), not on disk yet: served from the write waiting.
  EXPECT_TRUE(tiers_->fill_from_lower(ids({1}), 0, Deadline::never(), record()).empty());
  EXPECT_EQ(served_, (std::vector<std::vector<uint64_t>>{{1}}));
  EXPECT_EQ(disk_->gets, 0);
  ASSERT_TRUE(tiers_->disk_copy(BlockId{id_, 0, 4}, 0));
  EXPECT_EQ(tiers_->disk_copy(BlockId{id_, 0, 4}, 0)->view(), "h000");
  EXPECT_EQ(tiers_->hits_before_write(), 3u);
  tiers_->store_fetched(id_, 0, blocks, {true, true});
  EXPECT_EQ(tiers_->writes_waiting(), 0u);
  EXPECT_TRUE(tiers_->fill_from_lower(ids({1}), 0, Deadline::never(), record()).empty());
  EXPECT_EQ(disk_->gets, 1);  // from the disk now
  EXPECT_EQ(tiers_->hits_before_write(), 3u);
}

// A wait for blocks' disk writes (a training loop's planner, before it releases their markers)
// returns as the last of them is written, with the bytes on disk by then; blocks not waiting for a
// write do not hold it; a write skipped (the file failed its hash, as a full disk skips one) ends
// it too.
TEST_F(TierStackTest, AWaitForDiskWritesEndsAsTheLastOneLands) {
  make({}, /*with_disk=*/true, /*with_shared=*/false);
  std::vector<std::pair<uint64_t, BlockBytes>> blocks{{0, bytes("h000")}, {1, bytes("h001")}};
  const Deadline passed = Deadline::after(0ms, env_.clock());
  EXPECT_TRUE(tiers_->wait_written(id_, {0, 1, 7}, passed));  // nothing waits for a write yet
  tiers_->expect_writes(id_, 0, blocks);
  EXPECT_FALSE(tiers_->wait_written(id_, {1, 7}, passed));  // block 1 waits: the deadline ends it
  EXPECT_TRUE(tiers_->wait_written(id_, {7}, passed));
  EXPECT_TRUE(tiers_->wait_written("sha256:other", {0, 1}, passed));
  std::atomic<bool> returned{false};
  bool on_disk_then = false;
  std::thread waiter([&] {
    EXPECT_TRUE(tiers_->wait_written(id_, {0, 1}, Deadline::after(1h, env_.clock())));
    on_disk_then = disk_->blocks.count(id_ + "#0") && disk_->blocks.count(id_ + "#1");
    returned = true;
  });
  ASSERT_TRUE(env_.manual_clock().wait_for_sleepers(1));  // it waits (on the clock that bounds it)
  tiers_->store_fetched(id_, 0, {blocks[0]}, {true});  // one of the two written: still waiting
  EXPECT_FALSE(returned.load());
  tiers_->store_fetched(id_, 0, {blocks[1]}, {true});
  waiter.join();
  EXPECT_TRUE(on_disk_then);

  std::vector<std::pair<uint64_t, BlockBytes>> bad{{2, bytes("bad2")}};
  tiers_->expect_writes(id_, 0, bad);
  std::thread skipped([&] { EXPECT_TRUE(tiers_->wait_written(id_, {2}, Deadline::after(1h, env_.clock()))); });
  ASSERT_TRUE(env_.manual_clock().wait_for_sleepers(1));
  tiers_->store_fetched(id_, 0, bad, {false});  // not written: the wait ends all the same
  skipped.join();
  EXPECT_EQ(disk_->blocks.count(id_ + "#2"), 0u);
}

// The wait's bound is on the Env's clock: a write that never lands ends it when the clock passes
// the deadline, and no real time passes.
TEST_F(TierStackTest, AWaitForADiskWriteThatNeverLandsEndsAtItsDeadline) {
  make({}, /*with_disk=*/true, /*with_shared=*/false);
  const std::vector<std::pair<uint64_t, BlockBytes>> block{{0, bytes("h000")}};
  tiers_->expect_writes(id_, 0, block);
  std::atomic<int> result{-1};
  std::thread waiter([&] { result = tiers_->wait_written(id_, {0}, Deadline::after(10s, env_.clock())) ? 1 : 0; });
  ASSERT_TRUE(env_.manual_clock().wait_for_sleepers(1));
  env_.advance(9s);
  EXPECT_EQ(result.load(), -1);
  env_.advance(1s);
  waiter.join();
  EXPECT_EQ(result.load(), 0);
  EXPECT_EQ(tiers_->writes_waiting(), 1u);
  // The wait that ended left nothing behind for the write to wake (ASan would see a write into
  // its frame): a later wait on the same block, named twice, ends with the write.
  std::thread again([&] { EXPECT_TRUE(tiers_->wait_written(id_, {0, 0}, Deadline::after(1h, env_.clock()))); });
  ASSERT_TRUE(env_.manual_clock().wait_for_sleepers(1));
  tiers_->store_fetched(id_, 0, block, {true});
  again.join();
}

// A block not served (its file failed its hash) leaves the waiting writes too, and a waiting
// block of an older epoch is never served to a read of the new one.
TEST_F(TierStackTest, AWaitingWriteServesOnlyItsEpochAndEndsEvenWhenSkipped) {
  make({}, /*with_disk=*/true, /*with_shared=*/false);
  std::vector<std::pair<uint64_t, BlockBytes>> blocks{{0, bytes("bad0")}};
  tiers_->expect_writes(id_, 0, blocks);
  tiers_->drop_failed_file(id_, id_, 0, 16, 4);
  EXPECT_EQ(tiers_->fill_from_lower(ids({0}), 1, Deadline::never(), record()), (std::vector<uint64_t>{0}));
  EXPECT_FALSE(tiers_->disk_copy(BlockId{id_, 0, 4}, 1));
  tiers_->store_fetched(id_, 0, blocks, {false});
  EXPECT_EQ(tiers_->writes_waiting(), 0u);
  EXPECT_EQ(disk_->blocks.count(id_ + "#0"), 0u);
}

// A shared-tier block waiting for its deferred disk write is found there, not asked of the
// shared tier again.
TEST_F(TierStackTest, ADeferredPromotionIsFoundBeforeItsWriteRuns) {
  make();
  shared_->blocks[id_ + "#2"] = "s002";
  EXPECT_TRUE(tiers_->fill_from_lower(ids({2}), 0, Deadline::never(), record()).empty());
  EXPECT_EQ(shared_->lookups, 1);
  EXPECT_EQ(tiers_->writes_waiting(), 1u);
  EXPECT_TRUE(tiers_->fill_from_lower(ids({2}), 0, Deadline::never(), record()).empty());
  EXPECT_EQ(shared_->lookups, 1);
  env_.advance(1s);
  tiers_->deferred().run_due();
  EXPECT_EQ(disk_->blocks[id_ + "#2"], "s002");
  EXPECT_EQ(tiers_->writes_waiting(), 0u);
}

// A failure drops the file from every tier and moves its epoch; the lower tiers then answer
// only reads of the new epoch.
TEST_F(TierStackTest, AFailedFileLeavesEveryTierAndItsEpochMoves) {
  make();
  tiers_->memory().put(BlockId{id_, 0, 4}, bytes("m000"));
  disk_->blocks[id_ + "#1"] = "d001";
  shared_->blocks[id_ + "#2"] = "s002";
  tiers_->drop_failed_file(id_, id_, 0, 10, 4);  // 3 blocks: 4 + 4 + 2 bytes
  EXPECT_EQ(tiers_->epochs().current(id_), 1u);
  EXPECT_FALSE(tiers_->memory().peek(BlockId{id_, 0, 4}));
  EXPECT_TRUE(disk_->blocks.empty());
  EXPECT_TRUE(shared_->blocks.empty());
  EXPECT_EQ(disk_->log, (std::vector<std::string>{"remove 0", "remove 1", "remove 2"}));
  // Blocks stored again (by the new epoch's reads) are found by them, never by the old epoch's.
  disk_->blocks[id_ + "#1"] = "d001";
  EXPECT_EQ(tiers_->fill_from_lower(ids({1}), 0, Deadline::never(), record()), (std::vector<uint64_t>{1}));
  EXPECT_TRUE(tiers_->fill_from_lower(ids({1}), 1, Deadline::never(), record()).empty());
  // A late failure of the old epoch's bytes moves nothing and cleans nothing below memory.
  tiers_->drop_failed_file(id_ + "~0", id_, 0, 10, 4);
  EXPECT_EQ(tiers_->epochs().current(id_), 1u);
  EXPECT_EQ(disk_->blocks.count(id_ + "#1"), 1u);
}

TEST_F(TierStackTest, WithoutLowerTiersEveryBlockIsAMiss) {
  make({}, /*with_disk=*/false, /*with_shared=*/false);
  EXPECT_EQ(tiers_->fill_from_lower(ids({0, 1}), 0, Deadline::never(), record()), (std::vector<uint64_t>{0, 1}));
  tiers_->store_fetched(id_, 0, {{0, bytes("h000")}}, {true});  // nowhere to store: fine
  EXPECT_TRUE(served_.empty());
}

// The pump on a real thread: a write waiting for a pause that is an hour away is run as soon as
// shutdown() asks (the pump waits on a condition variable, not in a sleep).
TEST(DeferredWrites, ShutdownWakesAPumpWaitingForAPause) {
  testing::ManualEnv env;
  TaskQueue writer(1);
  DeferredWrites deferred(env, 1 << 20, std::chrono::hours(1),
                          [&](std::function<void()> t) { return writer.post(std::move(t)); });
  std::atomic<int> ran{0};
  deferred.note_activity();
  ASSERT_TRUE(deferred.add(10, [&] { ++ran; }));
  deferred.shutdown();
  writer.drain();  // returns once the pump ran the write
  EXPECT_EQ(ran.load(), 1);
  EXPECT_FALSE(deferred.add(10, [&] { ++ran; }));  // refused after shutdown: the caller writes
}

// On a real thread with no activity, a write runs without anyone asking (and the pump ends).
TEST(DeferredWrites, AWriteRunsByItselfWhenNothingIsRead) {
  TaskQueue writer(1);
  std::mutex mu;
  std::condition_variable cv;
  bool ran = false;
  testing::ManualEnv env;
  DeferredWrites deferred(env, 1 << 20, std::chrono::milliseconds(1),
                          [&](std::function<void()> t) { return writer.post(std::move(t)); });
  ASSERT_TRUE(deferred.add(10, [&] {
    std::lock_guard<std::mutex> lock(mu);
    ran = true;
    cv.notify_all();
  }));
  {
    std::unique_lock<std::mutex> lock(mu);
    cv.wait(lock, [&] { return ran; });
  }
  EXPECT_TRUE(ran);
  // The pump is still on the writer's thread after the write (it releases the write's bytes
  // next): it must end before `deferred` goes out of scope, as DeferredWrites' owner drains its
  // executor before it (ASan saw the pump write into the destroyed object once).
  writer.drain();
  EXPECT_EQ(deferred.queued_bytes(), 0u);
}

// On a real thread, the pump waiting for a pause waits on the Env's clock: the write runs when
// the test moves the clock to the quiet point, not before, and no real time passes.
TEST(DeferredWrites, APumpWaitingForAPauseRunsTheWriteWhenTheClockReachesIt) {
  testing::ManualEnv env;
  TaskQueue writer(1);
  std::atomic<int> ran{0};
  DeferredWrites deferred(env, 1 << 20, std::chrono::seconds(30),
                          [&](std::function<void()> t) { return writer.post(std::move(t)); });
  deferred.note_activity();
  ASSERT_TRUE(deferred.add(10, [&] { ++ran; }));
  ASSERT_TRUE(env.manual_clock().wait_for_sleepers(1));  // the pump waits for the pause
  env.advance(std::chrono::seconds(29));
  EXPECT_EQ(ran.load(), 0);
  env.advance(std::chrono::seconds(1));
  writer.drain();  // the pump ran the write and ended (drain would block on a pump still waiting)
  EXPECT_EQ(ran.load(), 1);
  EXPECT_EQ(deferred.queued_bytes(), 0u);
}

TEST(DeferredWrites, AnExecutorThatRefusesRunsTheWriteAtOnce) {
  int ran = 0;
  testing::ManualEnv env;
  DeferredWrites deferred(env, 1 << 20, std::chrono::hours(1), [](std::function<void()>) { return false; });
  deferred.note_activity();
  EXPECT_TRUE(deferred.add(10, [&] { ++ran; }));
  EXPECT_EQ(ran, 1);
}

}  // namespace
}  // namespace hubfs
