#include "xet/xorb_fetch.h"

#include <cstdio>
#include <memory>
#include <optional>

namespace hubfs::xet {
namespace {

std::string xorb_range_header(const ByteRange& r) {
  return "bytes=" + std::to_string(r.start) + "-" + std::to_string(r.end);
}

// "bytes a-b/total" → (a, b); nullopt unless well formed.
std::optional<ByteRange> parse_xorb_content_range(const std::string& v) {
  unsigned long long a = 0, b = 0, t = 0;
  char tail = 0;
  if (std::sscanf(v.c_str(), "bytes %llu-%llu/%llu%c", &a, &b, &t, &tail) != 3 || a > b || b >= t) return std::nullopt;
  return ByteRange{a, b};
}

std::string answer_text(const HttpResponse& r) {
  std::string body = r.body.substr(0, 200);
  for (char& c : body) {
    if (c == '\n' || c == '\r') c = ' ';
  }
  return "HTTP " + std::to_string(r.status) + (body.empty() ? "" : " (" + body + ")");
}

}  // namespace

namespace {
// The transport's sink for one listed range: its chunks decoded as they arrive.
class DecodingSink : public BodySink {
 public:
  DecodingSink(const XorbRange& listed, size_t output_capacity, const DecodeExtras& extras)
      : decoder(listed.chunks.start, listed.chunks.count(), listed.bytes.length(),
                listed.chunks.count() * kMaxChunkSize, output_capacity, extras),
        want(listed.bytes) {}
  // The decoder's sink hears of ready bytes only from an answer that is the range asked for,
  // known before its body: a 206 whose Content-Range is exactly the range.
  void head(int status, const Headers& headers) override {
    auto cr = parse_xorb_content_range(find_header(headers, "content-range").value_or(""));
    head_ok = status == 206 && cr && *cr == want;
  }
  void begin() override {
    decoder.reset();
    if (head_ok) decoder.head_checked();
    head_ok = false;
  }
  void feed(const char* data, size_t n) override { decoder.feed(reinterpret_cast<const uint8_t*>(data), n); }
  ChunkStreamDecoder decoder;
  const ByteRange want;
  bool head_ok = false;  // the head() just before begin()
};
}  // namespace

XorbDecoded fetch_xorb_range(HttpTransport& transport, const std::string& url, const MerkleHash& xorb,
                             const XorbRange& listed, const Deadline& deadline, size_t output_capacity,
                             const DecodeExtras& extras, bool companion, XorbFetchCounters& counters,
                             std::shared_ptr<const ChunkStreamDecoder>* decoder) {
  auto answer = std::make_shared<OneShot<Result<DecodedChunks>>>();
  auto sink = std::make_shared<DecodingSink>(listed, output_capacity, extras);
  if (decoder) *decoder = std::shared_ptr<const ChunkStreamDecoder>(sink, &sink->decoder);
  const ByteRange range = listed.bytes;
  HttpRequest req;
  req.url = url;  // signed: no Authorization header goes with it
  req.headers = {{"Range", xorb_range_header(range)}};
  req.own_connection = true;
  req.companion = companion;
  req.deadline = deadline;
  req.max_body = range.length() + 1;  // a longer body is refused as it arrives
  req.body_sink = sink;
  const ByteRange want = range;
  req.validate = [want](const HttpResponse& r) -> Status {
    if (r.status != 206) return Status::Ok();  // judged below (a 403 or 404 is not transient)
    auto cr = parse_xorb_content_range(r.header("content-range").value_or(""));
    const uint64_t got = r.body.size() + r.streamed;
    if (!cr || !(*cr == want) || got != want.length()) {
      return Unavailable("the Xet storage service answered xorb range " + xorb_range_header(want) +
                         " with Content-Range '" + r.header("content-range").value_or("") + "' and " +
                         std::to_string(got) + " bytes");
    }
    return Status::Ok();
  };
  ++counters.requests;
  transport.submit(std::move(req), [answer, sink, want, xorb, &counters](Result<HttpResponse> r) {
    const std::string what = "xorb range " + xorb_range_header(want);
    if (!r.ok()) {
      // A validation refusal (or a transfer cut short) is the service's fault, never the data's.
      const Status s = r.status();
      answer->set(s.code() == Code::kCorrupt ? Unavailable(s.message()) : s.with_context("fetching a " + what));
      return;
    }
    if (r->status == 401 || r->status == 403) {
      answer->set(PermissionDenied(what + ": " + answer_text(*r) + ": the Xet service refused the signed URL"));
      return;
    }
    const uint64_t got = r->body.size() + r->streamed;
    if (r->status != 206 || got != want.length()) {
      answer->set(Unavailable(what + ": " + answer_text(*r) + " with " + std::to_string(got) +
                              " bytes: the Xet storage service failed"));
      return;
    }
    if (r->streamed == 0) {
      // A transport that does not stream (or an empty body): decoded here, all at once.
      sink->begin();
      sink->decoder.head_checked();  // a 206 of exactly the range: checked above and by validate
      sink->feed(r->body.data(), r->body.size());
    }
    counters.bytes += got;
    auto decoded = sink->decoder.finish();
    if (!decoded.ok()) {
      answer->set(Unavailable("the Xet storage service sent bytes of xorb " + xorb.hex() + " that do not decode (" +
                              decoded.status().message() + ")"));
      return;
    }
    answer->set(std::move(decoded));
  });
  return answer;
}

size_t listed_range_output_bound(uint64_t known_unpacked, uint32_t unknown_chunks) {
  return static_cast<size_t>(known_unpacked + uint64_t(unknown_chunks) * kMaxChunkSize);
}

size_t listed_range_headroom(const XorbRange& listed, uint64_t known_unpacked, uint32_t unknown_chunks) {
  return in_place_headroom(known_unpacked + uint64_t(unknown_chunks) * kMaxChunkSize, listed.bytes.length(),
                           listed.chunks.count());
}

Result<DecodedChunks> decode_listed_range(std::string body, const MerkleHash& xorb, const XorbRange& listed,
                                          const DecodeExtras& extras) {
  const size_t count = listed.chunks.count();
  auto decoded = decode_chunks(std::move(body), listed.chunks.start, count, count * kMaxChunkSize, extras);
  if (!decoded.ok()) {
    return Unavailable("the Xet storage service sent bytes of xorb " + xorb.hex() + " that do not decode (" +
                       decoded.status().message() + ")");
  }
  if (decoded->count() != count) {
    return Unavailable("xorb " + xorb.hex() + ": the range decoded to " + std::to_string(decoded->count()) +
                       " chunks, the plan lists " + std::to_string(count));
  }
  return decoded;
}

}  // namespace hubfs::xet
