// Reconstruction plans (docs/xet.md, "The read path", step 2), kept while their signed URLs are
// good and shared: a read whose bytes a kept plan covers asks for none, and reads asking for the
// same file range at once share one request (SingleFlight; each waiter gives up at its own
// deadline while the request goes on). What a plan is asked for is the read's own range: its
// URLs are signed for the chunks holding those bytes and nothing else, so a wider plan would only
// sign bytes the read does not need.
// Thread-safe; its mutex is a leaf, taken inside the SingleFlight's (the probe).
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "common/deadline.h"
#include "common/env.h"
#include "common/single_flight.h"
#include "common/status.h"
#include "net/range_fetcher.h"
#include "xet/reconstruction.h"

namespace hubfs::xet {

// A plan and the file range it was asked for.
struct PlannedRange {
  std::shared_ptr<const ReconstructionPlan> plan;
  int version = 2;           // the reconstruction API version that answered (1 or 2)
  hubfs::ByteRange covered;  // the file bytes it was asked for (and covers)
};

class PlanCache {
 public:
  // Asks the CAS for the plan of file bytes [range.offset, range end): blocking, on the caller's
  // thread. *version gets the API version that answered.
  using Ask = std::function<Result<std::shared_ptr<const ReconstructionPlan>>(
      const MerkleHash& file, hubfs::ByteRange range, const Deadline& deadline, int* version)>;

  // env: plan age on its clock. Must outlive this.
  PlanCache(Env& env, std::chrono::seconds ttl, size_t max_plans);

  // A kept plan covering `range` (unless `fresh`: then every kept plan of the file is dropped
  // first), else the answer of a request for exactly `range`, joined if one is on its way.
  Result<PlannedRange> get(const MerkleHash& file, hubfs::ByteRange range, const Deadline& deadline, bool fresh,
                           const Ask& ask);

  // Drops every kept plan of the file (its bytes failed the file's check: its plans described
  // other bytes).
  void forget(const MerkleHash& file);

  uint64_t requests() const { return requests_.load(); }
  uint64_t joined() const { return joined_.load(); }  // reads that waited for a request on its way
  size_t size() const;

 private:
  struct Kept {
    PlannedRange planned;
    MonotonicClock::time_point fetched;
  };
  std::optional<PlannedRange> find_locked(const MerkleHash& file, hubfs::ByteRange range);

  Env& env_;
  const std::chrono::seconds ttl_;
  const size_t max_plans_;
  SingleFlight<std::string, Result<PlannedRange>> flights_;  // by file and exact range
  mutable std::mutex mu_;                                     // guards kept_ and count_ (a leaf)
  std::map<MerkleHash, std::vector<Kept>> kept_;
  size_t count_ = 0;
  std::atomic<uint64_t> requests_{0}, joined_{0};
};

}  // namespace hubfs::xet
