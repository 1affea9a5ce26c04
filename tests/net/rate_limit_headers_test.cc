// The one parser of Retry-After, RateLimit and RateLimit-Policy (net/rate_limit_headers.h) that
// the retrying transport, the quota gate and the Hub's error messages share.
#include "net/rate_limit_headers.h"

#include <gtest/gtest.h>

namespace hubfs {
namespace HUBFS_UNITY_ID {

using std::chrono::milliseconds;
namespace rlh = rate_limit_headers;

TEST(RateLimitHeaderParts, TrimAndIntegers) {
  EXPECT_EQ(rlh::trim(" \t a b\t "), "a b");
  EXPECT_EQ(rlh::trim(""), "");
  EXPECT_EQ(rlh::parse_int(" 42 "), 42);
  EXPECT_EQ(rlh::parse_int("0"), 0);
  EXPECT_FALSE(rlh::parse_int("-1"));
  EXPECT_FALSE(rlh::parse_int("4x"));
  EXPECT_FALSE(rlh::parse_int(""));
  EXPECT_FALSE(rlh::parse_int("99999999999999999999"));  // overflow
}

TEST(RateLimitHeaderParts, ItemsSplitNamesAndIntegerParameters) {
  auto items = rlh::split_items(" \"fixed window\" ; \"api\";q=500; w = 300 ;junk;z=abc");
  EXPECT_EQ(items.names, (std::vector<std::string>{"fixed window", "api"}));
  EXPECT_EQ(items.params, (std::map<std::string, int64_t>{{"q", 500}, {"w", 300}}));
  EXPECT_EQ(rlh::split_items("r=1;r=2").params.at("r"), 2);  // a later key wins
  EXPECT_TRUE(rlh::split_items("").names.empty());
}

TEST(RetryAfter, SecondsOrAnHttpDate) {
  const auto now = std::chrono::system_clock::from_time_t(784111777);  // Sun, 06 Nov 1994 08:49:37 GMT
  EXPECT_EQ(parse_retry_after("7", now), milliseconds(7000));
  EXPECT_EQ(parse_retry_after(" 0 ", now), milliseconds(0));
  EXPECT_EQ(parse_retry_after("Sun, 06 Nov 1994 08:49:47 GMT", now), milliseconds(10'000));
  EXPECT_EQ(parse_retry_after("Sun, 06 Nov 1994 08:49:00 GMT", now), milliseconds(0));  // past
  EXPECT_FALSE(parse_retry_after("soon", now));
  EXPECT_FALSE(parse_retry_after("-3", now));
  EXPECT_FALSE(parse_retry_after("Sun, 06 Nov 1994 08:49:47 GMT trailing", now));
}

TEST(RateLimit, HeaderAndPolicyAsTheHubSendsThem) {
  auto rl = parse_ratelimit("\"api\";r=0;t=55");
  ASSERT_TRUE(rl);
  EXPECT_EQ(rl->bucket, "api");
  EXPECT_EQ(rl->remaining, 0);
  EXPECT_EQ(rl->reset_s, 55);
  EXPECT_FALSE(parse_ratelimit("r=0;t=55"));  // no bucket
  auto policy = parse_ratelimit_policy("\"fixed window\";\"resolvers\";q=3000;w=300");
  ASSERT_TRUE(policy);
  EXPECT_EQ(*policy, std::make_pair(int64_t{3000}, int64_t{300}));
  EXPECT_FALSE(parse_ratelimit_policy("\"fixed window\";q=1;w=0"));  // a window of nothing
}

// What binds a 429: t of a spent quota (r=0 or no r), whether or not the bucket is named.
TEST(RateLimit, ResetOnlyOfASpentQuota) {
  EXPECT_EQ(parse_ratelimit_reset("\"api\";r=0;t=55"), 55);
  EXPECT_EQ(parse_ratelimit_reset("r=0;t=9"), 9);
  EXPECT_EQ(parse_ratelimit_reset("\"api\";t=12"), 12);
  EXPECT_FALSE(parse_ratelimit_reset("\"api\";r=3;t=55"));  // not spent: the 429 is about something else
  EXPECT_FALSE(parse_ratelimit_reset("\"api\";r=0"));       // no reset time
  EXPECT_FALSE(parse_ratelimit_reset("garbage"));
}

}  // namespace
}  // namespace hubfs
