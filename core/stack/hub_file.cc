#include "stack/hub_file.h"

#include <fcntl.h>
#include <sys/stat.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "cache/content_verifier.h"
#include "common/log.h"

namespace hubfs {

Result<HfUrl> parse_hf_url(std::string_view url, std::optional<std::string> revision_override) {
  constexpr std::string_view kScheme = "hf://";
  std::string_view rest = url;
  if (rest.substr(0, kScheme.size()) == kScheme) rest.remove_prefix(kScheme.size());
  while (!rest.empty() && rest.back() == '/') rest.remove_suffix(1);
  auto spec = parse_repo_spec(rest, std::nullopt, std::nullopt, std::nullopt);
  if (!spec.ok()) {
    return InvalidArgument("'" + std::string(url) + "' is not an hf:// URL of the form "
                           "hf://[datasets/|spaces/]ORG/NAME[@REVISION]/PATH (" + spec.status().message() + ")");
  }
  HfUrl out;
  out.repo = spec->repo;
  out.path = spec->subfolder;
  // HfFileSystem percent-encodes a revision holding '/' (refs%2Fpr%2F1): parse_repo_ref decodes it.
  if (revision_override) {
    const bool named = rest.find('@') != std::string_view::npos;
    if (named && out.repo.revision != *revision_override) {
      return InvalidArgument("'" + std::string(url) + "' names revision '" + out.repo.revision +
                             "' and the revision option says '" + *revision_override + "': give one of them");
    }
    out.repo.revision = *revision_override;
  }
  if (Status st = check_revision(out.repo.revision); !st.ok()) return st;
  return out;
}

int errno_of(const Status& s) {
  switch (s.code()) {
    case Code::kOk: return 0;
    case Code::kNotFound: return ENOENT;
    case Code::kPermissionDenied: return EACCES;
    case Code::kInvalidArgument: return EINVAL;
    case Code::kTimeout: return ETIMEDOUT;
    case Code::kUnavailable: return EHOSTUNREACH;
    default: return EIO;
  }
}

Status status_of(const FsError& e, const std::string& what) {
  std::string message = what + ": " + (e.reason.empty() ? std::string(strerror(e.code)) : e.reason);
  switch (e.code) {
    case ENOENT: return NotFound(std::move(message));
    case EACCES:
    case EPERM: return PermissionDenied(std::move(message));
    case ETIMEDOUT: return Timeout(std::move(message));
    case EISDIR:
    case ENOTDIR:
    case EINVAL:
    case EROFS: return InvalidArgument(std::move(message));
    default: return IoError(std::move(message));
  }
}

namespace {

// Splits "a/b/c" into its components; "" and "/" are the root. "." and ".." are refused (a repo
// path never holds them, and they would otherwise walk out of a subfolder).
Result<std::vector<std::string>> components(const std::string& path) {
  std::vector<std::string> parts;
  size_t start = 0;
  while (start <= path.size()) {
    size_t slash = path.find('/', start);
    if (slash == std::string::npos) slash = path.size();
    std::string part = path.substr(start, slash - start);
    if (part == "." || part == "..") return InvalidArgument("'" + path + "': repo paths hold no '.' or '..'");
    if (!part.empty()) parts.push_back(std::move(part));
    start = slash + 1;
  }
  return parts;
}

struct Found {
  Ino ino = 0;
  struct stat attr {};
};

Result<Found> walk(RepoSession& s, const std::string& path) {
  auto parts = components(path);
  if (!parts.ok()) return parts.status();
  Found at{kRootIno, {}};
  auto root = s.fs->getattr(kRootIno);
  if (!root.ok()) return status_of(root.error(), s.label);
  at.attr = root.value();
  std::string walked;
  for (const std::string& part : *parts) {
    walked += (walked.empty() ? "" : "/") + part;
    if (!S_ISDIR(at.attr.st_mode)) {
      return NotFound("'" + walked + "' in " + s.label + ": '" + walked.substr(0, walked.size() - part.size() - 1) +
                      "' is a file, not a directory");
    }
    auto e = s.fs->lookup(at.ino, part);
    if (!e.ok()) return status_of(e.error(), "listing '" + walked + "' in " + s.label);
    if (e.value().ino == 0) {
      return NotFound("'" + walked + "' does not exist in " + s.label + " at revision " + s.repo.revision +
                      " (commit " + s.info.commit + "); check its spelling and case");
    }
    at.ino = e.value().ino;
    at.attr = e.value().attr;
  }
  return at;
}

std::string joined(const std::string& dir, const std::string& name) {
  std::string d = dir;
  while (!d.empty() && d.back() == '/') d.pop_back();
  while (!d.empty() && d.front() == '/') d.erase(0, 1);
  return d.empty() ? name : d + "/" + name;
}

}  // namespace

Result<PathInfo> stat_path(RepoSession& s, const std::string& path) {
  auto found = walk(s, path);
  if (!found.ok()) return found.status();
  auto parts = components(path);
  std::string clean;
  for (const auto& p : *parts) clean += (clean.empty() ? "" : "/") + p;
  return PathInfo{clean, S_ISDIR(found->attr.st_mode), S_ISDIR(found->attr.st_mode)
                                                            ? 0
                                                            : static_cast<uint64_t>(found->attr.st_size)};
}

Result<std::vector<PathInfo>> list_dir(RepoSession& s, const std::string& path) {
  auto found = walk(s, path);
  if (!found.ok()) return found.status();
  if (!S_ISDIR(found->attr.st_mode)) return InvalidArgument("'" + path + "' in " + s.label + " is a file, not a directory");
  auto handle = s.fs->opendir(found->ino);
  if (!handle.ok()) return status_of(handle.error(), "listing '" + path + "' in " + s.label);
  std::vector<PathInfo> out;
  uint64_t offset = 0;
  Status failed = Status::Ok();
  for (;;) {
    std::vector<DirEntry> page = s.fs->readdir(handle.value(), offset);
    if (page.empty()) break;
    for (const DirEntry& e : page) {
      offset = e.next_offset;
      if (e.name == "." || e.name == "..") continue;
      PathInfo info{joined(path, e.name), e.is_dir, 0};
      if (!e.is_dir) {
        auto attr = s.fs->getattr(e.ino);
        if (!attr.ok()) {
          failed = status_of(attr.error(), "'" + info.path + "' in " + s.label);
          break;
        }
        info.size = static_cast<uint64_t>(attr.value().st_size);
      }
      out.push_back(std::move(info));
    }
    if (!failed.ok()) break;
  }
  s.fs->releasedir(handle.value());
  if (!failed.ok()) return failed;
  std::sort(out.begin(), out.end(), [](const PathInfo& a, const PathInfo& b) { return a.path < b.path; });
  return out;
}

Result<std::unique_ptr<HubFile>> HubFile::open(std::shared_ptr<RepoSession> session, const std::string& path) {
  auto found = walk(*session, path);
  if (!found.ok()) return found.status();
  if (S_ISDIR(found->attr.st_mode)) {
    return InvalidArgument("'" + path + "' in " + session->label + " is a directory, not a file (list it instead)");
  }
  auto opened = session->fs->open(found->ino, O_RDONLY);
  if (!opened.ok()) return status_of(opened.error(), "opening '" + path + "' in " + session->label);
  const uint64_t size = static_cast<uint64_t>(found->attr.st_size);
  // The listing's hash of the file, as the mount shows it in its extended attributes.
  std::string content_id;
  if (auto sha = session->fs->getxattr(found->ino, "user.hubfs.sha256"); sha.ok()) {
    content_id = "sha256:" + sha.value();
  } else if (auto oid = session->fs->getxattr(found->ino, "user.hubfs.oid"); oid.ok()) {
    content_id = "oid:" + oid.value();
  }
  return std::unique_ptr<HubFile>(
      new HubFile(std::move(session), path, opened.value().handle, size, std::move(content_id)));
}

HubFile::~HubFile() {
  if (handle_) session_->fs->release(handle_);
}

Status HubFile::reopen() {
  if (handle_) session_->fs->release(handle_);
  handle_ = 0;
  auto found = walk(*session_, path_);
  if (!found.ok()) return found.status();
  auto opened = session_->fs->open(found->ino, O_RDONLY);
  if (!opened.ok()) return status_of(opened.error(), "opening '" + path_ + "' in " + session_->label + " again");
  handle_ = opened.value().handle;
  return Status::Ok();
}

Result<std::vector<BlockBytes>> HubFile::read(uint64_t offset, size_t len) {
  if (offset >= size_ || len == 0) return std::vector<BlockBytes>{};
  auto r = session_->fs->read(handle_, offset, len);
  if (!r.ok()) return status_of(r.error(), "reading '" + path_ + "' in " + session_->label);
  return std::move(r.value());
}

Result<size_t> HubFile::pread(void* dst, uint64_t offset, size_t len) {
  // One FileSystem read serves at most 16 MiB (what the kernel could ask): loop to len or EOF.
  size_t copied = 0;
  while (copied < len) {
    auto slices = read(offset + copied, len - copied);
    if (!slices.ok()) return slices.status();
    if (slices->empty()) break;
    for (const BlockBytes& b : *slices) {
      std::memcpy(static_cast<char*>(dst) + copied, b.data(), b.size());
      copied += b.size();
    }
  }
  return copied;
}

void HubFile::discard_cached() { session_->fs->discard(handle_); }

Result<uint64_t> HubFile::hint(const std::vector<ByteRange>& ranges, HintRequests requests) {
  auto r = session_->fs->hint(handle_, ranges, requests);
  if (!r.ok()) return status_of(r.error(), "hinting ranges of '" + path_ + "' in " + session_->label);
  return r.value();
}

// A copy's piece: the reader's block size, so each read is one block from the cache or one
// range on the wire; the hint keeps kCopyWindow of them in flight ahead of the sink, refilled by
// halves, so each refill goes out as requests large enough to outlast their round trip
// (docs/constants.md, kCopyWindow).
constexpr size_t kCopyPiece = 1u << 20;
constexpr uint64_t kCopyWindow = 128ull << 20;

namespace {

// Whole-file hashes that failed in the session's reader so far.
uint64_t hash_failures(const HubFile& file) {
  const auto& reader = file.session()->stack.reader;
  return reader ? reader->stats().verify_failures : 0;
}

Status copy_once(HubFile& file, const CopyOptions& options);

}  // namespace

Status copy_file(HubFile& file, const CopyOptions& options) {
  const uint64_t failures = hash_failures(file);
  Status st = copy_once(file, options);
  if (st.ok() || (options.stop && options.stop())) return st;
  // Only a failed hash is worth a second copy (the blocks that stayed cached make any other
  // failure's second try cheap, but an outage would only be waited out twice).
  if (st.code() != Code::kCorrupt && hash_failures(file) == failures) return st;
  if (options.sink && !options.rewind) return st;
  if (options.rewind) {
    if (Status r = options.rewind(); !r.ok()) return st;
  }
  if (Status r = file.reopen(); !r.ok()) return st;
  log_warning("'" + file.path() + "' failed its hash (" + st.message() +
              "); its blocks were dropped, copying it once more from the start");
  Status again = copy_once(file, options);
  if (!again.ok() && again.code() != Code::kUnavailable) {
    return Status(again.code(), again.message() + " (the second try; the first failed its hash)");
  }
  return again;
}

namespace {

Status copy_once(HubFile& file, const CopyOptions& options) {
  auto verifier = ContentVerifier::for_content(file.content_id(), file.size());
  if (!verifier) {
    return Unsupported("'" + file.path() + "' has no content hash hubfs can check (content id '" +
                       file.content_id() + "'): not copied unverified");
  }
  const uint64_t size = file.size();
  uint64_t done = 0;
  uint64_t hinted_to = 0;
  while (done < size) {
    if (options.stop && options.stop()) return Unavailable("interrupted: what was fetched stays cached, run it again to resume");
    if (hinted_to < std::min(size, done + kCopyWindow / 2)) {
      const uint64_t end = std::min(size, done + kCopyWindow);
      if (end > hinted_to) {
        (void)file.hint({{hinted_to, end - hinted_to}});  // best effort: the reads below fetch anyway
        hinted_to = end;
      }
    }
    auto slices = file.read(done, static_cast<size_t>(std::min<uint64_t>(kCopyPiece, size - done)));
    if (!slices.ok()) return slices.status();
    if (slices->empty()) return Corrupt("'" + file.path() + "' ended at byte " + std::to_string(done) +
                                        " of the " + std::to_string(size) + " its listing gives");
    for (const BlockBytes& b : *slices) {
      verifier->update(std::string_view(b.data(), b.size()));
      if (options.sink) {
        if (Status st = options.sink(b.data(), b.size()); !st.ok()) return st;
      }
      done += b.size();
    }
    if (options.progress) options.progress(done, size);
  }
  const ContentVerifier::Verdict verdict = verifier->finish();
  if (!verdict.match) {
    // The bad bytes may be cached blocks (and this session's reader may not hash them itself:
    // hubfs cp turns that off, since this hash covers the same bytes): they go, or every run
    // would copy them again.
    file.discard_cached();
    return Corrupt("'" + file.path() + "' does not match its content hash (" + file.content_id() + ", computed " +
                   verdict.computed + "): nothing was kept, and its cached blocks were dropped; run it again");
  }
  return Status::Ok();
}

}  // namespace

}  // namespace hubfs