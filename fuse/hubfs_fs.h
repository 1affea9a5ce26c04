// The FUSE adapter: kernel requests in, core calls out. It owns the inode table (built lazily,
// one directory listing at a time) and translates reads to BlockReader calls; nothing here knows
// HTTP or the cache's disk layout.
#pragma once

#define FUSE_USE_VERSION 35
#include <fuse_lowlevel.h>

#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <shared_mutex>
#include <string>
#include <vector>

#include "hub/hub_client.h"
#include "reader/block_reader.h"

namespace hubfs {

struct FsOptions {
  // The revision is pinned to a commit, so nothing under the mount ever changes: the kernel may
  // keep names and attributes for as long as it likes.
  double entry_timeout_s = 86400;
  time_t mtime = 0;  // the commit date
};

class HubFs {
 public:
  // repo must be pinned (revision = commit sha).
  HubFs(HubClient& hub, RepoRef repo, BlockReader& reader, FsOptions options);
  static const fuse_lowlevel_ops& operations();  // userdata must be a HubFs*

  // Operation bodies (public for the C callbacks).
  void lookup(fuse_req_t req, fuse_ino_t parent, const char* name);
  void getattr(fuse_req_t req, fuse_ino_t ino);
  void opendir(fuse_req_t req, fuse_ino_t ino, fuse_file_info* fi);
  void readdir(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off, fuse_file_info* fi);
  void releasedir(fuse_req_t req, fuse_ino_t ino, fuse_file_info* fi);
  void open(fuse_req_t req, fuse_ino_t ino, fuse_file_info* fi);
  void read(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off, fuse_file_info* fi);
  void release(fuse_req_t req, fuse_ino_t ino, fuse_file_info* fi);
  void getxattr(fuse_req_t req, fuse_ino_t ino, const char* name, size_t size);
  void listxattr(fuse_req_t req, fuse_ino_t ino, size_t size);
  void statfs(fuse_req_t req, fuse_ino_t ino);

 private:
  struct Node {
    fuse_ino_t ino = 0;
    bool is_dir = false;
    TreeEntry entry;   // path, size, oid, lfs sha256
    RemoteFile remote;  // files only
    // Directories: children by name, listed once on first use.
    std::mutex list_mu;
    bool listed = false;
    std::map<std::string, fuse_ino_t> children;
  };
  struct OpenFile {
    Node* node;
    ReadState state;
  };
  struct DirListing {
    std::vector<std::pair<std::string, fuse_ino_t>> entries;
  };

  Node* node(fuse_ino_t ino);
  Node* add_node(TreeEntry entry);
  Status ensure_listed(Node* dir);
  struct stat attributes(const Node& n) const;
  void reply_error(fuse_req_t req, const Status& status, const char* op, const Node* n);

  HubClient& hub_;
  RepoRef repo_;
  BlockReader& reader_;
  FsOptions options_;
  std::shared_mutex nodes_mu_;
  std::vector<std::unique_ptr<Node>> nodes_;  // index = inode number; 0 unused
};

}  // namespace hubfs
