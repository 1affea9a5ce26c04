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

#include "common/counter_file.h"
#include "xet/chunk_run_name.h"

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

ChunkCache::ChunkCache(std::string dir, uint64_t max_bytes) : dir_(std::move(dir)), max_bytes_(max_bytes) {}

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

constexpr char kRunMagic[4] = {'X', 'C', 'R', '1'};
constexpr size_t kRunEntry = 32 + 4;  // a chunk's hash and size

void put_le32(std::string* s, uint32_t v) {
  for (int i = 0; i < 4; ++i) s->push_back(static_cast<char>((v >> (8 * i)) & 0xff));
}
uint32_t get_le32(const char* p) {
  uint32_t v = 0;
  for (int i = 3; i >= 0; --i) v = (v << 8) | static_cast<uint8_t>(p[i]);
  return v;
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
  bool ok = false;
  std::string table(8 + size_t(count) * kRunEntry, '\0');
  if (pread_all(fd, table.data(), table.size(), 0) && std::memcmp(table.data(), kRunMagic, 4) == 0 &&
      get_le32(table.data() + 4) == count) {
    uint64_t offset = table.size(), length = 0;
    ok = true;
    for (uint32_t k = 0; k < end - run.first && ok; ++k) {
      const uint32_t size = get_le32(table.data() + 8 + size_t(k) * kRunEntry + 32);
      if (size > kMaxChunkSize) ok = false;
      if (k < first - run.first) offset += size;
      else length += size;
    }
    const size_t base = out->size();
    if (ok) {
      out->resize(base + length);
      ok = pread_all(fd, out->data() + base, length, offset);
    }
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
    if (!ok) out->resize(base);
  }
  ::close(fd);
  if (!ok) {
    ::unlink(run.path.c_str());
    ++damaged_;
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
    // The run holding chunk i that reaches furthest.
    const Run* best = nullptr;
    for (const Run& r : runs) {
      if (r.first <= i && r.end > i && (!best || r.end > best->end)) best = &r;
    }
    const uint32_t upto = best ? std::min(end, best->end) : i;
    if (!best || !read_run(*best, i, upto, &out, &got)) {
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
  if (chunks.empty() || chunks.size() > std::numeric_limits<uint32_t>::max() - first) return;
  const std::string hex = xorb.hex();
  const std::string sub = dir_ + "/" + hex.substr(0, 2);
  const std::string path =
      sub + "/" + hex + "." + std::to_string(first) + "-" + std::to_string(first + chunks.size());
  ::mkdir(dir_.c_str(), 0755);
  ::mkdir(sub.c_str(), 0755);
  std::string head(kRunMagic, 4);
  put_le32(&head, static_cast<uint32_t>(chunks.size()));
  uint64_t length = 0;
  for (const HashAndSize& c : chunks) {
    if (c.size > kMaxChunkSize) return;
    head.append(reinterpret_cast<const char*>(c.hash.bytes.data()), 32);
    put_le32(&head, static_cast<uint32_t>(c.size));
    length += c.size;
  }
  const std::string tmp = path + ".tmp" + std::to_string(::getpid()) + "." + std::to_string(++g_tmp_counter);
  int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
  if (fd < 0) return;
  bool ok = write_all(fd, head.data(), head.size()) && write_all(fd, data, length);
  ok = ::close(fd) == 0 && ok;
  if (!ok || ::rename(tmp.c_str(), path.c_str()) != 0) {
    ::unlink(tmp.c_str());
    return;
  }
  stored_ += chunks.size();
  if (max_bytes_ == 0) return;
  const uint64_t total = bytes_.fetch_add(head.size() + length) + head.size() + length;
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
