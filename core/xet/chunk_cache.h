// Verified Xet chunks, keyed by xorb hash and chunk index (docs/xet.md, "The chunk cache"): a
// chunk fetched for any file or revision is never fetched again while it is here. Files sharing
// chunks (a revision that changed 1%, fine-tunes of one base) then cost only their new chunks.
//
// Stored as runs: the chunks [first, end) of one xorb that a read fetched together, in one file
// <dir>/<first 2 hex of the xorb>/<xorb hex>.<first>-<end>. One file per fetched term, not per
// chunk: a file per ~64 KiB chunk cost more CPU than hashing them (docs/constants.md, kCopyMagic). A range of chunks is served from whichever runs hold its
// pieces (revision 2's terms need not line up with revision 1's). A run comes in two kinds:
//   - a location ("XCL1"), where the chunks' bytes are those of a file the block cache holds
//     (put_location): the run keeps the chunks' hashes and sizes, the file's key and offset, and
//     inline only the bytes at its two ends that lie outside the read which fetched it (a chunk
//     straddling the read's edge: at most two chunks' worth). The bytes are written once, as
//     blocks, not a second time here: the native read of a 170 MB file wrote 340 MB of page
//     cache before, and the fresh memory cost the reading application more than the write;
//   - a copy ("XCR1", put_run): the chunks' bytes themselves, where no block cache can hold them
//     (a reader without one, and runs written before locations existed).
//
// Only chunks whose hash was checked go in (the caller passes the hashes it verified), and a
// chunk comes out only if its bytes, wherever they were read from, still hash to the stored
// hash: a damaged run, or a location whose file bytes differ, is a miss, removed, never served.
// A location whose blocks are not (or no longer) in the block cache is a miss, kept. Runs are
// written to a temporary name and renamed, so a reader never sees half of one.
//
// Bounded: with max_bytes set, a put that takes the directory past it evicts the least recently
// used runs (a hit refreshes its file's mtime) down to 90% of it, so one sweep pays for many
// puts. The sweep lists the directory, which also corrects the running total for what other
// processes sharing the directory stored or removed. One sweep at a time; a put that finds one
// running goes on without waiting.
//
// What it served instead of the network is also kept beside the directory, in `<dir>.saved`
// (common/counter_file.h: "chunks N" and "bytes N", summed over every process that used the
// directory), for `hubfs cache info`: added every kSavedFlushBytes served and when the cache is
// destroyed (a daemon killed with SIGKILL loses at most that much of the count).
//
// Thread-safe (each call touches its own files; counters are atomic; sweeps under sweep_mu_,
// which is held across nothing but this directory's own files; file_bytes must be thread-safe).
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "xet/chunker.h"
#include "xet/hash.h"

namespace hubfs::xet {

struct ChunkCacheStats {
  uint64_t hits = 0;        // chunks served
  uint64_t hit_bytes = 0;  // content bytes served from here instead of the network
  uint64_t misses = 0;      // chunks asked for and not served
  uint64_t stored = 0;      // chunks stored
  uint64_t damaged = 0;  // run files whose chunks no longer matched their hashes (removed)
  uint64_t evicted = 0;  // run files removed to stay within max_bytes
};

class ChunkCache {
 public:
  // Reads bytes [offset, offset + length) of the file whose block-cache key is `file` into `out`;
  // false when any of them is not held there. Must be thread-safe.
  using FileBytes = std::function<bool(const std::string& file, uint64_t offset, uint64_t length, char* out)>;

  // dir is created on first put. max_bytes: the most its files may take (headers included); 0
  // for no bound. file_bytes (may be null): where locations are read back from; without it,
  // put_location stores nothing.
  explicit ChunkCache(std::string dir, uint64_t max_bytes = 0, FileBytes file_bytes = nullptr);
  ~ChunkCache();  // adds what is left of the served count to `<dir>.saved`
  ChunkCache(const ChunkCache&) = delete;
  ChunkCache& operator=(const ChunkCache&) = delete;

  static constexpr uint64_t kSavedFlushBytes = 16ull << 20;
  // The file beside `dir` that counts what every cache on it served: keys "chunks" and "bytes".
  static std::string saved_path(const std::string& dir) { return dir + ".saved"; }

  // Chunks [first, end) of xorb, concatenated, if every one is here and intact (from as many
  // runs as hold them); *chunks (if given) gets their hashes and sizes.
  std::optional<std::string> get_range(const MerkleHash& xorb, uint32_t first, uint32_t end,
                                       std::vector<HashAndSize>* chunks = nullptr);
  // One chunk: get_range(xorb, index, index + 1).
  std::optional<std::string> get(const MerkleHash& xorb, uint32_t index, MerkleHash* hash = nullptr);
  // Whether runs on disk cover chunks [first, end) (no read, no check). get_range makes the same
  // test on its own listing before it reads anything.
  bool contains(const MerkleHash& xorb, uint32_t first, uint32_t end) const;
  bool contains(const MerkleHash& xorb, uint32_t index) const { return contains(xorb, index, index + 1); }
  // Stores chunks [first, first + chunks.size()) of xorb as one run; `data` holds their bytes
  // back to back (chunks[i].size each) and they hash to chunks[i].hash (the caller checked).
  // Failures are ignored (a cache, not a store of record).
  void put_run(const MerkleHash& xorb, uint32_t first, const std::vector<HashAndSize>& chunks, const char* data);
  // Records that chunks [first, first + chunks.size()) of xorb (they hash to chunks[i].hash: the
  // caller checked) are bytes [file_offset, file_offset + their total size) of the file the block
  // cache keeps as `file`, except their first head.size() and last tail.size() bytes, which are
  // stored here (they lie outside the caller's read, so its blocks do not hold them). Failures are
  // ignored. Without file_bytes, does nothing.
  void put_location(const MerkleHash& xorb, uint32_t first, const std::vector<HashAndSize>& chunks,
                    const std::string& file, uint64_t file_offset, std::string_view head, std::string_view tail);
  // Whether put_location stores anything (a FileBytes was given).
  bool keeps_locations() const { return static_cast<bool>(file_bytes_); }
  // One chunk: a run of one.
  void put(const MerkleHash& xorb, uint32_t index, const MerkleHash& hash, const char* data, size_t len);

  ChunkCacheStats stats() const;
  const std::string& dir() const { return dir_; }

 private:
  struct Run {
    uint32_t first, end;
    std::string path;
  };
  // The runs of xorb on disk (one listing of its subdirectory).
  std::vector<Run> runs_of(const MerkleHash& xorb) const;
  // Whether `runs` hold every chunk of [first, end).
  static bool covers(const std::vector<Run>& runs, uint32_t first, uint32_t end);
  // Appends chunks [first, end) (within the run's own) from `run` to *out, after checking each
  // one's hash, and their hashes and sizes to *chunks; false if it is gone (evicted), a location
  // whose blocks are not held, or damaged (then removed).
  bool read_run(const Run& run, uint32_t first, uint32_t end, std::string* out, std::vector<HashAndSize>* chunks);
  // Lists the directory, sets bytes_ to what it holds, and if that is over max_bytes_ removes
  // the oldest files (by mtime) down to 90% of it. Called with sweep_mu_ held.
  void sweep();
  // Writes a run file (header, then `parts` back to back) under a temporary name and renames it
  // into place; counts it toward max_bytes and sweeps when that is passed.
  void write_run(const MerkleHash& xorb, uint32_t first, uint32_t count, const std::vector<std::string_view>& parts);
  // Moves the served count not yet written into `<dir>.saved` (if the directory exists).
  void flush_saved();

  std::string dir_;
  const uint64_t max_bytes_;
  const FileBytes file_bytes_;
  std::mutex sweep_mu_;             // one sweep at a time (try_lock: a put never waits for one)
  std::atomic<bool> counted_{false};  // bytes_ was set from a listing at least once
  std::atomic<uint64_t> bytes_{0};  // what the directory holds, as far as this process knows
  std::atomic<uint64_t> hits_{0}, hit_bytes_{0}, misses_{0}, stored_{0}, damaged_{0}, evicted_{0};
  std::atomic<uint64_t> unsaved_hits_{0}, unsaved_bytes_{0};  // served, not yet in <dir>.saved
};

}  // namespace hubfs::xet
