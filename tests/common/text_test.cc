// The ASCII helpers the header, URL and content-id parsers share.
#include "common/text.h"

#include <gtest/gtest.h>

namespace hubfs {
namespace HUBFS_UNITY_ID {

TEST(Text, AsciiLowerTurnsOnlyCapitalLetters) {
  EXPECT_EQ(ascii_lower("X-Repo-Commit: ABCdef09"), "x-repo-commit: abcdef09");
  EXPECT_EQ(ascii_lower(std::string("\xC3\x89T\x00Z", 5)), std::string("\xC3\x89t\x00z", 5));  // UTF-8 and NUL kept
  EXPECT_EQ(ascii_lower(""), "");
}

TEST(Text, IsHexWantsExactlyThatManyDigitsOfEitherCase) {
  EXPECT_TRUE(is_hex("0123456789abcdefABCDEF", 22));
  EXPECT_FALSE(is_hex("0123456789abcdefABCDEF", 21));
  EXPECT_FALSE(is_hex("0123g", 5));
  EXPECT_FALSE(is_hex("01 23", 5));
  EXPECT_TRUE(is_hex("", 0));
  EXPECT_FALSE(is_hex(std::string("ab\0c", 4), 4));
}

TEST(Text, IsLowerHexRefusesCapitals) {
  EXPECT_TRUE(is_lower_hex("0123456789abcdef", 16));
  EXPECT_FALSE(is_lower_hex("0123456789abcdeF", 16));
  EXPECT_FALSE(is_lower_hex("0123456789abcdef", 15));
  EXPECT_FALSE(is_lower_hex("0123456789abcdeg", 16));
}

}  // namespace HUBFS_UNITY_ID
}  // namespace hubfs
