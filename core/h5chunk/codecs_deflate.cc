// Deflate filter (1): one zlib stream (RFC 1950) per chunk.
#include <zlib.h>

#include <algorithm>
#include <climits>
#include <string>

#include "h5chunk/codecs.h"

namespace h5chunk::codec {
namespace {

// zlib counts in uInt; feed larger buffers in slices of this size.
constexpr size_t kMaxSlice = size_t{1} << 30;

uInt slice(size_t n) { return static_cast<uInt>(std::min(n, kMaxSlice)); }

}  // namespace

Result<size_t> deflate_decode(z_stream_s* stream, const uint8_t* in, size_t in_size, Target out) {
  // Reset rather than init: keeps the 7 KiB of inflate state and its 32 KiB window allocated
  // across chunks.
  if (inflateReset(stream) != Z_OK)
    return hubfs::Status(hubfs::Code::kInternal, "deflate: inflateReset failed");
  size_t in_left = in_size, out_left = out.capacity;
  stream->next_in = const_cast<Bytef*>(in);
  stream->next_out = out.data;
  for (;;) {
    uInt avail_in = slice(in_left), avail_out = slice(out_left);
    stream->avail_in = avail_in;
    stream->avail_out = avail_out;
    int rc = inflate(stream, Z_NO_FLUSH);
    in_left -= avail_in - stream->avail_in;
    out_left -= avail_out - stream->avail_out;
    if (rc == Z_STREAM_END) break;
    bool progressed = stream->avail_in != avail_in || stream->avail_out != avail_out;
    if (rc == Z_OK && progressed) continue;
    if (rc == Z_OK || rc == Z_BUF_ERROR) {
      // Stuck: either the output is full before the stream ends, or the input ran out.
      if (out_left == 0) {
        return hubfs::Corrupt("deflate: stream inflates to more than " + std::to_string(out.capacity) +
                              " bytes");
      }
      return hubfs::Corrupt("deflate: stream truncated after " + std::to_string(out.capacity - out_left) +
                            " bytes of output");
    }
    return hubfs::Corrupt(std::string("deflate: ") + (stream->msg ? stream->msg : "inflate error ") +
                          (stream->msg ? "" : std::to_string(rc)));
  }
  size_t produced = out.capacity - out_left;
  if (in_left != 0) {
    return hubfs::Corrupt("deflate: " + std::to_string(in_left) + " bytes after the end of the stream");
  }
  if (out.exact && produced != out.capacity) {
    return hubfs::Corrupt("deflate: decoded " + std::to_string(produced) + " bytes, expected " +
                          std::to_string(out.capacity));
  }
  return produced;
}

}  // namespace h5chunk::codec
