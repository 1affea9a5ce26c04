#include <gtest/gtest.h>

#include <map>

#include "hub/hub_client.h"
#include "hub_test_util.h"
#include "support/fake_transport.h"

namespace hubfs {
namespace HUBFS_UNITY_ID {

using testing::FakeTransport;
using testing::has_header;
using testing::respond;

const RepoRef kRepo{RepoType::kModel, "org/x", "main"};
const char kRootUrl[] = "https://hub.test/api/models/org/x/tree/main?recursive=false&limit=1000";

std::string file_json(const std::string& path, int size = 1) {
  return R"({"type":"file","oid":"o)" + path + R"(","size":)" + std::to_string(size) + R"(,"path":")" + path + "\"}";
}

// Serves pages by exact URL; anything else is a 599 the test would notice.
FakeTransport::Handler pages(std::map<std::string, HttpResponse> by_url) {
  return [by_url = std::move(by_url)](const HttpRequest& req) -> Result<HttpResponse> {
    auto it = by_url.find(req.url);
    if (it == by_url.end()) return respond(599, "unexpected URL " + req.url);
    return it->second;
  };
}

Headers next(const std::string& url) { return {{"link", "<" + url + ">; rel=\"next\""}}; }

TEST(ListDir, RootUrlAndAuthorization) {
  FakeTransport t(pages({{kRootUrl, respond(200, "[" + file_json("a") + "]")}}));
  HubClient c(testing::test_config(), t);
  auto r = c.list_dir(kRepo, "");
  ASSERT_TRUE(r.ok()) << r.status().message();
  ASSERT_EQ(r->size(), 1u);
  EXPECT_EQ((*r)[0].path, "a");
  EXPECT_EQ(testing::header_or_empty(t.requests()[0], "Authorization"), std::string("Bearer ") + testing::kToken);
}

TEST(ListDir, SubdirectoryAndRevisionAreEncoded) {
  const std::string url =
      "https://hub.test/api/datasets/org/x/tree/refs%2Fpr%2F1/my%20dir/caf%C3%A9?recursive=false&limit=1000";
  FakeTransport t(pages({{url, respond(200, "[" + file_json("my dir/caf\xc3\xa9/f#1") + "]")}}));
  HubClient c(testing::test_config(), t);
  auto r = c.list_dir(RepoRef{RepoType::kDataset, "org/x", "refs/pr/1"}, "/my dir/caf\xc3\xa9/");
  ASSERT_TRUE(r.ok()) << r.status().message();
  ASSERT_EQ(r->size(), 1u);
  EXPECT_EQ((*r)[0].path, "my dir/caf\xc3\xa9/f#1");
}

TEST(ListDir, FollowsThreePagesAndReturnsEverything) {
  const std::string p2 = "https://hub.test/api/models/org/x/tree/main?recursive=false&limit=1000&cursor=AAA";
  const std::string p3 = "https://hub.test/api/models/org/x/tree/main?recursive=false&limit=1000&cursor=BBB";
  FakeTransport t(pages({
      {kRootUrl, respond(200, "[" + file_json("a") + "," + file_json("b") + "]", next(p2))},
      {p2, respond(200, "[" + file_json("c") + "]",
                   {{"link", "<https://hub.test/first>; rel=\"first\", <" + p3 + ">; rel=\"next\""}})},
      {p3, respond(200, "[" + file_json("d") + "," + file_json("e") + "]")},
  }));
  HubClient c(testing::test_config(), t);
  auto r = c.list_dir(kRepo, "");
  ASSERT_TRUE(r.ok()) << r.status().message();
  std::vector<std::string> names;
  for (const auto& e : *r) names.push_back(e.path);
  EXPECT_EQ(names, (std::vector<std::string>{"a", "b", "c", "d", "e"}));
  auto reqs = t.requests();
  ASSERT_EQ(reqs.size(), 3u);
  for (const auto& req : reqs) EXPECT_TRUE(has_header(req, "Authorization")) << req.url;
}

TEST(ListDir, RelativeNextLinkIsResolvedAgainstThePage) {
  const std::string p2 = "https://hub.test/api/models/org/x/tree/main?cursor=2";
  FakeTransport t(pages({
      {kRootUrl, respond(200, "[" + file_json("a") + "]", next("/api/models/org/x/tree/main?cursor=2"))},
      {p2, respond(200, "[" + file_json("b") + "]")},
  }));
  HubClient c(testing::test_config(), t);
  auto r = c.list_dir(kRepo, "");
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_EQ(r->size(), 2u);
}

TEST(ListDir, NoTokenToANextPageOnAnotherHost) {
  const std::string foreign = "https://mirror.test/api/models/org/x/tree/main?cursor=2";
  const std::string other_port = "https://hub.test:8443/api/models/org/x/tree/main?cursor=3";
  FakeTransport t(pages({
      {kRootUrl, respond(200, "[" + file_json("a") + "]", next(foreign))},
      {foreign, respond(200, "[" + file_json("b") + "]", next(other_port))},
      {other_port, respond(200, "[" + file_json("c") + "]")},
  }));
  HubClient c(testing::test_config(), t);
  auto r = c.list_dir(kRepo, "");
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_EQ(r->size(), 3u);
  auto reqs = t.requests();
  ASSERT_EQ(reqs.size(), 3u);
  EXPECT_TRUE(has_header(reqs[0], "Authorization"));
  EXPECT_EQ(reqs[1].url, foreign);
  EXPECT_FALSE(has_header(reqs[1], "Authorization"));
  EXPECT_EQ(reqs[2].url, other_port);
  EXPECT_FALSE(has_header(reqs[2], "Authorization"));
}

TEST(ListDir, ANextPageOnAnotherHostThatWantsTheTokenSaysWhy) {
  const std::string foreign = "https://mirror.test/api/models/org/x/tree/main?cursor=2";
  FakeTransport t(pages({
      {kRootUrl, respond(200, "[" + file_json("a") + "]", next(foreign))},
      {foreign, respond(401, "{\"error\":\"Repository Not Found\"}", {{"x-error-code", "RepoNotFound"}})},
  }));
  HubClient c(testing::test_config(), t);
  auto r = c.list_dir(kRepo, "");
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("page 2 is on https://mirror.test, another host than https://hub.test"), std::string::npos)
      << r.status().message();
  EXPECT_NE(r.status().message().find("sends the token only to"), std::string::npos) << r.status().message();
  ASSERT_EQ(t.requests().size(), 2u);
  EXPECT_FALSE(has_header(t.requests()[1], "Authorization"));
}

TEST(ListDir, RepeatedNextUrlStopsWithAnError) {
  const std::string p2 = "https://hub.test/api/models/org/x/tree/main?cursor=2";
  FakeTransport t(pages({
      {kRootUrl, respond(200, "[" + file_json("a") + "]", next(p2))},
      {p2, respond(200, "[" + file_json("b") + "]", next(kRootUrl))},
  }));
  HubClient c(testing::test_config(), t);
  auto r = c.list_dir(kRepo, "");
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), Code::kCorrupt);
  EXPECT_NE(r.status().message().find("already read"), std::string::npos);
  EXPECT_EQ(t.request_count(), 2u);
}

TEST(ListDir, EndlessFreshCursorsStopAtThePageBound) {
  // Every page offers a new cursor: only the page bound can end this.
  FakeTransport t([](const HttpRequest& req) {
    return respond(200, "[]", next(req.url + "x"));
  });
  HubConfig cfg = testing::test_config();
  cfg.max_dir_pages = 7;
  HubClient c(cfg, t);
  auto r = c.list_dir(kRepo, "");
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), Code::kUnsupported);
  EXPECT_NE(r.status().message().find("7 pages"), std::string::npos);
  EXPECT_EQ(t.request_count(), 7u);
}

TEST(ListDir, TooManyEntriesIsRefused) {
  FakeTransport t([](const HttpRequest& req) {
    static const std::string body = "[" + file_json("a") + "," + file_json("b") + "," + file_json("c") + "]";
    return respond(200, body);
  });
  HubConfig cfg = testing::test_config();
  cfg.max_dir_entries = 2;
  HubClient c(cfg, t);
  auto r = c.list_dir(kRepo, "");
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), Code::kUnsupported);
  EXPECT_NE(r.status().message().find("more than 2 entries"), std::string::npos);
}

TEST(ListDir, OnlyDirectChildrenOnce) {
  const std::string url = "https://hub.test/api/models/org/x/tree/main/d?recursive=false&limit=1000";
  FakeTransport t(pages({{url, respond(200, "[" + file_json("d/ok") + "," + file_json("d/sub/deep") + "," +
                                                  file_json("other/f") + "," + file_json("d") + "," +
                                                  file_json("dd/x") + "," + file_json("d/ok") + "," +
                                                  file_json("d/..") + "," +
                                                  R"({"type":"directory","oid":"t","size":0,"path":"d/sub"})" + "]")}}));
  HubClient c(testing::test_config(), t);
  auto r = c.list_dir(kRepo, "d");
  ASSERT_TRUE(r.ok()) << r.status().message();
  ASSERT_EQ(r->size(), 2u);
  EXPECT_EQ((*r)[0].path, "d/ok");
  EXPECT_EQ((*r)[1].path, "d/sub");
  EXPECT_TRUE((*r)[1].is_dir);
}

TEST(ListDir, LfsSizeAndSha) {
  FakeTransport t(pages({{kRootUrl, respond(200, R"([{"type":"file","oid":"ptr","size":134,"path":"w.safetensors",
      "lfs":{"oid":"e3b0c442","size":9876543210,"pointerSize":134}}])")}}));
  HubClient c(testing::test_config(), t);
  auto r = c.list_dir(kRepo, "");
  ASSERT_TRUE(r.ok());
  ASSERT_EQ(r->size(), 1u);
  EXPECT_EQ((*r)[0].size, 9876543210u);
  EXPECT_EQ((*r)[0].lfs_sha256, "e3b0c442");
  EXPECT_EQ((*r)[0].content_id(), "sha256:e3b0c442");
}

TEST(ListDir, MissingDirectoryIsNotFound) {
  FakeTransport t([](const HttpRequest&) {
    return respond(404, "", {{"x-error-code", "EntryNotFound"}, {"x-error-message", "nope"}});
  });
  HubClient c(testing::test_config(), t);
  auto r = c.list_dir(kRepo, "ghost");
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), Code::kNotFound);
  EXPECT_NE(r.status().message().find("directory 'ghost' not found"), std::string::npos) << r.status().message();
}

TEST(ListDir, ErrorOnALaterPageIsReported) {
  const std::string p2 = "https://hub.test/api/models/org/x/tree/main?cursor=2";
  FakeTransport t(pages({
      {kRootUrl, respond(200, "[" + file_json("a") + "]", next(p2))},
      {p2, respond(502, "bad gateway")},
  }));
  HubClient c(testing::test_config(), t);
  auto r = c.list_dir(kRepo, "");
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), Code::kUnavailable);
}

TEST(ListDir, DotSegmentsAreRefusedWithoutARequest) {
  FakeTransport t([](const HttpRequest&) { return respond(200, "[]"); });
  HubClient c(testing::test_config(), t);
  for (const char* dir : {"..", "a/../b", "a//b", "./a"}) {
    auto r = c.list_dir(kRepo, dir);
    ASSERT_FALSE(r.ok()) << dir;
    EXPECT_EQ(r.status().code(), Code::kInvalidArgument) << dir;
  }
  EXPECT_EQ(t.request_count(), 0u);
}

TEST(PathsInfo, PostsFormBodyAndKeepsOnlyAskedPaths) {
  FakeTransport t([](const HttpRequest&) {
    return respond(200, "[" + file_json("a b.txt", 3) + "," + file_json("unasked") + "," +
                            R"({"type":"directory","oid":"t","size":0,"path":"dir/sub"})" + "]");
  });
  HubClient c(testing::test_config(), t);
  auto r = c.paths_info(RepoRef{RepoType::kDataset, "org/x", "refs/pr/1"}, {"a b.txt", "dir/sub", "missing"});
  ASSERT_TRUE(r.ok()) << r.status().message();
  ASSERT_EQ(r->size(), 2u);
  EXPECT_EQ((*r)[0].path, "a b.txt");
  EXPECT_EQ((*r)[0].size, 3u);
  EXPECT_TRUE((*r)[1].is_dir);
  auto reqs = t.requests();
  ASSERT_EQ(reqs.size(), 1u);
  EXPECT_EQ(reqs[0].method, "POST");
  EXPECT_EQ(reqs[0].url, "https://hub.test/api/datasets/org/x/paths-info/refs%2Fpr%2F1");
  EXPECT_EQ(reqs[0].body, "paths=a%20b.txt&paths=dir%2Fsub&paths=missing");
  EXPECT_EQ(testing::header_or_empty(reqs[0], "Content-Type"), "application/x-www-form-urlencoded");
  EXPECT_TRUE(has_header(reqs[0], "Authorization"));
}

TEST(PathsInfo, ManyPathsAreBatched) {
  FakeTransport t([](const HttpRequest&) { return respond(200, "[]"); });
  HubClient c(testing::test_config(), t);
  std::vector<std::string> paths;
  for (int i = 0; i < 250; ++i) paths.push_back("f" + std::to_string(i));
  auto r = c.paths_info(kRepo, paths);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(t.request_count(), 3u);
}

}  // namespace
}  // namespace hubfs

namespace hubfs {
namespace HUBFS_UNITY_ID {

TEST(PathsInfo, TemporaryRedirectRepeatsThePost) {
  testing::FakeTransport t([](const HttpRequest& req) {
    if (req.url.find("/old/") != std::string::npos) {
      return testing::respond(307, "", {{"location", "/api/models/new/x/paths-info/main"}});
    }
    return testing::respond(200, R"([{"type":"file","oid":"o","size":1,"path":"a"}])");
  });
  HubClient c(testing::test_config(), t);
  auto r = c.paths_info(RepoRef{RepoType::kModel, "old/x", "main"}, {"a"});
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_EQ(r->size(), 1u);
  auto reqs = t.requests();
  ASSERT_EQ(reqs.size(), 2u);
  EXPECT_EQ(reqs[1].method, "POST");
  EXPECT_EQ(reqs[1].body, "paths=a");
  EXPECT_EQ(testing::header_or_empty(reqs[1], "Content-Type"), "application/x-www-form-urlencoded");
  EXPECT_TRUE(testing::has_header(reqs[1], "Authorization"));
}

TEST(PathsInfo, FoundRedirectIsNotFollowedForAPost) {
  testing::FakeTransport t([](const HttpRequest&) {
    return testing::respond(302, "", {{"location", "/elsewhere"}});
  });
  HubClient c(testing::test_config(), t);
  auto r = c.paths_info(RepoRef{RepoType::kModel, "org/x", "main"}, {"a"});
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(t.request_count(), 1u);
}

TEST(ListDir, RedirectedFirstPageResolvesRelativeNextAgainstTheNewUrl) {
  testing::FakeTransport t([](const HttpRequest& req) {
    if (req.url.find("/old/") != std::string::npos) {
      return testing::respond(307, "", {{"location", "https://hub.test/api/models/new/x/tree/main?limit=1000"}});
    }
    if (req.url.find("cursor") == std::string::npos) {
      return testing::respond(200, R"([{"type":"file","oid":"o","size":1,"path":"a"}])",
                              {{"link", "<main?cursor=2>; rel=\"next\""}});
    }
    return testing::respond(200, R"([{"type":"file","oid":"o","size":1,"path":"b"}])");
  });
  HubClient c(testing::test_config(), t);
  auto r = c.list_dir(RepoRef{RepoType::kModel, "old/x", "main"}, "");
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_EQ(r->size(), 2u);
  auto reqs = t.requests();
  ASSERT_EQ(reqs.size(), 3u);
  EXPECT_EQ(reqs[2].url, "https://hub.test/api/models/new/x/tree/main?cursor=2");
}

}  // namespace
}  // namespace hubfs
