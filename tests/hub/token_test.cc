#include <gtest/gtest.h>

#include <fstream>
#include <map>

#include "hub/hub_client.h"
#include "support/temp_dir.h"

namespace hubfs {
namespace HUBFS_UNITY_ID {

// An environment and a file system the test writes, and a record of which files were read.
struct FakeWorld {
  std::map<std::string, std::string> env;
  std::map<std::string, std::string> files;
  std::vector<std::string> reads;

  TokenSources sources() {
    TokenSources s;
    s.getenv = [this](const char* name) -> const char* {
      auto it = env.find(name);
      return it == env.end() ? nullptr : it->second.c_str();
    };
    s.read_file = [this](const std::string& path) -> std::optional<std::string> {
      reads.push_back(path);
      auto it = files.find(path);
      if (it == files.end()) return std::nullopt;
      return it->second;
    };
    return s;
  }
};

TEST(FindToken, HfTokenWinsOverEverything) {
  FakeWorld w;
  w.env = {{"HF_TOKEN", "hf_a"}, {"HUGGING_FACE_HUB_TOKEN", "hf_b"}, {"HOME", "/home/u"}};
  w.files["/home/u/.cache/huggingface/token"] = "hf_file";
  EXPECT_EQ(find_token(w.sources()), "hf_a");
  EXPECT_TRUE(w.reads.empty());
}

TEST(FindToken, LegacyVariableWinsOverFile) {
  FakeWorld w;
  w.env = {{"HUGGING_FACE_HUB_TOKEN", "hf_b"}, {"HOME", "/home/u"}};
  w.files["/home/u/.cache/huggingface/token"] = "hf_file";
  EXPECT_EQ(find_token(w.sources()), "hf_b");
}

TEST(FindToken, EmptyVariableMeansNotSet) {
  FakeWorld w;
  w.env = {{"HF_TOKEN", ""}, {"HUGGING_FACE_HUB_TOKEN", "  \n"}, {"HOME", "/home/u"}};
  w.files["/home/u/.cache/huggingface/token"] = "hf_file";
  EXPECT_EQ(find_token(w.sources()), "hf_file");
}

TEST(FindToken, TokenPathWinsOverHfHome) {
  FakeWorld w;
  w.env = {{"HF_TOKEN_PATH", "/etc/hf/tok"}, {"HF_HOME", "/hfhome"}, {"HOME", "/home/u"}};
  w.files["/etc/hf/tok"] = "hf_path";
  w.files["/hfhome/token"] = "hf_home";
  EXPECT_EQ(find_token(w.sources()), "hf_path");
}

TEST(FindToken, HfHomeWinsOverXdgAndHome) {
  FakeWorld w;
  w.env = {{"HF_HOME", "/hfhome"}, {"XDG_CACHE_HOME", "/xdg"}, {"HOME", "/home/u"}};
  w.files["/hfhome/token"] = "hf_home";
  w.files["/xdg/huggingface/token"] = "hf_xdg";
  EXPECT_EQ(find_token(w.sources()), "hf_home");
}

TEST(FindToken, XdgCacheWinsOverHome) {
  FakeWorld w;
  w.env = {{"XDG_CACHE_HOME", "/xdg"}, {"HOME", "/home/u"}};
  w.files["/xdg/huggingface/token"] = "hf_xdg";
  w.files["/home/u/.cache/huggingface/token"] = "hf_file";
  EXPECT_EQ(find_token(w.sources()), "hf_xdg");
}

TEST(FindToken, HomeDefault) {
  FakeWorld w;
  w.env = {{"HOME", "/home/u"}};
  w.files["/home/u/.cache/huggingface/token"] = "hf_file";
  EXPECT_EQ(find_token(w.sources()), "hf_file");
}

TEST(FindToken, OnlyTheChosenFileIsRead) {
  // HF_HOME set but its token file missing: huggingface_hub does not fall back further.
  FakeWorld w;
  w.env = {{"HF_HOME", "/hfhome"}, {"HOME", "/home/u"}};
  w.files["/home/u/.cache/huggingface/token"] = "hf_file";
  EXPECT_EQ(find_token(w.sources()), std::nullopt);
  EXPECT_EQ(w.reads, std::vector<std::string>{"/hfhome/token"});
}

TEST(FindToken, WhitespaceIsStripped) {
  FakeWorld w;
  w.env = {{"HF_TOKEN", " \thf_spaced \n"}};
  EXPECT_EQ(find_token(w.sources()), "hf_spaced");
  FakeWorld f;
  f.env = {{"HOME", "/h"}};
  f.files["/h/.cache/huggingface/token"] = "hf_file\r\n";
  EXPECT_EQ(find_token(f.sources()), "hf_file");
}

TEST(FindToken, EmptyOrBlankFileMeansNone) {
  FakeWorld w;
  w.env = {{"HOME", "/h"}};
  w.files["/h/.cache/huggingface/token"] = "";
  EXPECT_EQ(find_token(w.sources()), std::nullopt);
  w.files["/h/.cache/huggingface/token"] = " \n\t";
  EXPECT_EQ(find_token(w.sources()), std::nullopt);
}

TEST(FindToken, NothingConfiguredMeansNone) {
  FakeWorld w;
  EXPECT_EQ(find_token(w.sources()), std::nullopt);
}

TEST(FindToken, TokenThatWouldBreakAHeaderIsIgnored) {
  FakeWorld w;
  w.env = {{"HF_TOKEN", "hf_a\r\nX-Injected: 1"}};
  EXPECT_EQ(find_token(w.sources()), std::nullopt);
}

TEST(FindToken, ReadsARealFileByDefault) {
  testing::TempDir dir;
  std::ofstream(dir / "tok") << "hf_real\n";
  std::string path = (dir / "tok").string();
  TokenSources s;
  s.getenv = [&](const char* name) -> const char* {
    return std::string_view(name) == "HF_TOKEN_PATH" ? path.c_str() : nullptr;
  };
  EXPECT_EQ(find_token(s), "hf_real");
}

TEST(FindToken, MissingRealFileMeansNone) {
  testing::TempDir dir;
  std::string path = (dir / "absent").string();
  TokenSources s;
  s.getenv = [&](const char* name) -> const char* {
    return std::string_view(name) == "HF_TOKEN_PATH" ? path.c_str() : nullptr;
  };
  EXPECT_EQ(find_token(s), std::nullopt);
}

}  // namespace
}  // namespace hubfs

namespace hubfs {
namespace HUBFS_UNITY_ID {

TokenSources env_only(std::map<std::string, std::string> env) {
  TokenSources s;
  s.getenv = [env = std::move(env)](const char* name) -> const char* {
    auto it = env.find(name);
    return it == env.end() ? nullptr : it->second.c_str();
  };
  return s;
}

TEST(FindEndpoint, DefaultAndOverride) {
  EXPECT_EQ(find_endpoint(env_only({})), "https://huggingface.co");
  EXPECT_EQ(find_endpoint(env_only({{"HF_ENDPOINT", ""}})), "https://huggingface.co");
  EXPECT_EQ(find_endpoint(env_only({{"HF_ENDPOINT", "http://127.0.0.1:8080//"}})), "http://127.0.0.1:8080");
}

TEST(OfflineRequested, TrueSpellings) {
  for (const char* v : {"1", "true", "TRUE", "yes", "On"}) {
    EXPECT_TRUE(offline_requested(env_only({{"HF_HUB_OFFLINE", v}}))) << v;
  }
  for (const char* v : {"0", "", "false", "no", "2"}) {
    EXPECT_FALSE(offline_requested(env_only({{"HF_HUB_OFFLINE", v}}))) << v;
  }
  EXPECT_FALSE(offline_requested(env_only({})));
}

TEST(EnvTimeouts, UnsetOrEmptyKeepsTheDefaults) {
  auto t = env_timeouts(env_only({{"HF_HUB_ETAG_TIMEOUT", ""}}));
  ASSERT_TRUE(t.ok()) << t.status().message();
  EXPECT_FALSE(t->etag);
  EXPECT_FALSE(t->download);
}

TEST(EnvTimeouts, WholeSecondsAreRead) {
  auto t = env_timeouts(env_only({{"HF_HUB_ETAG_TIMEOUT", "25"}, {"HF_HUB_DOWNLOAD_TIMEOUT", " 60 "}}));
  ASSERT_TRUE(t.ok()) << t.status().message();
  EXPECT_EQ(t->etag, std::chrono::seconds(25));
  EXPECT_EQ(t->download, std::chrono::seconds(60));
  auto only_download = env_timeouts(env_only({{"HF_HUB_DOWNLOAD_TIMEOUT", "86400"}}));
  ASSERT_TRUE(only_download.ok());
  EXPECT_FALSE(only_download->etag);
  EXPECT_EQ(only_download->download, std::chrono::seconds(86400));
}

TEST(EnvTimeouts, BadValueIsAnErrorNamingTheVariable) {
  for (const char* name : {"HF_HUB_ETAG_TIMEOUT", "HF_HUB_DOWNLOAD_TIMEOUT"}) {
    for (const char* bad : {"0", "-5", "10s", "1.5", "ten", "86401", "99999999999999999999", " "}) {
      auto t = env_timeouts(env_only({{name, bad}}));
      ASSERT_FALSE(t.ok()) << name << "=" << bad;
      EXPECT_EQ(t.status().code(), Code::kInvalidArgument);
      EXPECT_NE(t.status().message().find(name), std::string::npos) << t.status().message();
      EXPECT_NE(t.status().message().find("seconds"), std::string::npos) << t.status().message();
    }
  }
}

}  // namespace
}  // namespace hubfs

namespace hubfs {
namespace HUBFS_UNITY_ID {

TEST(WithoutUrlCredentials, RemovesUserAndPasswordFromEveryUrlInAnArgument) {
  EXPECT_EQ(without_url_credentials("http://alice:Pa55w0rd@127.0.0.1:8080"), "http://127.0.0.1:8080");
  EXPECT_EQ(without_url_credentials("--endpoint=https://alice:Pa55w0rd@hub.test/api?x=1"), "--endpoint=https://hub.test/api?x=1");
  EXPECT_EQ(without_url_credentials("endpoint=http://u:p@h,cache_dir=/c,shared_cache=memcached://m:1"),
            "endpoint=http://h,cache_dir=/c,shared_cache=memcached://m:1");
  EXPECT_EQ(without_url_credentials("http://alice:p@ss@host/x"), "http://host/x") << "a raw '@' in the password";
  EXPECT_EQ(without_url_credentials("http://token@h http://v:w@k"), "http://h http://k");
  EXPECT_EQ(without_url_credentials("http://h/path@not-userinfo"), "http://h/path@not-userinfo");
  for (const char* plain : {"", "datasets/org/name", "http://host", "://", "a://@", "/mnt/x@y", "org/name@v1"}) {
    const std::string cleaned = without_url_credentials(plain);
    EXPECT_LE(cleaned.size(), std::string(plain).size()) << plain;
    if (std::string(plain).find("@") == std::string::npos || std::string(plain).find("://") == std::string::npos) {
      EXPECT_EQ(cleaned, plain);
    }
  }
  EXPECT_EQ(without_url_credentials("a://@"), "a://");
}

}  // namespace
}  // namespace hubfs
