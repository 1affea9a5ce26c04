#include "stack/session.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <filesystem>
#include <optional>

#include "cache/cache_index.h"
#include "common/deadline.h"
#include "common/log.h"
#include "common/single_flight.h"
#include "common/text.h"
#include "fs/listing_cache.h"
#include "hub/environment.h"

namespace hubfs {

std::function<void(const RemoteFile&)> index_recorder(const std::string& cache_dir, const std::string& repo_label,
                                                      const std::string& revision, const std::string& commit,
                                                      uint32_t block_size) {
  auto warned = std::make_shared<std::atomic<bool>>(false);
  return [cache_dir, repo_label, revision, commit, block_size, warned](const RemoteFile& f) {
    IndexRecord r{repo_label, revision, commit, f.path, cache_key(f.content_id, block_size), f.size};
    if (Status st = cache_index::record(cache_dir, r); !st.ok() && !warned->exchange(true))
      log_warning("cache: cannot record " + f.path + " in the cache index (" + st.message() +
                  "); `hubfs cache info` will not attribute its blocks to " + repo_label);
  };
}

namespace {

// What the cache knows of `path` at `commit` without the Hub: nothing, a stored listing of its
// directory (and in it, the file's entry), or the file's own record (a probe's, stored by an
// earlier session).
struct StoredFirstFile {
  bool dir_listed = false;
  std::optional<TreeEntry> record;
  // From its directory's listing: the files after it, in the listing's order (up to
  // kWarmFiles - 1): what an opener of many files in a row opens next.
  std::vector<TreeEntry> next_files;
  // The directory's whole listing (up to kKnownListingMax entries; else empty): the session's
  // FileSystem takes it as that directory's listing (FileSystem::know_listing), so the opens
  // after the first read and parse no stored listing again.
  std::vector<TreeEntry> dir_entries;
  bool known() const { return dir_listed || record.has_value(); }
};

// While a pin is out, the first blocks of the first file and of the files after it in its
// stored directory listing are loaded from the disk cache into memory: at most this many files
// (docs/constants.md, kWarmFiles).
constexpr size_t kWarmFiles = 16;

// The first file's directory listing, read while the pin is out, is handed to the FileSystem
// up to this many entries (docs/constants.md): filling its nodes is on the first open's path,
// a listing parsed again at the second open is not; a huge directory is left to be listed at
// its first lookup, as before.
constexpr size_t kKnownListingMax = 1024;

StoredFirstFile stored_first_file(const ListingCache* listings, const std::string& commit, const std::string& path) {
  StoredFirstFile out;
  if (!listings || path.empty()) return out;
  auto dir = listings->load_dir(commit, parent_dir(path));
  out.dir_listed = dir.has_value();
  if (!dir) {
    out.record = listings->load_file(commit, path);
    return out;
  }
  // Known from its directory's listing: the session then lists nothing ahead (its root need not
  // be stored), and that directory comes from the cache at the first lookup in it.
  for (const TreeEntry& e : *dir) {
    if (out.record) {
      if (out.next_files.size() + 1 >= kWarmFiles) break;
      if (!e.is_dir) out.next_files.push_back(e);
    } else if (e.path == path && !e.is_dir) {
      out.record = e;
    }
  }
  if (out.record && dir->size() <= kKnownListingMax) out.dir_entries = std::move(*dir);
  return out;
}

// Loads the first block of each file from the disk cache into the reader's memory, on `executor`
// (the session's background one: a thread of its own, not the reader's four disk threads, which
// an opener that reads nothing else never starts), while the pin is out: the opens after it then
// find them in memory (a block read from disk and checked is most of a small open's CPU). Blocks
// are keyed by their content, not by commit: if the pin names another commit than the one these
// files were listed at, they are simply not the blocks its files read. Fetches nothing; at most a
// quarter of the memory tier. `executor` must be drained before the reader goes.
void warm_first_blocks(Executor& executor, BlockReader& reader, uint64_t memory_bytes, const StoredFirstFile& stored) {
  if (!stored.record) return;
  const uint64_t block = reader.options().block_size;
  const uint64_t most = std::min<uint64_t>(kWarmFiles, memory_bytes / 4 / block);
  std::vector<RemoteFile> files;
  auto add = [&](const TreeEntry& e) {
    if (files.size() >= most) return;
    RemoteFile f;
    f.path = e.path;
    f.content_id = e.content_id();
    f.size = e.size;
    f.locate = [path = e.path](bool) -> Result<Location> {
      return Unavailable("not fetched: " + path + " is only loaded from the disk cache while the revision is pinned");
    };
    files.push_back(std::move(f));
  };
  add(*stored.record);
  for (const TreeEntry& e : stored.next_files) add(e);
  if (!files.empty())
    (void)executor.post([&reader, files = std::move(files)] { reader.load_first_blocks_from_disk(files); });
}

// A probe of the first file, started beside the pin (on `executor`, which must outlive `hub`'s
// requests: the session's background executor) and waited for after it, for a while (on
// `env`'s clock). With `head_fetcher` (SessionConfig::xet_head_from_probe): a probe that shows a
// Xet file and names its bridge location starts the file's first block from there at once
// (PrefetchedHead), beside the rest of the session's opening.
class FirstFileProbe {
 public:
  struct Answer {
    HubClient::FileProbe probe;
    std::shared_ptr<PrefetchedHead> head;  // or null
  };
  FirstFileProbe(Env& env, Executor& executor, HubClient& hub, const RepoRef& repo, const std::string& path,
                 RangeFetcher* head_fetcher, uint64_t head_bytes, int read_timeout_s)
      : env_(env), answer_(std::make_shared<OneShot<Result<Answer>>>()) {
    if (!executor.post([&hub, repo, path, answer = answer_, head_fetcher, head_bytes, read_timeout_s, &env] {
          Result<HubClient::FileProbe> r = hub.probe_file(repo, path);
          if (!r.ok()) {
            answer->set(r.status());
            return;
          }
          Answer a{std::move(*r), nullptr};
          if (head_fetcher && a.probe.entry.xet_hash && a.probe.location && a.probe.entry.size > 0) {
            a.head = std::make_shared<PrefetchedHead>(std::min(head_bytes, a.probe.entry.size));
            // No fresh location on a refusal: the revision as named may have moved since the probe
            // (the pin is not in yet), and another version's bytes must never stand for these.
            // The head read then takes Xet's answer (XetRouter).
            Locator at = [location = *a.probe.location](bool refresh) -> Result<Location> {
              if (refresh) return Unavailable("the probe's bridge location was refused; the head comes from Xet");
              return location;
            };
            head_fetcher->fetch_async(
                at, a.probe.entry.size, ByteRange{0, a.head->length()},
                [head = a.head](Result<std::string> got) { head->set(std::move(got)); },
                Deadline::after(std::chrono::seconds(read_timeout_s), env.clock()));
          }
          answer->set(std::move(a));
        })) {
      answer_->set(Unavailable("not probed"));
    }
  }
  // The probe's entry and location (and its head, when one was started) if the pin's commit
  // served it within `grace`; nullopt otherwise (the caller lists, which also produces the errors
  // a missing or forbidden file deserves; a probe still running finishes on the executor,
  // unheard, and so does its head).
  std::optional<Answer> wait(const std::string& commit, std::chrono::milliseconds grace) {
    std::optional<Result<Answer>> answered = answer_->wait(Deadline::after(grace, env_.clock()));
    if (!answered) {
      log_debug("probe of the first file: no answer " + std::to_string(grace.count()) + " ms after the pin; listing instead");
      return std::nullopt;
    }
    Result<Answer> r = std::move(*answered);
    if (!r.ok()) {
      log_debug("probe of the first file: " + r.status().message() + "; listing instead");
      return std::nullopt;
    }
    if (r->probe.commit != commit) {
      log_debug("probe of the first file: served from commit " + r->probe.commit + ", pinned " + commit +
                "; listing instead");
      return std::nullopt;
    }
    return std::move(*r);
  }

 private:
  Env& env_;
  std::shared_ptr<OneShot<Result<Answer>>> answer_;
};

// How long the pin's caller waits, after the pin, for the first file's probe: a second, or as
// long as the pin itself took (a slow link). A probe slower than that is held somewhere (the
// resolvers' quota, a stalled connection): listing costs one round trip instead.
constexpr std::chrono::milliseconds kProbeGrace{1000};

// pin_revision, run on `executor` (which must outlive `hub`'s requests: the session's background
// executor) from the moment it is made, and waited for with get().
class BackgroundPin {
 public:
  BackgroundPin(Executor& executor, HubClient& hub, const RepoRef& repo, std::shared_ptr<const ListingCache> listings)
      : answer_(std::make_shared<OneShot<Result<PinnedRevision>>>()) {
    if (!executor.post([&hub, repo, listings, answer = answer_] {
          // The records that only refresh the cache are stored after the answer is handed on.
          std::function<void()> store_later;
          answer->set(pin_revision_storing_later(hub, repo, listings.get(), &store_later));
          if (store_later) store_later();
        })) {
      answer_->set(pin_revision(hub, repo, listings.get(), false));  // a refused post: pinned here
    }
  }
  Result<PinnedRevision> get() { return answer_->take(); }

 private:
  std::shared_ptr<OneShot<Result<PinnedRevision>>> answer_;
};

}  // namespace

bool session_needs_no_request(const SessionConfig& config, const RepoSpec& spec, const std::string& first_file) {
  if (config.offline || offline_requested()) return true;  // never a request (or an error at once)
  if (config.cache_size == 0 || !spec.subfolder.empty() || !is_hex(spec.repo.revision, 40)) return false;
  const ListingCache listings(config.cache_dir, config.endpoint, spec.repo);
  auto pinned = stored_commit_pin(spec.repo, &listings);
  if (!pinned) return false;  // pin_revision would ask
  if (first_file.empty()) return listings.load_dir(pinned->commit, "").has_value();  // list_root's
  return stored_first_file(&listings, pinned->commit, first_file).record.has_value();  // no probe, no list_root
}

Status open_repo_session(const SessionConfig& config, const RepoSpec& spec, RepoSession& s,
                         const std::function<void(RepoSession&, FsOptions&)>& customize,
                         const std::string& first_file) {
  // HF_HUB_OFFLINE asks huggingface_hub for no network at all: the same as the offline option.
  const bool offline = config.offline || offline_requested();
  if (offline && config.cache_size == 0) {
    return InvalidArgument("offline reads come from the disk cache, and a cache size of 0 keeps none: "
                           "drop --cache-size 0 (cache_size=0)");
  }
  s.repo = spec.repo;
  s.subfolder = spec.subfolder;
  s.offline = offline;
  s.label = std::string(api_segment(spec.repo.type)) + "/" + spec.repo.id;
  if (Status st = build_stack(config, s.stack); !st.ok()) return st;

  // Listings live with the blocks; cache_size 0 writes nothing to the cache directory.
  std::shared_ptr<const ListingCache> listings;
  if (config.cache_size != 0) listings = std::make_shared<ListingCache>(config.cache_dir, config.endpoint, s.repo);
  // A pin answered without the Hub: offline, or a commit sha the cache holds.
  std::optional<Result<PinnedRevision>> pinned_here;
  if (offline) {
    pinned_here = pin_revision(*s.stack.hub, s.repo, listings.get(), /*offline=*/true);
  } else if (auto stored = stored_commit_pin(s.repo, listings.get())) {
    pinned_here = std::move(*stored);
  }
  const bool pin_asks = !pinned_here;
  // The first file is probed beside the pin unless the cache knows it at the commit this
  // revision was pinned to last (the pin then most likely confirms that commit); or, when it
  // knows it, its first blocks are loaded beside the pin (warm_first_blocks): one or the other,
  // on a thread beside the pin's.
  const bool may_probe = !offline && !first_file.empty() && spec.subfolder.empty();
  if (const int threads = int{pin_asks} + int{may_probe}; threads > 0)
    s.background = s.stack.env->new_executor(threads);
  // A pin that asks the Hub goes out first, and runs beside the rest of the build (what the
  // cache knows of the first file, the reader, the disk cache's opening): a fresh process's
  // first open pays the round trip and that work at once, not one after the other. Nothing is
  // read through the session before it is pinned.
  const auto pin_started = s.stack.env->now();
  std::optional<BackgroundPin> pin_in_flight;
  if (pin_asks) pin_in_flight.emplace(*s.background, *s.stack.hub, s.repo, listings);
  std::optional<FirstFileProbe> probe;
  std::optional<std::string> last_commit;  // what `stored_at_last` was read for
  StoredFirstFile stored_at_last;
  if (may_probe) {
    if (auto last = listings ? listings->load_ref(s.repo.revision) : std::nullopt) {
      last_commit = last->commit;
      stored_at_last = stored_first_file(listings.get(), last->commit, first_file);
    }
  }
  const bool probing = may_probe && !stored_at_last.known();
  // Not with a shared tier, which needs the pin's answer (private or gated). And opening the disk
  // cache makes its directories and a probe file: before the pin has found the repo, only a cache
  // that holds blocks already is opened, so a repo or revision that does not exist leaves nothing
  // new behind (a mount's checks of its mountpoint see it as it was).
  std::error_code no_throw;
  const bool reader_first = pin_asks && config.shared_cache.empty() &&
                            (config.cache_size == 0 || std::filesystem::is_directory(config.cache_dir + "/blocks", no_throw));
  const bool warming = reader_first && config.cache_size != 0 && stored_at_last.record.has_value();
  if (probing) {
    // The reader's block: h5chunk's header read asks for the first block.
    probe.emplace(*s.stack.env, *s.background, *s.stack.hub, s.repo, first_file,
                  config.xet_head_from_probe && !xet_disabled() ? s.stack.fetcher.get() : nullptr,
                  config.block_size, config.read_timeout_s);
  }
  if (reader_first) {
    if (Status st = build_reader(config, s.stack, nullptr, s.label); !st.ok()) return st;
    if (warming && s.stack.reader)
      warm_first_blocks(*s.background, *s.stack.reader, config.memory_cache_bytes, stored_at_last);
  }
  Result<PinnedRevision> info = pin_in_flight ? pin_in_flight->get() : std::move(*pinned_here);
  if (!info.ok()) return info.status();
  std::optional<TreeEntry> first;  // known without listing its directory
  std::vector<TreeEntry> first_dir;  // its directory's stored listing at the pinned commit, or empty
  std::optional<Location> first_location;
  bool first_probed = false;  // `first` is the Hub's answer of this session, not the cache's
  std::shared_ptr<PrefetchedHead> first_head;  // its first block, asked for at the probe
  if (spec.subfolder.empty()) {
    // Read once: the pin usually confirms the commit the cache was asked about before it.
    StoredFirstFile stored = last_commit == info->commit ? std::move(stored_at_last)
                                                         : stored_first_file(listings.get(), info->commit, first_file);
    if (stored.record) first = std::move(stored.record);
    first_dir = std::move(stored.dir_entries);
    if (probe && !stored.known()) {
      const auto pin_took =
          std::chrono::duration_cast<std::chrono::milliseconds>(s.stack.env->now() - pin_started);
      if (auto probed = probe->wait(info->commit, std::max(kProbeGrace, pin_took))) {
        first = std::move(probed->probe.entry);
        first_location = std::move(probed->probe.location);
        first_head = std::move(probed->head);
        first_probed = true;
        // Best effort, as listings are: the next session opens this file without the Hub.
        if (listings) (void)listings->save_file(info->commit, *first);
      }
    }
  }
  s.info = *info;
  RepoRef pinned = s.repo;
  pinned.revision = info->commit;  // every later request names the commit: the view never moves
  const std::string& subfolder = s.subfolder;
  if (offline && !first && !listings->load_dir(info->commit, subfolder)) {
    return NotFound("offline: the cache " + config.cache_dir + " holds " + s.label + " at revision " +
                    s.repo.revision + " (commit " + info->commit + ") but not the listing of " +
                    (subfolder.empty() ? "its root" : "'" + subfolder + "'") +
                    ": read it once without --offline (HF_HUB_OFFLINE) while the Hub can be reached");
  }
  if (!subfolder.empty()) {
    // The subfolder must be a directory at this commit. The stored listing of its parent answers
    // that without a request (offline, its own listing was found above).
    std::optional<std::vector<TreeEntry>> found;
    if (listings) found = listings->load_dir(info->commit, parent_dir(subfolder));
    if (!found && offline) found = std::vector<TreeEntry>{TreeEntry{subfolder, true, 0, "", std::nullopt, std::nullopt}};
    if (!found) {
      auto asked = s.stack.hub->paths_info(pinned, {subfolder});
      if (!asked.ok()) return asked.status();
      found = std::move(*asked);
    }
    const TreeEntry* entry = nullptr;
    for (const auto& e : *found)
      if (e.path == subfolder) entry = &e;
    if (!entry) {
      return NotFound("subfolder '" + subfolder + "' does not exist in " + s.label + " at revision " +
                      s.repo.revision + " (commit " + info->commit + "); check its spelling and case with the "
                      "repo's file browser, or mount the whole repo");
    }
    if (!entry->is_dir) {
      return InvalidArgument("'" + subfolder + "' in " + s.label + " is a file, not a directory: a "
                             "subfolder mount shows a directory (mount its parent instead)");
    }
  }
  if (!reader_first) {
    if (Status st = build_reader(config, s.stack, &s.info, s.label); !st.ok()) return st;
  }
  FsOptions fs_options;
  fs_options.mtime = static_cast<time_t>(info->last_modified);
  fs_options.root_path = subfolder;
  fs_options.listings = listings;
  fs_options.offline = offline;
  fs_options.list_whole_repo = info->file_count && *info->file_count <= kWholeRepoMaxFiles;
  if (s.stack.cache)
    fs_options.on_open = index_recorder(config.cache_dir, s.label, s.repo.revision, info->commit, config.block_size);
  if (!offline) build_xet(config, s.stack, pinned, fs_options);
  // A probe that shows a Xet file: its read token now, beside the rest of the open, as a listing
  // from the Hub does (on_hub_listing), so the first read waits for its plan only. huggingface_hub
  // does the same: the HEAD's X-Xet-Hash, then the token (docs/hub-http-contract.md, 7b). A first
  // file known from the cache asks for nothing (a warm session sends only its pin).
  if (first_probed && first->xet_hash && s.stack.xet) s.stack.xet->warm_token();
  // Its first block through the bridge location the probe named (asked for as the probe
  // answered), beside Xet's plan and range (SessionConfig::xet_head_from_probe).
  if (config.xet_head_from_probe && first_probed && first->xet_hash && first_location && s.stack.xet_router &&
      s.stack.reader)
    s.stack.xet_router->read_head_through_bridge(*first->xet_hash, s.stack.reader->options().block_size,
                                                 std::move(first_head));
  if (customize) customize(s, fs_options);
  s.fs = std::make_unique<FileSystem>(*s.stack.hub, pinned, *s.stack.reader, fs_options);
  if (first) {
    // The first file is known without a listing; whatever else is asked for lists then.
    if (first_location) s.stack.hub->adopt_location(pinned, first->path, *first_location);
    const std::string dir = parent_dir(first->path);
    s.fs->know_file(std::move(*first));
    // Read at this commit while the pin was out: what the first lookup of a sibling would read.
    if (!first_dir.empty()) s.fs->know_listing(dir, std::move(first_dir));
    return Status::Ok();
  }
  // Paid by the first access anyway (a lookup lists its whole directory); here it is off the
  // first read's path. A second session on the same commit finds it in the listing cache.
  if (Status st = s.fs->list_root(); !st.ok()) log_warning("listing the root ahead of the first access: " + st.message());
  return Status::Ok();
}

}  // namespace hubfs
