#include <gtest/gtest.h>

#include "hub/hub_client.h"
#include "hub_test_util.h"
#include "support/fake_transport.h"

namespace hubfs {
namespace HUBFS_UNITY_ID {

using testing::FakeTransport;
using testing::header_or_empty;
using testing::kToken;
using testing::respond;

RepoRef repo(RepoType t = RepoType::kModel, std::string rev = "main") { return RepoRef{t, "org/x", rev}; }

TEST(RepoInfo, RequestsTheRevisionWithTokenAndParses) {
  FakeTransport t([](const HttpRequest&) {
    return respond(200, R"({"sha":"0123abcd","lastModified":"2023-11-14T22:13:20.000Z","private":true})");
  });
  HubClient c(testing::test_config(), t);
  auto r = c.repo_info(repo(RepoType::kDataset, "refs/pr/1"));
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_EQ(r->sha, "0123abcd");
  EXPECT_EQ(r->last_modified, 1700000000);
  EXPECT_TRUE(r->is_private);
  auto reqs = t.requests();
  ASSERT_EQ(reqs.size(), 1u);
  EXPECT_EQ(reqs[0].method, "GET");
  EXPECT_EQ(reqs[0].url, "https://hub.test/api/datasets/org/x/revision/refs%2Fpr%2F1");
  EXPECT_EQ(header_or_empty(reqs[0], "Authorization"), std::string("Bearer ") + kToken);
  EXPECT_EQ(header_or_empty(reqs[0], "User-Agent"), "hubfs/0.1.0");
}

// However a RepoRef was built (--hub's NAME@%2e%2e, a caller's bug), no request carries '.' or
// '..' as its revision: URL normalisation would turn /tree/.. into the repo's default branch.
TEST(RepoInfo, EveryCallRefusesDotRevisionsWithoutARequest) {
  FakeTransport t([](const HttpRequest&) { return respond(200, R"({"sha":"s"})"); });
  HubClient c(testing::test_config(), t);
  for (const char* rev : {".", "..", "a/../b", "", "x\ny"}) {
    const RepoRef r = repo(RepoType::kDataset, rev);
    EXPECT_EQ(c.repo_info(r).status().code(), Code::kInvalidArgument) << rev;
    EXPECT_EQ(c.list_dir(r, "").status().code(), Code::kInvalidArgument) << rev;
    EXPECT_EQ(c.paths_info(r, {"a"}).status().code(), Code::kInvalidArgument) << rev;
    EXPECT_EQ(c.locate(r, "a.bin", false).status().code(), Code::kInvalidArgument) << rev;
  }
  EXPECT_EQ(t.requests().size(), 0u);
}

TEST(RepoInfo, ACommitThatIsNoRevisionIsCorrupt) {
  for (const char* sha : {"..", ".", "a/../b"}) {
    FakeTransport t([&](const HttpRequest&) { return respond(200, std::string(R"({"sha":")") + sha + R"("})"); });
    HubClient c(testing::test_config(), t);
    EXPECT_EQ(c.repo_info(repo()).status().code(), Code::kCorrupt) << sha;
  }
}

TEST(RepoInfo, NoTokenNoAuthorization) {
  FakeTransport t([](const HttpRequest&) { return respond(200, R"({"sha":"s"})"); });
  HubClient c(testing::test_config(/*with_token=*/false), t);
  ASSERT_TRUE(c.repo_info(repo()).ok());
  EXPECT_FALSE(testing::has_header(t.requests()[0], "Authorization"));
}

TEST(RepoInfo, EmptyTokenCountsAsNone) {
  FakeTransport t([](const HttpRequest&) { return respond(200, R"({"sha":"s"})"); });
  HubConfig cfg = testing::test_config(false);
  cfg.token = "";
  HubClient c(cfg, t);
  ASSERT_TRUE(c.repo_info(repo()).ok());
  EXPECT_FALSE(testing::has_header(t.requests()[0], "Authorization"));
}

TEST(RepoInfo, TrailingSlashOfEndpointIsDropped) {
  FakeTransport t([](const HttpRequest&) { return respond(200, R"({"sha":"s"})"); });
  HubConfig cfg = testing::test_config();
  cfg.endpoint = "https://hub.test//";
  HubClient c(cfg, t);
  ASSERT_TRUE(c.repo_info(repo(RepoType::kSpace)).ok());
  EXPECT_EQ(t.requests()[0].url, "https://hub.test/api/spaces/org/x/revision/main");
  EXPECT_TRUE(testing::has_header(t.requests()[0], "Authorization"));
}

// One row of the error table: the answer, and what the Status must say.
struct ErrorCase {
  const char* name;
  long status;
  const char* error_code;  // X-Error-Code, "" for none
  bool with_token;
  Code code;
  std::vector<const char*> must_contain;
};

class RepoInfoErrors : public ::testing::TestWithParam<ErrorCase> {};

TEST_P(RepoInfoErrors, MapToCauseAndFix) {
  const ErrorCase& e = GetParam();
  FakeTransport t([&](const HttpRequest&) {
    Headers h;
    if (*e.error_code) h.emplace_back("x-error-code", e.error_code);
    return respond(e.status, "", h);
  });
  HubClient c(testing::test_config(e.with_token), t);
  auto r = c.repo_info(repo(RepoType::kModel, "v9"));
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), e.code) << r.status().message();
  for (const char* s : e.must_contain) {
    EXPECT_NE(r.status().message().find(s), std::string::npos) << "missing '" << s << "' in: " << r.status().message();
  }
  EXPECT_EQ(r.status().message().find(kToken), std::string::npos);
}

INSTANTIATE_TEST_SUITE_P(
    Table, RepoInfoErrors,
    ::testing::Values(
        ErrorCase{"RepoNotFound401NoToken", 401, "RepoNotFound", false, Code::kNotFound,
                  {"repository 'org/x' (model) not found at https://hub.test", "no valid token was sent",
                   "set HF_TOKEN", "~/.cache/huggingface/token"}},
        ErrorCase{"RepoNotFound404WithToken", 404, "RepoNotFound", true, Code::kNotFound,
                  {"not found at https://hub.test", "the token sent cannot read it", "--repo-type"}},
        ErrorCase{"Plain401", 401, "", false, Code::kPermissionDenied, {"not found", "set HF_TOKEN"}},
        ErrorCase{"Plain404", 404, "", false, Code::kNotFound, {"'org/x'", "set HF_TOKEN"}},
        ErrorCase{"Gated", 403, "GatedRepo", false, Code::kPermissionDenied,
                  {"is gated", "accept its conditions at https://hub.test/org/x", "use a token", "HF_TOKEN"}},
        ErrorCase{"GatedWithToken", 403, "GatedRepo", true, Code::kPermissionDenied,
                  {"is gated", "account that accepted them"}},
        ErrorCase{"RevisionNotFound", 404, "RevisionNotFound", true, Code::kNotFound,
                  {"revision 'v9' not found in repository 'org/x'", "--revision"}},
        ErrorCase{"Disabled", 403, "DisabledRepo", true, Code::kPermissionDenied, {"disabled"}},
        ErrorCase{"Plain403", 403, "", true, Code::kPermissionDenied, {"refused", "token"}},
        ErrorCase{"RateLimited", 429, "", false, Code::kUnavailable, {"rate-limiting", "retry"}},
        ErrorCase{"ServerError", 503, "", false, Code::kUnavailable, {"HTTP 503", "retry later"}},
        ErrorCase{"BadRequest", 400, "", false, Code::kInvalidArgument, {"HTTP 400", "check the repo id"}},
        ErrorCase{"Odd", 304, "", false, Code::kUnavailable, {"HTTP 304", "--endpoint"}}),
    [](const auto& info) { return std::string(info.param.name); });

TEST(RepoInfo, GatedDatasetPointsAtTheDatasetPage) {
  FakeTransport t([](const HttpRequest&) { return respond(403, "", {{"x-error-code", "GatedRepo"}}); });
  HubClient c(testing::test_config(), t);
  auto r = c.repo_info(repo(RepoType::kDataset));
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("https://hub.test/datasets/org/x"), std::string::npos) << r.status().message();
}

TEST(RepoInfo, ServerMessageIsQuotedWithoutTheToken) {
  FakeTransport t([](const HttpRequest&) {
    return respond(401, "", {{"x-error-code", "RepoNotFound"},
                             {"x-error-message", std::string("Invalid credentials in Authorization header: ") + kToken}});
  });
  HubClient c(testing::test_config(), t);
  auto r = c.repo_info(repo());
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("Invalid credentials"), std::string::npos) << r.status().message();
  EXPECT_EQ(r.status().message().find(kToken), std::string::npos) << r.status().message();
  EXPECT_EQ(r.status().code(), Code::kPermissionDenied) << "a refused token is not a missing repo";
}

TEST(RepoInfo, JsonErrorBodyIsQuoted) {
  FakeTransport t([](const HttpRequest&) { return respond(404, R"({"error":"Repository Not Found for url"})"); });
  HubClient c(testing::test_config(), t);
  auto r = c.repo_info(repo());
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("Repository Not Found for url"), std::string::npos);
}

TEST(RepoInfo, LongServerMessageIsCut) {
  FakeTransport t([](const HttpRequest&) { return respond(500, "", {{"x-error-message", std::string(5000, 'z')}}); });
  HubClient c(testing::test_config(), t);
  auto r = c.repo_info(repo());
  ASSERT_FALSE(r.ok());
  EXPECT_LT(r.status().message().size(), 1000u);
}

TEST(RepoInfo, TransportFailureSaysCannotReachAndHowToFix) {
  FakeTransport t([](const HttpRequest&) -> Result<HttpResponse> { return Unavailable("connection refused"); });
  HubClient c(testing::test_config(), t);
  auto r = c.repo_info(repo());
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), Code::kUnavailable);
  EXPECT_NE(r.status().message().find("cannot reach https://hub.test: connection refused"), std::string::npos);
  EXPECT_NE(r.status().message().find("HF_ENDPOINT"), std::string::npos);
}

TEST(RepoInfo, TransportTimeoutKeepsItsCode) {
  FakeTransport t([](const HttpRequest&) -> Result<HttpResponse> { return Timeout("no first byte in 30 s"); });
  HubClient c(testing::test_config(), t);
  auto r = c.repo_info(repo());
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), Code::kTimeout);
  EXPECT_NE(r.status().message().find("timed out talking to https://hub.test"), std::string::npos);
}

TEST(RepoInfo, NonJsonAnswerIsCorrupt) {
  FakeTransport t([](const HttpRequest&) { return respond(200, "<html>captive portal</html>"); });
  HubClient c(testing::test_config(), t);
  auto r = c.repo_info(repo());
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), Code::kCorrupt);
}

}  // namespace
}  // namespace hubfs

namespace hubfs {
namespace HUBFS_UNITY_ID {

using testing::FakeTransport;
using testing::has_header;
using testing::respond;

TEST(RepoInfo, RenamedRepoRedirectIsFollowedWithTheToken) {
  FakeTransport t([](const HttpRequest& req) {
    if (req.url == "https://hub.test/api/models/old/x/revision/main") {
      return respond(307, "", {{"location", "/api/models/new/x/revision/main"}});
    }
    return respond(200, R"({"sha":"s2"})");
  });
  HubClient c(testing::test_config(), t);
  auto r = c.repo_info(RepoRef{RepoType::kModel, "old/x", "main"});
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_EQ(r->sha, "s2");
  auto reqs = t.requests();
  ASSERT_EQ(reqs.size(), 2u);
  EXPECT_EQ(reqs[1].url, "https://hub.test/api/models/new/x/revision/main");
  EXPECT_TRUE(has_header(reqs[1], "Authorization"));
}

TEST(RepoInfo, RedirectToAnotherHostDropsTheToken) {
  FakeTransport t([](const HttpRequest& req) {
    if (req.url.rfind("https://hub.test/", 0) == 0) {
      return respond(302, "", {{"location", "https://elsewhere.test/api/models/org/x/revision/main"}});
    }
    return respond(200, R"({"sha":"s"})");
  });
  HubClient c(testing::test_config(), t);
  ASSERT_TRUE(c.repo_info(RepoRef{RepoType::kModel, "org/x", "main"}).ok());
  auto reqs = t.requests();
  ASSERT_EQ(reqs.size(), 2u);
  EXPECT_TRUE(has_header(reqs[0], "Authorization"));
  EXPECT_FALSE(has_header(reqs[1], "Authorization"));
}

TEST(RepoInfo, RedirectLoopEnds) {
  FakeTransport t([](const HttpRequest&) { return respond(302, "", {{"location", "/api/models/org/x/revision/main"}}); });
  HubClient c(testing::test_config(), t);
  auto r = c.repo_info(RepoRef{RepoType::kModel, "org/x", "main"});
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), Code::kUnavailable);
  EXPECT_NE(r.status().message().find("redirecting in a loop"), std::string::npos);
  EXPECT_EQ(t.request_count(), 6u);
}

}  // namespace
}  // namespace hubfs
