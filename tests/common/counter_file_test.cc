// common/counter_file.h: totals that processes add to under a lock; damage reads as zeros.
#include "common/counter_file.h"

#include <filesystem>
#include <fstream>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "support/temp_dir.h"

namespace hubfs {
namespace HUBFS_UNITY_ID {

using testing::TempDir;

TEST(CounterFile, AddsToWhatIsThereAndReadsItBack) {
  TempDir dir;
  const std::string path = (dir.path() / "totals").string();
  EXPECT_TRUE(counter_file::read(path).empty());  // missing: zeros
  ASSERT_TRUE(counter_file::add(path, {{"chunks", 2}, {"bytes", 100}}).ok());
  ASSERT_TRUE(counter_file::add(path, {{"bytes", 23}, {"other", 1}}).ok());
  const counter_file::Totals totals = counter_file::read(path);
  EXPECT_EQ(totals, (counter_file::Totals{{"bytes", 123}, {"chunks", 2}, {"other", 1}}));
}

// Each add() opens the file itself, so threads contend for the flock as processes do: no update
// may be lost.
TEST(CounterFile, ConcurrentAddersLoseNothing) {
  TempDir dir;
  const std::string path = (dir.path() / "totals").string();
  constexpr int kThreads = 8, kAdds = 50;
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < kAdds; ++i) EXPECT_TRUE(counter_file::add(path, {{"n", 1}, {"sum", uint64_t(t)}}).ok());
    });
  }
  for (auto& t : threads) t.join();
  const counter_file::Totals totals = counter_file::read(path);
  EXPECT_EQ(totals.at("n"), uint64_t(kThreads * kAdds));
  EXPECT_EQ(totals.at("sum"), uint64_t(kAdds * (kThreads * (kThreads - 1) / 2)));
}

TEST(CounterFile, ADamagedFileReadsAsZerosAndIsRewrittenWhole) {
  TempDir dir;
  const std::string path = (dir.path() / "totals").string();
  for (const char* damage : {"bytes 12x\n", "bytes\n", "Bytes 5\n", "bytes 99999999999999999999\n", "\x01\x02"}) {
    SCOPED_TRACE(damage);
    std::ofstream(path, std::ios::trunc) << "chunks 4\n" << damage;
    EXPECT_TRUE(counter_file::read(path).empty());
    ASSERT_TRUE(counter_file::add(path, {{"chunks", 1}}).ok());
    EXPECT_EQ(counter_file::read(path), (counter_file::Totals{{"chunks", 1}}));
  }
}

TEST(CounterFile, AnUnwritableDirectoryIsAnErrorNamingThePath) {
  TempDir dir;
  const std::string path = (dir.path() / "missing" / "totals").string();
  Status st = counter_file::add(path, {{"n", 1}});
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.message().find(path), std::string::npos) << st.message();
}

}  // namespace HUBFS_UNITY_ID
}  // namespace hubfs
