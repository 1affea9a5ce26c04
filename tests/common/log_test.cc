#include "common/log.h"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <string>

namespace hubfs {
namespace HUBFS_UNITY_ID {

// Restores the process-wide log state the other tests expect.
struct LogStateGuard {
  ~LogStateGuard() {
    unsetenv("HUBFS_LOG_LEVEL");
    set_log_level(LogLevel::kInfo);
    set_log_file(nullptr);
    set_log_format(LogFormat::kText);
  }
};

std::string read_all(std::FILE* f) {
  std::fflush(f);
  std::rewind(f);
  std::string out;
  char buf[4096];
  size_t n;
  while ((n = std::fread(buf, 1, sizeof buf, f)) > 0) out.append(buf, n);
  return out;
}

TEST(Log, LevelFromEnvironment) {
  LogStateGuard guard;
  set_log_level(LogLevel::kInfo);
  unsetenv("HUBFS_LOG_LEVEL");
  EXPECT_TRUE(set_log_level_from_env());  // unset: nothing changes
  EXPECT_FALSE(log_enabled(LogLevel::kDebug));
  EXPECT_TRUE(log_enabled(LogLevel::kInfo));

  setenv("HUBFS_LOG_LEVEL", "debug", 1);
  EXPECT_TRUE(set_log_level_from_env());
  EXPECT_TRUE(log_enabled(LogLevel::kDebug));

  setenv("HUBFS_LOG_LEVEL", "error", 1);
  EXPECT_TRUE(set_log_level_from_env());
  EXPECT_FALSE(log_enabled(LogLevel::kWarning));
  EXPECT_TRUE(log_enabled(LogLevel::kError));

  setenv("HUBFS_LOG_LEVEL", "verbose", 1);  // not a level: refused, level kept
  EXPECT_FALSE(set_log_level_from_env());
  EXPECT_FALSE(log_enabled(LogLevel::kWarning));
}

TEST(Log, LinesCarryLevelAndMillisecondStamp) {
  LogStateGuard guard;
  std::FILE* f = std::tmpfile();
  ASSERT_NE(f, nullptr);
  set_log_file(f);
  set_log_level(LogLevel::kWarning);
  log_info("hidden");
  log_warning("shown");
  std::string text = read_all(f);
  std::fclose(f);
  EXPECT_EQ(text.find("hidden"), std::string::npos);
  ASSERT_NE(text.find(" hubfs warning: shown\n"), std::string::npos) << text;
  // 2026-11-30T23:32:09.614Z: a date, a time with milliseconds, UTC.
  ASSERT_GE(text.size(), 24u);
  EXPECT_EQ(text[10], 'T');
  EXPECT_EQ(text[19], '.');
  EXPECT_EQ(text[23], 'Z');
  for (int i : {20, 21, 22}) EXPECT_TRUE(text[i] >= '0' && text[i] <= '9') << text;
}

TEST(Log, JsonFormatIsOneObjectPerLineWithEveryByteEscaped) {
  LogStateGuard guard;
  std::FILE* f = std::tmpfile();
  ASSERT_NE(f, nullptr);
  set_log_file(f);
  set_log_format(LogFormat::kJson);
  const std::string hostile = std::string("a \"quoted\" C:\\path\nsecond line\ttab \x01 caf\xc3\xa9");
  log_warning(hostile);
  log_info("plain");
  std::string text = read_all(f);
  std::fclose(f);
  const size_t newline = text.find('\n');
  ASSERT_NE(newline, std::string::npos);
  ASSERT_EQ(text.find('\n', newline + 1), text.size() - 1) << text;  // two lines, no more
  auto first = nlohmann::json::parse(text.substr(0, newline));
  auto second = nlohmann::json::parse(text.substr(newline + 1));
  EXPECT_EQ(first["message"], hostile);
  EXPECT_EQ(first["level"], "warning");
  EXPECT_EQ(first["program"], "hubfs");
  EXPECT_EQ(first["pid"], static_cast<int>(getpid()));
  EXPECT_EQ(first["time"].get<std::string>().size(), 24u);
  EXPECT_EQ(first.size(), 5u);
  EXPECT_EQ(second["message"], "plain");
  EXPECT_EQ(second["level"], "info");
}

}  // namespace
}  // namespace hubfs
