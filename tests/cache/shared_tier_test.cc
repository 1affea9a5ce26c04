// The shared tier's engine-free pieces: the envelope every value travels in (a bad value is never
// accepted) and the circuit breaker (on a fake clock: no sleeping).
#include "cache/shared_tier.h"

#include <gtest/gtest.h>

namespace hubfs {
namespace {

const std::string kKey = SharedBlockKey{"sha256:ab12", 1u << 20, 7}.str();

TEST(SharedEnvelope, RoundTripsAndKeysNameContentBlockSizeAndIndex) {
  EXPECT_EQ(kKey, "hubfs:v1:sha256:ab12:1048576:7");
  std::string block(5000, 'x');
  block[17] = '\0';
  std::string value = shared_envelope::wrap(kKey, block);
  EXPECT_EQ(value.size(), shared_envelope::size(kKey, block.size()));
  auto back = shared_envelope::unwrap(kKey, block.size(), value);
  ASSERT_TRUE(back);
  EXPECT_EQ(*back, block);
  // Deterministic: two machines storing the same block store the same bytes.
  EXPECT_EQ(value, shared_envelope::wrap(kKey, block));
  // An empty block (a zero-length file has none, but the format must not trip on it).
  EXPECT_TRUE(shared_envelope::unwrap(kKey, 0, shared_envelope::wrap(kKey, "")));
}

TEST(SharedEnvelope, EveryFlippedByteTruncationOrWrongKeyIsRejected) {
  std::string block(300, '\0');
  for (size_t i = 0; i < block.size(); ++i) block[i] = static_cast<char>(i * 7);
  const std::string value = shared_envelope::wrap(kKey, block);
  for (size_t i = 0; i < value.size(); ++i) {
    std::string bad = value;
    bad[i] ^= 0x01;
    EXPECT_FALSE(shared_envelope::unwrap(kKey, block.size(), bad)) << "flipped byte " << i;
  }
  EXPECT_FALSE(shared_envelope::unwrap(kKey, block.size(), value.substr(0, value.size() - 1)));
  EXPECT_FALSE(shared_envelope::unwrap(kKey, block.size(), value + "x"));
  EXPECT_FALSE(shared_envelope::unwrap(kKey, block.size() - 1, value));
  EXPECT_FALSE(shared_envelope::unwrap(kKey, block.size(), ""));
  // The right bytes under another block's key (an engine or proxy mix-up) are not this block.
  const std::string other = SharedBlockKey{"sha256:ab12", 1u << 20, 8}.str();
  EXPECT_FALSE(shared_envelope::unwrap(other, block.size(), value));
}

struct FakeClock {
  std::chrono::steady_clock::time_point t{};
  CircuitBreaker::Clock fn() {
    return [this] { return t; };
  }
  void advance(std::chrono::milliseconds d) { t += d; }
};

TEST(CircuitBreaker, OpensAfterFailuresInARowAndProbesOnceAfterTheWait) {
  FakeClock clock;
  CircuitBreaker::Options o;
  o.failures_to_open = 3;
  o.open_for = std::chrono::milliseconds(1000);
  o.max_open_for = std::chrono::milliseconds(4000);
  CircuitBreaker b(o, clock.fn());
  // A success in between resets the count: two failures, a success, two failures stay closed.
  b.failure();
  b.failure();
  b.success();
  b.failure();
  b.failure();
  EXPECT_TRUE(b.allow());
  EXPECT_FALSE(b.open());
  b.failure();  // third in a row
  EXPECT_TRUE(b.open());
  EXPECT_FALSE(b.allow());
  clock.advance(std::chrono::milliseconds(999));
  EXPECT_FALSE(b.allow());
  clock.advance(std::chrono::milliseconds(1));
  EXPECT_TRUE(b.allow());   // the probe
  EXPECT_FALSE(b.allow());  // only one at a time
  b.success();
  EXPECT_FALSE(b.open());
  EXPECT_TRUE(b.allow());
  EXPECT_TRUE(b.allow());
}

TEST(CircuitBreaker, AFailedProbeWaitsTwiceAsLongUpToTheCap) {
  FakeClock clock;
  CircuitBreaker::Options o;
  o.failures_to_open = 1;
  o.open_for = std::chrono::milliseconds(1000);
  o.max_open_for = std::chrono::milliseconds(3000);
  CircuitBreaker b(o, clock.fn());
  b.failure();
  clock.advance(std::chrono::milliseconds(1000));
  ASSERT_TRUE(b.allow());
  b.failure();  // probe failed: 2 s now
  clock.advance(std::chrono::milliseconds(1999));
  EXPECT_FALSE(b.allow());
  clock.advance(std::chrono::milliseconds(1));
  ASSERT_TRUE(b.allow());
  b.failure();  // 4 s, capped at 3 s
  clock.advance(std::chrono::milliseconds(2999));
  EXPECT_FALSE(b.allow());
  clock.advance(std::chrono::milliseconds(1));
  ASSERT_TRUE(b.allow());
  b.success();  // back: the next opening waits the base time again
  b.failure();
  clock.advance(std::chrono::milliseconds(1000));
  EXPECT_TRUE(b.allow());
}

TEST(CircuitBreaker, LateFailuresOfCallsLetThroughBeforeItOpenedDoNotExtendIt) {
  FakeClock clock;
  CircuitBreaker::Options o;
  o.failures_to_open = 1;
  o.open_for = std::chrono::milliseconds(1000);
  CircuitBreaker b(o, clock.fn());
  b.failure();
  clock.advance(std::chrono::milliseconds(600));
  b.failure();  // another call that was already under way
  clock.advance(std::chrono::milliseconds(400));
  EXPECT_TRUE(b.allow());
}

}  // namespace
}  // namespace hubfs
