// hubfs-xet-pack: stores one file the way Xet does, for the local Hub's Xet model
// (tools/hub_server/xet.py runs it; docs/xet.md, "The local Hub's Xet model").
//
//   hubfs-xet-pack --store DIR [--max-xorb-bytes N] [--scheme none|lz4|bg4] FILE
//
// Cuts FILE into content-defined chunks (core/xet/chunker.h), looks each chunk's hash up in the
// store's index (DIR/chunks.idx: one "<chunk hash> <xorb hash> <index>" line per stored chunk),
// packs the chunks the store does not hold yet into new xorbs (DIR/xorbs/<xorb hash>, with their
// footers), appends them to the index, and prints on stdout the file's reconstruction as JSON:
//   {"size": N, "xet_hash": "<hex>", "terms": [{"xorb": "<hex>", "start": i, "end": j,
//    "unpacked_length": L}], "xorbs": {"<hex>": {"chunk_ends": [...], "unpacked_ends": [...]}}}
// with the packed and unpacked chunk ends of every xorb the terms name (read from the footers).
// A second revision of a file thus reuses every chunk it shares with the first: that is the
// dedup across revisions the model serves. The hashing and compression run in C++ because the
// server is pure Python, where BLAKE3 over hundreds of MB would take minutes.
//
// Not thread-safe across processes: the server runs one at a time per store.
#include <sys/stat.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <iostream>
#include <map>
#include <sstream>
#include <string>
#include <unordered_map>
#include <vector>

#include <nlohmann/json.hpp>

#include "xet/chunker.h"
#include "xet/hash.h"
#include "xet/xorb.h"

using namespace hubfs::xet;

namespace {

// xet-core's limits for one xorb (MAX_XORB_BYTES, MAX_XORB_CHUNKS in its constants.rs).
constexpr size_t kMaxXorbBytes = 64u << 20;
constexpr size_t kMaxXorbChunks = 8192;

[[noreturn]] void die(const std::string& msg) {
  std::cerr << "hubfs-xet-pack: " << msg << "\n";
  std::exit(1);
}

std::string read_all(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) die("cannot open " + path + ": " + std::strerror(errno));
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

void write_atomically(const std::string& path, const std::string& bytes) {
  const std::string tmp = path + ".tmp";
  {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
    if (!out) die("cannot write " + tmp);
  }
  if (std::rename(tmp.c_str(), path.c_str()) != 0) die("cannot rename " + tmp + ": " + std::strerror(errno));
}

struct ChunkRef {
  MerkleHash xorb;
  uint32_t index = 0;
};

struct KeyHash {
  size_t operator()(const MerkleHash& h) const {
    size_t v;
    std::memcpy(&v, h.bytes.data(), sizeof v);
    return v;
  }
};

}  // namespace

int main(int argc, char** argv) {
  std::string store, file;
  size_t max_xorb_bytes = kMaxXorbBytes;
  CompressionScheme scheme = CompressionScheme::kLz4;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    auto value = [&]() -> std::string {
      if (i + 1 >= argc) die(a + " needs a value");
      return argv[++i];
    };
    if (a == "--store") {
      store = value();
    } else if (a == "--max-xorb-bytes") {
      max_xorb_bytes = std::stoull(value());
    } else if (a == "--scheme") {
      std::string s = value();
      if (s == "none") scheme = CompressionScheme::kNone;
      else if (s == "lz4") scheme = CompressionScheme::kLz4;
      else if (s == "bg4") scheme = CompressionScheme::kByteGrouping4Lz4;
      else die("--scheme is none, lz4 or bg4");
    } else if (!a.empty() && a[0] != '-' && file.empty()) {
      file = a;
    } else {
      die("usage: hubfs-xet-pack --store DIR [--max-xorb-bytes N] [--scheme none|lz4|bg4] FILE");
    }
  }
  if (store.empty() || file.empty()) die("usage: hubfs-xet-pack --store DIR [--max-xorb-bytes N] FILE");
  const std::string xorb_dir = store + "/xorbs";
  ::mkdir(store.c_str(), 0755);
  ::mkdir(xorb_dir.c_str(), 0755);

  // The store's index: every chunk already in a xorb.
  std::unordered_map<MerkleHash, ChunkRef, KeyHash> index;
  const std::string index_path = store + "/chunks.idx";
  {
    std::ifstream in(index_path);
    std::string chunk_hex, xorb_hex;
    uint32_t idx;
    while (in >> chunk_hex >> xorb_hex >> idx) {
      auto c = MerkleHash::from_hex(chunk_hex);
      auto x = MerkleHash::from_hex(xorb_hex);
      if (!c || !x) die("damaged index " + index_path);
      index.emplace(*c, ChunkRef{*x, idx});
    }
  }

  const std::string data = read_all(file);
  const std::vector<size_t> ends = chunk_boundaries(data.data(), data.size());

  // Chunks of this file, in order: where each lives (a pending xorb is named once it is full).
  struct Placed {
    int pending = -1;  // index into `built` while its xorb is being filled, else -1
    ChunkRef ref;
    uint64_t size = 0;
  };
  std::vector<Placed> placed;
  std::vector<HashAndSize> file_chunks;
  std::vector<MerkleHash> built;  // hashes of the xorbs this run wrote, in order
  std::unordered_map<MerkleHash, std::pair<int, uint32_t>, KeyHash> pending_index;
  std::string index_append;
  XorbBuilder builder(scheme);
  size_t builder_bytes = 0;
  auto flush = [&] {
    if (builder.chunk_count() == 0) return;
    const MerkleHash h = builder.hash();
    write_atomically(xorb_dir + "/" + h.hex(), builder.finish(true));
    for (size_t i = 0; i < builder.chunk_count(); ++i) {
      index.emplace(builder.chunks()[i].hash, ChunkRef{h, static_cast<uint32_t>(i)});
      index_append += builder.chunks()[i].hash.hex() + " " + h.hex() + " " + std::to_string(i) + "\n";
    }
    built.push_back(h);
    pending_index.clear();
    builder = XorbBuilder(scheme);
    builder_bytes = 0;
  };

  size_t start = 0;
  for (size_t end : ends) {
    const size_t len = end - start;
    const MerkleHash h = chunk_hash(data.data() + start, len);
    file_chunks.push_back({h, len});
    Placed p;
    p.size = len;
    if (auto it = index.find(h); it != index.end()) {
      p.ref = it->second;
    } else if (auto pit = pending_index.find(h); pit != pending_index.end()) {
      p.pending = pit->second.first;
      p.ref.index = pit->second.second;
    } else {
      if (builder.chunk_count() >= kMaxXorbChunks || builder_bytes + len > max_xorb_bytes) flush();
      auto idx = builder.add_chunk(data.data() + start, len);
      if (!idx.ok()) die("chunk at " + std::to_string(start) + ": " + idx.status().message());
      builder_bytes += len;
      p.pending = static_cast<int>(built.size());
      p.ref.index = *idx;
      pending_index.emplace(h, std::make_pair(p.pending, *idx));
    }
    placed.push_back(p);
    start = end;
  }
  flush();
  if (!index_append.empty()) {
    std::ofstream out(index_path, std::ios::app);
    out << index_append;
    if (!out) die("cannot append to " + index_path);
  }

  // Terms: runs of consecutive chunks of one xorb.
  nlohmann::json terms = nlohmann::json::array();
  std::map<std::string, bool> named;
  for (size_t i = 0; i < placed.size();) {
    auto ref_of = [&](size_t k) {
      ChunkRef r = placed[k].ref;
      if (placed[k].pending >= 0) r.xorb = built[placed[k].pending];
      return r;
    };
    const ChunkRef first = ref_of(i);
    uint64_t length = placed[i].size;
    size_t j = i + 1;
    while (j < placed.size()) {
      ChunkRef r = ref_of(j);
      if (r.xorb != first.xorb || r.index != first.index + (j - i)) break;
      length += placed[j].size;
      ++j;
    }
    terms.push_back({{"xorb", first.xorb.hex()},
                     {"start", first.index},
                     {"end", first.index + static_cast<uint32_t>(j - i)},
                     {"unpacked_length", length}});
    named[first.xorb.hex()] = true;
    i = j;
  }

  nlohmann::json xorbs = nlohmann::json::object();
  for (const auto& [hex, _] : named) {
    const std::string bytes = read_all(xorb_dir + "/" + hex);
    auto footer = parse_footer(reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size());
    if (!footer.ok()) die("xorb " + hex + ": " + footer.status().message());
    xorbs[hex] = {{"chunk_ends", footer->chunk_ends}, {"unpacked_ends", footer->unpacked_ends}};
  }
  nlohmann::json out = {{"size", data.size()},
                        {"xet_hash", file_hash(file_chunks).hex()},
                        {"terms", terms},
                        {"xorbs", xorbs}};
  std::cout << out.dump() << "\n";
  return 0;
}
