// ChunkStreamDecoder (xet/xorb.h): a xorb range's chunks decoded and hashed as their bytes
// arrive, piece by piece from the transport, with the same checks, output and errors as
// decode_chunks in xorb.cc.
#include <algorithm>
#include <cstring>
#include <limits>

#include "common/big_buffer.h"
#include "xet/xorb.h"

namespace hubfs::xet {

ChunkStreamDecoder::ChunkStreamDecoder(uint64_t first_chunk, size_t expected_chunks, uint64_t length,
                                       size_t max_output, size_t output_capacity, const DecodeExtras& extras)
    : first_chunk_(first_chunk),
      expected_chunks_(expected_chunks),
      length_(length),
      max_output_(std::min<size_t>(max_output, std::numeric_limits<uint32_t>::max())),
      output_capacity_(output_capacity),
      extras_(extras) {
  reset();
  output_base_ = out_.data.data();
  output_reserved_ = out_.data.capacity();
}

bool ChunkStreamDecoder::prefault_output(size_t bytes) const {
  return prefault_pages(output_base_, std::min(bytes, std::min(output_capacity_, output_reserved_)));
}

void ChunkStreamDecoder::reset() {
  // The output's memory is kept (cleared, not freed): a retried body fills pages already faulted.
  out_.data.clear();
  out_.ends.clear();
  out_.packed_ends.clear();
  out_.hashes.clear();
  out_.dropped = 0;
  failed_ = Status::Ok();
  fed_ = 0;
  produced_ = 0;
  kept_ = 0;
  head_ok_ = false;
  chunk_start_ = 0;
  keep_from_.reset();
  header_.reset();
  direct_ = false;
  direct_got_ = 0;
  stage_.clear();
  if (length_ > std::numeric_limits<uint32_t>::max()) {
    failed_ = InvalidArgument("a xorb range of " + std::to_string(length_) + " bytes: xorbs are at most 64 MiB");
    return;
  }
  // Every chunk has at least its header: a count the bytes cannot hold is refused before any
  // vector is sized by it.
  if (expected_chunks_ > length_ / kChunkHeaderSize) {
    failed_ = Corrupt("xorb range of " + std::to_string(length_) + " bytes cannot hold the " +
                      std::to_string(expected_chunks_) + " chunks it should (from chunk " +
                      std::to_string(first_chunk_) + "): truncated response or wrong range");
    return;
  }
  if (out_.data.capacity() < output_capacity_) {
    out_.data.reserve(output_capacity_);
    advise_huge_pages(out_.data.data(), output_capacity_);
  }
  out_.ends.reserve(expected_chunks_);
  out_.packed_ends.reserve(expected_chunks_);
  if (extras_.hash) out_.hashes.reserve(expected_chunks_);
}

void ChunkStreamDecoder::feed(const uint8_t* data, size_t n) {
  while (n > 0 && failed_.ok()) {
    const size_t took = step(data, n);
    data += took;
    n -= took;
    fed_ += took;
  }
  fed_ += n;  // after a failure: counted, not decoded
}

size_t ChunkStreamDecoder::step(const uint8_t* p, size_t n) {
  if (!header_ && out_.count() == expected_chunks_) {
    failed_ = Corrupt("xorb range holds bytes after its " + std::to_string(expected_chunks_) +
                      " chunks (from chunk " + std::to_string(first_chunk_) + "): the range and the chunk count disagree");
    return 0;
  }
  if (header_ && direct_) {
    // A chunk stored as-is and kept whole: its bytes go straight to their place in the output
    // as they arrive, and are hashed there once complete (still in cache), with no staging copy.
    const size_t take = std::min<size_t>(n, header_->compressed_size - direct_got_);
    keep(reinterpret_cast<const char*>(p), take);
    // Into a sink the chunk is hashed piece by piece as it passes (its bytes are not in one
    // place of ours to hash at the end).
    if (extras_.sink) direct_hash_.update(p, take);
    direct_got_ += take;
    if (failed_.ok() && direct_got_ == header_->compressed_size) {
      chunk_done(extras_.sink ? nullptr
                              : reinterpret_cast<const uint8_t*>(out_.data.data()) + out_.data.size() - direct_got_);
    }
    return take;
  }
  const size_t need = header_ ? header_->compressed_size : kChunkHeaderSize;
  const bool whole_here = stage_.empty() && n >= need;
  const size_t take = whole_here ? need : std::min(n, need - stage_.size());
  if (!whole_here) stage_.append(reinterpret_cast<const char*>(p), take);
  if (whole_here || stage_.size() == need) {
    const uint8_t* bytes = whole_here ? p : reinterpret_cast<const uint8_t*>(stage_.data());
    if (header_) {
      chunk_done(bytes);
    } else {
      header_done(bytes);
    }
    stage_.clear();
  }
  return take;
}

void ChunkStreamDecoder::header_done(const uint8_t* h) {
  const uint64_t index = first_chunk_ + out_.count();
  auto header = parse_chunk_header(h, kChunkHeaderSize, index);
  if (!header.ok()) {
    failed_ = header.status();
    return;
  }
  const uint64_t payload_start = chunk_start_ + kChunkHeaderSize;
  if (header->compressed_size > length_ - std::min(length_, payload_start)) {
    failed_ = Corrupt(chunk_name(index) + ": header says " + std::to_string(header->compressed_size) +
                      " stored bytes, only " + std::to_string(length_ - std::min(length_, payload_start)) +
                      " remain in the range: truncated response or damaged header");
    return;
  }
  if (header->uncompressed_size > max_output_ - produced_) {
    failed_ = Corrupt(chunk_name(index) + ": decoding it would exceed the " + std::to_string(max_output_) +
                      " bytes expected for this range: damaged header or a wrong reconstruction term");
    return;
  }
  header_ = *header;
  if (!keep_from_ && out_.count() == extras_.keep_from_chunk) keep_from_ = produced_ + extras_.keep_skip;
  direct_ = header_->scheme == CompressionScheme::kNone && keep_from_ && *keep_from_ <= produced_ &&
            header_->compressed_size > 0;
  direct_got_ = 0;
  if (direct_ && extras_.sink) direct_hash_ = ChunkHasher();
  if (header_->compressed_size == 0) chunk_done(h);  // an empty chunk: its payload is complete
}

void ChunkStreamDecoder::chunk_done(const uint8_t* payload) {
  const ChunkHeader h = *header_;
  header_.reset();
  const uint64_t index = first_chunk_ + out_.count();
  const uint8_t* content = payload;
  if (h.scheme != CompressionScheme::kNone) {
    scratch_.clear();
    Status s = decode_chunk_payload(h, payload, index, &scratch_);
    if (!s.ok()) {
      failed_ = s;
      return;
    }
    if (scratch_.size() != h.uncompressed_size) {
      failed_ = Corrupt(chunk_name(index) + ": decoded to the wrong size");
      return;
    }
    content = reinterpret_cast<const uint8_t*>(scratch_.data());
  }
  // A chunk kept as-is into a sink comes with no payload here: it was hashed as it passed.
  if (extras_.hash) out_.hashes.push_back(content ? chunk_hash(content, h.uncompressed_size) : direct_hash_.finalize());
  if (direct_) {
    direct_ = false;  // already in place
  } else if (keep_from_ && produced_ + h.uncompressed_size > *keep_from_) {
    const uint64_t from = std::max<uint64_t>(produced_, *keep_from_);
    keep(reinterpret_cast<const char*>(content) + (from - produced_), produced_ + h.uncompressed_size - from);
    if (!failed_.ok()) return;
  }
  produced_ += h.uncompressed_size;
  chunk_start_ += kChunkHeaderSize + h.compressed_size;
  out_.ends.push_back(static_cast<uint32_t>(produced_));
  out_.packed_ends.push_back(static_cast<uint32_t>(chunk_start_));
  if (extras_.sink && head_ok_ && kept_ > 0) extras_.sink->ready(kept_);
}

void ChunkStreamDecoder::keep(const char* p, size_t n) {
  if (extras_.sink) {
    Status s = extras_.sink->put(kept_, p, n);
    if (!s.ok()) failed_ = s;
  } else {
    out_.data.append(p, n);
  }
  kept_ += n;
}

Result<DecodedChunks> ChunkStreamDecoder::finish() {
  if (!failed_.ok()) return failed_;
  if (header_ || !stage_.empty() || out_.count() != expected_chunks_ || fed_ != length_) {
    const uint64_t index = first_chunk_ + out_.count();
    return Corrupt("xorb range ends after " + std::to_string(fed_) + " of its " + std::to_string(length_) +
                   " bytes, inside " + chunk_name(index) + " (" + std::to_string(out_.count()) + " of " +
                   std::to_string(expected_chunks_) + " chunks decoded): truncated response or damaged header");
  }
  out_.dropped = std::min<uint64_t>(keep_from_.value_or(produced_), produced_);
  out_.sunk = extras_.sink ? kept_ : 0;
  return std::move(out_);
}

}  // namespace hubfs::xet
