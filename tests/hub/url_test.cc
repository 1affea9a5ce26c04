#include "common/url.h"

#include <gtest/gtest.h>

#include "hub/hub_client.h"

namespace hubfs {
namespace HUBFS_UNITY_ID {

TEST(EncodeSegment, RevisionIsOneSegment) {
  EXPECT_EQ(encode_segment("refs/pr/1"), "refs%2Fpr%2F1");
  EXPECT_EQ(encode_segment("main"), "main");
  EXPECT_EQ(encode_segment("v1.0-rc_2~x"), "v1.0-rc_2~x");
  EXPECT_EQ(encode_segment("a b+c&d=e"), "a%20b%2Bc%26d%3De");
}

TEST(EncodePath, KeepsSlashesEncodesTheRest) {
  EXPECT_EQ(encode_path("dir/sub/file.bin"), "dir/sub/file.bin");
  EXPECT_EQ(encode_path("my dir/a file.txt"), "my%20dir/a%20file.txt");
  EXPECT_EQ(encode_path("q/what?.txt"), "q/what%3F.txt");
  EXPECT_EQ(encode_path("c#/notes#1.md"), "c%23/notes%231.md");
  EXPECT_EQ(encode_path("caf\xc3\xa9/\xe6\x97\xa5.txt"), "caf%C3%A9/%E6%97%A5.txt");
  EXPECT_EQ(encode_path("100%.txt"), "100%25.txt");
}

TEST(ResolveUrl, BuildsEachRepoType) {
  RepoRef model{RepoType::kModel, "org/x", "main"};
  RepoRef dataset{RepoType::kDataset, "org/x", "refs/pr/1"};
  RepoRef space{RepoType::kSpace, "org/x", "v1"};
  EXPECT_EQ(resolve_url("https://h", model, "a b/c.bin"), "https://h/org/x/resolve/main/a%20b/c.bin");
  EXPECT_EQ(resolve_url("https://h", dataset, "d.parquet"), "https://h/datasets/org/x/resolve/refs%2Fpr%2F1/d.parquet");
  EXPECT_EQ(resolve_url("https://h", space, "app.py"), "https://h/spaces/org/x/resolve/v1/app.py");
}

TEST(Origin, ParsesSchemeHostPort) {
  auto o = url::origin_of("HTTPS://Hub.Test/api?x=1");
  ASSERT_TRUE(o);
  EXPECT_EQ(o->scheme, "https");
  EXPECT_EQ(o->host, "hub.test");
  EXPECT_EQ(o->port, 443);
  o = url::origin_of("http://user:pw@[::1]:8080/x");
  ASSERT_TRUE(o);
  EXPECT_EQ(o->host, "[::1]");
  EXPECT_EQ(o->port, 8080);
  EXPECT_EQ(url::origin_of("http://h")->port, 80);
  EXPECT_FALSE(url::origin_of("ftp://h/x"));
  EXPECT_FALSE(url::origin_of("/relative/path"));
  EXPECT_FALSE(url::origin_of("https:///nohost"));
  EXPECT_FALSE(url::origin_of("https://h:99999/"));
  EXPECT_FALSE(url::origin_of("https://h:12ab/"));
}

TEST(Origin, SameOriginComparesSchemeHostAndPort) {
  EXPECT_TRUE(url::same_origin("https://hub.test/a", "https://HUB.test:443/b?c"));
  EXPECT_TRUE(url::same_origin("http://127.0.0.1:8080/a", "http://127.0.0.1:8080"));
  EXPECT_FALSE(url::same_origin("https://hub.test/a", "http://hub.test/a"));
  EXPECT_FALSE(url::same_origin("https://hub.test/a", "https://hub.test:8443/a"));
  EXPECT_FALSE(url::same_origin("https://hub.test/a", "https://cdn.hub.test/a"));
  // A look-alike host hidden behind userinfo is still another host.
  EXPECT_FALSE(url::same_origin("https://hub.test@evil.test/a", "https://hub.test/a"));
  EXPECT_FALSE(url::same_origin("not a url", "not a url"));
}

TEST(HostForMessages, DropsPathQueryAndUserinfo) {
  EXPECT_EQ(url::host_for_messages("https://u:pw@cdn.test:8443/x?Signature=abc"), "https://cdn.test:8443");
}

TEST(ResolveReference, AllForms) {
  const char* base = "https://hub.test/api/models/o/x/tree/main?cursor=1";
  EXPECT_EQ(*url::resolve_reference(base, "https://other.test/p"), "https://other.test/p");
  EXPECT_EQ(*url::resolve_reference(base, "//cdn.test/p?q"), "https://cdn.test/p?q");
  EXPECT_EQ(*url::resolve_reference(base, "/new/x/resolve/main/f"), "https://hub.test/new/x/resolve/main/f");
  EXPECT_EQ(*url::resolve_reference(base, "other?cursor=2"), "https://hub.test/api/models/o/x/tree/other?cursor=2");
  EXPECT_EQ(*url::resolve_reference(base, "?cursor=2"), "https://hub.test/api/models/o/x/tree/main?cursor=2");
  EXPECT_EQ(*url::resolve_reference(base, "  /padded "), "https://hub.test/padded");
  EXPECT_FALSE(url::resolve_reference("relative", "/x"));
}

TEST(QueryParam, FindsExactNameAndDecodes) {
  const char* u = "https://cdn.test/f?X-Amz-Expires=3600&X-Amz-Date=20240101T000000Z&name=a%20b#frag";
  EXPECT_EQ(*url::query_param(u, "X-Amz-Expires"), "3600");
  EXPECT_EQ(*url::query_param(u, "X-Amz-Date"), "20240101T000000Z");
  EXPECT_EQ(*url::query_param(u, "name"), "a b");
  EXPECT_FALSE(url::query_param(u, "x-amz-expires"));
  EXPECT_FALSE(url::query_param(u, "Expires"));
  EXPECT_FALSE(url::query_param("https://cdn.test/f", "a"));
  EXPECT_EQ(*url::query_param("https://h/?flag&b=1", "flag"), "");
}

TEST(PercentDecode, LeavesBrokenEscapesAlone) {
  EXPECT_EQ(url::percent_decode("a%2Fb%zz%4"), "a/b%zz%4");
}

Headers link(std::string value) { return {{"link", std::move(value)}}; }

TEST(NextLink, PlainNext) {
  EXPECT_EQ(*url::next_link(link("<https://hub.test/p2>; rel=\"next\"")), "https://hub.test/p2");
}

TEST(NextLink, SeveralLinksInOneHeader) {
  auto h = link("<https://h/first>; rel=\"first\", <https://h/p3?c=a,b>; rel=\"next\", <https://h/last>; rel=last");
  EXPECT_EQ(*url::next_link(h), "https://h/p3?c=a,b");
}

TEST(NextLink, UnquotedSpacedAndMixedCaseRel) {
  EXPECT_EQ(*url::next_link(link("<https://h/p2>;rel=next")), "https://h/p2");
  EXPECT_EQ(*url::next_link(link("  < https://h/p2 >  ;  REL = \"Next\"  ")), "https://h/p2");
  EXPECT_EQ(*url::next_link(link("<https://h/p2>; rel=\"last next\"")), "https://h/p2");
}

TEST(NextLink, CommaInsideQuotedParamDoesNotSplit) {
  auto h = link("<https://h/a>; title=\"x, rel=next\"; rel=prev, <https://h/b>; rel=next");
  EXPECT_EQ(*url::next_link(h), "https://h/b");
}

TEST(NextLink, LooksAcrossSeveralHeaders) {
  Headers h = {{"Link", "<https://h/prev>; rel=prev"}, {"content-type", "x"}, {"LINK", "<https://h/n>; rel=next"}};
  EXPECT_EQ(*url::next_link(h), "https://h/n");
}

TEST(NextLink, AbsentOrMalformed) {
  EXPECT_FALSE(url::next_link({}));
  EXPECT_FALSE(url::next_link(link("<https://h/p>; rel=prev")));
  EXPECT_FALSE(url::next_link(link("<https://h/p; rel=next")));
  EXPECT_FALSE(url::next_link(link("https://h/p; rel=next")));
  EXPECT_FALSE(url::next_link(link("<https://h/p>; rel=nextpage")));
}

}  // namespace
}  // namespace hubfs
