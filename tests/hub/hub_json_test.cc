#include "hub/hub_json.h"

#include <gtest/gtest.h>

namespace hubfs {
namespace HUBFS_UNITY_ID {

using hub_json::parse_iso8601;

TEST(Iso8601, HubFormats) {
  EXPECT_EQ(parse_iso8601("1970-01-01T00:00:00Z"), 0);
  EXPECT_EQ(parse_iso8601("2023-11-14T22:13:20.000Z"), 1700000000);
  EXPECT_EQ(parse_iso8601("2023-11-14T22:13:20Z"), 1700000000);
  EXPECT_EQ(parse_iso8601("2023-11-14T22:13:20.123456Z"), 1700000000);
  EXPECT_EQ(parse_iso8601("2023-11-15T00:13:20+02:00"), 1700000000);
  EXPECT_EQ(parse_iso8601("2023-11-14T17:13:20-0500"), 1700000000);
  EXPECT_EQ(parse_iso8601("2024-02-29T00:00:00Z"), 1709164800);
}

TEST(Iso8601, RejectsMalformed) {
  for (const char* s : {"", "2023-11-14", "2023-13-01T00:00:00Z", "2023-11-14T25:00:00Z", "2023/11/14T00:00:00Z",
                        "2023-11-14T00:00:00Zjunk", "2023-11-14T00:00:00.Z", "2023-11-14T00:00:00+2"}) {
    EXPECT_EQ(parse_iso8601(s), std::nullopt) << s;
  }
}

TEST(RepoInfoJson, FullBody) {
  auto r = hub_json::parse_repo_info(
      R"({"id":"org/x","sha":"abc123","lastModified":"2023-11-14T22:13:20.000Z","private":true,
          "gated":"manual","cardData":{"license":"mit"},"siblings":[{"rfilename":"a"}]})",
      "https://hub.test");
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_EQ(r->sha, "abc123");
  EXPECT_EQ(r->last_modified, 1700000000);
  EXPECT_TRUE(r->is_private);
  EXPECT_TRUE(r->gated);
}

TEST(RepoInfoJson, MinimalBody) {
  auto r = hub_json::parse_repo_info(R"({"sha":"abc"})", "https://hub.test");
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->sha, "abc");
  EXPECT_EQ(r->last_modified, 0);
  EXPECT_FALSE(r->is_private);
  EXPECT_FALSE(r->gated);
}

TEST(RepoInfoJson, GatedFalseAndAuto) {
  EXPECT_FALSE(hub_json::parse_repo_info(R"({"sha":"a","gated":false})", "h")->gated);
  EXPECT_TRUE(hub_json::parse_repo_info(R"({"sha":"a","gated":"auto"})", "h")->gated);
}

TEST(RepoInfoJson, MissingShaOrNotJsonIsCorrupt) {
  for (const char* body : {R"({"id":"org/x"})", R"({"sha":""})", R"({"sha":5})", "<html>", "[]", ""}) {
    auto r = hub_json::parse_repo_info(body, "https://hub.test");
    ASSERT_FALSE(r.ok()) << body;
    EXPECT_EQ(r.status().code(), Code::kCorrupt) << body;
    EXPECT_NE(r.status().message().find("https://hub.test"), std::string::npos);
    EXPECT_NE(r.status().message().find("--endpoint"), std::string::npos);
  }
}

TEST(TreeJson, FilesDirsAndLfs) {
  auto r = hub_json::parse_tree_entries(
      R"([{"type":"file","oid":"b10b","size":12,"path":"small.txt"},
          {"type":"file","oid":"p0137","size":134,"path":"big.bin",
           "lfs":{"oid":"5ha256","size":5000000000,"pointerSize":134},"xetHash":"x"},
          {"type":"directory","oid":"7ree","size":0,"path":"sub"},
          {"type":"symlink","oid":"s","size":1,"path":"odd"},
          {"type":"file","oid":"n"},
          17])",
      "https://hub.test");
  ASSERT_TRUE(r.ok()) << r.status().message();
  ASSERT_EQ(r->size(), 3u);
  EXPECT_EQ((*r)[0].path, "small.txt");
  EXPECT_EQ((*r)[0].size, 12u);
  EXPECT_FALSE((*r)[0].lfs_sha256);
  EXPECT_EQ((*r)[0].content_id(), "oid:b10b");
  EXPECT_EQ((*r)[1].size, 5000000000u);
  EXPECT_EQ((*r)[1].oid, "p0137");
  EXPECT_EQ((*r)[1].lfs_sha256, "5ha256");
  EXPECT_EQ((*r)[1].content_id(), "sha256:5ha256");
  EXPECT_TRUE((*r)[2].is_dir);
  EXPECT_EQ((*r)[2].oid, "7ree");
}

// Every size a hostile or broken listing may claim, as the JSON text of "size" (and of
// "lfs.size"): the listing is refused, naming the entry, never shown as 0 or believed.
TEST(TreeJson, SizesThatAreNotByteCountsFailTheListing) {
  for (const char* size : {"-1", "\"12\"", "1.5", "12.0", "18446744073709551616", "18446744073709551615",
                           "9223372036854775807", "9007199254740993", "null", "true", "[1]", "{}"}) {
    const std::string plain = std::string(R"([{"type":"file","oid":"b","size":)") + size + R"(,"path":"w.bin"}])";
    auto r = hub_json::parse_tree_entries(plain, "https://hub.test");
    ASSERT_FALSE(r.ok()) << plain;
    EXPECT_EQ(r.status().code(), Code::kCorrupt) << plain;
    EXPECT_NE(r.status().message().find("'w.bin'"), std::string::npos) << r.status().message();
    EXPECT_NE(r.status().message().find("2^53"), std::string::npos) << r.status().message();

    const std::string lfs = std::string(R"([{"type":"file","oid":"b","size":134,"path":"w.bin","lfs":{"oid":"aa","size":)") +
                            size + "}}]";
    auto l = hub_json::parse_tree_entries(lfs, "https://hub.test");
    ASSERT_FALSE(l.ok()) << lfs;
    EXPECT_EQ(l.status().code(), Code::kCorrupt) << lfs;
  }
  auto missing = hub_json::parse_tree_entries(R"([{"type":"file","oid":"b","path":"w.bin"}])", "https://hub.test");
  EXPECT_EQ(missing.status().code(), Code::kCorrupt) << "a file without a size";
}

TEST(TreeJson, SizesUpToTwoToThe53AreBelieved) {
  auto r = hub_json::parse_tree_entries(
      R"([{"type":"file","oid":"a","size":0,"path":"empty"},
          {"type":"file","oid":"b","size":9007199254740992,"path":"huge"},
          {"type":"directory","oid":"d","path":"dir"},
          {"type":"directory","oid":"e","size":-1,"path":"odd-dir"}])",
      "https://hub.test");
  ASSERT_TRUE(r.ok()) << r.status().message();
  ASSERT_EQ(r->size(), 4u);
  EXPECT_EQ((*r)[0].size, 0u);
  EXPECT_EQ((*r)[1].size, hub_json::kMaxListedSize);
  EXPECT_EQ((*r)[2].size, 0u) << "a directory needs no size";
  EXPECT_EQ((*r)[3].size, 0u) << "a directory's size is not used";
}

TEST(TreeJson, NotAnArrayIsCorrupt) {
  auto r = hub_json::parse_tree_entries(R"({"error":"x"})", "https://hub.test");
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), Code::kCorrupt);
}

TEST(ErrorField, ReadsTheHubsErrorObject) {
  EXPECT_EQ(hub_json::error_field(R"({"error":"Repository not found"})"), "Repository not found");
  EXPECT_EQ(hub_json::error_field("plain text"), std::nullopt);
  EXPECT_EQ(hub_json::error_field(R"({"error":42})"), std::nullopt);
}

}  // namespace
}  // namespace hubfs
