#include <gtest/gtest.h>

#include "hub/hub_client.h"

namespace hubfs {
namespace HUBFS_UNITY_ID {

struct GoodCase {
  const char* spec;
  RepoType type;
  const char* id;
  const char* revision;
};

class ParseRepoRefGood : public ::testing::TestWithParam<GoodCase> {};

TEST_P(ParseRepoRefGood, Parses) {
  const GoodCase& c = GetParam();
  auto r = parse_repo_ref(c.spec);
  ASSERT_TRUE(r.ok()) << c.spec << ": " << r.status().message();
  EXPECT_EQ(r->type, c.type) << c.spec;
  EXPECT_EQ(r->id, c.id) << c.spec;
  EXPECT_EQ(r->revision, c.revision) << c.spec;
}

INSTANTIATE_TEST_SUITE_P(
    Specs, ParseRepoRefGood,
    ::testing::Values(GoodCase{"org/name", RepoType::kModel, "org/name", "main"},
                      GoodCase{"models/org/name", RepoType::kModel, "org/name", "main"},
                      GoodCase{"datasets/org/name", RepoType::kDataset, "org/name", "main"},
                      GoodCase{"spaces/org/name@v1.0", RepoType::kSpace, "org/name", "v1.0"},
                      GoodCase{"org/name@refs/pr/1", RepoType::kModel, "org/name", "refs/pr/1"},
                      GoodCase{"datasets/HuggingFaceH4/ultrachat_200k@0123456789abcdef0123456789abcdef01234567",
                               RepoType::kDataset, "HuggingFaceH4/ultrachat_200k",
                               "0123456789abcdef0123456789abcdef01234567"},
                      // Legacy ids without a namespace; "datasets" is a reserved word on the
                      // Hub, so "datasets/name" is the legacy dataset "name", not an org.
                      GoodCase{"datasets/name", RepoType::kDataset, "name", "main"},
                      GoodCase{"gpt2", RepoType::kModel, "gpt2", "main"},
                      GoodCase{"models/gpt2", RepoType::kModel, "gpt2", "main"},
                      GoodCase{"datasets/squad", RepoType::kDataset, "squad", "main"},
                      GoodCase{"spaces/x_y", RepoType::kSpace, "x_y", "main"},
                      GoodCase{"squad@v1", RepoType::kModel, "squad", "v1"},
                      GoodCase{"bert-base-uncased@refs/pr/3", RepoType::kModel, "bert-base-uncased", "refs/pr/3"},
                      GoodCase{"openai-community/gpt2", RepoType::kModel, "openai-community/gpt2", "main"},
                      GoodCase{"a.b/c_d-e", RepoType::kModel, "a.b/c_d-e", "main"}));

class ParseRepoRefBad : public ::testing::TestWithParam<const char*> {};

TEST_P(ParseRepoRefBad, IsInvalidArgumentNamingTheSpec) {
  auto r = parse_repo_ref(GetParam());
  ASSERT_FALSE(r.ok()) << GetParam();
  EXPECT_EQ(r.status().code(), Code::kInvalidArgument);
  EXPECT_FALSE(r.status().message().empty());
}

INSTANTIATE_TEST_SUITE_P(Specs, ParseRepoRefBad,
                         ::testing::Values("", "datasets/", "datasets", "-gpt2", "gp t2", "a..b", "a/b/c", "x/a/b/c", "org/na me", "org/", "/name",
                                           "org/name@", "org/-x", "org/x.", "org/a..b", "org/a--b",
                                           "bad/org/name", "org/n%61me", "org/name@..", "org/name@.", "org/name@refs/../main",
                                           "org/name@a/./b", "org/name@a\nb",
                                           "org/ab\xc3\xa9"));

TEST(ParseRepoRef, RejectsNamesLongerThanTheHubAllows) {
  EXPECT_TRUE(parse_repo_ref("org/" + std::string(96, 'a')).ok());
  EXPECT_FALSE(parse_repo_ref("org/" + std::string(97, 'a')).ok());
}

TEST(ParseRepoRef, BadIdMessageShowsTheExpectedForm) {
  auto r = parse_repo_ref("org/name/extra/part");
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("'org/name/extra/part'"), std::string::npos);
  EXPECT_NE(r.status().message().find("ORG/]NAME"), std::string::npos);
}

TEST(ParseRepoRef, LegacyIdTakesTheTypeOption) {
  auto r = parse_repo_ref("squad@v1", std::string("dataset"));
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_EQ(r->type, RepoType::kDataset);
  EXPECT_EQ(r->id, "squad");
  EXPECT_EQ(r->revision, "v1");
  auto conflict = parse_repo_ref("datasets/squad", std::string("model"));
  ASSERT_FALSE(conflict.ok());
  EXPECT_NE(conflict.status().message().find("--repo-type"), std::string::npos) << conflict.status().message();
}

TEST(ParseRepoRef, LegacyIdsGiveTheHubsUrls) {
  auto model = parse_repo_ref("gpt2");
  auto dataset = parse_repo_ref("datasets/squad@v1");
  ASSERT_TRUE(model.ok() && dataset.ok());
  EXPECT_EQ(resolve_url("https://h", *model, "config.json"), "https://h/gpt2/resolve/main/config.json");
  EXPECT_EQ(resolve_url("https://h", *dataset, "a/b.json"), "https://h/datasets/squad/resolve/v1/a/b.json");
}

TEST(ParseRepoRef, TypeOverrideApplies) {
  auto r = parse_repo_ref("org/name", std::string("dataset"));
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->type, RepoType::kDataset);
  r = parse_repo_ref("org/name", std::string("space"));
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->type, RepoType::kSpace);
}

TEST(ParseRepoRef, TypeOverrideAgreeingWithPrefixIsFine) {
  auto r = parse_repo_ref("datasets/org/name", std::string("dataset"));
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->type, RepoType::kDataset);
}

TEST(ParseRepoRef, TypeConflictNamesBoth) {
  auto r = parse_repo_ref("datasets/org/name", std::string("model"));
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), Code::kInvalidArgument);
  EXPECT_NE(r.status().message().find("dataset"), std::string::npos);
  EXPECT_NE(r.status().message().find("--repo-type says model"), std::string::npos);
}

TEST(ParseRepoRef, UnknownTypeWordIsRefused) {
  // The option takes the singular word; the plural is the URL prefix.
  auto r = parse_repo_ref("org/name", std::string("datasets"));
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("model, dataset or space"), std::string::npos);
}

TEST(ParseRepoRef, RevisionOverrideApplies) {
  auto r = parse_repo_ref("org/name", std::nullopt, std::string("refs/pr/7"));
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->revision, "refs/pr/7");
}

TEST(ParseRepoRef, SameRevisionTwiceIsFine) {
  auto r = parse_repo_ref("org/name@v2", std::nullopt, std::string("v2"));
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->revision, "v2");
}

TEST(ParseRepoRef, RevisionConflictNamesBoth) {
  auto r = parse_repo_ref("org/name@v1", std::nullopt, std::string("v2"));
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), Code::kInvalidArgument);
  EXPECT_NE(r.status().message().find("'v1'"), std::string::npos);
  EXPECT_NE(r.status().message().find("'v2'"), std::string::npos);
}

TEST(ParseRepoRef, DotRevisionsAreRefusedFromTheOptionToo) {
  for (const char* rev : {".", "..", "../main", "refs/pr/..", "a/./b"}) {
    auto r = parse_repo_ref("org/name", std::nullopt, std::string(rev));
    ASSERT_FALSE(r.ok()) << rev;
    EXPECT_EQ(r.status().code(), Code::kInvalidArgument) << rev;
    EXPECT_NE(r.status().message().find("'.' or '..'"), std::string::npos) << r.status().message();
  }
  // Dots inside a name are fine: v1.0, release..candidate is git's business, not a URL's.
  EXPECT_TRUE(parse_repo_ref("org/name@v1.0").ok());
  EXPECT_TRUE(parse_repo_ref("org/name@.hidden").ok());
  EXPECT_TRUE(parse_repo_ref("org/name", std::nullopt, std::string("refs/pr/1")).ok());
}

TEST(ParseRepoRef, EmptyRevisionOverrideIsRefused) {
  auto r = parse_repo_ref("org/name", std::nullopt, std::string(""));
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), Code::kInvalidArgument);
}

TEST(RepoType, UrlPieces) {
  EXPECT_EQ(api_segment(RepoType::kModel), "models");
  EXPECT_EQ(api_segment(RepoType::kDataset), "datasets");
  EXPECT_EQ(api_segment(RepoType::kSpace), "spaces");
  EXPECT_EQ(resolve_prefix(RepoType::kModel), "");
  EXPECT_EQ(resolve_prefix(RepoType::kDataset), "datasets/");
  EXPECT_EQ(resolve_prefix(RepoType::kSpace), "spaces/");
}

struct SpecCase {
  const char* spec;
  RepoType type;
  const char* id;
  const char* revision;
  const char* subfolder;
};

class ParseRepoSpecGood : public ::testing::TestWithParam<SpecCase> {};

TEST_P(ParseRepoSpecGood, SplitsRepoRevisionAndSubfolder) {
  const SpecCase& c = GetParam();
  auto r = parse_repo_spec(c.spec);
  ASSERT_TRUE(r.ok()) << c.spec << ": " << r.status().message();
  EXPECT_EQ(r->repo.type, c.type) << c.spec;
  EXPECT_EQ(r->repo.id, c.id) << c.spec;
  EXPECT_EQ(r->repo.revision, c.revision) << c.spec;
  EXPECT_EQ(r->subfolder, c.subfolder) << c.spec;
}

INSTANTIATE_TEST_SUITE_P(
    Specs, ParseRepoSpecGood,
    ::testing::Values(SpecCase{"org/name", RepoType::kModel, "org/name", "main", ""},
                      SpecCase{"datasets/org/name", RepoType::kDataset, "org/name", "main", ""},
                      SpecCase{"datasets/name", RepoType::kDataset, "name", "main", ""},
                      SpecCase{"gpt2", RepoType::kModel, "gpt2", "main", ""},
                      SpecCase{"gpt2@main/onnx", RepoType::kModel, "gpt2", "main", "onnx"},
                      SpecCase{"datasets/squad@v1/plain_text", RepoType::kDataset, "squad", "v1", "plain_text"},
                      // Three parts without '@' stay ORG/NAME/SUB (or TYPE/ORG/NAME): never a legacy id.
                      SpecCase{"gpt2/onnx", RepoType::kModel, "gpt2/onnx", "main", ""},
                      SpecCase{"datasets/squad/train", RepoType::kDataset, "squad/train", "main", ""},
                      SpecCase{"datasets/org/name/sub/dir", RepoType::kDataset, "org/name", "main", "sub/dir"},
                      SpecCase{"datasets/org/name/sub/dir/", RepoType::kDataset, "org/name", "main", "sub/dir"},
                      SpecCase{"org/name/onnx", RepoType::kModel, "org/name", "main", "onnx"},
                      SpecCase{"spaces/org/name@v1.0", RepoType::kSpace, "org/name", "v1.0", ""},
                      SpecCase{"datasets/org/name@v1.0/sub//dir", RepoType::kDataset, "org/name", "v1.0", "sub/dir"},
                      SpecCase{"org/name@refs/pr/1", RepoType::kModel, "org/name", "refs/pr/1", ""},
                      SpecCase{"org/name@refs/pr/1/a/b", RepoType::kModel, "org/name", "refs/pr/1", "a/b"},
                      SpecCase{"datasets/org/name@refs/convert/parquet/default", RepoType::kDataset, "org/name",
                               "refs/convert/parquet", "default"},
                      // Percent-encoded as one segment, as hf:// URLs carry it: decoded.
                      SpecCase{"datasets/org/name@refs%2Fconvert%2Fparquet", RepoType::kDataset, "org/name",
                               "refs/convert/parquet", ""},
                      SpecCase{"org/name@refs%2Fpr%2F3/sub", RepoType::kModel, "org/name", "refs/pr/3", "sub"},
                      SpecCase{"org/name@caf%C3%A9", RepoType::kModel, "org/name", "caf\xC3\xA9", ""}));

TEST(ParseRepoSpec, EncodedRevisionIsCheckedDecoded) {
  // "%2E%2E" is ".." once decoded: refused like the plain spelling, not sent as a segment.
  auto dots = parse_repo_spec("org/name@%2E%2E");
  ASSERT_FALSE(dots.ok());
  EXPECT_NE(dots.status().message().find("'.' or '..'"), std::string::npos) << dots.status().message();
  EXPECT_FALSE(parse_repo_spec("org/name@a%00b").ok());
  // The decoded name is what --revision is compared with.
  EXPECT_TRUE(parse_repo_spec("org/name@refs%2Fpr%2F1", std::nullopt, std::string("refs/pr/1")).ok());
  EXPECT_FALSE(parse_repo_spec("org/name@refs%2Fpr%2F1", std::nullopt, std::string("refs/pr/2")).ok());
}

TEST(ParseRepoSpec, SubfolderOptionAppliesAndAgreesOrConflicts) {
  auto r = parse_repo_spec("datasets/org/name", std::nullopt, std::nullopt, "/a/b/");
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_EQ(r->subfolder, "a/b");
  EXPECT_TRUE(parse_repo_spec("datasets/org/name/a/b", std::nullopt, std::nullopt, "a/b").ok());
  auto conflict = parse_repo_spec("datasets/org/name/a", std::nullopt, std::nullopt, "b");
  ASSERT_FALSE(conflict.ok());
  EXPECT_NE(conflict.status().message().find("--subfolder"), std::string::npos) << conflict.status().message();
}

TEST(ParseRepoSpec, RefusesDotPartsSingularPrefixesAndPathsOnBothSides) {
  for (const char* bad : {"datasets/org/name/../x", "datasets/org/name/./x", "dataset/org/name/x",
                          "datasets/org/name/a@main/b", "datasets/org/name@", "", "-name", "gpt2@"}) {
    auto r = parse_repo_spec(bad);
    ASSERT_FALSE(r.ok()) << bad;
    EXPECT_EQ(r.status().code(), Code::kInvalidArgument) << bad;
  }
}

TEST(ParentDir, IsTheDirectoryWhoseListingHoldsThePath) {
  EXPECT_EQ(parent_dir("a.h5"), "");
  EXPECT_EQ(parent_dir("x/a.h5"), "x");
  EXPECT_EQ(parent_dir("x/y/a.h5"), "x/y");
  EXPECT_EQ(parent_dir("x/y"), "x");  // a directory's too
  EXPECT_EQ(parent_dir(""), "");
}

}  // namespace
}  // namespace hubfs
