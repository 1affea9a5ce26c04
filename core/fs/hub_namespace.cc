#include "fs/hub_namespace.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <optional>

namespace hubfs {
namespace {

// The Hub's limit on an org or repo name's length.
constexpr size_t kMaxIdPart = 96;
// Slots are the top 24 bits of a 64-bit inode number: 16M repos a mount, far beyond any use.
constexpr uint64_t kMaxSlots = (uint64_t{1} << (64 - HubNamespace::kLocalBits)) - 1;

// Could be an org or repo name on the Hub: letters, digits, '-', '_', '.', starting with a
// letter or digit, no "..". Everything else (".git", ".Trash-0", "desktop.ini "...) is refused
// without asking the Hub.
bool is_id_part(const std::string& s) {
  if (s.empty() || s.size() > kMaxIdPart || !isalnum(static_cast<unsigned char>(s[0]))) return false;
  if (s.find("..") != std::string::npos) return false;
  for (unsigned char c : s)
    if (!isalnum(c) && c != '-' && c != '_' && c != '.') return false;
  return true;
}

// "refs%2Fpr%2F1" -> "refs/pr/1": a revision with '/' cannot be one path segment otherwise.
std::optional<std::string> decode_revision(const std::string& s) {
  std::string out;
  for (size_t i = 0; i < s.size(); ++i) {
    unsigned char c = static_cast<unsigned char>(s[i]);
    if (c == '%' && i + 2 < s.size() && isxdigit(static_cast<unsigned char>(s[i + 1])) &&
        isxdigit(static_cast<unsigned char>(s[i + 2]))) {
      c = static_cast<unsigned char>(std::stoi(s.substr(i + 1, 2), nullptr, 16));
      i += 2;
    }
    if (c < 0x20 || c == 0x7f) return std::nullopt;
    out += static_cast<char>(c);
  }
  if (out.size() > 255 || revision_problem(out)) return std::nullopt;  // "%2e%2e" is ".."
  return out;
}

}  // namespace

struct HubNamespace::Dir {
  enum Kind { kRoot, kType, kOrg };
  Ino ino = 0;
  Kind kind = kRoot;
  RepoType type = RepoType::kModel;
  std::string org;                      // kOrg only
  std::map<std::string, Ino> children;  // root: types; type: ORGs; ORG: repos touched (global inos)
};

struct HubNamespace::Repo {
  TouchedRepo touched;
  std::unique_ptr<FileSystem> fs;
};

HubNamespace::HubNamespace(HubClient& hub, BlockReader& reader, HubNamespaceOptions options)
    : hub_(hub), reader_(reader), options_(std::move(options)) {
  env_of(options_.env, "HubNamespace");
  std::unique_lock<std::shared_mutex> lock(mu_);
  dirs_.emplace_back();  // inode 0 does not exist
  auto root = std::make_unique<Dir>();
  root->ino = kRootIno;
  dirs_.push_back(std::move(root));
  Dir* r = dirs_[kRootIno].get();
  for (RepoType type : {RepoType::kDataset, RepoType::kModel, RepoType::kSpace}) {
    Dir* d = add_dir(r, std::string(api_segment(type)), type);
    d->kind = Dir::kType;
    d->org.clear();
  }
}

HubNamespace::~HubNamespace() {
  // Under the locks: the FUSE threads that last touched the tables were joined inside libfuse,
  // an ordering ThreadSanitizer cannot see; the locks show it.
  std::lock_guard<std::mutex> handles(handles_mu_);
  dir_handles_.clear();
  std::unique_lock<std::shared_mutex> lock(mu_);
  repos_.clear();
}

HubNamespace::Dir* HubNamespace::add_dir(Dir* parent, const std::string& name, RepoType type) {
  auto d = std::make_unique<Dir>();
  d->ino = dirs_.size();
  d->kind = Dir::kOrg;
  d->type = type;
  d->org = name;
  parent->children.emplace(name, d->ino);
  dirs_.push_back(std::move(d));
  return dirs_.back().get();
}

HubNamespace::Dir* HubNamespace::dir(Ino ino) const {
  if (slot_of(ino) != 0) return nullptr;
  std::shared_lock<std::shared_mutex> lock(mu_);
  return ino == 0 || ino >= dirs_.size() ? nullptr : dirs_[ino].get();
}

HubNamespace::Repo* HubNamespace::repo(uint64_t slot) const {
  std::shared_lock<std::shared_mutex> lock(mu_);
  return slot == 0 || slot > repos_.size() ? nullptr : repos_[slot - 1].get();
}

struct stat HubNamespace::dir_attributes(const Dir& d) const {
  struct stat st {};
  st.st_ino = d.ino;
  st.st_mode = S_IFDIR | 0555;
  st.st_nlink = 2;
  st.st_uid = getuid();
  st.st_gid = getgid();
  st.st_mtim.tv_sec = st.st_ctim.tv_sec = st.st_atim.tv_sec = options_.mtime;
  st.st_blksize = static_cast<blksize_t>(reader_.options().block_size);
  return st;
}

struct stat HubNamespace::repo_attributes(uint64_t slot, struct stat st) const {
  st.st_ino = global(slot, st.st_ino);
  return st;
}

FsResult<EntryReply> HubNamespace::lookup(Ino parent, const std::string& name) {
  if (const uint64_t slot = slot_of(parent); slot != 0) {
    Repo* r = repo(slot);
    if (!r) return errno_only(ENOENT);
    auto reply = r->fs->lookup(local_of(parent), name);
    if (reply.ok() && reply.value().ino != 0) {
      reply.value().ino = global(slot, reply.value().ino);
      reply.value().attr.st_ino = reply.value().ino;
    }
    return reply;
  }
  Dir* d = dir(parent);
  if (!d) return errno_only(ENOENT);
  if (d->kind == Dir::kOrg) return lookup_repo(d, name);
  EntryReply reply;
  if (d->kind == Dir::kType && is_id_part(name)) {
    // Any well-formed ORG is a directory: whether it exists shows one level down.
    std::unique_lock<std::shared_mutex> lock(mu_);
    auto it = d->children.find(name);
    Dir* org = it != d->children.end() ? dirs_[it->second].get() : add_dir(d, name, d->type);
    reply.ino = org->ino;
    reply.attr = dir_attributes(*org);
    return reply;
  }
  std::shared_lock<std::shared_mutex> lock(mu_);
  auto it = d->children.find(name);
  if (it != d->children.end()) {
    reply.ino = it->second;
    reply.attr = dir_attributes(*dirs_[it->second]);
  }
  return reply;  // ino 0: not a type, or not a possible ORG name; never will be
}

FsResult<EntryReply> HubNamespace::lookup_repo(Dir* org, const std::string& name) {
  const std::string key = std::string(api_segment(org->type)) + "/" + org->org + "/" + name;
  // What is known already: a pinned repo, or a recent "no such repo".
  auto known = [&]() -> std::optional<FsResult<EntryReply>> {
    uint64_t slot = 0;
    {
      std::shared_lock<std::shared_mutex> lock(mu_);
      if (auto it = org->children.find(name); it != org->children.end()) {
        slot = slot_of(it->second);
      } else if (auto neg = negatives_.find(key); neg != negatives_.end()) {
        const auto now = options_.env->now();
        if (now < neg->second.until) {
          if (neg->second.code != ENOENT) return FsResult<EntryReply>(errno_only(neg->second.code));
          EntryReply reply;  // a negative entry the kernel keeps for what is left of the time
          reply.timeout_s = std::max(1.0, std::chrono::duration<double>(neg->second.until - now).count());
          return FsResult<EntryReply>(reply);
        }
      }
    }
    if (slot == 0) return std::nullopt;
    auto attr = repo(slot)->fs->getattr(kRootIno);
    if (!attr.ok()) return FsResult<EntryReply>(attr.error());
    EntryReply reply;
    reply.ino = global(slot, kRootIno);
    reply.attr = repo_attributes(slot, attr.value());
    return FsResult<EntryReply>(reply);
  };
  if (auto answer = known()) return *answer;

  const size_t at = name.find('@');
  const std::string base = name.substr(0, at);
  std::optional<std::string> revision = at == std::string::npos ? std::optional<std::string>("main")
                                                                 : decode_revision(name.substr(at + 1));
  if (!is_id_part(base) || !revision) return EntryReply{};  // can never be a repo: no request

  // One resolution per name at a time: a burst of first lookups (a parallel `ls`) asks once. The
  // others wait for it and look again; a resolution that left nothing known (the Hub was
  // unreachable) is tried again by one of them, as the next leader.
  for (;;) {
    auto ticket = resolving_.join(key);
    if (ticket.leader) break;
    // The resolution bounds itself (its requests' deadlines): no deadline of our own.
    (void)resolving_.wait(ticket.flight, Deadline::never());
    if (auto answer = known()) return *answer;
  }
  // Every way out of here ends the flight (its waiters look again).
  struct EndFlight {
    SingleFlight<std::string, bool>& flights;
    const std::string& key;
    ~EndFlight() { flights.complete(key, true); }
  } end_flight{resolving_, key};
  if (auto answer = known()) return *answer;

  const RepoRef asked{org->type, org->org + "/" + base, *revision};
  auto pinned = options_.pin(asked);
  if (!pinned.ok()) {
    const Code code = pinned.status().code();
    if (code == Code::kNotFound || code == Code::kPermissionDenied) {
      const int err = code == Code::kNotFound ? ENOENT : EACCES;
      std::unique_lock<std::shared_mutex> lock(mu_);
      negatives_[key] = Negative{options_.env->now() + options_.negative_ttl, err};
      if (err == ENOENT) {
        EntryReply reply;
        reply.timeout_s = static_cast<double>(options_.negative_ttl.count());
        return reply;
      }
      return FsError{err, key + ": " + pinned.status().message()};
    }
    // Unreachable, throttled, ...: not the repo's fault, so not remembered.
    return FsError{EIO, "resolving " + key + ": " + pinned.status().message()};
  }
  RepoRef at_commit = asked;
  at_commit.revision = pinned->commit;
  auto r = std::make_unique<Repo>();
  r->touched = TouchedRepo{key, *revision, pinned->commit};
  r->fs = std::make_unique<FileSystem>(hub_, at_commit, reader_, options_.repo_options(asked, *pinned));
  {
    std::unique_lock<std::shared_mutex> lock(mu_);
    if (repos_.size() >= kMaxSlots) return FsError{EMFILE, "more than " + std::to_string(kMaxSlots) + " repos touched"};
    repos_.push_back(std::move(r));
    org->children[name] = global(repos_.size(), kRootIno);
    negatives_.erase(key);
  }
  auto answer = known();
  return answer ? *answer : FsResult<EntryReply>(errno_only(EIO));
}

FsResult<struct stat> HubNamespace::getattr(Ino ino) {
  if (const uint64_t slot = slot_of(ino); slot != 0) {
    Repo* r = repo(slot);
    if (!r) return errno_only(ENOENT);
    auto attr = r->fs->getattr(local_of(ino));
    if (!attr.ok()) return attr;
    return repo_attributes(slot, attr.value());
  }
  Dir* d = dir(ino);
  if (!d) return errno_only(ENOENT);
  return dir_attributes(*d);
}

FsResult<uint64_t> HubNamespace::opendir(Ino ino) {
  if (const uint64_t slot = slot_of(ino); slot != 0) {
    Repo* r = repo(slot);
    if (!r) return errno_only(ENOENT);
    auto h = r->fs->opendir(local_of(ino));
    if (!h.ok()) return h;
    return global(slot, h.value());
  }
  Dir* d = dir(ino);
  if (!d) return errno_only(ENOENT);
  std::vector<DirEntry> entries = {{".", ino, true, 1}, {"..", ino, true, 2}};
  {
    std::shared_lock<std::shared_mutex> lock(mu_);
    for (const auto& [name, child] : d->children) entries.push_back({name, child, true, entries.size() + 1});
  }
  std::lock_guard<std::mutex> lock(handles_mu_);
  const uint64_t handle = next_handle_++;  // slot 0: far below 2^40
  dir_handles_.emplace(handle, std::move(entries));
  return handle;
}

std::vector<DirEntry> HubNamespace::readdir(uint64_t handle, uint64_t offset) {
  if (const uint64_t slot = slot_of(handle); slot != 0) {
    Repo* r = repo(slot);
    if (!r) return {};
    auto entries = r->fs->readdir(local_of(handle), offset);
    for (DirEntry& e : entries) e.ino = global(slot, e.ino);
    return entries;
  }
  std::lock_guard<std::mutex> lock(handles_mu_);
  auto it = dir_handles_.find(handle);
  if (it == dir_handles_.end() || offset >= it->second.size()) return {};
  return {it->second.begin() + static_cast<long>(offset), it->second.end()};
}

void HubNamespace::releasedir(uint64_t handle) {
  if (const uint64_t slot = slot_of(handle); slot != 0) {
    if (Repo* r = repo(slot)) r->fs->releasedir(local_of(handle));
    return;
  }
  std::lock_guard<std::mutex> lock(handles_mu_);
  dir_handles_.erase(handle);
}

FsResult<OpenReply> HubNamespace::open(Ino ino, int flags) {
  if (const uint64_t slot = slot_of(ino); slot != 0) {
    Repo* r = repo(slot);
    if (!r) return errno_only(ENOENT);
    auto reply = r->fs->open(local_of(ino), flags);
    if (reply.ok()) reply.value().handle = global(slot, reply.value().handle);
    return reply;
  }
  return errno_only(dir(ino) ? EISDIR : ENOENT);
}

FsResult<std::vector<BlockBytes>> HubNamespace::read(uint64_t handle, uint64_t offset, size_t size) {
  Repo* r = repo(slot_of(handle));
  if (!r) return errno_only(EBADF);
  return r->fs->read(local_of(handle), offset, size);
}

void HubNamespace::release(uint64_t handle) {
  if (Repo* r = repo(slot_of(handle))) r->fs->release(local_of(handle));
}

FsResult<uint64_t> HubNamespace::hint(uint64_t handle, const std::vector<ByteRange>& ranges, HintRequests requests) {
  Repo* r = repo(slot_of(handle));
  if (!r) return errno_only(EBADF);
  return r->fs->hint(local_of(handle), ranges, requests);
}

FsResult<std::string> HubNamespace::getxattr(Ino ino, const std::string& name) {
  if (const uint64_t slot = slot_of(ino); slot != 0) {
    Repo* r = repo(slot);
    if (!r) return errno_only(ENOENT);
    return r->fs->getxattr(local_of(ino), name);
  }
  if (!dir(ino)) return errno_only(ENOENT);
  if (ino == kRootIno && options_.status_json && name == kStatusXattr) return options_.status_json();
  return errno_only(ENODATA);
}

FsResult<std::string> HubNamespace::listxattr(Ino ino) {
  if (const uint64_t slot = slot_of(ino); slot != 0) {
    Repo* r = repo(slot);
    if (!r) return errno_only(ENOENT);
    return r->fs->listxattr(local_of(ino));
  }
  if (!dir(ino)) return errno_only(ENOENT);
  if (ino == kRootIno && options_.status_json) return std::string(kStatusXattr) + '\0';
  return std::string();
}

struct statvfs HubNamespace::statfs() {
  struct statvfs st {};
  st.f_bsize = st.f_frsize = reader_.options().block_size;
  st.f_namemax = 255;
  std::shared_lock<std::shared_mutex> lock(mu_);
  st.f_files = dirs_.size();
  return st;
}

bool HubNamespace::listing_is_stable(Ino ino) const { return slot_of(ino) != 0; }

std::vector<TouchedRepo> HubNamespace::touched() const {
  std::shared_lock<std::shared_mutex> lock(mu_);
  std::vector<TouchedRepo> out;
  for (const auto& r : repos_) out.push_back(r->touched);
  return out;
}

}  // namespace hubfs
