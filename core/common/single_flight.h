// Single-flight: however many callers ask for one key at once, one of them (the leader) produces
// the value and every other caller waits for that one result instead of producing it again.
//
// Contract:
// - join(key) makes the first caller for a key its leader (Ticket::leader) and every later caller
//   a waiter on the same Flight, until the leader calls complete(key, value); after that, the
//   next join for the key starts a new flight (results are not cached here: that is the owner's
//   store, which join() can consult atomically, see below).
// - A join may first look in the owner's store (`probe`), under this object's lock: a value the
//   probe finds is returned as an already finished flight. Because complete() takes the same
//   lock, an owner that puts the value in its store before complete() never starts a second
//   flight for a value that was just produced (the store's lock is taken inside this one: the
//   probe must take no lock that is held around a call into this object).
// - wait() blocks until the flight is done or the waiter's own deadline passes (then nullopt: the
//   flight goes on, and a later wait may still get it). Waiters are woken by complete(), or by
//   their deadline's clock.
// - complete() must be called exactly once per flight by its leader, also on failure (put the
//   error in V, e.g. Result<T>): otherwise its waiters wait until their deadlines.
// Thread-safe. One mutex, a leaf unless the probe takes its owner's store lock (then this one
// first).
//
// The one "many askers, one request" wait of core/: BlockReader's blocks in flight, the Hub
// client's resolves, the namespace's per-repo pins and listings, Xet's tokens and plans.
#pragma once

#include <condition_variable>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <unordered_map>
#include <utility>
#include <vector>

#include "common/deadline.h"

namespace hubfs {

template <typename K, typename V, typename Hash = std::hash<K>>
class SingleFlight {
 public:
  // One value being produced. Opaque to callers: they hold it to wait on it.
  class Flight {
   public:
   private:
    friend class SingleFlight;
    std::condition_variable cv_;
    std::optional<V> value_;  // guarded by the SingleFlight's mutex
  };
  using FlightPtr = std::shared_ptr<Flight>;

  struct Ticket {
    FlightPtr flight;
    bool leader = false;  // this caller must produce the value and complete() it
    bool stored = false;  // the probe found the value: the flight is finished already
  };

  // Joins the key's flight, or starts one (then the caller is the leader).
  Ticket join(const K& key) {
    return join(key, [] { return std::optional<V>(); });
  }
  // The same, but first looks in the owner's store: `probe()` (returning std::optional<V>) runs
  // under this object's lock when no flight of the key is in progress, and a value it finds
  // comes back as a finished flight (stored true, leader false); no flight starts then.
  template <typename Probe>
  Ticket join(const K& key, Probe&& probe) {
    std::lock_guard<std::mutex> lock(mu_);
    if (auto it = flights_.find(key); it != flights_.end()) return Ticket{it->second, false, false};
    if (std::optional<V> found = probe()) {
      auto finished = std::make_shared<Flight>();
      finished->value_ = std::move(found);
      return Ticket{std::move(finished), false, true};
    }
    auto flight = std::make_shared<Flight>();
    flights_.emplace(key, flight);
    return Ticket{std::move(flight), true, false};
  }

  // The leader's result: wakes every waiter and ends the flight. False when no flight of the key
  // is in progress (nothing happens then).
  bool complete(const K& key, V value) {
    FlightPtr flight;
    {
      std::lock_guard<std::mutex> lock(mu_);
      auto it = flights_.find(key);
      if (it == flights_.end()) return false;
      flight = std::move(it->second);
      flights_.erase(it);
      flight->value_ = std::move(value);
    }
    flight->cv_.notify_all();
    return true;
  }

  // The flight's value, or nullopt when `deadline` passed first, judged on the deadline's own
  // clock (the Env's: a manual one in tests ends the wait when the test moves it). The flight
  // goes on either way. Deadline::never(): until the leader completes.
  std::optional<V> wait(const FlightPtr& flight, const Deadline& deadline) {
    std::unique_lock<std::mutex> lock(mu_);
    if (!deadline.wait(flight->cv_, lock, [&] { return flight->value_.has_value(); })) return std::nullopt;
    return flight->value_;
  }

  // Whether a flight of the key is in progress now (it may end right after: a hint to skip work).
  bool in_progress(const K& key) const {
    std::lock_guard<std::mutex> lock(mu_);
    return flights_.count(key) != 0;
  }

  // Flights in progress (for tests and stats).
  size_t size() const {
    std::lock_guard<std::mutex> lock(mu_);
    return flights_.size();
  }

 private:
  // A leaf, except that a join's probe runs under it (then this one first, the store's after).
  mutable std::mutex mu_;
  std::unordered_map<K, FlightPtr, Hash> flights_;
};

// One answer that one producer gives once, for whoever waits on it: a submit-and-wait
// (HttpTransport::perform), a probe waited for a while (the session's first file), a file's head
// fetched before any read asks for it (stack/xet_routing.h's PrefetchedHead, whose reads take it
// through then()). The wait of a SingleFlight's waiter without the keys: until the answer, or
// until the waiter's own deadline on its own clock (the Env's); or, with then(), no wait at all.
// Shared between producer and waiters (make_shared): the producer may answer after every waiter
// gave up. Thread-safe; one mutex, a leaf (then()'s callbacks run outside it).
template <typename V>
class OneShot {
 public:
  using Callback = std::function<void(const V&)>;  // then()'s

  // The first answer is kept; later ones are dropped (false). The first wakes every waiter, then
  // runs the callbacks then() left, on this thread, in the order they were given.
  bool set(V value) {
    std::vector<Callback> callbacks;
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (value_) return false;
      value_ = std::move(value);
      callbacks.swap(callbacks_);
    }
    cv_.notify_all();
    for (Callback& c : callbacks) c(*value_);  // value_ is never written again (take() aside)
    return true;
  }
  // Calls `callback` with the answer exactly once, without waiting for it: at once on this
  // thread if it is in, else on the thread whose set() gives it. Never under this object's lock,
  // so a callback may call set(), wait() or then() on it. Not for an answer someone take()s:
  // a callback after that sees a moved-from value.
  void then(Callback callback) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (!value_) {
        callbacks_.push_back(std::move(callback));
        return;
      }
    }
    callback(*value_);
  }
  // The answer, or nullopt when `deadline` passed first.
  std::optional<V> wait(const Deadline& deadline) {
    std::unique_lock<std::mutex> lock(mu_);
    if (!deadline.wait(cv_, lock, [&] { return value_.has_value(); })) return std::nullopt;
    return value_;
  }
  // The answer, however long it takes.
  V get() { return std::move(*wait(Deadline::never())); }
  // The answer moved out, however long it takes, for a waiter that is the only one (a xorb
  // range's body: get() would copy megabytes). Waits after it see a moved-from value.
  V take() {
    std::unique_lock<std::mutex> lock(mu_);
    cv_.wait(lock, [&] { return value_.has_value(); });
    return std::move(*value_);
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  std::optional<V> value_;           // written once, under mu_ (then read without it)
  std::vector<Callback> callbacks_;  // then()'s, until the answer is in
};

}  // namespace hubfs
