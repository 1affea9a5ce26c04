// The read-ahead policy: from what one open handle has read so far and the read arriving now,
// which blocks to fetch ahead of the reader, and in requests of what size. Pure: no threads, no
// clock, no I/O, so every rule below is unit-tested by feeding it reads
// (tests/reader/read_ahead_test.cc). BlockReader owns the mechanism (claiming blocks, the memory
// budget, sending requests); this decides the range.
//
// It weighs bytes against round trips, with a model of the link (ReadAheadOptions: round trip,
// bandwidth per connection, parallel requests). The settings it shares with the reader have the
// reader's names (ReaderOptions::read_ahead() copies them). The rules, each for a measured reason
// (docs/how-it-works.md, "Read-ahead"):
// - Sequential: a read that starts where the handle's last read ended, give or take the window
//   (the kernel sends one stream's pieces from several threads, a little out of order). A run
//   earns read-ahead only once it reaches its min_run_blocks-th block: a FUSE mount's mmap fault
//   reads the 1 MiB around the faulting page (two blocks, in one read), and that one read is not
//   a stream; a second read that goes on into a new block is (h5py's first chunk through a mount:
//   the kernel's reads of 16-512 KiB within block 0, then the piece that reaches block 1).
// - Over the network the window doubles only on a read that catches up with it: one that missed
//   or waited for a block read-ahead still had on its way (TCP's window grows only when it limits
//   the sender, likewise). A reader slower than the link (h5py, decoding between its chunk reads)
//   keeps the window that kept it fed, and when it stops, that window is all it wasted. It never
//   exceeds max_readahead_blocks, nor per_run_factor times what the run has read or the first
//   window (min_readahead_blocks), whichever is more: a run that ends (the last chunk of an HDF5
//   read) was fetched at most (1 + per_run_factor) times over, a short one min_readahead_blocks
//   over. Below it, a reader as fast as the link (h5py's first chunk through a mount, before any
//   pause is seen) waited a round trip for each 40% it read. From
//   the disk cache (a warm stream) over-reading costs no network bytes: the window doubles per
//   read, up to local_run_factor times the run. But a reader that reads N blocks at a time (h5py
//   reading a 10 MiB chunk through hubfs.open) always gets its next read's worth ahead, to arrive
//   while it decodes this one: a run that then ends was fetched one read over. Through a mount
//   the kernel cuts each such read into 1 MiB pieces that follow each other at once, and the
//   reader's pause between its reads (ReadFacts::paused) shows where one ends: from its second
//   read on, a run gets its largest whole read so far (a burst of pieces) ahead, as one read
//   through hubfs.open does. The largest, not the last: a piece that comes late within a burst
//   looks like a pause, and the burst it cuts off is not the size of the reader's reads. h5py's
//   second chunk then no longer waits round trips for a window still growing at 0.4 of the run,
//   and a run that ends was fetched one read over, as before.
//   A reader that never pauses (cat) keeps the window above.
// - A run from the file's first block that fetches reaches start_window_bytes ahead at once when
//   it earns read-ahead (its reach, not its window: the window goes on growing as above, and past
//   those bytes it alone decides). A program that reads a file from its start reads at least that
//   much far more often than it stops short of it, and the first chunk of an HDF5 file no longer
//   waits for a window that grows a round trip at a time.
// - The window goes out in requests sized to keep every connection busy: a window of W blocks
//   over C connections goes as requests of W / C blocks (1 to max_blocks_per_request). With a
//   bandwidth cap per connection a small window in big requests used a few connections and
//   left the rest idle; in small ones it arrives in one round trip.
// - Random access: a read that is not sequential fetches its own blocks, whole blocks of 1 MiB
//   (about what one connection moves in a round trip: 50 MB/s x 50 ms is 2.5 MB; on a mount the
//   kernel's read-around adds a block or two). Once a handle has made
//   random_reads_for_whole_file such reads, a file that the link moves whole in
//   whole_file_round_trips round trips is fetched whole: those reads have already cost that
//   many round trips, and each later one is then served from the cache. A bigger file never is:
//   its random reads fetch what they touch, not gigabytes they may never.
// - A file whose reader sends range hints gets no speculative read-ahead: it said what it needs.
// - max_ahead_bytes, when set, caps what the rules above fetch: a run's reach past its last read,
//   and the files fetched whole (bench/peer_bench.py --hubfs-args measures the trade).
// - Fetching ahead starts only on a miss, and continues only while the reader consumes blocks
//   read-ahead fetched (the kernel's PG_readahead marker: BlockReader marks every block its
//   read-ahead asks of the network, and the first read of one takes the mark; ReadFacts). A read
//   served from memory or the disk cache, or from a hint's or a prefetch's blocks, never starts a
//   fetch: a warm read asks the network nothing. A warm sequential stream still gets its window
//   ahead, read from the disk cache only (ReadAheadPlan::fetch false): what is not there is left
//   to the reads that need it.
#pragma once

#include <cstdint>
#include <optional>

namespace hubfs {

struct ReadAheadOptions {
  uint64_t block_size = 1 << 20;
  // The window of a sequential handle: its first, and the most it grows to.
  uint32_t min_readahead_blocks = 4;
  uint32_t max_readahead_blocks = 128;
  // The largest request (neighbouring blocks in one range GET).
  uint32_t max_blocks_per_request = 8;
  // The window may reach this many times the bytes the current run has read: a reader of a few
  // contiguous frames must not pull in the whole file, while a stream loses little to the slower
  // ramp (docs/constants.md, per_run_factor).
  double per_run_factor = 0.4;
  // The same bound for a handle whose blocks come from the disk cache (ReadAheadState::fetching
  // false):
  // over-reading costs disk reads, not network bytes, and a wider window made a warm stream
  // faster (docs/constants.md, local_run_factor).
  double local_run_factor = 4;
  // A run reads this many blocks before it earns read-ahead: more than the kernel's read-around
  // for one mmap fault (one read of the mount's read_ahead_kb, 1 MiB: fuse/mount.cc), so that
  // a stream's second 1 MiB read starts it (at 4, the first chunk h5py read through a mount
  // waited a round trip more; docs/constants.md, min_run_blocks).
  uint32_t min_run_blocks = 2;
  // A run from the file's first block that fetches has the file's first start_window_bytes
  // asked for at once when it earns read-ahead, not a window of min_readahead_blocks that grows a
  // round trip at a time: a program reading a file from its start (h5py: its metadata, then its
  // first chunk) waited three or four round trips more for its first 16 MiB. 16 MiB is rclone's
  // --buffer-size. Only the reach: past it the run's own window goes on as it grew, so a run that
  // stops later wastes no more than before (docs/constants.md, start_window_bytes). 0: none.
  uint64_t start_window_bytes = 16ull << 20;
  // The link: requests in flight at once (--max-requests), the round trip of one request, and
  // one connection's bandwidth (a CDN edge gives one TCP stream ~400 Mbit/s).
  uint32_t parallel_requests = 16;
  double round_trip_seconds = 0.05;
  double connection_bytes_per_second = 50e6;
  // Random access: after this many random reads on a handle, a file the link moves whole in
  // whole_file_round_trips round trips is fetched whole (16 x 50 MB/s x 50 ms x 16 = 640 MB).
  // Four: soon enough that the bulk fetch of a randomly read file does not start late, while
  // h5py's metadata reads before its chunks stay under it (docs/constants.md,
  // random_reads_for_whole_file).
  uint32_t random_reads_for_whole_file = 4;
  uint32_t whole_file_round_trips = 16;
  // A cap on everything above that costs network bytes (`hubfs mount --read-ahead`): the most a
  // fetching run asks for past its last read, and the largest file fetched whole under random
  // access. The rules above weigh bytes against round trips as if bytes were free; on a metered
  // link or a rate-limited account they are not, and only the user knows what they cost.
  // UINT64_MAX: no cap. 0: none at all, each read fetches the blocks it touches (hints and
  // prefetches, which the reader asked for, are not read-ahead). A warm stream's window from
  // the disk cache is not capped: it fetches nothing.
  uint64_t max_ahead_bytes = UINT64_MAX;

  // The largest file fetched whole under random access.
  uint64_t whole_file_bytes() const;
};

// What a handle remembers between reads. Guarded by its owner (BlockReader's ReadState::mu).
struct ReadAheadState {
  uint64_t next_offset = UINT64_MAX;  // where a sequential read would start (MAX: no read yet)
  uint32_t window_blocks = 0;         // current window (0: not sequential)
  uint64_t prefetched_to = 0;         // blocks below this were already requested ahead
  uint64_t run_bytes = 0;             // bytes read sequentially in the current run
  uint64_t run_first_block = 0;       // the block the current run began in
  uint32_t random_reads = 0;          // random reads since the handle's last long run
  bool whole_file = false;            // the file is being fetched whole (prefetched_to: how far)
  // The last blocks this handle loaded itself came over the network (a miss), or it consumed
  // blocks read-ahead fetched: its window is fetched, at per_run_factor. False (a new handle, or
  // its last loads came from the disk cache): its window is read from the disk cache only, at
  // local_run_factor, and nothing is fetched until a read misses.
  bool fetching = false;
  // The reader's reads as it made them (ReadFacts::paused): the bytes of the one it is making
  // now, of its last whole one in this run, and of the largest whole one in this run (0: none
  // yet). The window follows the largest: a pause seen inside one of the reader's reads (a
  // piece late by 5 ms or more) cuts it in two smaller ones, and the next read is as large as
  // the reader's reads are, not as the piece after the false pause.
  uint64_t burst_bytes = 0;
  uint64_t last_burst_bytes = 0;
  uint64_t largest_burst_bytes = 0;
};

// What the caller found serving one read: whether it may start or continue fetching ahead.
struct ReadFacts {
  // Some of the read's own blocks were in neither memory nor the disk cache (the shared tier or
  // the Hub served them).
  bool missed = false;
  // The read took a block's read-ahead mark: it consumed a block read-ahead fetched.
  bool marked = false;
  // The read's own blocks that were not in memory all came from the disk cache.
  bool from_disk = false;
  // The file's reader sent a range hint lately: no speculative read-ahead at all.
  bool hinted = false;
  // The read took a block's mark while that block was still on its way: the reader caught up
  // with read-ahead (the window grows only then, or on a miss).
  bool waited = false;
  // The reader paused before this read (BlockReader: longer than ReaderOptions::reader_pause
  // after its last read returned): this read starts a new read of the reader's own, not the next
  // piece the kernel cut from the same one.
  bool paused = false;
};

// Blocks [first, last], both included.
struct BlockRange {
  uint64_t first = 0;
  uint64_t last = 0;
  uint64_t count() const { return last - first + 1; }
  bool operator==(const BlockRange&) const = default;
};

// Blocks to fetch ahead, and the largest request to send them in.
struct ReadAheadPlan {
  BlockRange blocks;
  uint32_t blocks_per_request = 1;
  // False: read the blocks the disk cache holds into memory, fetch none (a warm stream).
  bool fetch = true;
  bool operator==(const ReadAheadPlan&) const = default;
};

class ReadAheadPolicy {
 public:
  explicit ReadAheadPolicy(ReadAheadOptions options) : options_(options) {}

  // Records the read [offset, end) (end > offset, end <= file_size) of a file of file_size bytes
  // and returns the blocks to read ahead of it, or nothing. `facts`: what serving the read found.
  // The caller fetches a prefix of the range (its memory budget may stop it early) and records
  // how far it got in state.prefetched_to (the block after the last one it took care of), so
  // the next read does not ask for them again.
  std::optional<ReadAheadPlan> on_read(ReadAheadState& state, uint64_t offset, uint64_t end,
                                       uint64_t file_size, const ReadFacts& facts) const;

  // The largest request for `blocks` blocks needed at once: spread over every connection (at
  // most `connections` of them, 0: no limit), at most `largest` each (0: max_blocks_per_request).
  uint32_t request_blocks(uint64_t blocks, uint32_t largest = 0, uint32_t connections = 0) const;

  // How many parts each of a read's own `requests` requests of about `bytes` bytes goes out in,
  // with `busy` of the connections' request slots taken. A reader waits for its own blocks
  // (read-ahead does not: it is already in flight on many connections), and a request split over
  // k connections arrives in a round trip plus 1/k of its transfer time: a random 1 MiB block at
  // 50 ms / 50 MB/s per connection takes 71 ms whole, 55 ms in 4 parts. Each part is at least
  // min_part_bytes(), a tenth of what one connection moves in a round trip: below it the transfer
  // saved is lost in the round trip's jitter, and the extra requests cost the server more than
  // they save.
  uint32_t demand_parts(uint64_t bytes, uint64_t requests, uint64_t busy) const;
  uint64_t min_part_bytes() const;

  const ReadAheadOptions& options() const { return options_; }

 private:
  // The window a sequential read asks for before the run's bounds (ReadAheadOptions).
  uint64_t next_window(const ReadAheadState& state, const ReadFacts& facts) const;
  std::optional<ReadAheadPlan> on_random_read(ReadAheadState& state, uint64_t file_size, uint64_t file_blocks,
                                              bool may_fetch, bool hinted) const;
  // Which blocks to request once the window is known (the refill rule), up to `reach` blocks past
  // the last one read (the window, or more for a file's start).
  std::optional<ReadAheadPlan> refill(const ReadAheadState& state, uint64_t last_read_block,
                                      uint64_t file_blocks, uint64_t reach) const;
  std::optional<ReadAheadPlan> whole_file_rest(const ReadAheadState& state, uint64_t file_blocks) const;

  ReadAheadOptions options_;
};

}  // namespace hubfs
