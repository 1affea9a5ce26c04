// Reads byte ranges of Xet-stored files natively, from the storage service (docs/xet.md, "The
// read path"), with the contract of RangeFetcher::fetch_async, so the reader can take a Xet
// file's ranges from here instead of the Hub's bridge (net/range_source.h; chosen in core/fs).
//
// For one range [a, b] of a file, reading exactly what the service signs:
//   1. the repo's read token (XetTokens: fetched once, again only near its `exp` or after a 401);
//   2. the reconstruction for exactly that range (PlanCache: GET {cas}/v2/reconstructions/
//      {xetHash}, Range: bytes=a-b in file coordinates; V1 only where V2 answers 404 or 501, as
//      xet-core's remote client does), kept while `plan_ttl` says its URLs are good;
//   3. per term: its chunks from the chunk cache when all are there, else the listed range that
//      holds it (V2: one of the URL's listed ranges, one per request, as huggingface.js XetBlob;
//      V1: the term's url_range), each range once per read, all in flight at once (xorb_fetch.h);
//   4. decoded as the bytes arrive (each chunk once its last byte is in, on the transport's
//      thread: xorb_fetch.h), chunk boundaries from the chunk headers, each chunk hashed; the hashes go to the whole-file check (XetFileChecks), which compares their Merkle
//      root with the file's Xet hash once they tile the file. A read that alone covers the whole
//      file is checked before it answers: on a mismatch it is fetched once more with a fresh
//      plan (nothing of the first attempt served or kept). A partial read is not
//      content-verified: the service's data has no per-chunk hash to check it by.
// What the service sends that does not fit (a refused or malformed plan, short or long bodies,
// headers that lie, frames that do not decode, no answer within the attempt's share of the read's
// deadline) is a service error: the read is tried once more with a fresh plan, then fails with
// kUnavailable (or the refusal's code) so XetRouter reads it through the bridge. A read that fails
// part-way fails whole. Only a failed hash is corrupt data, and that is the file's verdict.
//
// Threads: fetch_async returns at once; the work runs on this reader's own threads (token and
// plan requests block there, never on the caller's or a transport thread). Callbacks run there.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "common/env.h"
#include "common/http.h"
#include "common/status.h"
#include "net/range_source.h"
#include "xet/chunk_cache.h"
#include "xet/file_check.h"
#include "xet/plan_cache.h"
#include "xet/reconstruction.h"
#include "xet/xet_tokens.h"
#include "xet/xorb_fetch.h"

namespace hubfs::xet {

struct XetReaderOptions {
  // 2: V2 reconstructions (one URL per xorb, signed for its listed ranges); the reader moves to
  // 1 for good when the service answers V2 with 404 or 501 (xet-core's rule). 1: V1 from the
  // start (each term's url_range).
  int reconstruction_version = 2;
  // A token is refreshed this long before its `exp`: a request must not reach the CAS with a
  // token that expires on the way (xet-core refreshes within a similar window).
  std::chrono::seconds token_margin{60};
  // Plans are reused this long (their signed URLs last an hour on the Hub; a refusal drops it
  // sooner: the retry asks for a fresh one).
  std::chrono::seconds plan_ttl{300};
  size_t max_plans = 1024;
  // A plan's answer past this is refused as the service failing (docs/constants.md).
  uint64_t max_plan_bytes = 16ull << 20;
  // Each attempt at a read may use at most 1/attempt_share_divisor of the time the read has left
  // (the rest is the retry's and then the bridge's: the transport retries a failing xorb range
  // until its attempt's deadline), and `attempt_budget` for a read without a deadline
  // (docs/constants.md).
  int attempt_share_divisor = 4;
  std::chrono::milliseconds attempt_budget{60'000};
  // A plan request's own limit inside its attempt: a plan is small, so one that trickles is the
  // service failing.
  std::chrono::milliseconds plan_budget{10'000};
  // Threads that run reads: a read holds one while its requests are in flight, so as many as
  // the reader keeps requests in flight (ReaderOptions::parallel_requests).
  int threads = 16;
  // Verified chunks by xorb and index (may be null). Must outlive this reader. Chunks go in only
  // once their file's check matched (file_check.h), as locations in the file's blocks.
  ChunkCache* chunk_cache = nullptr;
  // Files whose chunk hashes are collected for the whole-file check at once (XetFileChecks).
  size_t max_hashing_files = 64;
  // Time (token expiry, plan age, attempt budgets) comes from here. Required (no default: the
  // stack's, or a test's); must outlive the reader.
  Env* env = nullptr;
};

// A read's bytes on their way into the caller's buffer (XetReader::fetch_into_async), shared by
// its attempts: bytes below what was reported ready are never written again, only compared.
class ReadSink;

struct XetReaderStats {
  uint64_t token_requests = 0;
  uint64_t reconstructions = 0;
  uint64_t plans_joined = 0;     // reads that waited for a plan already on its way instead of asking
  uint64_t xorb_requests = 0;
  uint64_t xorb_bytes = 0;       // bytes of xorb ranges received (compressed, headers included)
  uint64_t served_bytes = 0;     // bytes served by reads (from xorbs or the chunk cache)
  uint64_t unverified_bytes = 0; // of served_bytes, those of files whose whole-file check has not matched
  uint64_t cache_bytes = 0;      // served from the chunk cache
  uint64_t retries = 0;          // reads tried a second time after a service error or a whole read's mismatch
  // Of those, reads of a whole file whose chunks failed its Xet hash, fetched again before answering.
  uint64_t whole_read_refetches = 0;
  uint64_t service_errors = 0;   // reads that failed twice (the router then reads them through the bridge)
  uint64_t files_verified = 0;   // files whose served chunks, all of them, hash to their Xet hash
  uint64_t file_hash_mismatches = 0;
  int reconstruction_version = 2;  // the API version in use
};

class XetReader {
 public:
  using Callback = RangeFetcher::Callback;

  // transport must outlive this reader.
  XetReader(HttpTransport& transport, TokenSource tokens, XetReaderOptions options);
  // Calls shutdown().
  ~XetReader();
  // Finishes the reads already started (the transport bounds each), then stops the threads;
  // later fetches fail with kUnavailable. Idempotent.
  void shutdown();
  XetReader(const XetReader&) = delete;
  XetReader& operator=(const XetReader&) = delete;

  // RangeFetcher::fetch_async's contract for the file whose Xet hash is `file`. block_key: the
  // key under which the caller keeps the returned bytes in the block cache (the chunk cache
  // records verified chunks as locations there); empty: nothing goes to the chunk cache.
  void fetch_async(const MerkleHash& file, uint64_t file_size, hubfs::ByteRange range, Callback done,
                   Deadline deadline = Deadline::never(), std::string block_key = {});
  // fetch_async into `into` (RangeSource::fetch_into_async's contract, `progress` included): a
  // read of one term from one listed range (most reads) is decoded straight into `into`, and
  // each chunk's bytes are reported ready once it is decoded and hashed, from an answer whose
  // status and Content-Range were checked before its body (xorb_fetch.h); a read of several
  // pieces writes each into `into` as it is assembled and reports it. A read whose chunks may
  // tile the file alone reports nothing: it is checked before it answers (and fetched again
  // once on a mismatch). A retry (of the transport, or with a fresh plan) compares what it
  // brings below what was reported and fails on a difference: the whole-file check then hashes
  // exactly the bytes served. `done` runs once, after the last write.
  void fetch_into_async(const MerkleHash& file, uint64_t file_size, hubfs::ByteRange range,
                        std::shared_ptr<RangeBuffer> into, RangeSource::Progress progress,
                        std::function<void(Status)> done, Deadline deadline = Deadline::never(),
                        std::string block_key = {});
  // Fetches the read token now, on this reader's threads, unless one was fetched (or is on its
  // way) already: a mount whose listing came from the Hub calls it when the listing shows a Xet
  // file, so its first read waits for the plan only (hf-mount fetches its storage token at mount,
  // src/setup.rs `build_cas_config`). At most once per reader; a failure is only logged (the
  // first read asks again, as without it).
  void warm_token();
  // The same, waiting.
  Result<std::string> fetch(const MerkleHash& file, uint64_t file_size, hubfs::ByteRange range,
                            Deadline deadline = Deadline::never(), std::string block_key = {});

  // The check of the whole file (RangeSource::file_verdict, XetFileChecks::verdict). A mismatch
  // also drops the file's plans, so the reads after it start afresh.
  hubfs::FileVerdict file_verdict(const MerkleHash& file);

  // A RangeSource reading one file through this reader (which must outlive it); block_key as for
  // fetch_async. Its bytes are Provenance::kFileHashed; its file_verdict is the one above.
  std::shared_ptr<RangeSource> source_for(const MerkleHash& file, std::string block_key = {});

  XetReaderStats stats() const;

 private:
  // into: where the bytes go (fetch_into_async; then the answer is an empty string), or null.
  Result<std::string> read_range(const MerkleHash& file, uint64_t file_size, hubfs::ByteRange range,
                                 const Deadline& deadline, const std::string& block_key,
                                 const std::shared_ptr<ReadSink>& into = nullptr);
  // One attempt; fresh: ignore kept plans. A read that alone tiles the file and fails its check
  // answers an error, with *mismatch saying what differed.
  Result<std::string> read_once(const MerkleHash& file, uint64_t file_size, hubfs::ByteRange range,
                                const Deadline& deadline, bool fresh, const std::string& block_key,
                                std::string* mismatch, const std::shared_ptr<ReadSink>& into);
  // One reconstruction request (with its token refresh after a 401 and its fall back from V2).
  Result<std::shared_ptr<const ReconstructionPlan>> ask_plan(const MerkleHash& file, hubfs::ByteRange range,
                                                             const Deadline& deadline, int* version);
  // The chunks [term.chunks) from the chunk cache, if all are there; *chunks gets their hashes.
  std::optional<std::string> from_cache(const ReconstructionTerm& term, std::vector<HashAndSize>* chunks);
  // A file's whole-file check decided: keeps its verified chunks, or reports the mismatch.
  void on_decided(const MerkleHash& file, XetFileChecks::Recorded& decided);

  HttpTransport& transport_;
  const XetReaderOptions options_;
  Env& env_;
  XetTokens tokens_;
  PlanCache plans_;
  XetFileChecks checks_;
  XorbFetchCounters xorbs_;
  std::atomic<int> version_;
  std::atomic<bool> token_warmed_{false};
  std::atomic<uint64_t> served_bytes_{0}, cache_bytes_{0}, retries_{0}, service_errors_{0}, whole_read_refetches_{0};

  // The Env's executor (declared last: its threads start once everything above exists).
  const std::unique_ptr<Executor> work_;
};

}  // namespace hubfs::xet
