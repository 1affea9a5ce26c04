// A mount against a Hub, a cache directory and a user that misbehave on purpose: listings whose
// sizes no file can have (from the Hub, and edited into a stored listing), credentials in the
// endpoint that `ps` must not show, SIGINT inherited as ignored, `hubfs unmount` of a stopped
// daemon. Each bound is on a hang, never a measured time.
#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "support/hubfs_daemon.h"
#include "support/local_hub.h"
#include "support/mount_harness.h"
#include "support/temp_dir.h"

namespace fs = std::filesystem;
using namespace hubfs::testing;
using namespace std::chrono_literals;

namespace HUBFS_UNITY_ID {

// A daemon told to stop must be gone within this, however loaded the machine (ASan included).
constexpr auto kExitBound = 30s;
// Commands that must not hang.
constexpr auto kCommandBound = 60s;

// Sizes a hostile listing may claim, as JSON text.
const char* const kHostileSizes[] = {"9223372036854775807", "18446744073709551616", "-1", "\"12\"", "1.5"};

std::string hubfs_bin() { return shell_quote(bin_path("hubfs")); }

std::string slurp(const std::string& path) { return read_all(path); }

class HostileTest : public ::testing::Test {
 protected:
  void SetUp() override {
    // datasets/lab/plain: a.txt and sub/w.bin (LFS), one commit. datasets/lab/bad: hub.json
    // (rewritten by tests) over snapshots/c1 with ok.txt and sub/huge.bin.
    write_file((root_ / "datasets/lab/plain/a.txt").string(), "plain a\n");
    write_file((root_ / "datasets/lab/plain/sub/w.bin").string(), random_bytes(3 << 20, 7));
    write_file((root_ / "datasets/lab/bad/snapshots/c1/ok.txt").string(), "ok\n");
    write_file((root_ / "datasets/lab/bad/snapshots/c1/sub/huge.bin").string(), random_bytes(100000, 8));
    set_listed_size("");
    hub_ = LocalHub::start(LocalHubOptions{.root = root_.str()});
    mnt_ = (work_.path() / "mnt").string();
    fs::create_directories(mnt_);
    cache_ = (work_.path() / "cache").string();
  }
  void TearDown() override { hub_.reset(); }

  // lab/bad's sub/huge.bin is listed with `size` (JSON text), or its real size for "".
  void set_listed_size(const std::string& size) {
    std::string sizes = size.empty() ? "{}" : R"({"sub/huge.bin": )" + size + "}";
    write_file((root_ / "datasets/lab/bad/hub.json").string(),
               R"({"refs": {"main": "c1"}, "commits": {"c1": {"date": "2024-01-01T00:00:00Z"}}, "listed_sizes": )" +
                   sizes + "}");
  }

  TempDir root_, work_;
  std::unique_ptr<LocalHub> hub_;
  std::string mnt_, cache_;
};

// Under --hub one hostile repo used to abort the daemon (std::bad_alloc) and so every repo.
// Now its directory fails with EIO, every other repo and directory keeps working, and once the
// Hub lists a sane size the directory lists (a failed listing is not remembered).
TEST_F(HostileTest, AHostileSizeFromTheHubIsEioForThatDirectoryAndNothingElse) {
  auto m = HubfsMount::start(hub_->url(), "", cache_, {"--hub"});
  for (const char* size : kHostileSizes) {
    set_listed_size(size);
    struct stat st {};
    errno = 0;
    EXPECT_NE(stat((*m / "datasets/lab/bad/sub/huge.bin").c_str(), &st), 0) << size;
    EXPECT_EQ(errno, EIO) << size << ": " << strerror(errno);
    EXPECT_EQ(read_all(*m / "datasets/lab/bad/ok.txt"), "ok\n") << size;
    EXPECT_EQ(read_all(*m / "datasets/lab/plain/a.txt"), "plain a\n") << size;
  }
  set_listed_size("");
  struct stat st {};
  ASSERT_EQ(stat((*m / "datasets/lab/bad/sub/huge.bin").c_str(), &st), 0) << strerror(errno);
  EXPECT_EQ(st.st_size, 100000);
  EXPECT_EQ(read_all(*m / "datasets/lab/bad/sub/huge.bin"), random_bytes(100000, 8));
}

// A stored listing edited to claim a hostile size is damaged: the remount lists the directory
// again from the Hub (real size, exact bytes) and stores it again, whole.
TEST_F(HostileTest, AHostileSizeInAStoredListingIsListedAgain) {
  const std::string w = random_bytes(3 << 20, 7);
  {
    auto m = HubfsMount::start(hub_->url(), "datasets/lab/plain", cache_);
    ASSERT_EQ(read_all(*m / "sub/w.bin"), w);
  }
  std::string doc;
  for (auto& e : fs::recursive_directory_iterator(fs::path(cache_) / "listings"))
    if (e.is_regular_file() && slurp(e.path().string()).find("\"sub/w.bin\"") != std::string::npos) doc = e.path();
  ASSERT_FALSE(doc.empty()) << "sub/'s stored listing";
  const std::string whole = slurp(doc);
  for (const char* size : kHostileSizes) {
    auto j = nlohmann::json::parse(whole);
    for (auto& entry : j["entries"]) {
      if (entry["path"] != "sub/w.bin") continue;
      entry["size"] = nlohmann::json::parse(size);
      entry["lfs"]["size"] = nlohmann::json::parse(size);
    }
    write_file(doc, j.dump());
    hub_->reset_stats();
    {
      auto m = HubfsMount::start(hub_->url(), "datasets/lab/plain", cache_);
      struct stat st {};
      ASSERT_EQ(stat((*m / "sub/w.bin").c_str(), &st), 0) << size << ": " << strerror(errno);
      EXPECT_EQ(static_cast<size_t>(st.st_size), w.size()) << size;
      EXPECT_EQ(read_all(*m / "sub/w.bin"), w) << size;
    }
    EXPECT_NE(hub_->stats()["by_path"].dump().find("/tree/"), std::string::npos)
        << "listed again from the Hub: " << hub_->stats()["by_path"].dump();
    auto stored = nlohmann::json::parse(slurp(doc), nullptr, false);
    ASSERT_TRUE(stored.is_object()) << size;
    bool found = false;
    for (auto& entry : stored["entries"]) {
      if (entry["path"] != "sub/w.bin") continue;
      found = true;
      EXPECT_EQ(entry["size"], w.size()) << "stored again with the Hub's size, after " << size;
    }
    EXPECT_TRUE(found) << size;
  }
}

// `ps` shows every user the daemon's arguments for its whole life: the endpoint's password must
// not be there (every message already strips it).
TEST_F(HostileTest, TheEndpointsPasswordIsNotInTheDaemonsArguments) {
  const std::string secret = "Pa55w0rdInArgv";
  const std::string endpoint = "http://alice:" + secret + "@" + hub_->url().substr(std::string("http://").size());
  auto d = HubfsDaemon::start(endpoint, "datasets/lab/plain", cache_, mnt_);
  EXPECT_EQ(read_all(mnt_ + "/a.txt"), "plain a\n");
  std::string cmdline = slurp("/proc/" + std::to_string(d->pid()) + "/cmdline");
  ASSERT_FALSE(cmdline.empty());
  for (char& c : cmdline)
    if (c == '\0') c = ' ';
  EXPECT_EQ(cmdline.find(secret), std::string::npos) << cmdline;
  EXPECT_EQ(cmdline.find("alice"), std::string::npos) << cmdline;
  EXPECT_NE(cmdline.find(hub_->url()), std::string::npos) << "the endpoint itself stays: " << cmdline;
  d->signal(SIGTERM);
  EXPECT_TRUE(d->wait_exit(kExitBound).has_value());
}

// A script's background job starts with SIGINT ignored; libfuse keeps an inherited SIG_IGN, so
// the daemon ignored SIGINT for good. It must unmount and exit on it like on SIGTERM.
TEST_F(HostileTest, SigintStopsADaemonStartedWithSigintIgnored) {
  struct sigaction ignore {}, before {};
  ignore.sa_handler = SIG_IGN;
  ASSERT_EQ(sigaction(SIGINT, &ignore, &before), 0);
  std::unique_ptr<HubfsDaemon> d;
  try {
    d = HubfsDaemon::start(hub_->url(), "datasets/lab/plain", cache_, mnt_);
  } catch (...) {
    sigaction(SIGINT, &before, nullptr);
    throw;
  }
  sigaction(SIGINT, &before, nullptr);
  EXPECT_EQ(read_all(mnt_ + "/a.txt"), "plain a\n");
  d->signal(SIGINT);
  auto status = d->wait_exit(kExitBound);
  ASSERT_TRUE(status.has_value()) << "SIGINT was ignored; log:\n" << d->stderr_text();
  EXPECT_TRUE(WIFEXITED(*status) && WEXITSTATUS(*status) == 0) << describe_wait_status(*status);
  EXPECT_FALSE(is_mounted(mnt_));
}

// A stopped daemon never answers: `hubfs unmount` gives up, saying what to do, instead of
// blocking forever; once the daemon runs again the unmount works.
TEST_F(HostileTest, UnmountOfAStoppedDaemonGivesUpSayingSo) {
  auto d = HubfsDaemon::start(hub_->url(), "datasets/lab/plain", cache_, mnt_);
  d->signal(SIGSTOP);
  auto stopped = run_command_timeout(hubfs_bin() + " unmount " + shell_quote(mnt_), kCommandBound);
  d->signal(SIGCONT);
  EXPECT_FALSE(stopped.timed_out) << "hubfs unmount blocked on the stopped daemon";
  EXPECT_EQ(stopped.exit_code, 1) << stopped.output;
  EXPECT_NE(stopped.output.find("does not answer"), std::string::npos) << stopped.output;
  EXPECT_NE(stopped.output.find("kill -CONT"), std::string::npos) << stopped.output;
  EXPECT_TRUE(is_mounted(mnt_)) << "given up, nothing was done";

  auto again = run_command_timeout(hubfs_bin() + " unmount " + shell_quote(mnt_), kCommandBound);
  EXPECT_EQ(again.exit_code, 0) << again.output;
  auto status = d->wait_exit(kExitBound);
  ASSERT_TRUE(status.has_value());
  EXPECT_TRUE(WIFEXITED(*status) && WEXITSTATUS(*status) == 0) << describe_wait_status(*status);
}

}  // namespace
