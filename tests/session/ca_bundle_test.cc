// choose_ca_bundle (stack/config.h): which CA certificates the session's transport trusts, from
// the ca_bundle option or the environment, and what is read to get them.
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <optional>
#include <string>

#include <gtest/gtest.h>

#include "net/curl_transport.h"
#include "stack/config.h"
#include "support/temp_dir.h"

namespace hubfs {
namespace HUBFS_UNITY_ID {

// Sets the environment's CA variables for a test and puts back what was there.
class CaEnv {
 public:
  CaEnv() {
    for (const char* name : kNames) {
      const char* v = std::getenv(name);
      saved_[index(name)] = v ? std::optional<std::string>(v) : std::nullopt;
      unsetenv(name);
    }
  }
  ~CaEnv() {
    for (const char* name : kNames) {
      const auto& v = saved_[index(name)];
      if (v) setenv(name, v->c_str(), 1);
      else unsetenv(name);
    }
  }
  static void set(const char* name, const std::string& value) { setenv(name, value.c_str(), 1); }

 private:
  static constexpr const char* kNames[3] = {"REQUESTS_CA_BUNDLE", "CURL_CA_BUNDLE", "SSL_CERT_FILE"};
  static size_t index(const char* name) {
    for (size_t i = 0; i < 3; ++i)
      if (std::string(kNames[i]) == name) return i;
    return 0;
  }
  std::optional<std::string> saved_[3];
};

TEST(ChooseCaBundle, OneBundleIsPassedByNameAndSeveralAsTheirJoinedText) {
  CaEnv env;
  testing::TempDir dir;
  const std::string a = (dir.path() / "a.pem").string(), b = (dir.path() / "b.pem").string();
  std::ofstream(a) << "AAA";  // no final newline: joining adds one
  std::ofstream(b) << "BBB\n";
  {
    CurlOptions o;
    ASSERT_TRUE(choose_ca_bundle("", o).ok());
    EXPECT_EQ(o.ca_bundle, "");  // libcurl's own store
    EXPECT_EQ(o.ca_pem, "");
  }
  CaEnv::set("SSL_CERT_FILE", a);
  CaEnv::set("CURL_CA_BUNDLE", a);  // the same file twice is one bundle
  {
    CurlOptions o;
    ASSERT_TRUE(choose_ca_bundle("", o).ok());
    EXPECT_EQ(o.ca_bundle, a);
    EXPECT_EQ(o.ca_pem, "");  // passed by its name
  }
  CaEnv::set("REQUESTS_CA_BUNDLE", b);
  {
    CurlOptions o;
    ASSERT_TRUE(choose_ca_bundle("", o).ok());
    EXPECT_EQ(o.ca_pem, "BBB\nAAA\n");
  }
  {
    CurlOptions o;
    ASSERT_TRUE(choose_ca_bundle(b, o).ok());  // the option alone, whatever the environment says
    EXPECT_EQ(o.ca_bundle, b);
    EXPECT_EQ(o.ca_pem, "");
  }
}

TEST(ChooseCaBundle, ABundleThatCannotBeReadFailsNamingWhereItCameFrom) {
  CaEnv env;
  testing::TempDir dir;
  const std::string missing = (dir.path() / "missing.pem").string();
  CaEnv::set("SSL_CERT_FILE", missing);
  CurlOptions o;
  Status st = choose_ca_bundle("", o);
  ASSERT_EQ(st.code(), Code::kInvalidArgument) << st.message();
  EXPECT_NE(st.message().find(missing), std::string::npos) << st.message();
  EXPECT_NE(st.message().find("SSL_CERT_FILE"), std::string::npos) << st.message();
  Status flag = choose_ca_bundle(missing, o);
  ASSERT_EQ(flag.code(), Code::kInvalidArgument);
  EXPECT_NE(flag.message().find("--ca-bundle"), std::string::npos) << flag.message();
}

// A directory opens for reading, but libcurl cannot take it as CAINFO: refused at once (checked
// without reading the bundle: hf://'s first open checks it on its way to the pin).
TEST(ChooseCaBundle, ADirectoryIsNotABundle) {
  CaEnv env;
  testing::TempDir dir;
  CaEnv::set("REQUESTS_CA_BUNDLE", dir.str());
  CurlOptions o;
  Status st = choose_ca_bundle("", o);
  ASSERT_EQ(st.code(), Code::kInvalidArgument) << st.message();
  EXPECT_NE(st.message().find("REQUESTS_CA_BUNDLE"), std::string::npos) << st.message();
  EXPECT_NE(st.message().find(strerror(EISDIR)), std::string::npos) << st.message();
  EXPECT_EQ(choose_ca_bundle(dir.str(), o).code(), Code::kInvalidArgument);
}

}  // namespace HUBFS_UNITY_ID
}  // namespace hubfs
