// The open-handle table of a FileSystem: one numbering for files and directories, lookups that
// keep their entry alive past a release, and each kind found only as itself.
#include "fs/handle_table.h"

#include <gtest/gtest.h>

#include <memory>
#include <string>

namespace hubfs {
namespace HUBFS_UNITY_ID {

struct FakeFile {
  std::string name;
};
struct FakeDir {
  int entries = 0;
};
using Table = HandleTable<FakeFile, FakeDir>;

TEST(HandleTable, NumbersFilesAndDirectoriesFromOneCounterNeverZero) {
  Table t;
  const uint64_t f = t.add_file(std::make_shared<FakeFile>(FakeFile{"a"}));
  const uint64_t d = t.add_dir(std::make_shared<FakeDir>(FakeDir{3}));
  const uint64_t g = t.add_file(std::make_shared<FakeFile>(FakeFile{"b"}));
  EXPECT_NE(f, 0u);
  EXPECT_NE(f, d);
  EXPECT_NE(d, g);
  EXPECT_NE(f, g);
  ASSERT_NE(t.file(f), nullptr);
  EXPECT_EQ(t.file(f)->name, "a");
  EXPECT_EQ(t.file(g)->name, "b");
  ASSERT_NE(t.dir(d), nullptr);
  EXPECT_EQ(t.dir(d)->entries, 3);
}

TEST(HandleTable, AHandleIsFoundOnlyAsItsOwnKind) {
  Table t;
  const uint64_t f = t.add_file(std::make_shared<FakeFile>());
  const uint64_t d = t.add_dir(std::make_shared<FakeDir>());
  EXPECT_EQ(t.dir(f), nullptr);
  EXPECT_EQ(t.file(d), nullptr);
  // Removing as the other kind leaves it open.
  t.remove_dir(f);
  t.remove_file(d);
  EXPECT_NE(t.file(f), nullptr);
  EXPECT_NE(t.dir(d), nullptr);
}

TEST(HandleTable, ALookupKeepsItsEntryAfterTheRelease) {
  Table t;
  const uint64_t f = t.add_file(std::make_shared<FakeFile>(FakeFile{"held"}));
  std::shared_ptr<FakeFile> held = t.file(f);
  t.remove_file(f);
  EXPECT_EQ(t.file(f), nullptr);
  ASSERT_NE(held, nullptr);
  EXPECT_EQ(held->name, "held");  // a read under way still has its file
  EXPECT_EQ(held.use_count(), 1);
}

TEST(HandleTable, ClearForgetsEveryHandleAndNumbersGoOn) {
  Table t;
  const uint64_t f = t.add_file(std::make_shared<FakeFile>());
  const uint64_t d = t.add_dir(std::make_shared<FakeDir>());
  t.clear();
  EXPECT_EQ(t.file(f), nullptr);
  EXPECT_EQ(t.dir(d), nullptr);
  const uint64_t next = t.add_file(std::make_shared<FakeFile>());
  EXPECT_NE(next, f);  // a stale number never names a new handle
  EXPECT_NE(next, d);
}

}  // namespace HUBFS_UNITY_ID
}  // namespace hubfs
