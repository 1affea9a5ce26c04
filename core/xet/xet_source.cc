#include "xet/xet_source.h"

#include <algorithm>
#include <cstring>

#include "common/big_buffer.h"
#include "common/log.h"

namespace hubfs::xet {

namespace {

std::string range_header(uint64_t first, uint64_t last) {
  return "bytes=" + std::to_string(first) + "-" + std::to_string(last);
}

// "bytes a-b/total" → (a, b, total); nullopt unless well formed.
struct ContentRange {
  uint64_t first = 0, last = 0, total = 0;
};
std::optional<ContentRange> parse_content_range(const std::string& v) {
  unsigned long long a = 0, b = 0, t = 0;
  char tail = 0;
  if (std::sscanf(v.c_str(), "bytes %llu-%llu/%llu%c", &a, &b, &t, &tail) != 3 || a > b || b >= t) return std::nullopt;
  return ContentRange{a, b, t};
}

std::string status_text(const HttpResponse& r) {
  std::string body = r.body.substr(0, 200);
  for (char& c : body) {
    if (c == '\n' || c == '\r') c = ' ';
  }
  return "HTTP " + std::to_string(r.status) + (body.empty() ? "" : " (" + body + ")");
}

// The Xet storage service answered something other than data: a service error (the caller may
// read through the bridge instead).
Status service_error(const std::string& what, const HttpResponse& r) {
  if (r.status == 401 || r.status == 403) {
    return PermissionDenied(what + ": " + status_text(r) + ": the Xet service refused the token or URL");
  }
  if (r.status == 404) return NotFound(what + ": " + status_text(r));
  return Unavailable(what + ": " + status_text(r) + ": the Xet storage service failed");
}

}  // namespace

XetReader::XetReader(HttpTransport& transport, TokenSource tokens, XetReaderOptions options)
    : transport_(transport),
      tokens_(std::move(tokens)),
      options_(std::move(options)),
      version_(options_.reconstruction_version == 2 ? 2 : 1),
      work_(std::max(1, options_.threads)) {}

XetReader::~XetReader() { shutdown(); }

void XetReader::shutdown() { work_.drain(); }

XetReaderStats XetReader::stats() const {
  XetReaderStats s;
  s.token_requests = token_requests_.load();
  s.reconstructions = reconstructions_.load();
  s.plans_joined = plans_joined_.load();
  s.xorb_requests = xorb_requests_.load();
  s.xorb_bytes = xorb_bytes_.load();
  s.footer_requests = footer_requests_.load();
  s.chunks_verified = chunks_verified_.load();
  s.unverified_bytes = unverified_bytes_.load();
  s.cache_bytes = cache_bytes_.load();
  s.refetches = refetches_.load();
  s.corrupt = corrupt_.load();
  s.files_verified = files_verified_.load();
  s.file_hash_mismatches = file_hash_mismatches_.load();
  return s;
}

void XetReader::fetch_async(const MerkleHash& file, uint64_t file_size, hubfs::ByteRange range, Callback done,
                            Deadline deadline, std::string block_key) {
  auto cb = std::make_shared<Callback>(std::move(done));
  bool posted = work_.post([this, file, file_size, range, cb, deadline, key = std::move(block_key)] {
    (*cb)(read_range(file, file_size, range, deadline, key));
  });
  if (!posted) (*cb)(Unavailable("the Xet reader is shut down (unmounting)"));
}

Result<std::string> XetReader::fetch(const MerkleHash& file, uint64_t file_size, hubfs::ByteRange range,
                                     Deadline deadline, std::string block_key) {
  std::promise<Result<std::string>> p;
  auto f = p.get_future();
  fetch_async(file, file_size, range, [&p](Result<std::string> r) { p.set_value(std::move(r)); }, deadline,
              std::move(block_key));
  return f.get();
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
                                          const Deadline& deadline, const std::string& block_key) {
  if (range.length == 0) return std::string();
  if (range.offset > file_size || range.length > file_size - range.offset) {
    return InvalidArgument("Xet read of bytes " + std::to_string(range.offset) + "+" + std::to_string(range.length) +
                           " past the end of a " + std::to_string(file_size) + "-byte file");
  }
  auto first = read_once(file, file_size, range, deadline, /*fresh=*/false, block_key);
  if (first.ok()) return first;
  const Code code = first.status().code();
  // Wrong bytes, or a signed URL refused (expired): once more with a fresh plan and footers.
  if (code != Code::kCorrupt && code != Code::kPermissionDenied) return first;
  if (deadline.expired()) return first;
  ++refetches_;
  log_warning("Xet read of " + file.hex().substr(0, 16) + "... bytes " + std::to_string(range.offset) + "+" +
           std::to_string(range.length) + ": " + first.status().message() + "; fetching it again");
  auto second = read_once(file, file_size, range, deadline, /*fresh=*/true, block_key);
  if (!second.ok() && second.status().code() == Code::kCorrupt) ++corrupt_;
  return second;
}

void XetReader::prefetch_token() {
  if (token_prefetched_.exchange(true)) return;
  work_.post([this] { (void)token(nullptr); });
}

Result<XetToken> XetReader::token(const std::string* refused) {
  std::lock_guard<std::mutex> lock(token_mu_);
  // After a 401, only the token that was refused is replaced: reads refused together share one
  // fresh token.
  const bool stale = refused && token_ && token_->access_token == *refused;
  if (!stale && token_ && options_.env->system_now() + options_.token_margin < token_->expires) return *token_;
  ++token_requests_;
  auto t = tokens_();
  if (!t.ok()) return t.status().with_context("getting a Xet read token");
  token_ = *t;
  return t;
}

Result<std::shared_ptr<const ReconstructionPlan>> XetReader::plan(const MerkleHash& file, uint64_t file_size,
                                                                  hubfs::ByteRange range, const Deadline& deadline,
                                                                  bool fresh, int* version_out,
                                                                  hubfs::ByteRange* covered_out,
                                                                  const std::function<void()>& on_first) {
  const auto now = options_.env->system_now();
  bool first = false;
  int version;
  uint64_t ask = range.length;
  auto mine = std::make_shared<std::promise<PlanAnswer>>();
  {
    std::unique_lock<std::mutex> lock(mu_);
    auto& cached = plans_[file];
    // A fresh plan that covers the range serves it: no round trip.
    for (auto it = cached.begin(); it != cached.end();) {
      if (fresh || now - it->fetched >= options_.plan_ttl) {
        --plan_count_;
        it = cached.erase(it);
        continue;
      }
      if (it->start <= range.offset && range.offset + range.length <= it->end) {
        *version_out = it->version;
        *covered_out = {it->start, it->end - it->start};
        return it->plan;
      }
      ++it;
    }
    // A plan on its way that will cover the range (a window planned ahead, another read's)
    // serves it too, once it comes: one round trip for all who need it.
    if (!fresh) {
      for (const PendingPlan& pending : pending_plans_[file]) {
        if (pending.start > range.offset || range.offset + range.length > pending.end) continue;
        std::shared_future<PlanAnswer> answer = pending.answer;
        lock.unlock();
        ++plans_joined_;
        // Waits no longer than this read may (the plan's own deadline may be later).
        if (deadline.is_never()) {
          answer.wait();
        } else if (answer.wait_until(deadline.at()) != std::future_status::ready) {
          return Timeout("asking the Xet service for a reconstruction of " + file.hex() + ": no answer in time");
        }
        const PlanAnswer& got = answer.get();
        if (!got.plan.ok()) break;  // asked again below, with this read's deadline
        *version_out = got.version;
        *covered_out = got.covered;
        return got.plan;
      }
      if (!lock.owns_lock()) lock.lock();
    }
    version = version_;
    // A read that starts where the file's last plan ended is a stream: its plan covers the next
    // window too, so the reads after it need none (V1 only: narrowing a window's terms to a
    // read's chunks needs the footers a V1 URL serves).
    auto last = plan_ends_.find(file);
    if (version == 1 && options_.plan_window_bytes > range.length && last != plan_ends_.end() &&
        last->second == range.offset && range.offset < file_size) {
      ask = std::max<uint64_t>(range.length, std::min<uint64_t>(options_.plan_window_bytes, file_size - range.offset));
    }
    first = last == plan_ends_.end() && version == 1;
    if (plan_ends_.size() >= options_.max_plans && last == plan_ends_.end()) plan_ends_.clear();  // bounded
    plan_ends_[file] = range.offset + ask;
    pending_plans_[file].push_back(PendingPlan{range.offset, range.offset + ask, mine->get_future().share()});
  }
  if (first && on_first) on_first();
  PlanAnswer answer{ask_plan(file, range.offset, ask, deadline, &version), version, {}};
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (answer.plan.ok()) {
      if (plan_count_ >= options_.max_plans) {  // rare; plans are cheap to ask again
        plans_.clear();
        plan_count_ = 0;
      }
      const uint64_t covered = std::min(ask, (*answer.plan)->content_length());
      answer.covered = {range.offset, covered};
      plans_[file].push_back(
          CachedPlan{*answer.plan, options_.env->system_now(), version, range.offset, range.offset + covered});
      ++plan_count_;
    }
    auto& pending = pending_plans_[file];
    std::erase_if(pending, [&](const PendingPlan& p) { return p.start == range.offset && p.end == range.offset + ask; });
    if (pending.empty()) pending_plans_.erase(file);
  }
  mine->set_value(answer);
  if (!answer.plan.ok()) return answer.plan.status();
  *version_out = answer.version;
  *covered_out = answer.covered;
  return answer.plan;
}

Result<std::shared_ptr<const ReconstructionPlan>> XetReader::ask_plan(const MerkleHash& file, uint64_t offset,
                                                                      uint64_t length, const Deadline& deadline,
                                                                      int* version) {
  bool refreshed_token = false;
  for (;;) {
    auto tok = token(nullptr);
    if (!tok.ok()) return tok.status();
    HttpRequest req;
    req.url = tok->cas_url + "/v" + std::to_string(*version) + "/reconstructions/" + file.hex();
    req.headers = {{"Authorization", "Bearer " + tok->access_token},
                   {"Range", range_header(offset, offset + length - 1)}};
    req.deadline = deadline;
    req.max_body = 64u << 20;
    ++reconstructions_;
    auto resp = transport_.perform(std::move(req));
    if (!resp.ok()) return resp.status().with_context("asking the Xet service for a reconstruction");
    if (resp->status == 401 && !refreshed_token) {
      refreshed_token = true;  // revoked or expired early: one fresh token
      if (auto t = token(&tok->access_token); !t.ok()) return t.status();
      continue;
    }
    if (*version == 2 && (resp->status == 404 || resp->status == 501)) {
      // xet-core's rule: a service without V2 answers 404 or 501; V1 from then on.
      std::lock_guard<std::mutex> lock(mu_);
      version_ = *version = 1;
      continue;
    }
    if (resp->status != 200) return service_error("reconstruction of " + file.hex(), *resp);
    auto parsed = *version == 2 ? parse_reconstruction_v2(resp->body) : parse_reconstruction_v1(resp->body);
    if (!parsed.ok()) return parsed.status();
    return std::make_shared<const ReconstructionPlan>(std::move(parsed).value());
  }
}

void XetReader::look_ahead(const MerkleHash& file, uint64_t file_size, uint64_t from, const Deadline& deadline) {
  if (options_.plan_window_bytes == 0 || from >= file_size || file_size - from < options_.plan_window_bytes / 4) return;
  {
    // V1 only: a V2 plan's URLs are signed for its terms' exact ranges, so a window planned
    // ahead could not be narrowed to a read's chunks (no footers): each read asks for its own.
    std::lock_guard<std::mutex> lock(mu_);
    if (version_ != 1) return;
  }
  work_.post([this, file, file_size, from, deadline] {
    int version = 1;
    hubfs::ByteRange covered;
    const uint64_t window = std::min<uint64_t>(options_.plan_window_bytes, file_size - from);
    auto p = plan(file, file_size, {from, window}, deadline, /*fresh=*/false, &version, &covered, {});
    if (!p.ok() || version != 1) return;  // the reads will ask (and report) for themselves
    for (const auto& [xorb, fetches] : (*p)->fetches) {
      if (fetches.empty()) continue;
      work_.post([this, xorb = xorb, url = fetches.front().url, deadline] {
        (void)footer(xorb, url, deadline, /*fresh=*/false, /*required=*/true);
      });
    }
  });
}

std::future<Result<std::string>> XetReader::get_xorb_range(const std::string& url, const ByteRange& bytes,
                                                           const Deadline& deadline, size_t headroom,
                                                           bool companion) {
  auto promise = std::make_shared<std::promise<Result<std::string>>>();
  auto future = promise->get_future();
  HttpRequest req;
  req.url = url;  // signed: no Authorization header goes with it
  req.headers = {{"Range", range_header(bytes.start, bytes.end)}};
  req.own_connection = true;
  req.companion = companion;
  req.body_headroom = headroom;
  req.deadline = deadline;
  req.max_body = bytes.length() + 1;
  const ByteRange want = bytes;
  req.validate = [want](const HttpResponse& r) -> Status {
    if (r.status != 206) return Status::Ok();  // judged below (a 403 or 404 is not transient)
    auto cr = parse_content_range(r.header("content-range").value_or(""));
    if (!cr || cr->first != want.start || cr->last != want.end || r.body.size() != want.length()) {
      return Corrupt("xorb range " + range_header(want.start, want.end) + " answered with Content-Range '" +
                     r.header("content-range").value_or("") + "' and " + std::to_string(r.body.size()) + " bytes");
    }
    return Status::Ok();
  };
  ++xorb_requests_;
  transport_.submit(std::move(req), [this, promise, want](Result<HttpResponse> r) {
    if (!r.ok()) {
      promise->set_value(r.status().with_context("fetching a xorb range"));
      return;
    }
    if (r->status != 206) {
      promise->set_value(service_error("xorb range " + range_header(want.start, want.end), *r));
      return;
    }
    xorb_bytes_ += r->body.size();
    promise->set_value(std::move(r->body));
  });
  return future;
}

Result<std::shared_ptr<const XorbFooter>> XetReader::footer(const MerkleHash& xorb, const std::string& url,
                                                            const Deadline& deadline, bool fresh, bool required) {
  std::shared_future<Result<std::shared_ptr<const XorbFooter>>> pending;
  std::shared_ptr<std::promise<Result<std::shared_ptr<const XorbFooter>>>> mine;
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = footers_.find(xorb);
    if (it != footers_.end() && fresh && it->second.wait_for(std::chrono::seconds(0)) == std::future_status::ready) {
      footers_.erase(it);
      it = footers_.end();
    }
    if (it != footers_.end()) {
      pending = it->second;
    } else {
      mine = std::make_shared<std::promise<Result<std::shared_ptr<const XorbFooter>>>>();
      pending = mine->get_future().share();
      footers_.emplace(xorb, pending);
    }
  }
  if (mine) {
    auto r = fetch_footer(xorb, url, deadline, required);
    if (!r.ok()) {
      // Not remembered: the next read asks again (a transient fault is not the xorb's fault).
      std::lock_guard<std::mutex> lock(mu_);
      footers_.erase(xorb);
    }
    mine->set_value(r);
    return r;
  }
  return pending.get();
}

Result<std::shared_ptr<const XorbFooter>> XetReader::fetch_footer(const MerkleHash& xorb, const std::string& url,
                                                                  const Deadline& deadline, bool required) {
  auto suffix = [&](size_t n) -> Result<HttpResponse> {
    HttpRequest req;
    req.url = url;
    req.headers = {{"Range", "bytes=-" + std::to_string(n)}};
    req.deadline = deadline;
    req.max_body = n + 1;
    ++footer_requests_;
    return transport_.perform(std::move(req));
  };
  auto r = suffix(options_.footer_probe_bytes);
  if (!r.ok()) return r.status().with_context("fetching the footer of xorb " + xorb.hex());
  if (!required && (r->status == 403 || r->status == 416)) {
    // The URL is signed for other bytes only (V2-style): no chunk hashes for this xorb.
    return std::shared_ptr<const XorbFooter>();
  }
  if (r->status != 206 && r->status != 200) return service_error("footer of xorb " + xorb.hex(), *r);
  std::string tail = std::move(r->body);
  if (tail.size() >= 4) {
    uint32_t len;
    std::memcpy(&len, tail.data() + tail.size() - 4, 4);  // little-endian hosts only (x86, arm64)
    auto cr = parse_content_range(r->header("content-range").value_or(""));
    const uint64_t total = cr ? cr->total : tail.size();
    if (uint64_t(len) + 4 > tail.size() && uint64_t(len) + 4 <= total) {
      auto again = suffix(len + 4);
      if (!again.ok()) return again.status().with_context("fetching the footer of xorb " + xorb.hex());
      if (again->status != 206 && again->status != 200) return service_error("footer of xorb " + xorb.hex(), *again);
      tail = std::move(again->body);
    }
  }
  auto f = parse_footer(reinterpret_cast<const uint8_t*>(tail.data()), tail.size());
  if (!f.ok()) return Corrupt("xorb " + xorb.hex() + ": " + f.status().message());
  // The footer is only as good as its hashes: they must make up the xorb's name.
  std::vector<HashAndSize> chunks;
  for (size_t i = 0; i < f->chunk_hashes.size(); ++i) {
    chunks.push_back({f->chunk_hashes[i], f->unpacked_ends[i] - (i ? f->unpacked_ends[i - 1] : 0)});
  }
  if (f->xorb_hash != xorb || xorb_hash(chunks) != xorb) {
    return Corrupt("the footer of xorb " + xorb.hex() + " does not hash to the xorb's name: damaged in transit");
  }
  return std::make_shared<const XorbFooter>(std::move(f).value());
}

// One term's part of a read: the chunks it needs, the xorb bytes that hold them, and where the
// read's bytes lie in their decoded content.
struct XetReader::Piece {
  const ReconstructionTerm* term = nullptr;
  const std::string* url = nullptr;
  XorbRange fetched;      // the chunks and bytes to ask for (may hold chunks before and after)
  ChunkRange chunks;      // the chunks the read uses, within fetched
  uint64_t unpacked = 0;  // their decoded length
  uint64_t skip = 0;      // the read's bytes: [skip, skip + take) of their decoded content
  uint64_t take = 0;
  uint64_t file_offset = 0;  // file offset of the first byte of chunks.start
};

// The whole term, as the plan says to fetch it.
XetReader::Piece XetReader::whole_term(const ReconstructionPlan& plan, const TermRead& t) {
  Piece p;
  p.term = &plan.terms[t.term_index];
  p.url = &t.source.fetch->url;
  p.fetched = *t.source.range;
  p.chunks = p.term->chunks;
  p.unpacked = p.term->unpacked_length;
  p.skip = t.skip;
  p.take = t.take;
  p.file_offset = t.file_offset;
  return p;
}

// Only the term's chunks that hold the read's bytes, located by the xorb's footer (a window plan's
// terms run far past a read). Nullopt when the footer does not describe the term (the whole term
// is fetched then, and its checks decide).
std::optional<XetReader::Piece> XetReader::narrowed(const ReconstructionPlan& plan, const TermRead& t,
                                                    const XorbFooter& f) {
  Piece p = whole_term(plan, t);
  const ChunkRange c = p.term->chunks;
  if (c.count() == 0 || c.end > f.unpacked_ends.size() || c.end > f.chunk_ends.size()) return std::nullopt;
  const uint32_t base = c.start ? f.unpacked_ends[c.start - 1] : 0;
  std::vector<uint32_t> ends;
  ends.reserve(c.count());
  for (uint32_t i = c.start; i < c.end; ++i) {
    if (f.unpacked_ends[i] < base) return std::nullopt;
    ends.push_back(f.unpacked_ends[i] - base);
  }
  if (ends.back() != p.term->unpacked_length) return std::nullopt;
  auto span = chunks_for_bytes(ends, t.skip, t.take);
  if (!span.ok()) return std::nullopt;
  const uint64_t before = span->first ? ends[span->first - 1] : 0;
  p.chunks = {c.start + span->first, c.start + span->end};
  p.unpacked = ends[span->end - 1] - before;
  p.skip = span->offset_in_first;
  p.file_offset = t.file_offset + before;
  const uint64_t first_byte = p.chunks.start ? f.chunk_ends[p.chunks.start - 1] : 0;
  const uint64_t last_byte = uint64_t(f.chunk_ends[p.chunks.end - 1]) - 1;
  if (last_byte < first_byte || first_byte < t.source.range->bytes.start || last_byte > t.source.range->bytes.end) {
    return std::nullopt;  // outside what the URL is signed for
  }
  p.fetched = {p.chunks, {first_byte, last_byte}};
  return p;
}

size_t XetReader::decode_headroom(const Piece& piece) {
  // The fetched chunks decode to the piece's bytes plus, for chunks fetched beside them, at most
  // a largest chunk each. Capacity only: pages the decode does not touch are never allocated.
  const uint64_t extra_chunks = piece.fetched.chunks.count() - piece.chunks.count();
  return in_place_headroom(piece.unpacked + extra_chunks * kMaxChunkSize, piece.fetched.bytes.length(),
                           piece.fetched.chunks.count());
}

std::optional<std::string> XetReader::from_cache(const Piece& piece, std::vector<HashAndSize>* chunks) {
  ChunkCache* cache = options_.chunk_cache;
  const MerkleHash& xorb = piece.term->xorb;
  if (!cache) return std::nullopt;
  auto all = cache->get_range(xorb, piece.chunks.start, piece.chunks.end, chunks);
  if (!all || all->size() != piece.unpacked || piece.skip + piece.take > all->size()) {  // damaged: fetched
    chunks->clear();
    return std::nullopt;
  }
  cache_bytes_ += piece.take;
  if (piece.skip == 0 && piece.take == all->size()) return all;
  return all->substr(piece.skip, piece.take);
}

void XetReader::keep_chunks(const Piece& piece, const std::vector<HashAndSize>& chunks, const char* data,
                            hubfs::ByteRange range, const std::string& block_key) {
  ChunkCache* cache = options_.chunk_cache;
  if (!cache) return;
  const MerkleHash& xorb = piece.term->xorb;
  if (block_key.empty() || !cache->keeps_locations()) {
    cache->put_run(xorb, piece.chunks.start, chunks, data);
    return;
  }
  // The piece's bytes are file bytes [a, a + unpacked); the caller keeps [range.offset, range
  // end) as blocks. What lies outside (the first and last chunks reach past the read) is kept
  // in the run itself.
  const uint64_t a = piece.file_offset, b = a + piece.unpacked;
  const uint64_t lo = std::clamp(range.offset, a, b), hi = std::clamp(range.offset + range.length, lo, b);
  cache->put_location(xorb, piece.chunks.start, chunks, block_key, a, std::string_view(data, lo - a),
                      std::string_view(data + (hi - a), b - hi));
}

void XetReader::note_chunks(const MerkleHash& file, uint64_t file_size, uint64_t file_offset,
                            const std::vector<HashAndSize>& chunks) {
  std::vector<HashAndSize> ordered;
  MerkleHash served;  // the Merkle root of the chunks as served, once they tile the file
  bool conflict = false;
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = files_.find(file);
    if (it == files_.end()) {
      if (files_.size() >= options_.max_hashing_files) files_.erase(files_.begin());  // it just goes unchecked
      it = files_.emplace(file, FileChunks{}).first;
      it->second.size = file_size;
    }
    FileChunks& f = it->second;
    if (f.verdict != hubfs::FileVerdict::kUnknown) return;
    uint64_t at = file_offset;
    for (const HashAndSize& c : chunks) {
      auto [where, added] = f.chunks.emplace(at, c);
      if (added) {
        f.covered += c.size;
      } else if (where->second.hash != c.hash || where->second.size != c.size) {
        conflict = true;
      }
      at += c.size;
    }
    if (conflict) {
      f.verdict = hubfs::FileVerdict::kMismatch;
    } else {
      if (f.covered < f.size) return;
      // Every byte may be covered: the chunks must tile the file from 0 without a gap.
      uint64_t next = 0;
      for (const auto& [offset, c] : f.chunks) {
        if (offset != next) return;
        ordered.push_back(c);
        next += c.size;
      }
      if (next != f.size) return;
      // One pass over (hash, size) pairs, never the content: milliseconds for gigabytes.
      served = file_hash(ordered);
      f.verdict = served == file ? hubfs::FileVerdict::kMatch : hubfs::FileVerdict::kMismatch;
    }
    if (f.verdict == hubfs::FileVerdict::kMatch) {
      ++files_verified_;
      return;
    }
  }
  ++file_hash_mismatches_;
  log_error("Xet file " + file.hex() + ": " +
            (conflict ? std::string("two reads of it were served different chunks at one offset")
                      : "its chunks as served hash to " + served.hex() + ", not to the file's Xet hash") +
            ": a reconstruction did not describe this file. Its bytes are dropped and fetched again with fresh "
            "plans; report this to the Hub if it repeats");
}

hubfs::FileVerdict XetReader::file_verdict(const MerkleHash& file) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = files_.find(file);
  if (it == files_.end()) return hubfs::FileVerdict::kUnknown;
  const hubfs::FileVerdict verdict = it->second.verdict;
  if (verdict == hubfs::FileVerdict::kMismatch) {
    // Reported once: the reads after it (of bytes the caller dropped) start afresh, without the
    // plans that described other bytes. Footers are checked against their xorb's own hash, so
    // they stay.
    files_.erase(it);
    if (auto p = plans_.find(file); p != plans_.end()) {
      plan_count_ -= p->second.size();
      plans_.erase(p);
    }
    plan_ends_.erase(file);
  }
  return verdict;
}

Result<std::string> XetReader::read_once(const MerkleHash& file, uint64_t file_size, hubfs::ByteRange range,
                                         const Deadline& deadline, bool fresh, const std::string& block_key) {
  int version = 1;
  hubfs::ByteRange covered = range;
  const bool debug = log_enabled(LogLevel::kDebug);
  const auto started = options_.env->now();
  auto since = [&] {
    return std::to_string(std::chrono::duration_cast<std::chrono::milliseconds>(options_.env->now() - started).count()) +
           " ms";
  };
  // The file's first plan: the window after this read is planned at the same time, so its plan
  // and footers are there by the time the application asks for more (HDF5's chunks, after the
  // metadata this read brings).
  auto p = plan(file, file_size, range, deadline, fresh, &version, &covered,
                [&] { look_ahead(file, file_size, range.offset + range.length, deadline); });
  if (!p.ok()) return p.status();
  if (debug)
    log_debug("xet " + file.hex().substr(0, 8) + " bytes " + std::to_string(range.offset) + "+" +
              std::to_string(range.length) + ": plan after " + since());
  const ReconstructionPlan& plan = **p;
  auto reads = map_read(plan, covered.offset, range.offset, range.length);
  if (!reads.ok()) return reads.status().with_context("reconstruction of " + file.hex());
  const size_t n = reads->size();

  // The footers (chunk hashes and boundaries) of the xorbs the read needs. A plan asked for
  // exactly this range names the bytes to fetch, so its footers are asked for while those are on
  // the way; a plan for a wider window needs them first, to fetch only the read's chunks (each
  // footer is fetched once per xorb and shared by every read). A V1 URL signs the whole xorb, so
  // its footer is there; a V2 URL is tried once per xorb (a service that refuses it leaves that
  // xorb's chunks unverified).
  // (A plan asked for exactly this range is not a window, though its first and last terms may
  // reach past the range: the terms are the read's, and their bytes go out beside the footers.)
  const bool window = covered.offset != range.offset || covered.length > range.length;
  std::map<MerkleHash, Result<std::shared_ptr<const XorbFooter>>> footers;
  auto footer_of = [&](const TermRead& t) -> const Result<std::shared_ptr<const XorbFooter>>& {
    const MerkleHash& xorb = plan.terms[t.term_index].xorb;
    auto it = footers.find(xorb);
    if (it == footers.end()) {
      it = footers.emplace(xorb, footer(xorb, t.source.fetch->url, deadline, fresh, version == 1)).first;
    }
    return it->second;
  };
  std::vector<Piece> pieces;
  pieces.reserve(n);
  for (const TermRead& t : *reads) {
    std::optional<Piece> piece;
    if (window) {
      const auto& f = footer_of(t);
      if (f.ok() && *f) piece = narrowed(plan, t, **f);
    }
    pieces.push_back(piece ? *piece : whole_term(plan, t));
  }

  // Every piece the cache cannot serve goes out at once.
  std::vector<std::optional<std::string>> cached(n);
  // Each piece's chunks (hash, size), for the file's own hash (see note_chunks).
  std::vector<std::vector<HashAndSize>> piece_chunks(n);
  std::vector<std::future<Result<std::string>>> bodies(n);
  bool first_out = true;
  for (size_t i = 0; i < n; ++i) {
    cached[i] = from_cache(pieces[i], &piece_chunks[i]);
    if (!cached[i]) {
      // The read holds one of the reader's slots: its pieces after the first go out beside it
      // (HttpRequest::companion), not after some other read's transfer ends.
      bodies[i] = get_xorb_range(*pieces[i].url, pieces[i].fetched.bytes, deadline, decode_headroom(pieces[i]),
                                 /*companion=*/!first_out);
      first_out = false;
    }
  }
  for (size_t i = 0; i < n; ++i) {
    if (!cached[i]) (void)footer_of((*reads)[i]);
  }
  if (debug)
    log_debug("xet " + file.hex().substr(0, 8) + " bytes " + std::to_string(range.offset) + "+" +
              std::to_string(range.length) + ": " + std::to_string(n) + " pieces out after " + since());
  // The pieces are appended in file order, each copied once from its decoded chunks.
  std::string out;
  if (n > 1) {
    out.reserve(range.length);
    advise_huge_pages(out.data(), range.length);
  }
  Status first_error = Status::Ok();
  for (size_t i = 0; i < n; ++i) {
    const Piece& piece = pieces[i];
    if (cached[i]) {
      if (first_error.ok()) out += *cached[i];
      continue;
    }
    const MerkleHash& xorb = piece.term->xorb;
    const XorbRange& fetched = piece.fetched;
    auto body = bodies[i].get();
    if (!first_error.ok()) continue;  // wait for every request before returning (they use `this`)
    if (!body.ok()) {
      first_error = body.status();
      continue;
    }
    const auto& f = footers.at(xorb);
    if (!f.ok()) {
      first_error = f.status();
      continue;
    }
    const std::shared_ptr<const XorbFooter>& foot = *f;
    auto decoded = decode_chunks(std::move(body).value(), fetched.chunks.start, fetched.chunks.count(),
                                 size_t(fetched.chunks.count()) * kMaxChunkSize);
    if (!decoded.ok()) {
      // Whatever the decoder says (a header's version, a frame), these bytes are not the xorb's:
      // wrong bytes, fetched again, never a reason to read elsewhere.
      first_error = Corrupt("xorb " + xorb.hex() + ": " + decoded.status().message());
      continue;
    }
    if (foot) {
      if (Status s = verify_chunks(*decoded, fetched.chunks.start, *foot); !s.ok()) {
        first_error = s.with_context("xorb " + xorb.hex());
        continue;
      }
      chunks_verified_ += decoded->count();
    }
    // The piece's chunks within the fetched ones.
    const size_t lo = piece.chunks.start - fetched.chunks.start;
    const size_t hi = lo + piece.chunks.count();
    const uint64_t begin = lo ? decoded->ends[lo - 1] : 0;
    const uint64_t end = decoded->ends[hi - 1];
    if (end - begin != piece.unpacked) {
      first_error = Corrupt("xorb " + xorb.hex() + " chunks [" + std::to_string(piece.chunks.start) + ", " +
                            std::to_string(piece.chunks.end) + ") decoded to " + std::to_string(end - begin) +
                            " bytes, the reconstruction says " + std::to_string(piece.unpacked));
      continue;
    }
    if (!foot) unverified_bytes_ += piece.take;
    for (size_t k = lo; k < hi; ++k) {
      const uint64_t a = k ? decoded->ends[k - 1] : 0;
      const uint32_t index = fetched.chunks.start + static_cast<uint32_t>(k);
      // Without a footer the hash is computed here, on this worker: the file's hash checks it.
      piece_chunks[i].push_back({foot ? foot->chunk_hashes[index] : chunk_hash(decoded->data.data() + a,
                                                                                decoded->ends[k] - a),
                                 decoded->ends[k] - a});
    }
    if (begin + piece.skip + piece.take > decoded->data.size()) {
      first_error = Corrupt("xorb " + xorb.hex() + ": the read's bytes lie past the term's decoded chunks");
      continue;
    }
    // Verified chunks go to the chunk cache as one run (one file per piece: written here, since
    // keeping the decoded bytes for a writer thread measured slower on 2 cores: the extra memory
    // cost the reader more in fresh-page faults than the write cost this thread).
    if (foot) keep_chunks(piece, piece_chunks[i], decoded->data.data() + begin, range, block_key);
    if (n == 1) {
      // The read's one piece: its bytes are trimmed in place and handed over, not copied.
      decoded->data.erase(0, begin + piece.skip);
      decoded->data.resize(piece.take);
      out = std::move(decoded->data);
    } else {
      out.append(decoded->data, begin + piece.skip, piece.take);
    }
  }
  if (!first_error.ok()) return first_error;
  for (size_t i = 0; i < n; ++i) note_chunks(file, file_size, pieces[i].file_offset, piece_chunks[i]);
  if (debug)
    log_debug("xet " + file.hex().substr(0, 8) + " bytes " + std::to_string(range.offset) + "+" +
              std::to_string(range.length) + ": served after " + since());
  if (out.size() != range.length) {
    return Corrupt("Xet read assembled " + std::to_string(out.size()) + " bytes for a " +
                   std::to_string(range.length) + "-byte range: the reconstruction does not cover it");
  }
  return out;
}

}  // namespace hubfs::xet
