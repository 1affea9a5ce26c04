#include "xet/xet_source.h"

#include <algorithm>
#include <cstring>
#include <map>
#include <optional>

#include "common/big_buffer.h"
#include "common/log.h"

namespace hubfs::xet {

namespace {

std::string range_text(hubfs::ByteRange r) { return std::to_string(r.offset) + "+" + std::to_string(r.length); }

long long ms_between(MonotonicClock::time_point a, MonotonicClock::time_point b) {
  return std::chrono::duration_cast<std::chrono::milliseconds>(b - a).count();
}

std::string status_text(const HttpResponse& r) {
  std::string body = r.body.substr(0, 200);
  for (char& c : body) {
    if (c == '\n' || c == '\r') c = ' ';
  }
  return "HTTP " + std::to_string(r.status) + (body.empty() ? "" : " (" + body + ")");
}

// The Xet storage service answered something other than a plan: a service error (the caller may
// read through the bridge instead).
Status service_error(const std::string& what, const HttpResponse& r) {
  if (r.status == 401 || r.status == 403) {
    return PermissionDenied(what + ": " + status_text(r) + ": the Xet service refused the token");
  }
  if (r.status == 404) return NotFound(what + ": " + status_text(r));
  return Unavailable(what + ": " + status_text(r) + ": the Xet storage service failed");
}

// What a failed attempt says to the router: a storage-service error (it reads the bytes through
// the bridge), whatever the step that failed called it; the read's own deadline passing stays a
// timeout, and a caller's bad range stays its own.
Status as_service_error(const Status& s, const Deadline& read_deadline) {
  switch (s.code()) {
    case Code::kInvalidArgument:
      return s;
    case Code::kUnavailable:
    case Code::kIo:
    case Code::kPermissionDenied:
    case Code::kNotFound:
    case Code::kUnsupported:
      return s;
    default:
      if (read_deadline.expired()) return Timeout("Xet read: " + s.message());
      return Unavailable("the Xet storage service failed: " + s.message());
  }
}

// One read's debug line: when (ms from the read's start, plan included: its token, or its wait
// for a plan another read asked) its plan was there, its ranges were out and it was done.
std::string read_timeline(const MerkleHash& file, hubfs::ByteRange range, long long plan_ms, size_t ranges_out,
                          size_t cached_terms, long long out_ms, long long done_ms, const Status& result) {
  return "Xet read " + file.hex().substr(0, 16) + "... bytes " + range_text(range) + ": plan +" +
         std::to_string(plan_ms) + " ms, " + std::to_string(ranges_out) + (ranges_out == 1 ? " range" : " ranges") +
         " out +" + std::to_string(out_ms) + " ms (" + std::to_string(cached_terms) +
         " terms from the chunk cache), done +" + std::to_string(done_ms) + " ms" +
         (result.ok() ? "" : " (failed: " + result.message() + ")");
}

}  // namespace

class ReadSink : public DecodeSink {
 public:
  ReadSink(std::shared_ptr<RangeBuffer> into, uint64_t length, RangeSource::Progress progress)
      : into_(std::move(into)), length_(length), progress_(std::move(progress)) {}

  // Whether this attempt's ready bytes are reported (a read that may tile the file alone: not).
  void report(bool on) { reporting_.store(on); }
  uint64_t ready_bytes() const { return ready_.load(); }

  Status put(uint64_t offset, const char* data, size_t n) override {
    if (offset >= length_) return Status::Ok();  // a term's bytes past the read's end
    n = static_cast<size_t>(std::min<uint64_t>(n, length_ - offset));
    const uint64_t fixed = ready_.load();
    if (offset < fixed) {
      // Served already: a retry brings them again, and they must be the same.
      const size_t same = static_cast<size_t>(std::min<uint64_t>(n, fixed - offset));
      char buf[16384];
      for (size_t at = 0; at < same; at += sizeof buf) {
        const size_t k = std::min(sizeof buf, same - at);
        into_->read(offset + at, buf, k);
        if (std::memcmp(buf, data + at, k) != 0) {
          return Unavailable("the Xet storage service sent different bytes for bytes " + std::to_string(offset + at) +
                             "+" + std::to_string(k) + " of a read than it sent before, which were served");
        }
      }
      offset += same, data += same, n -= same;
    }
    if (n) into_->write(offset, data, n);
    return Status::Ok();
  }

  void ready(uint64_t bytes) override {
    if (!reporting_.load()) return;
    bytes = std::min(bytes, length_);
    if (bytes <= ready_.load()) return;
    ready_.store(bytes);  // one writer at a time: an attempt's decoder, or its assembling thread
    if (progress_) progress_(bytes);
  }

 private:
  const std::shared_ptr<RangeBuffer> into_;
  const uint64_t length_;
  const RangeSource::Progress progress_;
  std::atomic<uint64_t> ready_{0};
  std::atomic<bool> reporting_{false};
};

XetReader::XetReader(HttpTransport& transport, TokenSource tokens, XetReaderOptions options)
    : transport_(transport),
      options_(std::move(options)),
      env_(env_of(options_.env, "XetReader")),
      tokens_(std::move(tokens), env_, options_.token_margin),
      plans_(env_, options_.plan_ttl, options_.max_plans),
      checks_(options_.max_hashing_files),
      version_(options_.reconstruction_version == 1 ? 1 : 2),
      work_(env_.new_executor(std::max(1, options_.threads))) {}

XetReader::~XetReader() { shutdown(); }

void XetReader::shutdown() { work_->drain(); }

XetReaderStats XetReader::stats() const {
  XetReaderStats s;
  s.token_requests = tokens_.requests();
  s.reconstructions = plans_.requests();
  s.plans_joined = plans_.joined();
  s.xorb_requests = xorbs_.requests.load();
  s.xorb_bytes = xorbs_.bytes.load();
  s.served_bytes = served_bytes_.load();
  const uint64_t verified = checks_.verified_bytes();
  s.unverified_bytes = s.served_bytes > verified ? s.served_bytes - verified : 0;
  s.cache_bytes = cache_bytes_.load();
  s.retries = retries_.load();
  s.whole_read_refetches = whole_read_refetches_.load();
  s.service_errors = service_errors_.load();
  s.files_verified = checks_.files_verified();
  s.file_hash_mismatches = checks_.mismatches();
  s.reconstruction_version = version_.load();
  return s;
}

void XetReader::fetch_async(const MerkleHash& file, uint64_t file_size, hubfs::ByteRange range, Callback done,
                            Deadline deadline, std::string block_key) {
  auto cb = std::make_shared<Callback>(std::move(done));
  bool posted = work_->post([this, file, file_size, range, cb, deadline, key = std::move(block_key)] {
    (*cb)(read_range(file, file_size, range, deadline, key));
  });
  if (!posted) (*cb)(Unavailable("the Xet reader is shut down (unmounting)"));
}

void XetReader::fetch_into_async(const MerkleHash& file, uint64_t file_size, hubfs::ByteRange range,
                                 std::shared_ptr<RangeBuffer> into, RangeSource::Progress progress,
                                 std::function<void(Status)> done, Deadline deadline, std::string block_key) {
  auto sink = std::make_shared<ReadSink>(std::move(into), range.length, std::move(progress));
  auto cb = std::make_shared<std::function<void(Status)>>(std::move(done));
  bool posted = work_->post([this, file, file_size, range, cb, deadline, key = std::move(block_key), sink] {
    (*cb)(read_range(file, file_size, range, deadline, key, sink).status());
  });
  if (!posted) (*cb)(Unavailable("the Xet reader is shut down (unmounting)"));
}

void XetReader::warm_token() {
  if (token_warmed_.exchange(true)) return;
  (void)work_->post([this] {
    // Bounded as a plan is: the token is as small, and a read that needs it meanwhile joins this
    // fetch with its own deadline (XetTokens' single flight).
    auto t = tokens_.get(Deadline::after(options_.plan_budget, env_.clock()));
    if (!t.ok()) log_debug("Xet read token at the listing: " + t.status().message() + "; the first read asks again");
  });
}

Result<std::string> XetReader::fetch(const MerkleHash& file, uint64_t file_size, hubfs::ByteRange range,
                                     Deadline deadline, std::string block_key) {
  auto answer = std::make_shared<OneShot<Result<std::string>>>();
  fetch_async(file, file_size, range, [answer](Result<std::string> r) { answer->set(std::move(r)); }, deadline,
              std::move(block_key));
  return answer->take();  // the read's own deadline bounds it: its callback always runs
}

namespace {
class XetFileSource : public RangeSource {
 public:
  XetFileSource(XetReader& reader, MerkleHash file, std::string block_key)
      : reader_(reader), file_(file), block_key_(std::move(block_key)) {}
  void fetch_async(uint64_t file_size, hubfs::ByteRange range, Callback done, Deadline deadline) override {
    reader_.fetch_async(file_, file_size, range, with_provenance(std::move(done), Provenance::kFileHashed), deadline,
                        block_key_);
  }
  void fetch_into_async(uint64_t file_size, hubfs::ByteRange range, std::shared_ptr<RangeBuffer> into,
                        Progress progress, DoneInto done, Deadline deadline) override {
    reader_.fetch_into_async(
        file_, file_size, range, std::move(into), std::move(progress),
        [done = std::move(done)](Status s) { done(s, Provenance::kFileHashed); }, deadline, block_key_);
  }
  FileVerdict file_verdict() override { return reader_.file_verdict(file_); }

 private:
  XetReader& reader_;
  MerkleHash file_;
  std::string block_key_;
};
}  // namespace

std::shared_ptr<RangeSource> XetReader::source_for(const MerkleHash& file, std::string block_key) {
  return std::make_shared<XetFileSource>(*this, file, std::move(block_key));
}

Result<std::string> XetReader::read_range(const MerkleHash& file, uint64_t file_size, hubfs::ByteRange range,
                                          const Deadline& deadline, const std::string& block_key,
                                          const std::shared_ptr<ReadSink>& into) {
  if (range.length == 0) return std::string();
  if (range.offset > file_size || range.length > file_size - range.offset) {
    return InvalidArgument("Xet read of bytes " + range_text(range) + " past the end of a " +
                           std::to_string(file_size) + "-byte file");
  }
  Status last = Status::Ok();
  bool mismatched_before = false;
  for (int attempt = 0; attempt < 2; ++attempt) {
    // Each attempt gets a share of what the read has left, so a service that trickles leaves
    // time for the retry and then for the bridge.
    const Deadline mine =
        deadline.is_never()
            ? Deadline::after(options_.attempt_budget, env_.clock())
            : deadline.within(deadline.remaining() / std::max(1, options_.attempt_share_divisor), env_.clock());
    std::string mismatch;
    auto got = read_once(file, file_size, range, mine, /*fresh=*/attempt > 0, block_key, &mismatch, into);
    if (got.ok()) {
      served_bytes_ += range.length;
      return got;
    }
    last = as_service_error(got.status(), deadline);
    if (last.code() == Code::kInvalidArgument || last.code() == Code::kTimeout) return last;
    if (!mismatch.empty() && attempt == 0) {
      ++whole_read_refetches_;
      mismatched_before = true;
      log_warning("Xet file " + file.hex() + ": " + mismatch + ": fetching it once more with a fresh plan");
    } else if (!mismatch.empty()) {
      last = Unavailable("Xet file " + file.hex() + ": fetched " +
                         (mismatched_before ? "twice, and both times " : "twice (the first time failed), and ") +
                         mismatch + ": the storage service did not serve this file (nothing of it was kept); it is "
                         "read through the Hub's bridge instead, checked by its SHA-256");
    }
    if (attempt == 0) {
      ++retries_;
      if (mismatch.empty()) {
        log_debug("Xet read of " + file.hex().substr(0, 16) + "... bytes " + range_text(range) + ": " +
                  last.message() + "; trying once more with a fresh plan");
      }
    }
  }
  ++service_errors_;
  return last;
}

Result<std::shared_ptr<const ReconstructionPlan>> XetReader::ask_plan(const MerkleHash& file, hubfs::ByteRange range,
                                                                      const Deadline& deadline, int* version) {
  bool refreshed_token = false;
  const std::string* refused = nullptr;
  std::string refused_token;
  int v = version_.load();
  for (;;) {
    auto tok = tokens_.get(deadline, refused);
    if (!tok.ok()) return tok.status();
    HttpRequest req;
    req.url = tok->cas_url + "/v" + std::to_string(v) + "/reconstructions/" + file.hex();
    req.headers = {{"Authorization", "Bearer " + tok->access_token},
                   {"Range", "bytes=" + std::to_string(range.offset) + "-" +
                                 std::to_string(range.offset + range.length - 1)}};
    req.deadline = deadline.within(options_.plan_budget, env_.clock());
    req.max_body = options_.max_plan_bytes;
    auto resp = transport_.perform(std::move(req));
    if (!resp.ok()) return resp.status().with_context("asking the Xet service for a reconstruction");
    if (resp->status == 401 && !refreshed_token) {
      refreshed_token = true;  // revoked or expired early: one fresh token
      refused_token = tok->access_token;
      refused = &refused_token;
      continue;
    }
    if (v == 2 && (resp->status == 404 || resp->status == 501)) {
      // xet-core's rule (xet_client/src/cas_client/remote_client.rs): a service without V2
      // answers 404 or 501; V1 is asked, and used from then on once it answers.
      v = 1;
      continue;
    }
    if (resp->status != 200) return service_error("reconstruction of " + file.hex(), *resp);
    auto parsed = v == 2 ? parse_reconstruction_v2(resp->body) : parse_reconstruction_v1(resp->body);
    if (!parsed.ok()) return Unavailable(parsed.status().message());
    int expected = 2;
    if (v == 1 && version_.compare_exchange_strong(expected, 1)) {
      log_info("the Xet service has no V2 reconstructions (404/501): using V1");
    }
    *version = v;
    return std::make_shared<const ReconstructionPlan>(std::move(parsed).value());
  }
}

std::optional<std::string> XetReader::from_cache(const ReconstructionTerm& term, std::vector<HashAndSize>* chunks) {
  ChunkCache* cache = options_.chunk_cache;
  if (!cache) return std::nullopt;
  auto all = cache->get_range(term.xorb, term.chunks.start, term.chunks.end, chunks);
  if (!all || all->size() != term.unpacked_length || chunks->size() != term.chunks.count()) {
    chunks->clear();  // not all there, or not what the plan says: fetched
    return std::nullopt;
  }
  return all;
}

hubfs::FileVerdict XetReader::file_verdict(const MerkleHash& file) {
  const hubfs::FileVerdict v = checks_.verdict(file);
  if (v == hubfs::FileVerdict::kMismatch) plans_.forget(file);
  return v;
}

void XetReader::on_decided(const MerkleHash& file, XetFileChecks::Recorded& decided) {
  if (decided.verdict == hubfs::FileVerdict::kMismatch) {
    plans_.forget(file);
    log_error("Xet file " + file.hex() + ": " + decided.why +
              ": the storage service did not serve this file. Its bytes are dropped and fetched again with fresh "
              "plans; report this to the Hub if it repeats");
    return;
  }
  ChunkCache* cache = options_.chunk_cache;
  if (decided.verdict != hubfs::FileVerdict::kMatch || !cache || !cache->keeps_locations() ||
      decided.block_key.empty()) {
    return;
  }
  // The whole file's blocks hold every verified chunk: each run is recorded where it lies there,
  // with nothing inline.
  for (const VerifiedRun& run : decided.verified_runs) {
    cache->put_location(run.xorb, run.first, run.chunks, decided.block_key, run.file_offset, {}, {});
  }
}

Result<std::string> XetReader::read_once(const MerkleHash& file, uint64_t file_size, hubfs::ByteRange range,
                                         const Deadline& deadline, bool fresh, const std::string& block_key,
                                         std::string* mismatch, const std::shared_ptr<ReadSink>& into) {
  // The read's steps on the Env's clock, for its debug line (read_timeline): where a cold read's
  // round trips go, drawn from the log without a tracer.
  const MonotonicClock::time_point started = env_.now();
  auto planned = plans_.get(file, range, deadline, fresh,
                            [this](const MerkleHash& f, hubfs::ByteRange r, const Deadline& d, int* v) {
                              return ask_plan(f, r, d, v);
                            });
  if (!planned.ok()) return planned.status();
  const MonotonicClock::time_point plan_ready = env_.now();
  const ReconstructionPlan& plan = *planned->plan;
  auto reads = map_read(plan, planned->covered.offset, range.offset, range.length);
  if (!reads.ok()) return Unavailable("reconstruction of " + file.hex() + ": " + reads.status().message());
  const size_t n = reads->size();

  // The listed ranges the read needs, each once: several terms may lie in one.
  struct Request {
    const XorbFetch* fetch = nullptr;
    const XorbRange* listed = nullptr;
    MerkleHash xorb;
    bool needed = false;
    uint64_t known_unpacked = 0;  // of its chunks the read's terms describe
    uint32_t known_chunks = 0;
    XorbDecoded pending;  // its chunks, decoded as they arrive
    std::shared_ptr<const ChunkStreamDecoder> decoder;  // filling `pending`
    size_t expected_output = 0;  // what its decoder will most likely keep
    std::optional<Result<DecodedChunks>> decoded;
  };
  std::vector<Request> requests;
  std::map<const XorbRange*, size_t> request_of;
  struct Piece {
    const TermRead* read;
    const ReconstructionTerm* term;
    size_t request = 0;
    std::optional<std::string> cached;
    std::vector<HashAndSize> cached_chunks;
  };
  std::vector<Piece> pieces(n);
  for (size_t i = 0; i < n; ++i) {
    const TermRead& t = (*reads)[i];
    Piece& p = pieces[i];
    p.read = &t;
    p.term = &plan.terms[t.term_index];
    auto [it, added] = request_of.emplace(t.source.range, requests.size());
    if (added) {
      requests.emplace_back();
      requests.back().fetch = t.source.fetch;
      requests.back().listed = t.source.range;
      requests.back().xorb = p.term->xorb;
    }
    p.request = it->second;
    p.cached = from_cache(*p.term, &p.cached_chunks);
    if (!p.cached) {
      Request& r = requests[p.request];
      r.needed = true;
      r.known_unpacked += p.term->unpacked_length;
      r.known_chunks += p.term->chunks.count();
    }
  }
  // A read of one term from one listed range (most reads: a file's terms are long) is decoded
  // into its output from the read's first byte on and handed over: no copy trims it.
  const bool one_piece = n == 1 && requests.size() == 1 && !pieces[0].cached;
  if (into) {
    // Its bytes are served as they are reported ready, unless its chunks may tile the file alone
    // (it then is checked before it answers: nothing served before): a chunk is at most
    // kMaxChunkSize, so such a read starts and ends within one of the file's ends.
    const uint64_t end = range.offset + range.length;
    into->report(!(range.offset < kMaxChunkSize && file_size - end < kMaxChunkSize));
  }
  // Every range the cache cannot serve goes out at once; the read holds one of the reader's
  // slots, so its ranges after the first go out beside it (HttpRequest::companion). Each is
  // decoded, every chunk hashed (the file's check needs every one), as its bytes arrive.
  bool first_out = true;
  size_t ranges_out = 0;
  for (Request& r : requests) {
    if (!r.needed) continue;
    const uint32_t unknown = r.listed->chunks.count() > r.known_chunks ? r.listed->chunks.count() - r.known_chunks : 0;
    DecodeExtras extras;
    extras.hash = true;
    size_t capacity = listed_range_output_bound(r.known_unpacked, unknown);
    if (one_piece) {
      extras.keep_from_chunk = pieces[0].term->chunks.start - r.listed->chunks.start;
      extras.keep_skip = pieces[0].read->skip;
      // Into the caller's buffer, each chunk served as it is decoded: no output of its own.
      if (into) extras.sink = into, capacity = 0;
    }
    r.expected_output = extras.sink ? 0 : one_piece ? pieces[0].read->take : r.known_unpacked;
    r.pending = fetch_xorb_range(transport_, r.fetch->url, r.xorb, *r.listed, deadline, capacity, extras,
                                 !first_out, xorbs_, &r.decoder);
    first_out = false;
    ++ranges_out;
  }
  const MonotonicClock::time_point out_at = env_.now();
  // While the ranges wait for their first bytes, this thread maps the memory their decoders
  // will write and this read's output: the transport's one thread, which copies every byte in,
  // then finds its pages there (fresh pages cost a fault and zeroing each; docs/xet.md).
  for (const Request& r : requests) {
    if (r.decoder) r.decoder->prefault_output(r.expected_output);
  }
  std::string out;
  uint64_t assembled = 0;  // bytes of the range in `out`, or in `into`
  // The piece's bytes onto the read's: into the caller's buffer (then ready), or `out`.
  auto assemble = [&](const char* p, size_t k) {
    if (into) {
      Status s = into->put(assembled, p, k);
      if (!s.ok()) return s;
      into->ready(assembled + k);
    } else {
      out.append(p, k);
    }
    assembled += k;
    return Status::Ok();
  };
  if (n > 1 && !into) {
    out.reserve(range.length);
    advise_huge_pages(out.data(), range.length);
    prefault_pages(out.data(), range.length);
  }
  Status first_error = Status::Ok();
  // Each piece's chunks, for the whole-file check (from its term's first byte on).
  std::vector<std::vector<ServedChunk>> served(n);
  for (size_t i = 0; i < n; ++i) {
    Piece& p = pieces[i];
    const TermRead& t = *p.read;
    const ReconstructionTerm& term = *p.term;
    if (p.cached) {
      for (uint32_t k = 0; k < p.cached_chunks.size(); ++k)
        served[i].push_back({p.cached_chunks[k], term.xorb, term.chunks.start + k, /*from_cache=*/true});
      if (first_error.ok()) {
        first_error = assemble(p.cached->data() + t.skip, t.take);
        cache_bytes_ += t.take;
      }
      continue;
    }
    Request& r = requests[p.request];
    if (!r.decoded) {
      // Every request is waited for before returning, failed or not (they use this reader).
      r.decoded = r.pending->take();
    }
    if (!first_error.ok()) continue;
    if (!r.decoded->ok()) {
      first_error = r.decoded->status();
      continue;
    }
    const DecodedChunks& d = **r.decoded;
    const size_t lo = term.chunks.start - r.listed->chunks.start;
    const size_t hi = lo + term.chunks.count();
    const uint64_t begin = lo ? d.ends[lo - 1] : 0;
    const uint64_t end = d.ends[hi - 1];
    if (end - begin != term.unpacked_length || t.skip + t.take > term.unpacked_length) {
      first_error = Unavailable("xorb " + term.xorb.hex() + " chunks [" + std::to_string(term.chunks.start) + ", " +
                                std::to_string(term.chunks.end) + ") decoded to " + std::to_string(end - begin) +
                                " bytes, the reconstruction says " + std::to_string(term.unpacked_length) +
                                ": the Xet service's plan and its data disagree");
      continue;
    }
    if (d.hashes.size() != d.count() || d.dropped != (one_piece ? begin + t.skip : 0) ||
        d.data.size() + d.sunk < begin + t.skip - d.dropped + t.take) {
      first_error = Internal("xorb " + term.xorb.hex() + ": a decoded range does not hold what the read asked for");
      continue;
    }
    // Hashed as they arrived (on the transport's thread): the file's check needs every one.
    for (size_t k = lo; k < hi; ++k) {
      const uint64_t a = k ? d.ends[k - 1] : 0;
      served[i].push_back(
          {{d.hashes[k], d.ends[k] - a}, term.xorb, r.listed->chunks.start + static_cast<uint32_t>(k), false});
    }
    if (one_piece && into) {
      assembled = t.take;  // decoded into the caller's buffer, and reported, as it came
    } else if (one_piece) {
      // Decoded from the read's first byte on: only its end is cut, and it is handed over.
      std::string& data = r.decoded->value().data;
      data.resize(t.take);
      out = std::move(data);
      assembled = t.take;
    } else {
      first_error = assemble(d.data.data() + (begin + t.skip - d.dropped), t.take);
    }
  }
  if (log_enabled(LogLevel::kDebug)) {
    size_t cached_terms = 0;
    for (const Piece& p : pieces) cached_terms += p.cached.has_value();
    log_debug(read_timeline(file, range, ms_between(started, plan_ready), ranges_out, cached_terms,
                            ms_between(started, out_at), ms_between(started, env_.now()), first_error));
  }
  if (!first_error.ok()) return first_error;
  if (assembled != range.length) {
    return Unavailable("Xet read assembled " + std::to_string(assembled) + " bytes for a " +
                       std::to_string(range.length) + "-byte range: the reconstruction does not cover it");
  }
  // The read's chunks, back to back from its first term's first byte, recorded at once: a read
  // of the whole file is then checked as one before it answers.
  std::vector<ServedChunk> all;
  for (auto& s : served) all.insert(all.end(), s.begin(), s.end());
  auto decided = checks_.record(file, file_size, n ? pieces[0].read->file_offset : range.offset, all, block_key);
  if (decided.dropped) {
    // This read alone tiles the file and its bytes are not the file's (a corrupt byte or a plan
    // that lies): nothing of it was served or kept, so it is not answered (read_range fetches it
    // once more with a fresh plan).
    plans_.forget(file);
    *mismatch = decided.why;
    return Unavailable("Xet file " + file.hex() + ": " + decided.why +
                       ": the storage service did not serve this file");
  }
  if (decided.verdict != hubfs::FileVerdict::kUnknown) {
    const MonotonicClock::time_point decided_at = env_.now();
    on_decided(file, decided);
    if (log_enabled(LogLevel::kDebug)) {
      log_debug("Xet file " + file.hex().substr(0, 16) + "... " +
                (decided.verdict == hubfs::FileVerdict::kMatch ? "matched" : "did not match") +
                " its Xet hash, decided by the read of bytes " + range_text(range) +
                ": checked +" + std::to_string(ms_between(started, decided_at)) + " ms (" +
                std::to_string(decided.verified_runs.size()) + " verified runs), its chunks kept by +" +
                std::to_string(ms_between(started, env_.now())) + " ms");
    }
  }
  return out;
}

}  // namespace hubfs::xet
