// The process-wide pools of idle worker buffers (core/h5chunk/worker_state.h): they hold at most their
// cap, never a buffer past kRetainedBufferBytes, and a file's worker reuses the buffer another
// file's worker gave back, so many open files do not each keep their own.
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <memory>
#include <vector>

#include "h5chunk/worker_state.h"

namespace h5chunk {
namespace HUBFS_UNITY_ID {

constexpr size_t kMiB = 1 << 20;

Buffer buffer_of(size_t n) {
  Buffer b;
  EXPECT_NE(b.reserve(n), nullptr);
  return b;
}

TEST(BufferPool, KeepsAtMostItsCap) {
  BufferPool pool(5 * kMiB / 2);
  for (int i = 0; i < 3; ++i) pool.give(buffer_of(kMiB));
  EXPECT_EQ(pool.kept_count(), 2u);
  EXPECT_LE(pool.kept_bytes(), 5 * kMiB / 2);
  EXPECT_GE(pool.kept_bytes(), 2 * kMiB);
}

TEST(BufferPool, FreesABufferLargerThanAnyKept) {
  BufferPool pool(4 * kRetainedBufferBytes);
  pool.give(buffer_of(kRetainedBufferBytes + 1));  // allocated, never touched: no memory used
  EXPECT_EQ(pool.kept_count(), 0u);
  EXPECT_EQ(pool.take().capacity(), 0u);
}

TEST(BufferPool, TakeReturnsTheLastBufferGivenThenNothing) {
  BufferPool pool(8 * kMiB);
  Buffer first = buffer_of(kMiB);
  Buffer second = buffer_of(2 * kMiB);
  const uint8_t* second_data = second.data();
  pool.give(std::move(first));
  pool.give(std::move(second));
  Buffer got = pool.take();
  EXPECT_EQ(got.data(), second_data);
  EXPECT_GE(got.capacity(), 2 * kMiB);
  EXPECT_GE(pool.take().capacity(), kMiB);  // the first
  EXPECT_EQ(pool.take().capacity(), 0u);
  EXPECT_EQ(pool.kept_bytes(), 0u);
}

TEST(WorkerStatePool, AnotherFilesWorkerReusesTheBuffersGivenBack) {
  WorkerStatePool a("/dev/null"), b("/dev/null");
  auto worker = a.acquire();
  ASSERT_TRUE(worker.ok()) << worker.status().message();
  uint8_t* compressed = (*worker)->compressed.reserve(3 * kMiB);
  uint8_t* chunk = (*worker)->chunk.reserve(5 * kMiB);
  ASSERT_NE(compressed, nullptr);
  ASSERT_NE(chunk, nullptr);
  a.release(std::move(*worker));
  auto other = b.acquire();
  ASSERT_TRUE(other.ok()) << other.status().message();
  EXPECT_EQ((*other)->compressed.data(), compressed);
  EXPECT_EQ((*other)->chunk.data(), chunk);
  b.release(std::move(*other));
}

TEST(WorkerStatePool, ManyFilesKeepNoMoreThanThePoolsCap) {
  std::vector<std::unique_ptr<WorkerStatePool>> files;
  std::vector<std::unique_ptr<WorkerState>> busy;
  // More files busy at once than the pools hold, 2 MiB + 2 MiB each (allocated, never touched).
  const size_t n = kPooledBufferBytes / (2 * kMiB) + 8;
  for (size_t i = 0; i < n; ++i) {
    files.push_back(std::make_unique<WorkerStatePool>("/dev/null"));
    auto worker = files.back()->acquire();
    ASSERT_TRUE(worker.ok()) << worker.status().message();
    ASSERT_NE((*worker)->compressed.reserve(2 * kMiB), nullptr);
    ASSERT_NE((*worker)->chunk.reserve(2 * kMiB), nullptr);
    busy.push_back(std::move(*worker));
  }
  for (size_t i = 0; i < busy.size(); ++i) files[i]->release(std::move(busy[i]));
  EXPECT_LE(compressed_buffers().kept_bytes(), kPooledBufferBytes);
  EXPECT_LE(chunk_buffers().kept_bytes(), kPooledBufferBytes);
  EXPECT_GE(compressed_buffers().kept_bytes(), kPooledBufferBytes / 2);  // it does keep some
}

// The pools' locks are taken around fork() and released on both sides (a child forked while a
// worker held one would otherwise find it locked forever): a child takes and gives back buffers.
TEST(BufferPool, AForkedChildTakesAndGivesBuffers) {
  compressed_buffers().give(buffer_of(kMiB));
  const pid_t child = ::fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    Buffer b = compressed_buffers().take();
    const bool ok = b.capacity() >= kMiB && b.reserve(kMiB) != nullptr;
    compressed_buffers().give(std::move(b));
    ::_exit(ok ? 0 : 1);
  }
  int status = 0;
  ASSERT_EQ(::waitpid(child, &status, 0), child);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0);
  EXPECT_GE(compressed_buffers().kept_bytes(), kMiB);  // the parent's pool is usable too
}

}  // namespace HUBFS_UNITY_ID
}  // namespace h5chunk
