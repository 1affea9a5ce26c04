// The shared tier's engine-free pieces: the envelope every value travels in (a bad value is never
// accepted) and the circuit breaker (on a fake clock: no sleeping).
#include "shared/shared_store.h"
#include "support/manual_env.h"

#include <sys/stat.h>
#include <unistd.h>

#include <cstdio>

#include <gtest/gtest.h>

namespace hubfs {
namespace HUBFS_UNITY_ID {

const SharedStoreKey& secret() {
  static const SharedStoreKey k = SharedStoreKey::from_bytes("0123456789abcdef0123456789abcdef").value();
  return k;
}
const std::string kKey = SharedBlockKey{secret().id(), "sha256:ab12", 1u << 20, 7}.str();

TEST(SharedEnvelope, RoundTripsAndKeysNameKeyContentBlockSizeAndIndex) {
  EXPECT_EQ(kKey, "hubfs:v2:" + secret().id() + ":sha256:ab12:1048576:7");
  EXPECT_EQ(secret().id().size(), 8u);
  std::string block(5000, 'x');
  block[17] = '\0';
  std::string value = shared_envelope::wrap(secret(), kKey, block);
  EXPECT_EQ(value.size(), shared_envelope::size(kKey, block.size()));
  auto back = shared_envelope::unwrap(secret(), kKey, block.size(), value);
  ASSERT_TRUE(back);
  EXPECT_EQ(*back, block);
  // Deterministic: two machines storing the same block store the same bytes.
  EXPECT_EQ(value, shared_envelope::wrap(secret(), kKey, block));
  // An empty block (a zero-length file has none, but the format must not trip on it).
  EXPECT_TRUE(shared_envelope::unwrap(secret(), kKey, 0, shared_envelope::wrap(secret(), kKey, "")));
}

TEST(SharedEnvelope, EveryFlippedByteTruncationOrWrongKeyIsRejected) {
  std::string block(300, '\0');
  for (size_t i = 0; i < block.size(); ++i) block[i] = static_cast<char>(i * 7);
  const std::string value = shared_envelope::wrap(secret(), kKey, block);
  for (size_t i = 0; i < value.size(); ++i) {
    std::string bad = value;
    bad[i] ^= 0x01;
    EXPECT_FALSE(shared_envelope::unwrap(secret(), kKey, block.size(), bad)) << "flipped byte " << i;
  }
  EXPECT_FALSE(shared_envelope::unwrap(secret(), kKey, block.size(), value.substr(0, value.size() - 1)));
  EXPECT_FALSE(shared_envelope::unwrap(secret(), kKey, block.size(), value + "x"));
  EXPECT_FALSE(shared_envelope::unwrap(secret(), kKey, block.size() - 1, value));
  EXPECT_FALSE(shared_envelope::unwrap(secret(), kKey, block.size(), ""));
  // The right bytes under another block's key (an engine or proxy mix-up, a replay) are not
  // this block: the MAC covers the echoed key.
  const std::string other = SharedBlockKey{secret().id(), "sha256:ab12", 1u << 20, 8}.str();
  EXPECT_FALSE(shared_envelope::unwrap(secret(), other, block.size(), value));
}

// A forger who can write to the cache but does not hold the key: a value with the right layout,
// the key echoed and a MAC under any other key is refused, whatever block it carries.
TEST(SharedEnvelope, AValueMadeWithoutTheKeyIsRefused) {
  const std::string block(4096, 'A');
  const SharedStoreKey forger = SharedStoreKey::from_bytes("not the cluster's key, guessed!!").value();
  EXPECT_NE(forger.id(), secret().id());
  const std::string forged = shared_envelope::wrap(forger, kKey, block);
  EXPECT_EQ(forged.size(), shared_envelope::size(kKey, block.size()));
  EXPECT_FALSE(shared_envelope::unwrap(secret(), kKey, block.size(), forged));
  // Only the MAC differs from a genuine value of the same block.
  const std::string genuine = shared_envelope::wrap(secret(), kKey, block);
  EXPECT_EQ(forged.substr(0, forged.size() - 32), genuine.substr(0, genuine.size() - 32));
}

class SharedStoreKeyFile : public ::testing::Test {
 protected:
  std::string write(const std::string& name, const std::string& bytes, mode_t mode) {
    const std::string path = ::testing::TempDir() + "/hubfs_key_" + std::to_string(::getpid()) + "_" + name;
    FILE* f = fopen(path.c_str(), "wb");
    EXPECT_TRUE(f);
    fwrite(bytes.data(), 1, bytes.size(), f);
    fclose(f);
    chmod(path.c_str(), mode);
    paths_.push_back(path);
    return path;
  }
  ~SharedStoreKeyFile() override {
    for (const auto& p : paths_) unlink(p.c_str());
  }
  std::vector<std::string> paths_;
};

TEST_F(SharedStoreKeyFile, ReadsAKeyAndRefusesShortLooseMissingOrHugeOnesSayingHowToMakeOne) {
  const std::string secret32(32, '\x5a');
  auto good = SharedStoreKey::from_file(write("good", secret32, 0600));
  ASSERT_TRUE(good.ok()) << good.status().message();
  EXPECT_EQ(good->secret(), secret32);
  EXPECT_EQ(good->id(), SharedStoreKey::from_bytes(secret32)->id());
  EXPECT_TRUE(SharedStoreKey::from_file(write("group", secret32, 0640)).ok());

  auto short_key = SharedStoreKey::from_file(write("short", "tooshort", 0600));
  ASSERT_FALSE(short_key.ok());
  EXPECT_NE(short_key.status().message().find("head -c 32 /dev/urandom"), std::string::npos)
      << short_key.status().message();
  auto loose = SharedStoreKey::from_file(write("loose", secret32, 0644));
  ASSERT_FALSE(loose.ok());
  EXPECT_NE(loose.status().message().find("chmod 600"), std::string::npos) << loose.status().message();
  auto huge = SharedStoreKey::from_file(write("huge", std::string(SharedStoreKey::kMaxBytes + 1, 'k'), 0600));
  EXPECT_FALSE(huge.ok());
  auto missing = SharedStoreKey::from_file(::testing::TempDir() + "/hubfs_no_such_key");
  ASSERT_FALSE(missing.ok());
  EXPECT_NE(missing.status().message().find("head -c 32 /dev/urandom"), std::string::npos);
}

struct FakeClock {
  testing::ManualEnv env;
  Env& fn() { return env; }
  void advance(std::chrono::milliseconds d) { env.advance(d); }
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
