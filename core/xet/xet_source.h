// Reads byte ranges of Xet-stored files natively, from the storage service (docs/xet.md, "The
// read path"), with the contract of RangeFetcher::fetch_async, so the reader can take a Xet
// file's ranges from here instead of the Hub's bridge (net/range_source.h; chosen in core/fs).
//
// For one range [a, b] of a file:
//   1. the repo's read token (TokenSource: GET xet-read-token), fetched once and again only
//      `token_margin` before its `exp` (or after a 401);
//   2. the reconstruction for exactly that range (GET {cas}/v1|v2/reconstructions/{xetHash},
//      Range: bytes=a-b in file coordinates), kept while `plan_ttl` says its URLs are good;
//   3. per term: its chunks from the chunk cache when all are there, else the term's xorb byte
//      range from its signed URL (no Authorization header; all terms in flight at once);
//   4. decoded (chunk headers: none, LZ4 frame, byte-grouping + LZ4), and each chunk's hash
//      checked against the xorb's footer (fetched once per xorb, from the end of the same URL,
//      its own hash checked against the xorb's name) where the service lets a V1 URL serve it.
// Wrong bytes (a hash, a length or a frame that does not check out) are fetched once more
// (fresh plan, fresh footer), then the read fails with kCorrupt: never served. Where no footer
// can be had (V2's exactly-signed ranges), chunks are checked for structure and exact lengths
// only and counted as unverified (stats), as a partial read through the bridge is.
//
// Threads: fetch_async returns at once; the work runs on this reader's own threads (token and
// plan requests block there, never on the caller's or a transport thread). Callbacks run there.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <future>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "common/env.h"
#include "common/http.h"
#include "common/status.h"
#include "common/task_queue.h"
#include "net/range_source.h"
#include "xet/chunk_cache.h"
#include "xet/reconstruction.h"
#include "xet/xorb.h"

namespace hubfs::xet {

// A read token for one repo's files (HubClient::xet_read_token).
struct XetToken {
  std::string cas_url;  // no trailing slash
  std::string access_token;
  std::chrono::system_clock::time_point expires;
};
// Fetches a fresh token (blocking; called on the reader's threads). Must be thread-safe.
using TokenSource = std::function<Result<XetToken>()>;

struct XetReaderOptions {
  // 1: V1 plans, whose URLs sign whole xorbs, so footers (chunk hashes) are reachable and every
  // chunk is verified. 2: V2 (exactly signed ranges; falls back to 1 on 404/501 as xet-core
  // does); chunks unverified.
  int reconstruction_version = 1;
  // A token is refreshed this long before its `exp`: a request must not reach the CAS with a
  // token that expires on the way (xet-core refreshes within a similar window).
  std::chrono::seconds token_margin{60};
  // Plans are reused this long (their signed URLs last an hour on the Hub; a 403 on one drops
  // it sooner).
  std::chrono::seconds plan_ttl{300};
  size_t max_plans = 1024;
  // A read that starts where the file's last plan ended (a stream) asks for a plan this long, so
  // the reads after it need no plan of their own: one round trip instead of two for each of
  // them (V1; its terms are narrowed to each read's chunks with the xorbs' footers, so a long
  // window costs plan size, a few terms per 64 MiB xorb, not fetched bytes). After a file's
  // first read the same window is planned ahead (look_ahead); 0 turns both off.
  uint64_t plan_window_bytes = 256ull << 20;
  // Threads that run reads: a read holds one while its requests are in flight, so as many as
  // the reader keeps requests in flight (ReaderOptions::parallel_requests).
  int threads = 16;
  // Decoded, verified chunks by xorb and index (may be null). Must outlive this reader.
  ChunkCache* chunk_cache = nullptr;
  // Footers are fetched with one suffix request of this many bytes (a 64 MiB xorb of 64 KiB
  // chunks has a 41 KiB footer); a longer one costs a second request.
  size_t footer_probe_bytes = 64 * 1024;
  // Files whose chunk hashes are collected for the whole-file check at once (each holds 40
  // bytes per chunk: 0.6 MB for a 1 GB file); past it the oldest goes unchecked.
  size_t max_hashing_files = 64;
  // Wall time (token expiry, plan age) comes from here; tests pass one whose time they move.
  // Must outlive the reader.
  Env* env = &Env::real();
};

struct XetReaderStats {
  uint64_t token_requests = 0;
  uint64_t reconstructions = 0;
  uint64_t plans_joined = 0;       // reads that waited for a plan already on its way instead of asking
  uint64_t xorb_requests = 0;
  uint64_t xorb_bytes = 0;         // bytes of xorb ranges received (compressed, headers included)
  uint64_t footer_requests = 0;
  uint64_t chunks_verified = 0;    // checked against their xorb's footer
  uint64_t unverified_bytes = 0;   // served with length and structure checks only (no footer)
  uint64_t cache_bytes = 0;        // served from the chunk cache
  uint64_t refetches = 0;          // reads whose bytes failed a check and were fetched again
  uint64_t corrupt = 0;            // reads that failed their checks twice (errors, nothing served)
  uint64_t files_verified = 0;     // files whose served chunks, all of them, hash to their Xet hash
  uint64_t file_hash_mismatches = 0;
};

class XetReader {
 public:
  using Callback = RangeFetcher::Callback;

  // transport must outlive this reader.
  XetReader(HttpTransport& transport, TokenSource tokens, XetReaderOptions options = {});
  // Calls shutdown().
  ~XetReader();
  // Finishes the reads already started (the transport bounds each), then stops the threads;
  // later fetches fail with kUnavailable. Idempotent.
  void shutdown();
  XetReader(const XetReader&) = delete;
  XetReader& operator=(const XetReader&) = delete;

  // RangeFetcher::fetch_async's contract for the file whose Xet hash is `file`. block_key: the
  // key under which the caller keeps the returned bytes in the block cache (the chunk cache's
  // FileBytes reads them back there: the chunks are then recorded as locations in that file
  // instead of copied); empty: the chunks are copied into the chunk cache.
  void fetch_async(const MerkleHash& file, uint64_t file_size, hubfs::ByteRange range, Callback done,
                   Deadline deadline = Deadline::never(), std::string block_key = {});
  // The same, waiting.
  Result<std::string> fetch(const MerkleHash& file, uint64_t file_size, hubfs::ByteRange range,
                            Deadline deadline = Deadline::never(), std::string block_key = {});

  // Fetches the read token now, on this reader's threads, unless that was done before: called
  // when a repo turns out to hold Xet files, so the first read finds the token there (a failure
  // is forgotten: the first read asks again and reports it).
  void prefetch_token();

  // The check of the whole file (RangeSource::file_verdict): kMatch once the chunks this reader
  // served of it tile it and their Merkle root is its Xet hash; kMismatch when that root is not,
  // or two reads served different chunks at one offset, reported once: the file's record, plans
  // and footers are then forgotten, so the reads after it start afresh.
  hubfs::FileVerdict file_verdict(const MerkleHash& file);

  // A RangeSource reading one file through this reader (which must outlive it); block_key as for
  // fetch_async. Its bytes are Provenance::kFileHashed; its file_verdict is the one above.
  std::shared_ptr<RangeSource> source_for(const MerkleHash& file, std::string block_key = {});

  XetReaderStats stats() const;

 private:
  Result<std::string> read_range(const MerkleHash& file, uint64_t file_size, hubfs::ByteRange range,
                                 const Deadline& deadline, const std::string& block_key);
  // One attempt; fresh: ignore cached plans and footers.
  Result<std::string> read_once(const MerkleHash& file, uint64_t file_size, hubfs::ByteRange range,
                                const Deadline& deadline, bool fresh, const std::string& block_key);
  // Records the chunks (hash, size) a read served from file_offset on; once they tile the whole
  // file, compares their Merkle root with the file's Xet hash (file_verdict; logged and counted
  // if it differs). A chunk recorded at an offset where another one already is, with another
  // hash or size, is a mismatch at once: one of the two reads served wrong bytes.
  void note_chunks(const MerkleHash& file, uint64_t file_size, uint64_t file_offset,
                   const std::vector<HashAndSize>& chunks);
  // The current token, fetched when there is none, it is within token_margin of exp, or it is
  // `refused` (a 401 answered it).
  Result<XetToken> token(const std::string* refused);
  // A plan covering the range: a cached one, or one asked for it (or, for a read that starts where
  // the file's last plan ended, for the next plan_window_bytes). *version_out: the API version
  // (1, 2) that answered; *covered_out: the file range the plan was asked for (wider than `range`
  // for a window). on_first (if given) runs when this is the file's first V1 plan, once it is
  // registered and before it is asked for, so what it starts (look_ahead) shares the round trip.
  Result<std::shared_ptr<const ReconstructionPlan>> plan(const MerkleHash& file, uint64_t file_size,
                                                         hubfs::ByteRange range, const Deadline& deadline, bool fresh,
                                                         int* version_out, hubfs::ByteRange* covered_out,
                                                         const std::function<void()>& on_first);
  // At a file's first read (an application opening it: HDF5's superblock, a header), beside that
  // read's own plan, in the background: the plan for the next window from `from`, then the
  // footers of its xorbs, each once. The reads that follow (a hint's wave, a stream) then find
  // both and send their ranges at once, as through the bridge, instead of waiting a plan's round
  // trip. Not for files within a quarter window of their end (small files: no requests a read
  // may never need).
  void look_ahead(const MerkleHash& file, uint64_t file_size, uint64_t from, const Deadline& deadline);
  // One reconstruction request (and its token refresh, its fall back from V2) for file bytes
  // [offset, offset + length); *version: asked with, answered by.
  Result<std::shared_ptr<const ReconstructionPlan>> ask_plan(const MerkleHash& file, uint64_t offset, uint64_t length,
                                                             const Deadline& deadline, int* version);
  // The footer of a xorb, fetched once. Null when the URL refuses it and it is not `required`
  // (a V2 URL signed for other bytes: the xorb's chunks go unverified); with `required` (a V1
  // URL, signed for the whole xorb) a refusal is an error like any other.
  Result<std::shared_ptr<const XorbFooter>> footer(const MerkleHash& xorb, const std::string& url,
                                                   const Deadline& deadline, bool fresh, bool required);
  Result<std::shared_ptr<const XorbFooter>> fetch_footer(const MerkleHash& xorb, const std::string& url,
                                                         const Deadline& deadline, bool required);
  // Starts the GET of one xorb byte range; the future holds its body (exactly that range), in a
  // buffer with `headroom` bytes of capacity beyond it (for decoding it in place). companion: a
  // further piece of a read whose first piece just went out (HttpRequest::companion).
  std::future<Result<std::string>> get_xorb_range(const std::string& url, const ByteRange& bytes,
                                                  const Deadline& deadline, size_t headroom, bool companion);
  // One term's part of a read (xet_source.cc): the chunks it needs and the bytes holding them.
  struct Piece;
  // The headroom a piece's range needs to be decoded inside its own buffer: its chunks decode
  // to more than they are stored where LZ4 compressed them (see decode_chunks).
  static size_t decode_headroom(const Piece& piece);
  // The whole term, as the plan says to fetch it.
  static Piece whole_term(const ReconstructionPlan& plan, const TermRead& t);
  // Only the term's chunks holding the read's bytes, located by the xorb's footer; nullopt when
  // the footer does not describe the term.
  static std::optional<Piece> narrowed(const ReconstructionPlan& plan, const TermRead& t, const XorbFooter& f);
  // The piece's bytes from the chunk cache, when it holds all its chunks. *chunks gets their
  // hashes and sizes.
  std::optional<std::string> from_cache(const Piece& piece, std::vector<HashAndSize>* chunks);
  // Keeps a fetched piece's verified chunks (their decoded bytes at `data`) in the chunk cache: as
  // a location in the file's blocks (those the read `range` returns to the caller) when block_key
  // is given, else as a copy.
  void keep_chunks(const Piece& piece, const std::vector<HashAndSize>& chunks, const char* data,
                   hubfs::ByteRange range, const std::string& block_key);

  HttpTransport& transport_;
  TokenSource tokens_;
  const XetReaderOptions options_;

  std::atomic<bool> token_prefetched_{false};
  std::mutex token_mu_;  // held while a token is fetched: one fetch for all waiters
  std::optional<XetToken> token_;

  std::mutex mu_;  // guards the maps below and version_
  int version_;
  struct CachedPlan {
    std::shared_ptr<const ReconstructionPlan> plan;
    std::chrono::system_clock::time_point fetched;
    int version = 1;
    uint64_t start = 0, end = 0;  // the file bytes it covers
  };
  std::map<MerkleHash, std::vector<CachedPlan>> plans_;  // by file
  size_t plan_count_ = 0;
  std::map<MerkleHash, uint64_t> plan_ends_;  // where the last plan asked for each file ends
  // Plans on their way, by file: a read inside one's range waits for it instead of asking.
  struct PlanAnswer {
    Result<std::shared_ptr<const ReconstructionPlan>> plan;
    int version = 1;
    hubfs::ByteRange covered;
  };
  struct PendingPlan {
    uint64_t start = 0, end = 0;
    std::shared_future<PlanAnswer> answer;
  };
  std::map<MerkleHash, std::vector<PendingPlan>> pending_plans_;
  std::map<MerkleHash, std::shared_future<Result<std::shared_ptr<const XorbFooter>>>> footers_;
  // Chunks served so far per file, by file offset, until they cover it and its hash is checked.
  struct FileChunks {
    uint64_t size = 0;
    uint64_t covered = 0;
    hubfs::FileVerdict verdict = hubfs::FileVerdict::kUnknown;  // kUnknown until checked
    std::map<uint64_t, HashAndSize> chunks;
  };
  std::map<MerkleHash, FileChunks> files_;

  std::atomic<uint64_t> token_requests_{0}, reconstructions_{0}, plans_joined_{0}, xorb_requests_{0}, xorb_bytes_{0},
      footer_requests_{0}, chunks_verified_{0}, unverified_bytes_{0}, cache_bytes_{0}, refetches_{0}, corrupt_{0},
      files_verified_{0}, file_hash_mismatches_{0};

  TaskQueue work_;  // declared last: its threads start once everything above exists
};

}  // namespace hubfs::xet
