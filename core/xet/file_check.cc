#include "xet/file_check.h"

namespace hubfs::xet {

XetFileChecks::Recorded XetFileChecks::record(const MerkleHash& file, uint64_t file_size, uint64_t offset,
                                              const std::vector<ServedChunk>& chunks, const std::string& block_key) {
  Recorded out;
  std::lock_guard<std::mutex> lock(mu_);
  auto it = files_.find(file);
  if (it == files_.end()) {
    if (files_.size() >= max_files_) files_.erase(files_.begin());  // it just goes unchecked
    it = files_.emplace(file, File{}).first;
    it->second.size = file_size;
  }
  File& f = it->second;
  if (f.verdict != hubfs::FileVerdict::kUnknown) return out;
  const bool alone = f.chunks.empty();  // no other read's chunks are in this record
  if (f.block_key.empty()) f.block_key = block_key;
  uint64_t at = offset;
  bool conflict = false;
  for (const ServedChunk& c : chunks) {
    auto [where, added] = f.chunks.emplace(at, c);
    if (added) {
      f.covered += c.chunk.size;
    } else if (where->second.chunk.hash != c.chunk.hash || where->second.chunk.size != c.chunk.size) {
      conflict = true;
    }
    f.served += c.chunk.size;
    at += c.chunk.size;
  }
  if (conflict) {
    f.verdict = out.verdict = hubfs::FileVerdict::kMismatch;
    out.why = "two reads of it were served different chunks at one offset";
    ++mismatches_;
    return out;
  }
  if (f.covered < f.size) return out;
  // Every byte may be covered: the chunks must tile the file from 0 without a gap or overlap.
  std::vector<HashAndSize> ordered;
  ordered.reserve(f.chunks.size());
  uint64_t next = 0;
  for (const auto& [off, c] : f.chunks) {
    if (off != next) return out;
    ordered.push_back(c.chunk);
    next += c.chunk.size;
  }
  if (next != f.size) return out;
  // One pass over (hash, size) pairs, never the content: milliseconds for gigabytes.
  const MerkleHash served = file_hash(ordered);
  if (served != file) {
    f.verdict = out.verdict = hubfs::FileVerdict::kMismatch;
    out.why = "its chunks as served hash to " + served.hex() + ", not to the file's Xet hash";
    ++mismatches_;
    if (alone) {
      // Only this call's chunks, not yet served: no verdict to keep for the file's reader.
      files_.erase(it);
      out.dropped = true;
    }
    return out;
  }
  f.verdict = out.verdict = hubfs::FileVerdict::kMatch;
  ++files_verified_;
  verified_bytes_ += f.served;
  out.block_key = f.block_key;
  uint64_t run_end = 0;  // file offset where the last run ends
  for (const auto& [off, c] : f.chunks) {
    if (c.from_cache) continue;
    VerifiedRun* last = out.verified_runs.empty() ? nullptr : &out.verified_runs.back();
    if (last && last->xorb == c.xorb && last->first + last->chunks.size() == c.index && run_end == off) {
      last->chunks.push_back(c.chunk);
    } else {
      out.verified_runs.push_back(VerifiedRun{c.xorb, c.index, {c.chunk}, off});
    }
    run_end = off + c.chunk.size;
  }
  // The chunk list is no longer needed: only the verdict stays.
  f.chunks.clear();
  return out;
}

hubfs::FileVerdict XetFileChecks::verdict(const MerkleHash& file) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = files_.find(file);
  if (it == files_.end()) return hubfs::FileVerdict::kUnknown;
  const hubfs::FileVerdict v = it->second.verdict;
  if (v == hubfs::FileVerdict::kMismatch) files_.erase(it);
  return v;
}

}  // namespace hubfs::xet
