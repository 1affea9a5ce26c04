// A source of byte ranges of ONE file, other than the Hub's resolve + RangeFetcher: the reader
// sends a file's range requests here when its RemoteFile carries one (a Xet-stored file read
// natively from the storage service, core/xet/xet_source.h; chosen in core/fs).
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include "common/deadline.h"
#include "common/status.h"
#include "net/range_fetcher.h"

namespace hubfs {

// What a source says of bytes it delivered.
enum class Provenance {
  kPlain,       // only the reader's own whole-file hash can check them (the bridge's bytes)
  kFileHashed,  // covered by the source's own whole-file check: file_verdict() (a Xet read)
};

// A source's check of the whole file, over every byte it delivered as kFileHashed.
enum class FileVerdict {
  kUnknown,   // not (or not yet) checked: the delivered bytes do not tile the file, or records
              // of them were dropped
  kMatch,     // every byte delivered is the file's own
  kMismatch,  // some byte delivered is not
};

class RangeSource {
 public:
  using Callback = std::function<void(Result<std::string>, Provenance)>;
  virtual ~RangeSource() = default;

  // The contract of RangeFetcher::fetch_async for this source's file: returns at once; `done`
  // runs exactly once, on any thread but the caller's, with exactly range.length bytes, each
  // the file's own (never unchecked wrong bytes), or an error (kInvalidArgument for a range past
  // file_size; kTimeout once `deadline` passed); with the bytes, what checks them. Thread-safe.
  virtual void fetch_async(uint64_t file_size, ByteRange range, Callback done, Deadline deadline) = 0;

  // Bytes [0, ready) of a range fetched into a buffer are in it, final, from this source's
  // checked reads (Provenance::kFileHashed): the caller may serve them before the fetch ends.
  // The source records them for its file_verdict only when the fetch ends: a caller that takes
  // the verdict once a file is complete completes it only from a fetch that ended.
  using Progress = std::function<void(uint64_t ready)>;
  using DoneInto = std::function<void(Status, Provenance)>;
  // fetch_async whose bytes go into `into` (RangeFetcher::fetch_into_async's contract: only an OK
  // Status says `into` holds exactly the range), with `progress`, when set, told as a prefix of
  // the range is in for good (on any thread, before `done`, in increasing `ready`): from then on
  // nothing writes into [0, ready) of `into` again (a retry that brings those bytes compares
  // them, and fails unless they are the same), and they are the range's bytes whatever `done`
  // says (a failure leaves the rest of the range unserved, not those). `done`'s provenance is
  // that of the bytes past the last `ready`. This default fetches a string and copies it in,
  // with no progress.
  virtual void fetch_into_async(uint64_t file_size, ByteRange range, std::shared_ptr<RangeBuffer> into,
                                Progress progress, DoneInto done, Deadline deadline) {
    (void)progress;
    fetch_async(
        file_size, range,
        [into = std::move(into), done = std::move(done)](Result<std::string> got, Provenance provenance) {
          if (got.ok()) into->write(0, got->data(), got->size());
          done(got.status(), provenance);
        },
        deadline);
  }

  // The source's verdict on the whole file. A reader may take kMatch instead of hashing the file
  // itself when every byte it holds came from here as kFileHashed. kMismatch is reported once:
  // the source forgets what it delivered (and what told it where to fetch), so the reader's
  // next fetches, after it dropped the file's bytes, get a fresh verdict. Thread-safe.
  virtual FileVerdict file_verdict() { return FileVerdict::kUnknown; }
};

// A fetcher's callback that hands its result on to `done` with `provenance`.
inline RangeFetcher::Callback with_provenance(RangeSource::Callback done, Provenance provenance) {
  return [done = std::move(done), provenance](Result<std::string> got) { done(std::move(got), provenance); };
}

// A file's range from its own source when it has one, else through the fetcher from `locate`,
// in `parts` requests (RangeFetcher::fetch_async; its bytes are kPlain). A source plans its own
// requests: `parts` is the fetcher's only (a Xet read already fetches a term's xorb ranges side
// by side).
inline void fetch_file_range(RangeFetcher& fetcher, const std::shared_ptr<RangeSource>& source, const Locator& locate,
                             uint64_t file_size, ByteRange range, RangeSource::Callback done, Deadline deadline,
                             uint32_t parts = 1) {
  if (source) {
    source->fetch_async(file_size, range, std::move(done), deadline);
  } else {
    fetcher.fetch_async(locate, file_size, range, with_provenance(std::move(done), Provenance::kPlain), deadline, parts);
  }
}

}  // namespace hubfs
