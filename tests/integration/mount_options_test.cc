// `hubfs mount`'s options come from one table (tools/mount_options.cc): the command line and
// `-o KEY=VALUE` (fstab, the mount helper form) take and refuse the same values with the same
// reason, and --help lists every option under both spellings. Runs the real binary; nothing is
// mounted (every case is refused before the mountpoint is looked at).
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "support/mount_harness.h"

using namespace hubfs::testing;

namespace HUBFS_UNITY_ID {

// The reason after "hubfs: <option as given>: ".
std::string reason(const std::string& output) {
  const size_t at = output.find(": ", output.find("hubfs: ") + 7);
  std::string r = at == std::string::npos ? output : output.substr(at + 2);
  while (!r.empty() && r.back() == '\n') r.pop_back();
  return r;
}

TEST(MountOptions, TheCommandLineAndDashOTakeAndRefuseTheSame) {
  const std::string hubfs = shell_quote(bin_path("hubfs"));
  struct Case {
    std::string flag, key, value;
  };
  const std::vector<Case> refused = {
      {"--max-requests", "max_requests", "0"},   {"--max-requests", "max_requests", "x"},
      {"--read-timeout", "read_timeout", "3601"}, {"--rate-limit-wait", "rate_limit_wait", "-1"},
      {"--repo-type", "repo_type", "bucket"},     {"--log-format", "log_format", "xml"},
      {"--follow", "follow", "4"},                {"--shared-cache", "shared_cache", "h:0"},
      {"--read-ahead", "read_ahead", "lots"},
  };
  for (const Case& c : refused) {
    const CommandResult cli =
        run_command(hubfs + " mount " + c.flag + "=" + c.value + " lab/x /nonexistent-mountpoint 2>&1");
    const CommandResult o =
        run_command(hubfs + " lab/x /nonexistent-mountpoint -o " + c.key + "=" + c.value + " 2>&1");
    EXPECT_EQ(cli.exit_code, 2) << cli.output;
    EXPECT_EQ(o.exit_code, 2) << o.output;
    EXPECT_NE(cli.output.find(c.flag + "=" + c.value + ": "), std::string::npos) << cli.output;
    EXPECT_NE(o.output.find("-o " + c.key + "=" + c.value + ": "), std::string::npos) << o.output;
    EXPECT_EQ(reason(cli.output), reason(o.output)) << c.flag;
  }
  // Accepted both ways: the mount goes on to the mountpoint, which does not exist (exit 1).
  for (const Case& c : std::vector<Case>{{"--max-requests", "max_requests", "8"}, {"--follow", "follow", "5"},
                                         {"--log-format", "log_format", "json"}, {"--read-ahead", "read_ahead", "4M"}}) {
    const CommandResult cli =
        run_command(hubfs + " mount " + c.flag + "=" + c.value + " lab/x /nonexistent-mountpoint 2>&1");
    const CommandResult o =
        run_command(hubfs + " lab/x /nonexistent-mountpoint -o " + c.key + "=" + c.value + " 2>&1");
    EXPECT_NE(cli.output.find("/nonexistent-mountpoint does not exist"), std::string::npos) << cli.output;
    EXPECT_NE(o.output.find("/nonexistent-mountpoint does not exist"), std::string::npos) << o.output;
  }
  // A flag takes no value through -o; a value option needs one.
  EXPECT_NE(run_command(hubfs + " lab/x /nonexistent-mountpoint -o offline=1 2>&1").output.find("takes no value"),
            std::string::npos);
  EXPECT_NE(run_command(hubfs + " lab/x /nonexistent-mountpoint -o cache_dir 2>&1").output.find("needs a value"),
            std::string::npos);
}

TEST(MountOptions, HelpNamesEveryOptionAndItsDashOKey) {
  const std::string hubfs = shell_quote(bin_path("hubfs"));
  const std::string mount_help = run_command(hubfs + " mount --help 2>&1").output;
  const std::string help = run_command(hubfs + " --help 2>&1").output;
  for (const char* key : {"endpoint", "cache_dir", "cache_size", "revision", "repo_type", "subfolder",
                          "max_requests", "read_ahead", "read_timeout", "rate_limit_wait", "log_file", "log_format", "metrics",
                          "ca_bundle", "shared_cache", "shared_cache_key_file", "shared_cache_private",
                          "foreground", "debug", "offline", "hub"}) {
    std::string flag = std::string("--") + key;
    for (char& ch : flag)
      if (ch == '_') ch = '-';
    EXPECT_NE(mount_help.find(flag), std::string::npos) << flag;
    EXPECT_NE(help.find(std::string(key) + (std::string(key) == "shared_cache" ? " with" : "")), std::string::npos)
        << key;
  }
  EXPECT_NE(help.find("follow[=SECONDS]"), std::string::npos);
  // As users type it, not CLI11's "--follow{60}" default syntax.
  EXPECT_NE(mount_help.find("--follow [=SECONDS]"), std::string::npos) << mount_help;
  EXPECT_EQ(mount_help.find('{'), std::string::npos) << mount_help;
}

}  // namespace HUBFS_UNITY_ID
