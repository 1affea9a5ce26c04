// BlockSlots: a fetched run's body written into one pooled slot per block as it arrives.
#include "reader/block_slots.h"

#include <gtest/gtest.h>

#include <future>

#include "support/fake_transport.h"
#include "support/fetcher_env.h"

namespace hubfs {
namespace HUBFS_UNITY_ID {

using testing::FakeTransport;

constexpr uint64_t kBlock = 4096;

std::string bytes_of(uint64_t size) {
  std::string s(size, '\0');
  for (uint64_t i = 0; i < size; ++i) s[i] = static_cast<char>((i * 131 + 7) % 251);
  return s;
}

// A 206 for the asked range, its body fed to the request's sink in pieces of `piece` bytes, as a
// streaming transport (CurlTransport) does; or in HttpResponse::body when `piece` is 0.
FakeTransport::Handler cdn(const std::string& content, size_t piece) {
  return [&content, piece](const HttpRequest& req) -> Result<HttpResponse> {
    const std::string h = *find_header(req.headers, "range");
    const size_t dash = h.find('-');
    const uint64_t first = std::stoull(h.substr(6, dash - 6)), last = std::stoull(h.substr(dash + 1));
    HttpResponse resp;
    resp.status = 206;
    resp.headers = {{"content-range", "bytes " + std::to_string(first) + "-" + std::to_string(last) + "/" +
                                          std::to_string(content.size())}};
    resp.body = content.substr(first, last - first + 1);
    if (piece == 0 || !req.body_sink) return resp;
    req.body_sink->begin();
    for (size_t at = 0; at < resp.body.size(); at += piece)
      req.body_sink->feed(resp.body.data() + at, std::min(piece, resp.body.size() - at));
    resp.streamed = resp.body.size();
    resp.body.clear();
    return resp;
  };
}

Status fetch_run(RangeFetcher& fetcher, uint64_t file_size, BlockRun run, std::shared_ptr<BlockSlots> slots,
                 uint32_t parts) {
  std::promise<Status> done;
  const ByteRange range{run.first * kBlock, slots->length()};
  fetcher.fetch_into_async([](bool) -> Result<Location> { return Location{.url = "https://cdn.example/f", .headers = {}}; },
                           file_size, range, slots, [&](Status s) { done.set_value(s); }, Deadline::never(), parts);
  return done.get_future().get();
}

// Odd pieces, straddling block boundaries, in one request or several, land exactly in their
// blocks; the file's short last block is short; each block owns its slot, which goes back to the
// pool when the block is let go.
TEST(BlockSlots, AStreamedRunLandsExactlyInItsBlocks) {
  const uint64_t file_size = 5 * kBlock + 1234;  // six blocks, the last short
  const std::string content = bytes_of(file_size);
  auto pool = BlockBufferPool::create(kBlock + 100);
  for (size_t piece : {0u, 1u, 333u, 4097u, 100000u}) {
    for (uint32_t parts : {1u, 3u}) {
      SCOPED_TRACE(std::to_string(piece) + " bytes a piece, " + std::to_string(parts) + " parts");
      auto fake = std::make_unique<FakeTransport>(cdn(content, piece));
      auto fetcher = std::make_unique<RangeFetcher>(*fake, testing::fetcher_on(Env::real()));
      const BlockRun run{2, 4};  // blocks 2..5
      auto slots = BlockSlots::take(*pool, run, file_size, kBlock);
      ASSERT_NE(slots, nullptr);
      EXPECT_EQ(slots->length(), 3 * kBlock + 1234);
      EXPECT_EQ(pool->slots() - pool->free_slots(), 0u);  // none taken before a byte arrives
      ASSERT_TRUE(fetch_run(*fetcher, file_size, run, slots, parts).ok());
      fetcher.reset();
      fake.reset();  // it kept the requests, and with them their sinks
      auto blocks = slots->blocks();
      ASSERT_EQ(blocks.size(), 4u);
      for (const auto& [index, bytes] : blocks) {
        EXPECT_EQ(bytes.view(), std::string_view(content).substr(index * kBlock, kBlock)) << "block " << index;
      }
      EXPECT_EQ(blocks.back().second.size(), 1234u);
      EXPECT_NE(blocks[0].second.buffer.get(), blocks[1].second.buffer.get());  // a slot each
      const size_t lent = pool->slots() - pool->free_slots();
      EXPECT_EQ(lent, 4u);
      slots.reset();
      EXPECT_EQ(pool->slots() - pool->free_slots(), 4u);  // the blocks still hold them
      blocks.clear();
      EXPECT_EQ(pool->free_slots(), pool->slots());
    }
  }
}

// A run waiting for its connection holds no memory: a block takes its slot with its first byte,
// so a hint far larger than the transfers running maps only what those carry (the planner of a
// training loop zeroed fresh pages for a whole 150 MB hint at once), and a slot freed meanwhile
// serves the next block.
TEST(BlockSlots, ABlockTakesItsSlotWhenItsFirstByteArrives) {
  auto pool = BlockBufferPool::create(kBlock);
  auto first = BlockSlots::take(*pool, BlockRun{0, 3}, 10 * kBlock, kBlock);
  auto second = BlockSlots::take(*pool, BlockRun{3, 3}, 10 * kBlock, kBlock);
  ASSERT_NE(first, nullptr);
  ASSERT_NE(second, nullptr);
  EXPECT_EQ(pool->slots(), 0u);  // nothing mapped yet
  const std::string a = bytes_of(3 * kBlock);
  first->write(0, a.data(), kBlock + 10);  // block 0 whole, block 1 begun
  EXPECT_EQ(pool->slots() - pool->free_slots(), 2u);
  first->write(kBlock + 10, a.data() + kBlock + 10, 2 * kBlock - 10);
  auto blocks = first->blocks();
  EXPECT_EQ(blocks[2].second.view(), std::string_view(a).substr(2 * kBlock, kBlock));
  const size_t mapped = pool->slots();
  blocks.clear();
  first.reset();  // its slots go back, and the next run's blocks take them
  second->write(0, a.data(), 3 * kBlock);
  EXPECT_EQ(pool->slots(), mapped);
  EXPECT_EQ(second->blocks()[1].second.view(), std::string_view(a).substr(kBlock, kBlock));
}

TEST(BlockSlots, BlocksLargerThanTheSlotsAreNotTaken) {
  auto pool = BlockBufferPool::create(kBlock);
  EXPECT_EQ(BlockSlots::take(*pool, BlockRun{0, 1}, 10 * kBlock, 2 * kBlock), nullptr);
  EXPECT_EQ(pool->slots(), pool->free_slots());
}

}  // namespace HUBFS_UNITY_ID
}  // namespace hubfs
