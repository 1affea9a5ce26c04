#include "h5hub/local_reads.h"

#include <algorithm>
#include <string>
#include <vector>

#include "reader/block_reader.h"

namespace hubfs {

namespace {
uint64_t block_size_of(const HubFile& file) {
  const Stack& stack = file.session()->stack;
  return stack.reader ? stack.reader->options().block_size : 0;
}
}  // namespace

void RecentBlock::served(const HubFile& file, uint64_t offset, size_t len) {
  const uint64_t block = block_size_of(file);
  if (block == 0 || len == 0 || offset >= file.size()) return;
  index_.store((std::min<uint64_t>(offset + len, file.size()) - 1) / block, std::memory_order_relaxed);
}

bool reads_locally(const HubFile& file, uint64_t offset, size_t len, uint64_t recent) {
  if (len == 0 || offset >= file.size()) return true;
  const uint64_t block = block_size_of(file);
  if (block == 0) return false;
  const uint64_t first = offset / block;
  const uint64_t last = (std::min<uint64_t>(offset + len, file.size()) - 1) / block;
  if (first == last && first == recent) return true;
  BlockCache* cache = file.session()->stack.cache.get();
  if (!cache || last - first >= kMaxLocalProbeBlocks) return false;
  const BlockReader& reader = *file.session()->stack.reader;
  const std::string key = BlockReader::disk_key(file.content_id(), static_cast<uint32_t>(block));
  for (uint64_t b : reader.not_in_memory(file.content_id(), file.size(), first, last)) {
    if (b == recent) continue;  // served a moment ago: no block file opened
    char byte;
    if (!cache->read_part(key, b, 0, &byte, 1)) return false;
  }
  return true;
}

bool ListedDirs::opens_locally(const RepoSession& session, const std::string& path) {
  if (!session.fs || !session.subfolder.empty()) return false;
  if (session.fs->finds_without_listing(path)) return true;  // known already: no stored listing read
  const auto& listings = session.fs->options().listings;
  if (!listings) return false;
  // Each directory on the way (the root first) and the name looked up in it.
  for (size_t start = 0;;) {
    const size_t slash = path.find('/', start);
    const std::string dir = start == 0 ? std::string() : path.substr(0, start - 1);
    const std::string next = path.substr(0, slash);
    bool found;
    {
      std::lock_guard<std::mutex> lock(mu_);
      found = walked_.count(next) || known_.count(dir);
    }
    if (!found) {
      if (!listings->load_dir(session.info.commit, dir)) return false;  // read unlocked
      std::lock_guard<std::mutex> lock(mu_);
      known_.insert(dir);
    }
    if (slash == std::string::npos) return true;
    start = slash + 1;
  }
}

void ListedDirs::opened(const std::string& path) {
  std::lock_guard<std::mutex> lock(mu_);
  for (size_t slash = path.find('/'); slash != std::string::npos; slash = path.find('/', slash + 1))
    walked_.insert(path.substr(0, slash));
  walked_.insert(path);
}

}  // namespace hubfs
