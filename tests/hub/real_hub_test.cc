// The Hub client against behaviours of the real Hub: recursive subtree listings with a page
// budget, request counts per quota bucket, a token that changes while in use (TokenWatcher,
// HF_HUB_DISABLE_IMPLICIT_TOKEN), the invalid-token 401 and the quota 429 messages.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <atomic>
#include <fstream>
#include <map>

#include "hub/environment.h"
#include "support/manual_env.h"
#include "hub/hub_client.h"
#include "hub_test_util.h"
#include "support/fake_transport.h"
#include "support/temp_dir.h"

namespace hubfs {
namespace HUBFS_UNITY_ID {

using ::testing::HasSubstr;
using ::testing::Not;
using testing::FakeTransport;
using testing::respond;

const RepoRef kRepo{RepoType::kDataset, "org/x", "abc"};
const char kSubtreeUrl[] = "https://hub.test/api/datasets/org/x/tree/abc/data?recursive=true&limit=1000";

std::string entry(const std::string& path, bool dir = false) {
  return std::string(R"({"type":")") + (dir ? "directory" : "file") + R"(","oid":"o","size":1,"path":")" + path +
         "\"}";
}

FakeTransport::Handler pages(std::map<std::string, HttpResponse> by_url) {
  return [by_url = std::move(by_url)](const HttpRequest& req) -> Result<HttpResponse> {
    auto it = by_url.find(req.url);
    if (it == by_url.end()) return respond(599, "unexpected URL " + req.url);
    return it->second;
  };
}

Headers next(const std::string& url) { return {{"link", "<" + url + ">; rel=\"next\""}}; }

TEST(ListSubtree, EveryDescendantOverPagesOnlyInside) {
  const std::string page2 = "https://hub.test/api/datasets/org/x/tree/abc/data?recursive=true&limit=1000&cursor=2";
  FakeTransport t(pages({
      {kSubtreeUrl, respond(200, "[" + entry("data/a", true) + "," + entry("data/a/f1") + "," +
                                     entry("elsewhere/f") + "," + entry("data/../etc") + "]",
                            next(page2))},
      {page2, respond(200, "[" + entry("data/a/b", true) + "," + entry("data/a/b/f2") + "," + entry("data/a/f1") +
                               "," + entry("data/g") + "]")},
  }));
  HubClient c(testing::test_config(), t);
  auto r = c.list_subtree(kRepo, "data", 3);
  ASSERT_TRUE(r.ok()) << r.status().message();
  ASSERT_TRUE(*r);
  std::vector<std::string> paths;
  for (const auto& e : **r) paths.push_back(e.path);
  // Outside paths, ".." and the repeated entry are dropped.
  EXPECT_THAT(paths, ::testing::ElementsAre("data/a", "data/a/f1", "data/a/b", "data/a/b/f2", "data/g"));
  EXPECT_EQ(c.request_counts().api, 2u);
}

TEST(ListSubtree, TooManyPagesIsNotAnError) {
  const std::string page2 = "https://hub.test/api/datasets/org/x/tree/abc/data?recursive=true&limit=1000&cursor=2";
  const std::string page3 = "https://hub.test/api/datasets/org/x/tree/abc/data?recursive=true&limit=1000&cursor=3";
  FakeTransport t(pages({
      {kSubtreeUrl, respond(200, "[" + entry("data/f1") + "]", next(page2))},
      {page2, respond(200, "[" + entry("data/f2") + "]", next(page3))},
  }));
  HubClient c(testing::test_config(), t);
  auto r = c.list_subtree(kRepo, "data", 2);
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_FALSE(*r);  // bigger than the budget: the caller lists directory by directory
  EXPECT_EQ(t.request_count(), 2u);  // the budget, not one page more
}

TEST(RequestCounts, ApiCallsAndResolvesApart) {
  FakeTransport t([](const HttpRequest& req) -> Result<HttpResponse> {
    if (req.method == "HEAD") return respond(200, "", {{"etag", "\"x\""}});
    return respond(200, R"({"sha":"abc"})");
  });
  HubClient c(testing::test_config(), t);
  ASSERT_TRUE(c.repo_info(kRepo).ok());
  ASSERT_TRUE(c.locate(kRepo, "a.txt").ok());
  ASSERT_TRUE(c.locate(kRepo, "a.txt").ok());  // remembered: no second resolve
  EXPECT_EQ(c.request_counts().api, 1u);
  EXPECT_EQ(c.request_counts().resolves, 1u);
}

TEST(InvalidToken, ReportedAsSuchWithTheFix) {
  FakeTransport t([](const HttpRequest&) -> Result<HttpResponse> {
    return respond(401, R"({"error":"Invalid credentials in Authorization header"})",
                   {{"x-error-message", "Invalid credentials in Authorization header"}});
  });
  HubClient c(testing::test_config(), t);
  auto r = c.repo_info(kRepo);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), Code::kPermissionDenied);
  EXPECT_THAT(r.status().message(), HasSubstr("token sent to https://hub.test is invalid"));
  EXPECT_THAT(r.status().message(), HasSubstr("huggingface-cli login"));
  EXPECT_THAT(r.status().message(), HasSubstr("unset HF_TOKEN"));
  EXPECT_THAT(r.status().message(), Not(HasSubstr("not found")));
  EXPECT_THAT(r.status().message(), Not(HasSubstr(testing::kToken)));
}

TEST(QuotaMessage, NamesTheQuotaItsResetAndTheFix) {
  FakeTransport t([](const HttpRequest&) -> Result<HttpResponse> {
    return respond(429, "", {{"ratelimit", "\"resolvers\";r=0;t=47"},
                             {"ratelimit-policy", "\"fixed window\";\"resolvers\";q=3000;w=300"}});
  });
  HubClient c(testing::test_config(/*with_token=*/false), t);
  auto r = c.locate(kRepo, "a.bin");
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), Code::kUnavailable);
  EXPECT_THAT(r.status().message(), HasSubstr("'resolvers' quota (3000 requests per 300 s)"));
  EXPECT_THAT(r.status().message(), HasSubstr("resets in 47 s"));
  EXPECT_THAT(r.status().message(), HasSubstr("log in"));
  EXPECT_THAT(r.status().message(), HasSubstr("--rate-limit-wait"));
}

TEST(TokenSource, AskedForEveryRequest) {
  std::atomic<int> generation{1};
  FakeTransport t([](const HttpRequest&) -> Result<HttpResponse> { return respond(200, R"({"sha":"abc"})"); });
  HubConfig cfg = testing::test_config(/*with_token=*/false);
  cfg.token_source = [&]() -> std::optional<std::string> { return "hf_gen" + std::to_string(generation.load()); };
  HubClient c(cfg, t);
  ASSERT_TRUE(c.repo_info(kRepo).ok());
  generation = 2;
  ASSERT_TRUE(c.repo_info(kRepo).ok());
  auto reqs = t.requests();
  EXPECT_EQ(testing::header_or_empty(reqs[0], "Authorization"), "Bearer hf_gen1");
  EXPECT_EQ(testing::header_or_empty(reqs[1], "Authorization"), "Bearer hf_gen2");
}

struct Env {
  std::map<std::string, std::string> vars;
  TokenSources sources() {
    TokenSources sources;
    sources.getenv = [this](const char* name) -> const char* {
      auto it = vars.find(name);
      return it == vars.end() ? nullptr : it->second.c_str();
    };
    return sources;
  }
};

void write(const std::string& path, const std::string& text) { std::ofstream(path, std::ios::trunc) << text; }

TEST(TokenWatcher, RereadsTheFileWhenItChanges) {
  testing::TempDir dir;
  const std::string path = (dir.path() / "token").string();
  write(path, "hf_first\n");
  Env env;
  env.vars["HF_TOKEN_PATH"] = path;
  testing::ManualEnv time;
  TokenWatcher w(time, env.sources(), std::chrono::seconds(5));
  EXPECT_EQ(w.current(), "hf_first");
  write(path, "hf_second_longer\n");
  EXPECT_EQ(w.current(), "hf_first");  // not looked at again before the recheck interval
  time.advance(std::chrono::seconds(5));
  EXPECT_EQ(w.current(), "hf_second_longer");
  EXPECT_EQ(w.source(), "the token file " + path);
  std::remove(path.c_str());  // logged out
  time.advance(std::chrono::seconds(5));
  EXPECT_EQ(w.current(), std::nullopt);
  write(path, "hf_third\n");
  time.advance(std::chrono::seconds(5));
  EXPECT_EQ(w.current(), "hf_third");
}

TEST(TokenWatcher, EnvironmentWinsAndImplicitTokensCanBeDisabled) {
  testing::TempDir dir;
  const std::string path = (dir.path() / "token").string();
  write(path, "hf_file\n");
  Env env;
  env.vars["HF_TOKEN_PATH"] = path;
  env.vars["HF_TOKEN"] = "hf_env";
  testing::ManualEnv time;
  TokenWatcher w(time, env.sources());
  EXPECT_EQ(w.current(), "hf_env");
  EXPECT_EQ(w.source(), "HF_TOKEN");
  env.vars["HF_HUB_DISABLE_IMPLICIT_TOKEN"] = "1";
  EXPECT_EQ(TokenWatcher(time, env.sources()).current(), std::nullopt);
  EXPECT_EQ(find_token(env.sources()), std::nullopt);
  EXPECT_TRUE(implicit_token_disabled(env.sources()));
  env.vars["HF_HUB_DISABLE_IMPLICIT_TOKEN"] = "0";
  EXPECT_EQ(find_token(env.sources()), "hf_env");
}

}  // namespace
}  // namespace hubfs
