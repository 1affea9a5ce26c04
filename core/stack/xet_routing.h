// Which source serves a file's bytes (docs/xet.md, "Choosing the source"): a Xet-stored file
// (its listing carries xetHash) from the Xet storage service through xet::XetReader, anything
// else through the Hub's resolve and the bridge (RangeFetcher). The reader only sees the result,
// RemoteFile::source.
//
// The bridge stays the fallback: a storage-service error (the token, a reconstruction or a xorb
// refused or failing) is logged once, that read goes to the bridge, and so does every read for
// the next `fallback_for`, after which Xet is tried again. Bytes that fail their checks twice
// are an error, never a reason to serve from elsewhere unchecked (the bridge's partial reads are
// not verified). HF_HUB_DISABLE_XET and --offline build no router at all (stack/stack.cc).
//
// A file's head through the bridge (read_head_through_bridge; docs/xet.md, "The head of an hf://
// file"): the first read inside a file's first `head` bytes goes to the bridge location the
// session already holds (an hf:// probe's redirect, adopted as the file's location), one round
// trip where Xet needs its plan and then its range. Its bytes are still covered by the Xet check:
// the same range is read through Xet behind it, and the file's verdict is Xet's only once those
// bytes equal what the bridge served (else kUnknown: the reader hashes the file itself).
#pragma once

#include <atomic>
#include <chrono>
#include <memory>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "common/env.h"
#include "common/single_flight.h"
#include "hub/hub_client.h"
#include "net/range_fetcher.h"
#include "net/range_source.h"
#include "xet/xet_source.h"

namespace hubfs {

// A file's head fetched through the bridge before any read asks for it: an hf:// session starts
// it as soon as its probe names the bridge location (open_repo_session), beside the rest of the
// session's opening. Its answer is a OneShot's (common/single_flight.h): the first set() is
// kept, and its read takes it through then(), at once or on the setting thread. Thread-safe.
class PrefetchedHead : public OneShot<Result<std::string>> {
 public:
  explicit PrefetchedHead(uint64_t length) : length_(length) {}
  uint64_t length() const { return length_; }  // the head is [0, length)

 private:
  const uint64_t length_;
};

class XetRouter : public std::enable_shared_from_this<XetRouter> {
 public:
  // Both must outlive the router and every source it made.
  XetRouter(xet::XetReader& xet, RangeFetcher& bridge, std::chrono::seconds fallback_for = std::chrono::seconds(60));

  // A source for a Xet-stored file; null for any other (the reader then uses the bridge).
  // block_key: where the reader keeps the file's blocks on disk (XetReader::fetch_async), or empty.
  std::shared_ptr<RangeSource> source_for(const TreeEntry& entry, const Locator& locate, std::string block_key = {});

  // Reads the bridge served after a Xet failure.
  uint64_t fallbacks() const { return fallbacks_.load(); }

  // The first read that lies inside the first `head` bytes of the file with this Xet hash (of a
  // source made after this call) goes to the bridge, at the location its Locator already holds
  // (HubClient::adopt_location: no resolve), once; later reads of it go to Xet. For a door that
  // opens one file and reads its header first (h5chunk's hf://: SessionConfig::
  // xet_head_from_probe), never for a mount (its Xet reads ask the Hub for nothing).
  // `prefetched`, when given, is that head already asked for: a read inside it takes its answer.
  void read_head_through_bridge(const std::string& xet_hash, uint64_t head,
                                std::shared_ptr<PrefetchedHead> prefetched = nullptr);
  // Reads served so, and of them those whose bytes Xet then confirmed, byte for byte.
  uint64_t head_reads() const { return head_reads_.load(); }
  uint64_t heads_confirmed() const { return heads_confirmed_.load(); }

  // The stack is shutting down (Stack::shutdown, before the transport): the failures that
  // follow are its own, so they neither count against the storage service nor go to the bridge.
  // Also runs what the head executor holds (a prefetched head's answer to its read).
  void shutdown();

 private:
  class FileSource;
  bool bridge_now() const;
  void note_failure(const Status& s);

  xet::XetReader& xet_;
  RangeFetcher& bridge_;
  const std::chrono::seconds fallback_for_;
  std::atomic<MonotonicClock::time_point::rep> bridge_until_{0};  // on the bridge's Env's clock
  std::atomic<bool> logged_{false};
  std::atomic<bool> stopping_{false};
  std::atomic<uint64_t> fallbacks_{0};
  std::atomic<uint64_t> head_reads_{0};
  std::atomic<uint64_t> heads_confirmed_{0};
  std::mutex heads_mu_;
  struct Head {
    xet::MerkleHash hash;
    uint64_t bytes = 0;
    std::shared_ptr<PrefetchedHead> prefetched;
  };
  std::vector<Head> heads_;  // read_head_through_bridge's
  // Hands a prefetched head's answer to its read: never on the reading thread (RangeSource's
  // contract), though the answer may be in before the read asks. Made with the first prefetched
  // head; drained by shutdown().
  std::unique_ptr<Executor> heads_executor_;
};

// Errors of the storage service itself, which the bridge may not share: refusals, missing
// objects, failures and unreachable hosts. Not wrong bytes (kCorrupt), a caller's bad range or
// a read out of time.
bool is_storage_service_error(const Status& s);

}  // namespace hubfs
