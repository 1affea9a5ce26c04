#include "xet/chunk_cache.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstring>
#include <cstdio>
#include <filesystem>
#include <limits>
#include <tuple>
#include <vector>

#include "cache/chunk_run_name.h"
#include "common/counter_file.h"

namespace hubfs::xet {

namespace {

bool write_all(int fd, const char* p, size_t n) {
  while (n > 0) {
    ssize_t w = ::write(fd, p, n);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) return false;
    p += w;
    n -= static_cast<size_t>(w);
  }
  return true;
}

std::atomic<uint64_t> g_tmp_counter{0};

}  // namespace

ChunkCache::ChunkCache(std::string dir, uint64_t max_bytes, FileBytes file_bytes)
    : dir_(std::move(dir)), max_bytes_(max_bytes), file_bytes_(std::move(file_bytes)) {}

ChunkCache::~ChunkCache() { flush_saved(); }

void ChunkCache::flush_saved() {
  const uint64_t hits = unsaved_hits_.exchange(0), bytes = unsaved_bytes_.exchange(0);
  if (hits == 0 && bytes == 0) return;
  struct stat st;
  if (::stat(dir_.c_str(), &st) != 0) return;  // nothing was ever stored here: nothing to count
  // A failure loses this much of a statistic; the cache itself is unaffected.
  (void)counter_file::add(saved_path(dir_), {{"chunks", hits}, {"bytes", bytes}});
}

namespace {

// A run file: magic, chunk count (u32 LE), each chunk's 32-byte hash and size (u32 LE), then
//   copy:     the chunks' bytes;
//   location: the file's key (u32 length, bytes), the offset in it of the run's first byte
//             (u64 LE), the lengths of the ends stored here (head, tail: u32 LE each), their bytes.
constexpr char kCopyMagic[4] = {'X', 'C', 'R', '1'};
constexpr char kLocationMagic[4] = {'X', 'C', 'L', '1'};
constexpr size_t kRunEntry = 32 + 4;  // a chunk's hash and size
// A location's own part (key, offset, the two ends) is small: at most two chunks' bytes and a key.
constexpr uint64_t kMaxLocationTail = 4096 + 4 * uint64_t(kMaxChunkSize);

void put_le32(std::string* s, uint32_t v) {
  for (int i = 0; i < 4; ++i) s->push_back(static_cast<char>((v >> (8 * i)) & 0xff));
}
uint32_t get_le32(const char* p) {
  uint32_t v = 0;
  for (int i = 3; i >= 0; --i) v = (v << 8) | static_cast<uint8_t>(p[i]);
  return v;
}
void put_le64(std::string* s, uint64_t v) {
  put_le32(s, static_cast<uint32_t>(v));
  put_le32(s, static_cast<uint32_t>(v >> 32));
}
uint64_t get_le64(const char* p) { return get_le32(p) | (uint64_t(get_le32(p + 4)) << 32); }

// A location run's own part, after its chunk table (views into the bytes it was parsed from).
struct Location {
  std::string_view file;
  uint64_t offset = 0;
  std::string_view head, tail;
};
// A run file's start: magic, chunk count, each chunk's hash and size; *length gets their total
// size. Nullopt for no chunks, too many, or a chunk larger than Xet allows.
std::optional<std::string> run_head(const char magic[4], uint32_t first, const std::vector<HashAndSize>& chunks,
                                    uint64_t* length) {
  if (chunks.empty() || chunks.size() > std::numeric_limits<uint32_t>::max() - first) return std::nullopt;
  std::string head(magic, 4);
  put_le32(&head, static_cast<uint32_t>(chunks.size()));
  *length = 0;
  for (const HashAndSize& c : chunks) {
    if (c.size > kMaxChunkSize) return std::nullopt;
    head.append(reinterpret_cast<const char*>(c.hash.bytes.data()), 32);
    put_le32(&head, static_cast<uint32_t>(c.size));
    *length += c.size;
  }
  return head;
}

std::optional<Location> parse_location(std::string_view rest, uint64_t run_bytes) {
  Location l;
  size_t at = 0;
  auto need = [&](size_t n) { return rest.size() - at >= n; };
  if (!need(4)) return std::nullopt;
  const uint32_t key_len = get_le32(rest.data());
  at = 4;
  if (key_len == 0 || !need(key_len)) return std::nullopt;
  l.file = rest.substr(at, key_len);
  at += key_len;
  if (!need(16)) return std::nullopt;
  l.offset = get_le64(rest.data() + at);
  const uint64_t head = get_le32(rest.data() + at + 8), tail = get_le32(rest.data() + at + 12);
  at += 16;
  if (head + tail > run_bytes || rest.size() - at != head + tail) return std::nullopt;
  l.head = rest.substr(at, head);
  l.tail = rest.substr(at + head);
  return l;
}

bool pread_all(int fd, char* p, size_t n, uint64_t at) {
  while (n > 0) {
    ssize_t r = ::pread(fd, p, n, static_cast<off_t>(at));
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) return false;
    p += r;
    at += static_cast<uint64_t>(r);
    n -= static_cast<size_t>(r);
  }
  return true;
}

}  // namespace

std::vector<ChunkCache::Run> ChunkCache::runs_of(const MerkleHash& xorb) const {
  std::vector<Run> runs;
  const std::string hex = xorb.hex();
  const std::string sub = dir_ + "/" + hex.substr(0, 2);
  DIR* d = ::opendir(sub.c_str());
  if (!d) return runs;
  while (const dirent* e = ::readdir(d)) {
    Run r;
    if (parse_chunk_run_name(e->d_name, hex, &r.first, &r.end)) {
      r.path = sub + "/" + e->d_name;
      runs.push_back(std::move(r));
    }
  }
  ::closedir(d);
  return runs;
}

bool ChunkCache::contains(const MerkleHash& xorb, uint32_t first, uint32_t end) const {
  return covers(runs_of(xorb), first, end);
}

bool ChunkCache::covers(const std::vector<Run>& runs, uint32_t first, uint32_t end) {
  uint32_t i = first;
  while (i < end) {
    uint32_t reach = i;
    for (const Run& r : runs) {
      if (r.first <= i && r.end > reach) reach = r.end;
    }
    if (reach == i) return false;
    i = reach;
  }
  return true;
}

bool ChunkCache::read_run(const Run& run, uint32_t first, uint32_t end, std::string* out,
                          std::vector<HashAndSize>* chunks) {
  const uint32_t count = run.end - run.first;
  int fd = ::open(run.path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return false;  // evicted meanwhile: a miss, nothing damaged
  std::string table(8 + size_t(count) * kRunEntry, '\0');
  bool ok = pread_all(fd, table.data(), table.size(), 0) && get_le32(table.data() + 4) == count;
  const bool copy = ok && std::memcmp(table.data(), kCopyMagic, 4) == 0;
  const bool location = ok && std::memcmp(table.data(), kLocationMagic, 4) == 0;
  // false: a location whose file bytes cannot be had here (no FileBytes, or the block cache does
  // not hold them): a miss that keeps the run, not a damaged one.
  bool held = !location || file_bytes_;
  ok = copy || (location && held);
  // The wanted chunks are the run's bytes [skip, skip + length) of `total`.
  uint64_t skip = 0, length = 0, total = 0;
  for (uint32_t k = 0; k < count && ok; ++k) {
    const uint32_t size = get_le32(table.data() + 8 + size_t(k) * kRunEntry + 32);
    if (size > kMaxChunkSize) ok = false;
    if (k < first - run.first) skip += size;
    else if (k < end - run.first) length += size;
    total += size;
  }
  const size_t base = out->size(), chunks_base = chunks ? chunks->size() : 0;
  if (ok && copy) {
    out->resize(base + length);
    ok = pread_all(fd, out->data() + base, length, table.size() + skip);
  } else if (ok) {
    struct stat st;
    ok = ::fstat(fd, &st) == 0 && uint64_t(st.st_size) >= table.size() &&
         uint64_t(st.st_size) - table.size() <= kMaxLocationTail;
    std::string rest;
    if (ok) {
      rest.resize(uint64_t(st.st_size) - table.size());
      ok = pread_all(fd, rest.data(), rest.size(), table.size());
    }
    std::optional<Location> loc = ok ? parse_location(rest, total) : std::nullopt;
    ok = loc.has_value();
    if (ok) {
      // [skip, skip + length) from the head kept here, the file's bytes, the tail kept here.
      const uint64_t mid_begin = loc->head.size(), mid_end = total - loc->tail.size();
      const uint64_t a = skip, b = skip + length;
      if (a < mid_begin) out->append(loc->head, a, std::min(b, mid_begin) - a);
      if (std::max(a, mid_begin) < std::min(b, mid_end)) {
        const uint64_t from = std::max(a, mid_begin), to = std::min(b, mid_end);
        const size_t at = out->size();
        out->resize(at + (to - from));
        held = file_bytes_(std::string(loc->file), loc->offset + from, to - from, out->data() + at);
        ok = held;
      }
      if (ok && b > mid_end) {
        const uint64_t from = std::max(a, mid_end);
        out->append(loc->tail, from - mid_end, b - from);
      }
      ok = ok && out->size() - base == length;
    }
  }
  ::close(fd);
  uint64_t at = base;
  for (uint32_t k = first - run.first; k < end - run.first && ok; ++k) {
    const char* entry = table.data() + 8 + size_t(k) * kRunEntry;
    HashAndSize c;
    std::memcpy(c.hash.bytes.data(), entry, 32);
    c.size = get_le32(entry + 32);
    ok = chunk_hash(out->data() + at, c.size) == c.hash;
    at += c.size;
    if (chunks) chunks->push_back(c);
  }
  if (!ok) {
    out->resize(base);
    if (chunks) chunks->resize(chunks_base);
    if (held) {
      ::unlink(run.path.c_str());
      ++damaged_;
    }
    return false;
  }
  if (max_bytes_ != 0) ::utimensat(AT_FDCWD, run.path.c_str(), nullptr, 0);  // recently used: evicted last
  return true;
}

std::optional<std::string> ChunkCache::get_range(const MerkleHash& xorb, uint32_t first, uint32_t end,
                                                 std::vector<HashAndSize>* chunks) {
  const std::vector<Run> runs = runs_of(xorb);
  // One listing decides: a range the runs do not cover is a miss before any run is read.
  if (first >= end || !covers(runs, first, end)) {
    misses_ += end > first ? end - first : 0;
    return std::nullopt;
  }
  std::string out;
  std::vector<HashAndSize> got;
  uint32_t i = first;
  while (i < end) {
    // The runs holding chunk i, furthest-reaching first: a location whose blocks are gone, or a
    // damaged run, leaves the next one to try.
    std::vector<const Run*> holding;
    for (const Run& r : runs) {
      if (r.first <= i && r.end > i) holding.push_back(&r);
    }
    std::sort(holding.begin(), holding.end(), [](const Run* a, const Run* b) { return a->end > b->end; });
    uint32_t upto = i;
    for (const Run* r : holding) {
      const uint32_t reach = std::min(end, r->end);
      if (read_run(*r, i, reach, &out, &got)) {
        upto = reach;
        break;
      }
    }
    if (upto == i) {
      misses_ += end - first;
      return std::nullopt;
    }
    i = upto;
  }
  hits_ += end - first;
  hit_bytes_ += out.size();
  unsaved_hits_ += end - first;
  if (unsaved_bytes_.fetch_add(out.size()) + out.size() >= kSavedFlushBytes) flush_saved();
  if (chunks) *chunks = std::move(got);
  return out;
}

std::optional<std::string> ChunkCache::get(const MerkleHash& xorb, uint32_t index, MerkleHash* hash) {
  std::vector<HashAndSize> chunks;
  auto r = get_range(xorb, index, index + 1, &chunks);
  if (r && hash) *hash = chunks.at(0).hash;
  return r;
}

void ChunkCache::put(const MerkleHash& xorb, uint32_t index, const MerkleHash& hash, const char* data, size_t len) {
  put_run(xorb, index, {HashAndSize{hash, len}}, data);
}

void ChunkCache::put_run(const MerkleHash& xorb, uint32_t first, const std::vector<HashAndSize>& chunks,
                         const char* data) {
  uint64_t length = 0;
  auto head = run_head(kCopyMagic, first, chunks, &length);
  if (!head) return;
  write_run(xorb, first, static_cast<uint32_t>(chunks.size()), {*head, std::string_view(data, length)});
}

void ChunkCache::put_location(const MerkleHash& xorb, uint32_t first, const std::vector<HashAndSize>& chunks,
                              const std::string& file, uint64_t file_offset, std::string_view head_bytes,
                              std::string_view tail_bytes) {
  if (!file_bytes_ || file.empty() || file.size() > 1024) return;
  uint64_t length = 0;
  auto made = run_head(kLocationMagic, first, chunks, &length);
  if (!made) return;
  std::string& head = *made;
  if (head_bytes.size() + tail_bytes.size() > length ||
      4 + file.size() + 16 + head_bytes.size() + tail_bytes.size() > kMaxLocationTail) {
    return;
  }
  put_le32(&head, static_cast<uint32_t>(file.size()));
  head += file;
  put_le64(&head, file_offset);
  put_le32(&head, static_cast<uint32_t>(head_bytes.size()));
  put_le32(&head, static_cast<uint32_t>(tail_bytes.size()));
  write_run(xorb, first, static_cast<uint32_t>(chunks.size()), {head, head_bytes, tail_bytes});
}

void ChunkCache::write_run(const MerkleHash& xorb, uint32_t first, uint32_t count,
                           const std::vector<std::string_view>& parts) {
  const std::string hex = xorb.hex();
  const std::string sub = dir_ + "/" + hex.substr(0, 2);
  const std::string path = sub + "/" + hex + "." + std::to_string(first) + "-" + std::to_string(first + count);
  ::mkdir(dir_.c_str(), 0755);
  ::mkdir(sub.c_str(), 0755);
  const std::string tmp = path + ".tmp" + std::to_string(::getpid()) + "." + std::to_string(++g_tmp_counter);
  int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
  if (fd < 0) return;
  bool ok = true;
  uint64_t size = 0;
  for (std::string_view part : parts) {
    ok = ok && write_all(fd, part.data(), part.size());
    size += part.size();
  }
  ok = ::close(fd) == 0 && ok;
  if (!ok || ::rename(tmp.c_str(), path.c_str()) != 0) {
    ::unlink(tmp.c_str());
    return;
  }
  stored_ += count;
  if (max_bytes_ == 0) return;
  const uint64_t total = bytes_.fetch_add(size) + size;
  if (counted_.load() && total <= max_bytes_) return;
  std::unique_lock<std::mutex> lock(sweep_mu_, std::try_to_lock);
  if (lock.owns_lock()) sweep();
}

void ChunkCache::sweep() {
  namespace fs = std::filesystem;
  std::vector<std::tuple<fs::file_time_type, uint64_t, fs::path>> files;
  uint64_t total = 0;
  std::error_code ec;
  for (auto it = fs::recursive_directory_iterator(dir_, ec); !ec && it != fs::recursive_directory_iterator();
       it.increment(ec)) {
    std::error_code e;
    if (!it->is_regular_file(e) || e) continue;
    if (it->path().filename().string().find(".tmp") != std::string::npos) continue;  // a put in progress
    const uint64_t size = it->file_size(e);
    if (e) continue;
    const auto mtime = it->last_write_time(e);
    if (e) continue;
    total += size;
    files.emplace_back(mtime, size, it->path());
  }
  counted_.store(true);
  if (total > max_bytes_) {
    const uint64_t target = max_bytes_ / 10 * 9;
    std::sort(files.begin(), files.end(),
              [](const auto& a, const auto& b) { return std::get<0>(a) < std::get<0>(b); });
    for (const auto& [mtime, size, path] : files) {
      if (total <= target) break;
      std::error_code e;
      if (fs::remove(path, e)) {
        total -= size;
        ++evicted_;
      }
    }
  }
  bytes_.store(total);
}

ChunkCacheStats ChunkCache::stats() const {
  return {hits_.load(), hit_bytes_.load(), misses_.load(), stored_.load(), damaged_.load(), evicted_.load()};
}

}  // namespace hubfs::xet
