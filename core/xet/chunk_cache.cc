#include "xet/chunk_cache.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstring>
#include <filesystem>
#include <tuple>
#include <vector>

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

std::string ChunkCache::path_of(const MerkleHash& xorb, uint32_t index) const {
  const std::string hex = xorb.hex();
  return dir_ + "/" + hex.substr(0, 2) + "/" + hex + "." + std::to_string(index);
}

bool ChunkCache::contains(const MerkleHash& xorb, uint32_t index) const {
  struct stat st;
  return ::stat(path_of(xorb, index).c_str(), &st) == 0 && st.st_size >= 32;
}

std::optional<std::string> ChunkCache::get(const MerkleHash& xorb, uint32_t index, MerkleHash* hash) {
  const std::string path = path_of(xorb, index);
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    ++misses_;
    return std::nullopt;
  }
  struct stat st;
  std::string bytes;
  bool ok = ::fstat(fd, &st) == 0 && st.st_size >= 32 && st.st_size <= 32 + static_cast<off_t>(kMaxChunkSize);
  if (ok) {
    bytes.resize(static_cast<size_t>(st.st_size));
    size_t got = 0;
    while (got < bytes.size()) {
      ssize_t r = ::pread(fd, bytes.data() + got, bytes.size() - got, static_cast<off_t>(got));
      if (r < 0 && errno == EINTR) continue;
      if (r <= 0) break;
      got += static_cast<size_t>(r);
    }
    ok = got == bytes.size();
  }
  ::close(fd);
  MerkleHash stored;
  if (ok) {
    std::memcpy(stored.bytes.data(), bytes.data(), 32);
    ok = chunk_hash(bytes.data() + 32, bytes.size() - 32) == stored;
  }
  if (!ok) {
    ::unlink(path.c_str());
    ++damaged_;
    ++misses_;
    return std::nullopt;
  }
  ++hits_;
  hit_bytes_ += bytes.size() - 32;
  if (max_bytes_ != 0) ::utimensat(AT_FDCWD, path.c_str(), nullptr, 0);  // recently used: evicted last
  if (hash) *hash = stored;
  return bytes.substr(32);
}

void ChunkCache::put(const MerkleHash& xorb, uint32_t index, const MerkleHash& hash, const char* data, size_t len) {
  const std::string path = path_of(xorb, index);
  const std::string sub = path.substr(0, path.rfind('/'));
  ::mkdir(dir_.c_str(), 0755);
  ::mkdir(sub.c_str(), 0755);
  const std::string tmp = path + ".tmp" + std::to_string(::getpid()) + "." + std::to_string(++g_tmp_counter);
  int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
  if (fd < 0) return;
  bool ok = write_all(fd, reinterpret_cast<const char*>(hash.bytes.data()), 32) && write_all(fd, data, len);
  ok = ::close(fd) == 0 && ok;
  if (!ok || ::rename(tmp.c_str(), path.c_str()) != 0) {
    ::unlink(tmp.c_str());
    return;
  }
  ++stored_;
  if (max_bytes_ == 0) return;
  const uint64_t total = bytes_.fetch_add(32 + len) + 32 + len;
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
