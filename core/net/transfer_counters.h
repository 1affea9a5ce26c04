// CurlTransport's counters, as stats() reports them: transfers started, hedges started and won,
// and how many run now.
//
// The event-loop thread writes them; stats() reads them from any thread. Thread-safe; one
// mutex, a leaf (CurlTransport's lock order: never held while another lock is taken or a
// callback runs, and never taken under the transport's queue lock).
#pragma once

#include <cstdint>
#include <mutex>

#include "net/curl_transport.h"

namespace hubfs {

class TransferCounters {
 public:
  void request_started() { bump(&CurlStats::requests); }
  void hedge_started() { bump(&CurlStats::hedges); }
  void hedge_won() { bump(&CurlStats::hedge_wins); }
  // The transfers running now, hedges included (the loop thread's count, mirrored).
  void set_in_flight(uint64_t running) {
    std::lock_guard<std::mutex> lock(mu_);
    counts_.in_flight = running;
  }
  // Every field but `queued`, which the transport's queue knows (left 0 here).
  CurlStats snapshot() const {
    std::lock_guard<std::mutex> lock(mu_);
    return counts_;
  }

 private:
  void bump(uint64_t CurlStats::*field) {
    std::lock_guard<std::mutex> lock(mu_);
    ++(counts_.*field);
  }

  mutable std::mutex mu_;  // guards counts_
  CurlStats counts_;       // `queued` stays 0
};

}  // namespace hubfs
