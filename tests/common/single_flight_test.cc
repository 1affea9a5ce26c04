// SingleFlight: one leader per key, every other asker shares its result; a store probe under the
// same lock closes the gap between "not in the store" and "no flight".
#include "common/single_flight.h"

#include <latch>
#include <memory>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include <gtest/gtest.h>

#include "support/manual_clock.h"

namespace hubfs {
namespace HUBFS_UNITY_ID {

using Flights = SingleFlight<std::string, int>;
const Deadline kNever = Deadline::never();

TEST(SingleFlight, TheFirstAskerLeadsAndLaterOnesShareItsFlight) {
  Flights flights;
  Flights::Ticket a = flights.join("k");
  Flights::Ticket b = flights.join("k");
  Flights::Ticket other = flights.join("other");
  EXPECT_TRUE(a.leader);
  EXPECT_FALSE(b.leader);
  EXPECT_TRUE(other.leader);
  EXPECT_EQ(a.flight, b.flight);
  EXPECT_EQ(flights.size(), 2u);
  EXPECT_TRUE(flights.complete("k", 7));
  EXPECT_EQ(flights.wait(b.flight, kNever), 7);
  EXPECT_EQ(flights.wait(a.flight, kNever), 7);
  EXPECT_EQ(flights.size(), 1u);
}

TEST(SingleFlight, AfterCompletionTheNextAskerStartsAFreshFlight) {
  Flights flights;
  Flights::Ticket first = flights.join("k");
  flights.complete("k", 1);
  Flights::Ticket second = flights.join("k");
  EXPECT_TRUE(second.leader);
  EXPECT_NE(first.flight, second.flight);
  EXPECT_FALSE(flights.complete("absent", 3));  // no flight: nothing happens
}

TEST(SingleFlight, AProbeHitIsAFinishedFlightAndStartsNone) {
  Flights flights;
  int probes = 0;
  Flights::Ticket t = flights.join("k", [&] {
    ++probes;
    return std::optional<int>(42);
  });
  EXPECT_FALSE(t.leader);
  EXPECT_TRUE(t.stored);
  EXPECT_EQ(flights.size(), 0u);
  EXPECT_EQ(flights.wait(t.flight, kNever), 42);
  // A flight in progress is joined without asking the store.
  Flights::Ticket lead = flights.join("j");
  Flights::Ticket join = flights.join("j", [&] {
    ++probes;
    return std::optional<int>(1);
  });
  EXPECT_EQ(probes, 1);
  EXPECT_FALSE(join.stored);
  EXPECT_EQ(join.flight, lead.flight);
}

TEST(SingleFlight, AWaitEndsAtItsDeadlineAndTheFlightGoesOn) {
  Flights flights;
  Flights::Ticket lead = flights.join("k");
  Flights::Ticket wait = flights.join("k");
  testing::ManualClock clock;
  const Deadline past = Deadline::after(std::chrono::seconds(-1), clock);
  // A deadline already past: no value, at once.
  EXPECT_EQ(flights.wait(wait.flight, past), std::nullopt);
  flights.complete("k", 5);
  EXPECT_EQ(flights.wait(wait.flight, past), 5);
}

// A Deadline on a manual clock (a test's Env) is judged on that clock: past, no value at once,
// whatever the real clock says; a finished flight's value comes back all the same.
TEST(SingleFlight, AWaitOnADeadlineJudgesItOnItsOwnClock) {
  Flights flights;
  testing::ManualClock clock;
  Flights::Ticket lead = flights.join("k");
  Flights::Ticket wait = flights.join("k");
  const Deadline passed = Deadline::after(std::chrono::milliseconds(5), clock);
  clock.advance(std::chrono::milliseconds(5));
  EXPECT_EQ(flights.wait(wait.flight, passed), std::nullopt);
  flights.complete("k", 7);
  EXPECT_EQ(flights.wait(wait.flight, passed), 7);
  EXPECT_EQ(flights.wait(lead.flight, Deadline::never()), 7);
}

// A waiter blocked on its deadline is let go when its clock reaches it (the manual clock, moved
// by the test: no real time passes), while the flight goes on for the others.
TEST(SingleFlight, ABlockedWaiterGivesUpWhenItsClockReachesItsDeadline) {
  Flights flights;
  testing::ManualClock clock;
  Flights::Ticket lead = flights.join("k");
  Flights::Ticket wait = flights.join("k");
  const Deadline deadline = Deadline::after(std::chrono::seconds(30), clock);
  std::optional<int> got = 1;
  std::thread waiter([&] { got = flights.wait(wait.flight, deadline); });
  ASSERT_TRUE(clock.wait_for_sleepers(1));
  clock.advance(std::chrono::seconds(29));
  EXPECT_EQ(clock.sleepers(), 1u);  // not yet
  clock.advance(std::chrono::seconds(1));
  waiter.join();
  EXPECT_EQ(got, std::nullopt);
  EXPECT_EQ(flights.size(), 1u);
  flights.complete("k", 3);
  EXPECT_EQ(flights.wait(lead.flight, deadline), 3);
}

// A waiter blocked on a far deadline gets the value as soon as the leader completes.
TEST(SingleFlight, ABlockedWaiterGetsTheValueBeforeItsDeadline) {
  Flights flights;
  testing::ManualClock clock;
  Flights::Ticket lead = flights.join("k");
  Flights::Ticket wait = flights.join("k");
  std::optional<int> got;
  std::thread waiter([&] { got = flights.wait(wait.flight, Deadline::after(std::chrono::hours(1), clock)); });
  ASSERT_TRUE(clock.wait_for_sleepers(1));
  flights.complete("k", 4);
  waiter.join();
  EXPECT_EQ(got, 4);
}

// Many threads, one key: exactly one leader, everybody gets its value.
TEST(SingleFlight, ConcurrentAskersGetOneLeaderAndOneValue) {
  Flights flights;
  std::atomic<int> leaders{0}, right{0};
  std::vector<std::thread> threads;
  for (int i = 0; i < 8; ++i) {
    threads.emplace_back([&] {
      Flights::Ticket t = flights.join("k");
      if (t.leader) {
        ++leaders;
        flights.complete("k", 99);
      }
      if (flights.wait(t.flight, kNever) == 99) ++right;
    });
  }
  for (auto& t : threads) t.join();
  // Some threads may join after the first flight completed and lead a second one; every flight
  // had exactly one leader and every asker got the value.
  EXPECT_GE(leaders.load(), 1);
  EXPECT_EQ(right.load(), 8);
  EXPECT_EQ(flights.size(), 0u);
}

// OneShot: the first answer is kept; a waiter gets it, or gives up when its own clock reaches its
// deadline (the manual clock, moved by the test: no real time passes), and a later wait still
// gets an answer that came after it gave up.
TEST(OneShot, AWaiterGetsTheFirstAnswerOrGivesUpAtItsDeadline) {
  testing::ManualClock clock;
  auto answer = std::make_shared<OneShot<int>>();
  std::optional<int> got = 1;
  std::thread waiter([&] { got = answer->wait(Deadline::after(std::chrono::seconds(5), clock)); });
  ASSERT_TRUE(clock.wait_for_sleepers(1));
  clock.advance(std::chrono::seconds(5));
  waiter.join();
  EXPECT_EQ(got, std::nullopt);
  EXPECT_TRUE(answer->set(8));
  EXPECT_FALSE(answer->set(9));  // the first answer stays
  EXPECT_EQ(answer->wait(Deadline::after(std::chrono::seconds(0), clock)), 8);
  EXPECT_EQ(answer->get(), 8);
}

TEST(OneShot, ABlockedWaiterIsWokenByTheAnswer) {
  auto answer = std::make_shared<OneShot<std::string>>();
  std::thread producer([answer] { answer->set("done"); });
  EXPECT_EQ(answer->get(), "done");
  producer.join();
}

// take() moves the answer out (a xorb range's megabytes are not copied): it works for a value
// that cannot be copied at all, and a waiter blocked in it is woken by the answer.
TEST(OneShot, TakeMovesTheAnswerOutWithoutCopying) {
  auto answer = std::make_shared<OneShot<std::unique_ptr<std::string>>>();
  std::thread producer([answer] { answer->set(std::make_unique<std::string>("body")); });
  std::unique_ptr<std::string> got = answer->take();
  producer.join();
  ASSERT_NE(got, nullptr);
  EXPECT_EQ(*got, "body");
}

// then(): a callback given before the answer runs on the thread whose set() gives it, one given
// after runs at once on its own thread; each runs once, a second set() runs none again, and a
// callback may call then() on the same OneShot (callbacks run outside its lock).
TEST(OneShot, ThenRunsOnTheSettingThreadOrAtOnceWhenTheAnswerIsIn) {
  auto answer = std::make_shared<OneShot<int>>();
  std::vector<std::pair<int, std::thread::id>> runs;  // (value, thread) per callback run
  auto record = [&runs](const int& v) { runs.emplace_back(v, std::this_thread::get_id()); };
  answer->then([&, answer](const int& v) {
    record(v);
    answer->then(record);  // from inside a callback: the answer is in, so it runs at once
  });
  EXPECT_TRUE(runs.empty());
  std::thread::id setter_id;
  std::thread setter([&] {
    setter_id = std::this_thread::get_id();
    EXPECT_TRUE(answer->set(5));
  });
  setter.join();
  ASSERT_EQ(runs.size(), 2u);
  EXPECT_EQ(runs[0], std::make_pair(5, setter_id));
  EXPECT_EQ(runs[1], std::make_pair(5, setter_id));
  answer->then(record);
  ASSERT_EQ(runs.size(), 3u);
  EXPECT_EQ(runs[2], std::make_pair(5, std::this_thread::get_id()));
  EXPECT_FALSE(answer->set(6));
  EXPECT_EQ(runs.size(), 3u);  // nothing ran again
  EXPECT_EQ(answer->get(), 5);
}

// then() racing set() from many threads (run under TSan too): every callback runs exactly once,
// with the answer, whichever side of the set() it lands on.
TEST(OneShot, EveryCallbackRunsOnceWithTheAnswerWhenThenRacesSet) {
  constexpr int kThreads = 8;
  auto answer = std::make_shared<OneShot<std::string>>();
  std::latch start(kThreads + 1);
  std::vector<int> runs(kThreads, 0);          // each written by its own callback only
  std::vector<std::string> seen(kThreads);     // the answer each callback got
  std::vector<std::thread> threads;
  for (int i = 0; i < kThreads; ++i) {
    threads.emplace_back([&, i] {
      start.arrive_and_wait();
      answer->then([&runs, &seen, i](const std::string& v) {
        ++runs[i];
        seen[i] = v;
      });
    });
  }
  threads.emplace_back([&] {
    start.arrive_and_wait();
    EXPECT_TRUE(answer->set("head"));
  });
  for (auto& t : threads) t.join();
  for (int i = 0; i < kThreads; ++i) {
    EXPECT_EQ(runs[i], 1) << "callback " << i;
    EXPECT_EQ(seen[i], "head") << "callback " << i;
  }
}

}  // namespace
}  // namespace hubfs
