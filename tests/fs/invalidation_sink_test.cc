// The follower's gate to the mount's kernel invalidation: what it passes on, in which order, and
// nothing once closed.
#include "fs/invalidation_sink.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace hubfs {
namespace HUBFS_UNITY_ID {

ViewChange change_to(const std::string& commit, Ino dir) {
  ViewChange c;
  c.new_commit = commit;
  c.dirs.push_back(dir);
  return c;
}

TEST(InvalidationSink, DeliversEachNonEmptyChangeInOrder) {
  std::vector<std::string> seen;
  InvalidationSink sink([&](const ViewChange& c) { seen.push_back(c.new_commit); });
  sink.deliver(change_to("again", 2), change_to("new", 3));
  EXPECT_EQ(seen, (std::vector<std::string>{"again", "new"}));
  seen.clear();
  sink.deliver(ViewChange{}, change_to("new", 3));
  sink.deliver(change_to("again", 2), ViewChange{});
  sink.deliver(ViewChange{}, ViewChange{});
  EXPECT_EQ(seen, (std::vector<std::string>{"new", "again"}));
}

TEST(InvalidationSink, DeliversNothingOnceClosed) {
  int calls = 0;
  InvalidationSink sink([&](const ViewChange&) { ++calls; });
  sink.deliver(change_to("a", 2), ViewChange{});
  EXPECT_EQ(calls, 1);
  sink.close();
  sink.deliver(change_to("b", 2), change_to("c", 3));
  EXPECT_EQ(calls, 1);
  sink.close();  // twice is harmless
}

TEST(InvalidationSink, ANullCallbackIsNeverCalled) {
  InvalidationSink sink(nullptr);
  sink.deliver(change_to("a", 2), change_to("b", 3));  // would throw bad_function_call
  SUCCEED();
}

}  // namespace HUBFS_UNITY_ID
}  // namespace hubfs
