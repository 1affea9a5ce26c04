#include "xet/reconstruction.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <functional>
#include <limits>

#include "xet/chunker.h"
#include "xet/xorb.h"

namespace hubfs::xet {
namespace {

using nlohmann::json;

Status bad(const std::string& what) {
  return Corrupt("reconstruction response: " + what +
                 ": the CAS service sent a malformed plan; ask for it again (or read through the bridge)");
}

// A chunk index past this is not a xorb's (xet-core caps a xorb at 8192 chunks; older ones are
// smaller): refusing it keeps every size computed from indices far from overflow.
constexpr uint32_t kMaxChunkIndex = 1u << 24;

Result<uint64_t> get_u64(const json& obj, const char* key, const std::string& where) {
  auto it = obj.find(key);
  if (it == obj.end()) return bad(where + " has no \"" + key + "\"");
  if (!it->is_number_unsigned() && !(it->is_number_integer() && it->get<int64_t>() >= 0)) {
    return bad(where + "." + key + " is not a non-negative integer");
  }
  return it->get<uint64_t>();
}

Result<const json*> get_obj(const json& obj, const char* key, const std::string& where) {
  auto it = obj.find(key);
  if (it == obj.end() || !it->is_object()) return bad(where + " has no object \"" + key + "\"");
  return &*it;
}

Result<ChunkRange> get_chunk_range(const json& obj, const char* key, const std::string& where) {
  auto o = get_obj(obj, key, where);
  if (!o.ok()) return o.status();
  auto s = get_u64(**o, "start", where + "." + key);
  if (!s.ok()) return s.status();
  auto e = get_u64(**o, "end", where + "." + key);
  if (!e.ok()) return e.status();
  if (*s >= *e || *e > kMaxChunkIndex) {
    return bad(where + "." + key + " [" + std::to_string(*s) + ", " + std::to_string(*e) +
               ") is not a non-empty chunk range");
  }
  return ChunkRange{static_cast<uint32_t>(*s), static_cast<uint32_t>(*e)};
}

Result<ByteRange> get_byte_range(const json& obj, const char* key, const std::string& where) {
  auto o = get_obj(obj, key, where);
  if (!o.ok()) return o.status();
  auto s = get_u64(**o, "start", where + "." + key);
  if (!s.ok()) return s.status();
  auto e = get_u64(**o, "end", where + "." + key);
  if (!e.ok()) return e.status();
  if (*s > *e) return bad(where + "." + key + " ends before it starts");
  return ByteRange{*s, *e};
}

Result<MerkleHash> parse_hash(const std::string& hex, const std::string& where) {
  auto h = MerkleHash::from_hex(hex);
  if (!h) return bad(where + " \"" + hex.substr(0, 80) + "\" is not a 64-digit hex hash");
  return *h;
}

// A byte range must be able to hold its chunks: at least a header each, at most a header and
// the largest stored chunk each.
Status check_range_fits(const XorbRange& r, const std::string& where) {
  const uint64_t n = r.chunks.count();
  if (r.bytes.length() < n * kChunkHeaderSize || r.bytes.length() > n * (kChunkHeaderSize + kMaxStoredChunkSize)) {
    return bad(where + ": " + std::to_string(r.bytes.length()) + " bytes cannot hold " + std::to_string(n) +
               " chunks");
  }
  return Status::Ok();
}

// One xorb range of a fetch entry: its chunks under `chunks_key`, their bytes under `bytes_key`
// (V1: "range" and "url_range"; V2: "chunks" and "bytes"), the bytes able to hold the chunks.
Result<XorbRange> get_xorb_range(const json& obj, const char* chunks_key, const char* bytes_key,
                                 const std::string& where) {
  auto chunks = get_chunk_range(obj, chunks_key, where);
  if (!chunks.ok()) return chunks.status();
  auto bytes = get_byte_range(obj, bytes_key, where);
  if (!bytes.ok()) return bytes.status();
  XorbRange r{*chunks, *bytes};
  if (Status fit = check_range_fits(r, where); !fit.ok()) return fit;
  return r;
}

Result<json> parse_json(std::string_view text) {
  json j = json::parse(text.begin(), text.end(), nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) return bad("not valid JSON");
  if (!j.is_object()) return bad("not a JSON object");
  return j;
}

// The part V1 and V2 share: offset_into_first_range and terms.
Status parse_terms(const json& j, ReconstructionPlan* plan) {
  auto off = get_u64(j, "offset_into_first_range", "the response");
  if (!off.ok()) return off.status();
  plan->offset_into_first_range = *off;
  auto it = j.find("terms");
  if (it == j.end() || !it->is_array()) return bad("no \"terms\" array");
  uint64_t total = 0;
  for (size_t i = 0; i < it->size(); ++i) {
    const json& t = (*it)[i];
    const std::string where = "terms[" + std::to_string(i) + "]";
    if (!t.is_object()) return bad(where + " is not an object");
    auto h = t.find("hash");
    if (h == t.end() || !h->is_string()) return bad(where + " has no string \"hash\"");
    auto hash = parse_hash(h->get<std::string>(), where + ".hash");
    if (!hash.ok()) return hash.status();
    auto range = get_chunk_range(t, "range", where);
    if (!range.ok()) return range.status();
    auto len = get_u64(t, "unpacked_length", where);
    if (!len.ok()) return len.status();
    // Every chunk holds 1..kMaxChunkSize bytes.
    if (*len < range->count() || *len > uint64_t(range->count()) * kMaxChunkSize) {
      return bad(where + ": " + std::to_string(*len) + " bytes cannot come from " +
                 std::to_string(range->count()) + " chunks");
    }
    if (total > std::numeric_limits<uint64_t>::max() - *len) return bad("the terms' lengths overflow");
    total += *len;
    plan->terms.push_back({*hash, *range, *len});
  }
  if (plan->terms.empty() ? plan->offset_into_first_range != 0
                          : plan->offset_into_first_range >= plan->terms[0].unpacked_length) {
    return bad("offset_into_first_range " + std::to_string(plan->offset_into_first_range) +
               " is not inside the first term");
  }
  return Status::Ok();
}

Status check_every_term_has_a_source(const ReconstructionPlan& plan) {
  for (size_t i = 0; i < plan.terms.size(); ++i) {
    auto s = find_term_source(plan, i);
    if (!s.ok()) return s.status();
  }
  return Status::Ok();
}

}  // namespace

uint64_t ReconstructionPlan::content_length() const {
  uint64_t total = 0;
  for (const auto& t : terms) total += t.unpacked_length;
  return total - offset_into_first_range;
}

namespace {

// One xorb's entry of a plan's fetch list, as `where` names it in errors: the XorbFetch it
// stands for (its URL already checked), or why it is refused.
using EntryParser = std::function<Result<XorbFetch>(const json& entry, std::string url, const std::string& where)>;

// What both versions share: the terms, then `field`, an object from xorb hash to a list of
// entries, each an object with a non-empty "url" that `parse_entry` reads the rest of; then
// every term must have a source. V2 lists no xorb without an entry (`allow_empty` false).
Result<ReconstructionPlan> parse_plan(std::string_view text, const char* field, bool allow_empty,
                                      const EntryParser& parse_entry) {
  auto j = parse_json(text);
  if (!j.ok()) return j.status();
  ReconstructionPlan plan;
  Status s = parse_terms(*j, &plan);
  if (!s.ok()) return s;
  auto lists = get_obj(*j, field, "the response");
  if (!lists.ok()) return lists.status();
  for (const auto& [key, list] : (*lists)->items()) {
    const std::string where = std::string(field) + "[" + key.substr(0, 80) + "]";
    auto hash = parse_hash(key, where);
    if (!hash.ok()) return hash.status();
    if (!list.is_array() || (!allow_empty && list.empty()))
      return bad(where + (allow_empty ? " is not an array" : " is not a non-empty array"));
    auto& fetches = plan.fetches[*hash];
    for (size_t i = 0; i < list.size(); ++i) {
      const json& e = list[i];
      const std::string w = where + "[" + std::to_string(i) + "]";
      if (!e.is_object()) return bad(w + " is not an object");
      auto url = e.find("url");
      if (url == e.end() || !url->is_string() || url->get<std::string>().empty()) return bad(w + " has no url");
      auto fetch = parse_entry(e, url->get<std::string>(), w);
      if (!fetch.ok()) return fetch.status();
      fetches.push_back(std::move(*fetch));
    }
  }
  s = check_every_term_has_a_source(plan);
  if (!s.ok()) return s;
  return plan;
}

}  // namespace

// V1: one chunk range per entry ("range"), its bytes in the xorb ("url_range").
Result<ReconstructionPlan> parse_reconstruction_v1(std::string_view text) {
  return parse_plan(text, "fetch_info", true, [](const json& e, std::string url, const std::string& w) -> Result<XorbFetch> {
    auto r = get_xorb_range(e, "range", "url_range", w);
    if (!r.ok()) return r.status();
    return XorbFetch{std::move(url), {*r}};
  });
}

// V2: one URL per entry for several ranges ("ranges": chunks and bytes each).
Result<ReconstructionPlan> parse_reconstruction_v2(std::string_view text) {
  return parse_plan(text, "xorbs", false, [](const json& e, std::string url, const std::string& w) -> Result<XorbFetch> {
    auto ranges = e.find("ranges");
    if (ranges == e.end() || !ranges->is_array() || ranges->empty()) return bad(w + " has no ranges");
    XorbFetch f{std::move(url), {}};
    for (size_t k = 0; k < ranges->size(); ++k) {
      const json& r = (*ranges)[k];
      const std::string wr = w + ".ranges[" + std::to_string(k) + "]";
      if (!r.is_object()) return bad(wr + " is not an object");
      auto got = get_xorb_range(r, "chunks", "bytes", wr);
      if (!got.ok()) return got.status();
      const XorbRange& xr = *got;
      // Sorted and disjoint, as documented: a multi-range request is built from them in order.
      if (!f.ranges.empty() &&
          (xr.chunks.start < f.ranges.back().chunks.end || xr.bytes.start <= f.ranges.back().bytes.end)) {
        return bad(wr + " overlaps or precedes the range before it");
      }
      f.ranges.push_back(xr);
    }
    return f;
  });
}

Result<TermSource> find_term_source(const ReconstructionPlan& plan, size_t term_index) {
  if (term_index >= plan.terms.size()) return InvalidArgument("no term " + std::to_string(term_index));
  const ReconstructionTerm& t = plan.terms[term_index];
  auto it = plan.fetches.find(t.xorb);
  if (it != plan.fetches.end()) {
    for (const auto& f : it->second) {
      for (const auto& r : f.ranges) {
        if (r.chunks.contains(t.chunks)) return TermSource{&f, &r};
      }
    }
  }
  return bad("term " + std::to_string(term_index) + " (xorb " + t.xorb.hex() + " chunks " +
             std::to_string(t.chunks.start) + ".." + std::to_string(t.chunks.end) +
             ") has no fetch range holding its chunks");
}

Result<std::vector<TermRead>> map_read(const ReconstructionPlan& plan, uint64_t plan_start, uint64_t offset,
                                       uint64_t length) {
  const uint64_t covered = plan.content_length();
  if (offset < plan_start || offset - plan_start > covered || length > covered - (offset - plan_start)) {
    return Status(Code::kOutOfRange, "bytes " + std::to_string(offset) + "+" + std::to_string(length) +
                                         " are outside the reconstruction plan's " + std::to_string(plan_start) +
                                         "+" + std::to_string(covered) + ": ask for a plan covering them");
  }
  std::vector<TermRead> out;
  if (length == 0) return out;
  const uint64_t want_end = offset + length;
  if (plan_start < plan.offset_into_first_range) {
    return bad("offset_into_first_range reaches before the start of the file");
  }
  // File offset of the first term's first byte (offset_into_first_range is before plan_start).
  uint64_t term_start = plan_start - plan.offset_into_first_range;
  for (size_t i = 0; i < plan.terms.size() && term_start < want_end; ++i) {
    const uint64_t term_end = term_start + plan.terms[i].unpacked_length;
    if (term_end > offset) {
      auto src = find_term_source(plan, i);
      if (!src.ok()) return src.status();
      TermRead r;
      r.term_index = i;
      r.file_offset = term_start;
      r.skip = std::max(offset, term_start) - term_start;
      r.take = std::min(want_end, term_end) - term_start - r.skip;
      r.source = *src;
      out.push_back(r);
    }
    term_start = term_end;
  }
  return out;
}

Result<ChunkSpan> chunks_for_bytes(const std::vector<uint32_t>& chunk_ends, uint64_t skip, uint64_t take) {
  const uint64_t total = chunk_ends.empty() ? 0 : chunk_ends.back();
  if (take == 0 || skip >= total || take > total - skip) {
    return Status(Code::kOutOfRange, "bytes " + std::to_string(skip) + "+" + std::to_string(take) +
                                         " are not inside a term of " + std::to_string(total) + " bytes");
  }
  // First chunk ending after skip; first chunk ending at or after skip + take.
  const auto first = std::upper_bound(chunk_ends.begin(), chunk_ends.end(), skip);
  const auto last = std::lower_bound(first, chunk_ends.end(), skip + take);
  ChunkSpan s;
  s.first = static_cast<uint32_t>(first - chunk_ends.begin());
  s.end = static_cast<uint32_t>(last - chunk_ends.begin()) + 1;
  s.offset_in_first = skip - (s.first == 0 ? 0 : chunk_ends[s.first - 1]);
  return s;
}

}  // namespace hubfs::xet
