// hubfs as a system tool: `hubfs cache` over a cache live mounts use, `mount -t fuse.hubfs` and
// fstab lines (through the real mount(8) and mount.fuse3), and https with a private CA.
#include <stdlib.h>
#include <sys/stat.h>

#include <filesystem>
#include <fstream>
#include <random>
#include <thread>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "cache/block_file.h"
#include "support/local_hub.h"
#include "support/mount_harness.h"
#include "support/temp_dir.h"

namespace fs = std::filesystem;
using namespace hubfs::testing;

namespace HUBFS_UNITY_ID {

std::string hubfs_cmd() { return shell_quote(bin_path("hubfs")); }

// Two dataset repos sharing one file's content (same bytes, so the same sha256 and blocks).
struct Repos {
  TempDir root;
  std::string shared = random_bytes(2'500'000, 11);  // LFS, 3 blocks
  std::string own = random_bytes(1'200'000, 12);     // LFS, 2 blocks
  std::string small = "small file, served inline by the API\n";
  Repos() {
    write_file((root.path() / "datasets/lab/ops/data.bin").string(), shared);
    write_file((root.path() / "datasets/lab/ops/small.txt").string(), small);
    write_file((root.path() / "datasets/lab/twin/copy/data.bin").string(), shared);
    write_file((root.path() / "datasets/lab/twin/own.bin").string(), own);
  }
};

nlohmann::json cache_info(const std::string& cache_dir) {
  auto r = run_command(hubfs_cmd() + " cache info --json --cache-dir " + shell_quote(cache_dir));
  EXPECT_EQ(r.exit_code, 0) << r.output;
  return nlohmann::json::parse(r.output, nullptr, false);
}

const nlohmann::json* find_repo(const nlohmann::json& info, const std::string& repo) {
  for (const auto& r : info["repos"])
    if (r["repo"] == repo) return &r;
  return nullptr;
}

// Unsets variables for a test's length (the ambient environment must not decide what a test
// sees: this machine's may name CA bundles or proxies), restoring them afterwards.
class ScopedEnv {
 public:
  explicit ScopedEnv(std::initializer_list<const char*> names) {
    for (const char* n : names) {
      if (const char* old = getenv(n)) saved_.emplace_back(n, old);
      names_.push_back(n);
      unsetenv(n);
    }
  }
  ~ScopedEnv() {
    for (const std::string& n : names_) unsetenv(n.c_str());
    for (const auto& [k, v] : saved_) setenv(k.c_str(), v.c_str(), 1);
  }

 private:
  std::vector<std::string> names_;
  std::vector<std::pair<std::string, std::string>> saved_;
};

// tests/support/forward_proxy.py: an http forward proxy with CONNECT, logging each request.
class ForwardProxy {
 public:
  ForwardProxy() {
    const std::string port_file = dir_.str() + "/port";
    log_ = dir_.str() + "/log";
    const std::string cmd = "/usr/bin/python3 " + shell_quote(std::string(HUBFS_SOURCE_DIR) +
                                                              "/tests/support/forward_proxy.py") +
                            " --log " + shell_quote(log_) + " --port-file " + shell_quote(port_file);
    stdin_ = popen(cmd.c_str(), "w");  // it exits when we close its stdin
    // Readiness, not a timed assertion: the port file appears (by rename) once it listens.
    for (int i = 0; i < 500 && !fs::exists(port_file); ++i)
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    url_ = "http://127.0.0.1:" + read_all(port_file);
    while (!url_.empty() && url_.back() == '\n') url_.pop_back();
  }
  ~ForwardProxy() {
    if (stdin_) pclose(stdin_);
  }
  const std::string& url() const { return url_; }
  std::string log() const { return read_all(log_); }

 private:
  TempDir dir_;
  std::string log_, url_;
  FILE* stdin_ = nullptr;
};

TEST(SystemTool, CacheCommandsWorkOnTheCacheLiveMountsUse) {
  Repos repos;
  auto hub = LocalHub::start({.root = repos.root.str()});
  TempDir cache_root;
  const std::string cache = (cache_root.path() / "cache").string();
  auto ops = HubfsMount::start(hub->url(), "datasets/lab/ops", cache);
  auto twin = HubfsMount::start(hub->url(), "datasets/lab/twin", cache, {"--cache-size", "3G"});
  ASSERT_EQ(read_all(*ops / "data.bin"), repos.shared);
  ASSERT_EQ(read_all(*ops / "small.txt"), repos.small);
  ASSERT_EQ(read_all(*twin / "copy/data.bin"), repos.shared);
  ASSERT_EQ(read_all(*twin / "own.bin"), repos.own);

  // 3 + 1 + 2 blocks; the shared file's blocks are stored once and counted for both repos.
  const uint64_t header = hubfs::block_file::kHeaderSize;
  const uint64_t shared_bytes = repos.shared.size() + 3 * header;
  const uint64_t own_bytes = repos.own.size() + 2 * header;
  const uint64_t small_bytes = repos.small.size() + header;
  nlohmann::json info = cache_info(cache);
  ASSERT_FALSE(info.is_discarded());
  EXPECT_EQ(info["blocks"], 6);
  EXPECT_EQ(info["total_bytes"], shared_bytes + own_bytes + small_bytes);
  EXPECT_EQ(info["budget_bytes"], 3ull << 30);  // the last mount's (the first one's was 10G)
  const nlohmann::json* ops_usage = find_repo(info, "datasets/lab/ops");
  const nlohmann::json* twin_usage = find_repo(info, "datasets/lab/twin");
  ASSERT_TRUE(ops_usage && twin_usage) << info.dump();
  EXPECT_EQ((*ops_usage)["bytes"], shared_bytes + small_bytes);
  EXPECT_EQ((*twin_usage)["bytes"], shared_bytes + own_bytes);
  EXPECT_EQ(info["unindexed_blocks"], 0);
  auto text = run_command(hubfs_cmd() + " cache info --cache-dir " + shell_quote(cache));
  EXPECT_EQ(text.exit_code, 0);
  EXPECT_NE(text.output.find("datasets/lab/twin"), std::string::npos) << text.output;
  EXPECT_NE(text.output.find("own.bin"), std::string::npos) << text.output;

  // clear one repo: its own file goes, the content the other repo also uses stays.
  auto cleared = run_command(hubfs_cmd() + " cache clear datasets/lab/twin --cache-dir " + shell_quote(cache));
  EXPECT_EQ(cleared.exit_code, 0) << cleared.output;
  EXPECT_NE(cleared.output.find("kept 3 blocks"), std::string::npos) << cleared.output;
  info = cache_info(cache);
  EXPECT_EQ(info["blocks"], 4);
  EXPECT_EQ(find_repo(info, "datasets/lab/twin"), nullptr);

  // verify: a flipped byte in one block is found and deleted, and the exit code says so.
  fs::path victim;
  for (const auto& e : fs::recursive_directory_iterator(fs::path(cache) / "blocks"))
    if (e.is_regular_file() && e.path().filename().string().ends_with(".1")) victim = e.path();
  ASSERT_FALSE(victim.empty());
  {
    std::fstream f(victim, std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(static_cast<std::streamoff>(header + 100));
    f.put('\x5a' ^ repos.shared[(1u << 20) + 100]);
  }
  auto bad = run_command(hubfs_cmd() + " cache verify --cache-dir " + shell_quote(cache));
  EXPECT_EQ(bad.exit_code, 1) << bad.output;
  EXPECT_NE(bad.output.find("checked 4 blocks: 1 bad"), std::string::npos) << bad.output;
  EXPECT_FALSE(fs::exists(victim));
  // Nothing bad is left; the file that lost a block is now only partly cached: unverified (3).
  auto good = run_command(hubfs_cmd() + " cache verify --cache-dir " + shell_quote(cache));
  EXPECT_EQ(good.exit_code, 3) << good.output;
  EXPECT_NE(good.output.find("bad 0 files and 0 blocks"), std::string::npos) << good.output;

  // prune to nothing while both mounts run; they re-fetch what they read next.
  auto pruned = run_command(hubfs_cmd() + " cache prune --max-size 0 --cache-dir " + shell_quote(cache));
  EXPECT_EQ(pruned.exit_code, 0) << pruned.output;
  EXPECT_EQ(cache_info(cache)["total_bytes"], 0);
  drop_page_cache();
  EXPECT_EQ(read_all(*twin / "own.bin"), repos.own);
  EXPECT_EQ(read_all(*ops / "data.bin"), repos.shared);
}

// mount(8) runs helpers without the caller's PATH, and mount.fuse3 runs `hubfs` through
// /bin/sh, which then searches its default path (/usr/local/bin, /usr/bin, ...). The test
// makes hubfs found there in a private mount namespace (a bind mount over /usr/local/bin that
// nothing outside sees), then mounts through mount(8) exactly as a user or systemd would.
TEST(SystemTool, MountTypeFuseHubfsAndFstabLine) {
  Repos repos;
  auto hub = LocalHub::start({.root = repos.root.str()});
  TempDir work;
  fs::create_directories(work / "bin");
  fs::create_symlink(bin_path("hubfs"), work / "bin" / "hubfs");
  fs::create_directories(work / "mnt");
  fs::create_directories(work / "mnt2");
  write_file((work / "expected.bin").string(), repos.shared);
  write_file((work / "expected.txt").string(), repos.small);
  const std::string mnt = (work / "mnt").string(), mnt2 = (work / "mnt2").string();
  const std::string cache = (work / "cache").string();
  // What systemd and mount(8) consume (x-systemd.*, _netdev, nofail, noauto) must not reach FUSE.
  write_file((work / "fstab").string(),
             "datasets/lab/ops " + mnt2 + " fuse.hubfs noauto,nofail,_netdev,x-systemd.automount,endpoint=" +
                 hub->url() + ",cache_dir=" + cache + ",revision=main,allow_other 0 0\n");
  const std::string script =
      "set -e\n"
      // Whatever fails, nothing stays mounted; the script's own exit status is kept.
      "trap 'rc=$?; umount -l " + mnt + " 2>/dev/null || :; umount -l " + mnt2 + " 2>/dev/null || :; exit $rc' EXIT\n"
      "mount --bind " + shell_quote((work / "bin").string()) + " /usr/local/bin\n"
      "mount -t fuse.hubfs -o endpoint=" + hub->url() + ",cache_dir=" + cache +
      ",revision=main,_netdev,x-systemd.requires=network-online.target datasets/lab/ops " + mnt + "\n"
      "echo type=$(findmnt -n -o FSTYPE " + mnt + ")\n"
      "cmp " + mnt + "/data.bin " + shell_quote((work / "expected.bin").string()) + " && echo data=same\n"
      "umount " + mnt + "\n"
      "mount -T " + shell_quote((work / "fstab").string()) + " " + mnt2 + "\n"
      "echo options=$(findmnt -n -o OPTIONS " + mnt2 + ")\n"
      "cmp " + mnt2 + "/small.txt " + shell_quote((work / "expected.txt").string()) + " && echo small=same\n"
      "umount " + mnt2 + "\n"
      "echo done\n";
  write_file((work / "script.sh").string(), script);
  auto r = run_command("unshare -m --propagation private /bin/sh " + shell_quote((work / "script.sh").string()));
  EXPECT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("type=fuse.hubfs"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("data=same"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("allow_other"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("small=same"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("done"), std::string::npos) << r.output;
  // The blocks landed in the cache_dir the options named.
  EXPECT_TRUE(fs::exists(fs::path(cache) / "blocks"));
}

// A Hub served over https with a certificate from a CA made here.
class TlsTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    repos_ = new Repos();
    certs_ = new TempDir();
    const std::string d = certs_->str() + "/";
    auto r = run_command(  // in a subshell, so all of openssl's chatter is captured
        "(cd " + shell_quote(d) +
        " && openssl req -x509 -newkey rsa:2048 -nodes -keyout ca.key -out ca.pem -days 2 -subj '/CN=hubfs test CA'"
        " && openssl req -newkey rsa:2048 -nodes -keyout srv.key -out srv.csr -subj /CN=127.0.0.1"
        " && printf 'subjectAltName=IP:127.0.0.1\\n' > ext.cnf"
        " && openssl x509 -req -in srv.csr -CA ca.pem -CAkey ca.key -CAcreateserial -out srv.pem -days 2"
        " -extfile ext.cnf)");
    ASSERT_EQ(r.exit_code, 0) << r.output;
    hub_ = LocalHub::start({.root = repos_->root.str(), .tls_cert = d + "srv.pem", .tls_key = d + "srv.key"})
               .release();
    ASSERT_EQ(hub_->url().rfind("https://", 0), 0u) << hub_->url();
  }
  static void TearDownTestSuite() {
    delete hub_;
    delete certs_;
    delete repos_;
  }
  static std::string ca() { return certs_->str() + "/ca.pem"; }
  // The server's counters, read over https without verification (the control calls of
  // LocalHub speak plain http).
  static nlohmann::json stats() {
    auto r = run_command("curl -sk " + shell_quote(hub_->url() + "/_hubfs/stats"));
    return nlohmann::json::parse(r.output, nullptr, false);
  }
  void expect_reads_exact_bytes(const std::vector<std::string>& args) {
    TempDir cache;
    auto m = HubfsMount::start(hub_->url(), "datasets/lab/twin", cache.str(), args);
    EXPECT_EQ(read_all(*m / "own.bin"), repos_->own);  // through the https CDN origin
    EXPECT_EQ(read_all(*m / "copy/data.bin"), repos_->shared);
  }

  static Repos* repos_;
  static TempDir* certs_;
  static LocalHub* hub_;
  // The tests choose what is trusted and whether a proxy is used.
  ScopedEnv env_{"REQUESTS_CA_BUNDLE", "CURL_CA_BUNDLE", "SSL_CERT_FILE", "http_proxy", "https_proxy",
                 "HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "all_proxy", "NO_PROXY", "no_proxy"};
};
Repos* TlsTest::repos_ = nullptr;
TempDir* TlsTest::certs_ = nullptr;
LocalHub* TlsTest::hub_ = nullptr;

TEST_F(TlsTest, UntrustedCertificateFailsAtOnceSayingHowToTrustIt) {
  const long long refusals_before = stats()["tls_refused_by_client"].get<long long>();
  TempDir work;
  auto r = run_command(hubfs_cmd() + " mount --endpoint " + shell_quote(hub_->url()) + " --cache-dir " +
                       shell_quote(work.str() + "/cache") + " datasets/lab/twin " + shell_quote(work.str()));
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.output.find("the certificate of 127.0.0.1"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("is not trusted"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("REQUESTS_CA_BUNDLE or --ca-bundle"), std::string::npos) << r.output;
  EXPECT_EQ(r.output.find("attempts"), std::string::npos) << r.output;  // no "gave up after N attempts"
  // Exactly one refusal: a certificate failure is never retried. (Refusals, not handshake
  // failures: on a loaded machine an attempt may first time out mid-handshake, and a timeout is
  // retried; seen under TSan at load 16.)
  EXPECT_EQ(stats()["tls_refused_by_client"].get<long long>() - refusals_before, 1);
}

TEST_F(TlsTest, TrustedThroughRequestsCaBundle) {
  setenv("REQUESTS_CA_BUNDLE", ca().c_str(), 1);
  expect_reads_exact_bytes({});
}

// The reported failure: an image sets REQUESTS_CA_BUNDLE and CURL_CA_BUNDLE to the system
// bundle, the user points SSL_CERT_FILE at the CA that signed the endpoint. All three are trusted.
TEST_F(TlsTest, TrustedThroughSslCertFileBesideSystemBundlesInOtherVariables) {
  setenv("REQUESTS_CA_BUNDLE", "/etc/ssl/certs/ca-certificates.crt", 1);
  setenv("CURL_CA_BUNDLE", "/etc/ssl/certs/ca-certificates.crt", 1);
  setenv("SSL_CERT_FILE", ca().c_str(), 1);
  expect_reads_exact_bytes({});
}

TEST_F(TlsTest, TrustedThroughSslCertFileAlone) {
  setenv("SSL_CERT_FILE", ca().c_str(), 1);
  expect_reads_exact_bytes({});
}

TEST_F(TlsTest, TrustedThroughCaBundleOptionWhichWinsOverTheEnvironment) {
  // The environment names a bundle without the test CA; --ca-bundle overrides it.
  setenv("REQUESTS_CA_BUNDLE", "/etc/ssl/certs/ca-certificates.crt", 1);
  expect_reads_exact_bytes({"--ca-bundle", ca()});
}

TEST_F(TlsTest, UnreadableBundleIsNamedWithItsSource) {
  setenv("REQUESTS_CA_BUNDLE", "/nonexistent/ca.pem", 1);
  TempDir work;
  auto r = run_command(hubfs_cmd() + " mount --endpoint " + shell_quote(hub_->url()) + " --cache-dir " +
                       shell_quote(work.str() + "/cache") + " datasets/lab/twin " + shell_quote(work.str()));
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.output.find("/nonexistent/ca.pem (from REQUESTS_CA_BUNDLE) cannot be read"), std::string::npos)
      << r.output;
}

TEST_F(TlsTest, HttpsProxyFromTheEnvironmentTunnelsWithConnect) {
  ForwardProxy proxy;
  setenv("https_proxy", proxy.url().c_str(), 1);
  setenv("REQUESTS_CA_BUNDLE", ca().c_str(), 1);
  expect_reads_exact_bytes({});
  const std::string api_port = hub_->url().substr(hub_->url().rfind(':') + 1);
  EXPECT_NE(proxy.log().find("CONNECT 127.0.0.1:" + api_port), std::string::npos) << proxy.log();
}

// libcurl reads the proxy variables itself (http_proxy in lowercase only, as curl does).
TEST(SystemTool, HttpProxyFromTheEnvironmentAndNoProxy) {
  ScopedEnv env({"http_proxy", "https_proxy", "HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "all_proxy",
                 "NO_PROXY", "no_proxy"});
  Repos repos;
  auto hub = LocalHub::start({.root = repos.root.str()});
  ForwardProxy proxy;
  setenv("http_proxy", proxy.url().c_str(), 1);
  {
    TempDir cache;
    auto m = HubfsMount::start(hub->url(), "datasets/lab/ops", cache.str());
    EXPECT_EQ(read_all(*m / "data.bin"), repos.shared);
    EXPECT_EQ(read_all(*m / "small.txt"), repos.small);
  }
  const std::string through = proxy.log();
  EXPECT_NE(through.find("GET " + hub->url() + "/api/datasets/lab/ops"), std::string::npos) << through;
  EXPECT_NE(through.find("GET " + hub->cdn_url() + "/blobs/"), std::string::npos) << through;  // the CDN too

  setenv("NO_PROXY", "127.0.0.1", 1);
  {
    TempDir cache;
    auto m = HubfsMount::start(hub->url(), "datasets/lab/twin", cache.str());
    EXPECT_EQ(read_all(*m / "own.bin"), repos.own);
  }
  EXPECT_EQ(proxy.log(), through);  // nothing more went through the proxy
}

}  // namespace
