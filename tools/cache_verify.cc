#include "cache_verify.h"

#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <future>
#include <iostream>
#include <memory>
#include <optional>

#include "cache/cache_admin.h"
#include "cache/listing_store.h"
#include "hub/environment.h"
#include "hub/hub_client.h"
#include "mount.h"
#include "net/curl_transport.h"
#include "net/quota_gate.h"
#include "net/range_fetcher.h"
#include "net/retrying_transport.h"
#include "shared/memcached/memcached_store.h"

namespace hubfs {
namespace {

using Clock = std::chrono::steady_clock;
using cache_admin::ContentVerifyOptions;
using cache_admin::HubSource;

// Progress on stderr: a bar redrawn in place on a terminal (at most 5 times a second), else one
// line every 10 s (a log or a CI job shows it is alive without drowning in lines).
class ProgressBar {
 public:
  explicit ProgressBar(bool tty) : tty_(tty), start_(Clock::now()), last_(start_) {}
  void update(uint64_t done, uint64_t total) {
    const auto now = Clock::now();
    if (now - last_ < (tty_ ? std::chrono::milliseconds(200) : std::chrono::milliseconds(10'000))) return;
    last_ = now;
    draw(done, total, now);
    drawn_ = true;
  }
  void finish(uint64_t done, uint64_t total) {
    if (!drawn_) return;  // quick runs print no progress at all
    draw(done, total, Clock::now());
    if (tty_) std::fputc('\n', stderr);
  }

 private:
  void draw(uint64_t done, uint64_t total, Clock::time_point now) {
    const double secs = std::chrono::duration<double>(now - start_).count();
    const double rate = secs > 0 ? static_cast<double>(done) / secs : 0;
    const double eta = rate > 0 && total > done ? static_cast<double>(total - done) / rate : 0;
    const int pct = total ? static_cast<int>(100.0 * static_cast<double>(done) / static_cast<double>(total)) : 100;
    constexpr int kWidth = 30;
    std::string bar(static_cast<size_t>(kWidth * pct / 100), '#');
    bar.resize(kWidth, '.');
    std::fprintf(stderr, "%sverify: %3d%% [%s] %.1f / %.1f MB  %.1f MB/s  ETA %.0f s%s", tty_ ? "\r" : "", pct,
                 bar.c_str(), static_cast<double>(done) / 1e6, static_cast<double>(total) / 1e6, rate / 1e6, eta,
                 tty_ ? "   " : "\n");
    std::fflush(stderr);
  }
  const bool tty_;
  const Clock::time_point start_;
  Clock::time_point last_;
  bool drawn_ = false;
};

bool is_dir(const std::string& path) {
  struct stat st {};
  return ::stat(path.c_str(), &st) == 0 && S_ISDIR(st.st_mode);
}

// The Hub seen through index records: each record names its repo, commit and path, which is a
// resolve URL on the endpoint; the same transport stack as a mount (retries until the deadline,
// quota waits, CDN 403/416 re-resolved, tokens from the environment).
class HubRangeSource {
 public:
  static Result<std::unique_ptr<HubRangeSource>> create(const CacheVerifyConfig& config) {
    std::unique_ptr<HubRangeSource> s(new HubRangeSource(config));
    CurlOptions curl_options;
    curl_options.env = &Env::real();
    if (Status ca = choose_ca_bundle(config.ca_bundle, curl_options); !ca.ok()) return ca;
    s->curl_ = std::make_unique<CurlTransport>(curl_options);
    QuotaGateOptions quota_options;
    quota_options.endpoint = config.endpoint;
    quota_options.env = &Env::real();
    s->quota_ = std::make_unique<QuotaGate>(quota_options);
    RetryPolicy retry;
    retry.base_delay = std::chrono::milliseconds(200);
    retry.max_delay = std::chrono::milliseconds(4000);
    retry.quota = s->quota_.get();
    s->transport_ = std::make_unique<RetryingTransport>(*s->curl_, retry, Env::real());
    HubConfig hub_config;
    hub_config.env = &Env::real();
    hub_config.endpoint = config.endpoint;
    hub_config.token = find_token();
    s->hub_ = std::make_unique<HubClient>(hub_config, *s->transport_);
    RangeFetcherOptions fetcher_options;
    fetcher_options.env = &Env::real();
    s->fetcher_ = std::make_unique<RangeFetcher>(*s->transport_, fetcher_options);
    return s;
  }
  ~HubRangeSource() {
    if (transport_) transport_->shutdown();
    if (curl_) curl_->shutdown();
    if (fetcher_) fetcher_->shutdown();
  }

  Status mappable(const IndexRecord& r) const {
    if (r.commit.empty())
      return InvalidArgument("its index entry records no commit (written by an older hubfs); read the file whole "
                             "through a mount to verify it");
    auto ref = parse_repo_ref(r.repo);
    if (!ref.ok()) return InvalidArgument("its index entry names no repo hubfs understands (" + r.repo + ")");
    if (Status s = check_revision(r.commit); !s.ok()) return s;
    if (r.path.empty()) return InvalidArgument("its index entry names no path");
    // Listings are stored per endpoint: a repo listed only under others was read through one of
    // them (the index does not say which: the endpoint may carry credentials).
    if (!is_dir(listing_store::repo_dir(config_.cache_dir, config_.endpoint, r.repo)) &&
        listing_store::usage(config_.cache_dir, r.repo).files > 0)
      return InvalidArgument(r.repo + " was read through another endpoint than " + without_url_credentials(config_.endpoint) +
                             "; name that one with --endpoint (or HF_ENDPOINT)");
    return Status::Ok();
  }

  Result<std::string> fetch(const IndexRecord& r, uint64_t offset, uint64_t length) {
    auto ref = parse_repo_ref(r.repo);
    if (!ref.ok()) return ref.status();
    ref->revision = r.commit;
    Locator locate = [hub = hub_.get(), repo = *ref, path = r.path](bool refresh) {
      return hub->locate(repo, path, refresh);
    };
    auto promise = std::make_shared<std::promise<Result<std::string>>>();
    auto future = promise->get_future();
    fetcher_->fetch_async(
        locate, r.size, ByteRange{offset, length},
        [promise](Result<std::string> bytes) { promise->set_value(std::move(bytes)); },
        Deadline::after(std::chrono::seconds(config_.read_timeout_s), fetcher_->env().clock()));
    return future.get();
  }

 private:
  explicit HubRangeSource(const CacheVerifyConfig& config) : config_(config) {}
  const CacheVerifyConfig& config_;
  // Construction order; destroyed in reverse (the quota gate outlives the transport).
  std::unique_ptr<QuotaGate> quota_;
  std::unique_ptr<CurlTransport> curl_;
  std::unique_ptr<RetryingTransport> transport_;
  std::unique_ptr<HubClient> hub_;
  std::unique_ptr<RangeFetcher> fetcher_;
};

}  // namespace

int run_cache_verify(const CacheVerifyConfig& config) {
  namespace admin = cache_admin;
  auto fail = [](const std::string& why) {
    std::cerr << "hubfs: " << why << "\n";
    return kVerifyError;
  };
  ContentVerifyOptions options;
  std::unique_ptr<MemcachedStore> tier;
  if (!config.shared_cache.empty()) {
    if (config.shared_cache_key_file.empty())
      return fail("--shared-cache needs --shared-cache-key-file F, the key the mounts sharing the tier use "
                  "(bad blocks are deleted under their keys)");
    auto key = SharedStoreKey::from_file(config.shared_cache_key_file);
    if (!key.ok()) return fail(key.status().message());
    MemcachedStoreOptions tier_options;
    tier_options.env = &Env::real();
    tier_options.servers = config.shared_cache;
    auto made = MemcachedStore::create(tier_options);
    if (!made.ok()) return fail(made.status().message());
    tier = std::move(made).value();
    options.shared = tier.get();
    options.shared_key = std::move(key).value();
  }
  std::unique_ptr<HubRangeSource> source;
  if (config.complete) {
    auto made = HubRangeSource::create(config);
    if (!made.ok()) return fail(made.status().message());
    source = std::move(made).value();
    options.hub = HubSource{
        [s = source.get()](const IndexRecord& r) { return s->mappable(r); },
        [s = source.get()](const IndexRecord& r, uint64_t offset, uint64_t length) {
          return s->fetch(r, offset, length);
        }};
  }

  auto verified = admin::verify(config.cache_dir);
  if (!verified.ok()) return fail(verified.status().message());
  for (const std::string& bad : verified->bad_files) std::cerr << "hubfs: bad block deleted: " << bad << "\n";
  std::cout << "checked " << verified->checked << " blocks: " << verified->bad << " bad (deleted)";
  if (verified->vanished > 0) std::cout << ", " << verified->vanished << " evicted while checking";
  std::cout << "\n" << std::flush;

  // Then whole files: a block can carry a good checksum over bytes that were corrupt when they
  // arrived; only a complete file's hash catches that.
  ProgressBar bar(::isatty(2) != 0);
  uint64_t last_done = 0, last_total = 0;
  options.progress = [&](uint64_t done, uint64_t total) {
    last_done = done;
    last_total = total;
    bar.update(done, total);
  };
  auto content = admin::verify_content(config.cache_dir, Env::real(), options);
  bar.finish(last_done, last_total);
  if (tier) tier->wait_idle();  // the deletes are queued: done before we say so
  if (!content.ok()) return fail(content.status().message());
  for (const std::string& bad : content->bad_files) std::cerr << "hubfs: content mismatch: " << bad << "\n";
  for (const std::string& error : content->fetch_errors) std::cerr << "hubfs: could not fetch " << error << "\n";
  for (const std::string& partial : content->unverifiable_files)
    std::cout << "unverifiable (partly cached, no whole-file hash to check): " << partial << "\n";
  if (content->shared_blocks_deleted > 0)
    std::cout << "deleted " << content->shared_blocks_deleted << " blocks of bad files from the shared tier ("
              << tier->describe() << ")\n";

  // The summary: one line a script can parse, then what to do about what is left.
  const uint64_t bad = verified->bad + content->files_bad;
  // Files whose whole hash matched: at once, after completion, or after a refetch.
  const uint64_t good = content->files_checked - content->files_bad + content->files_refetched;
  std::cout << "verified " << good << " files"
            << (config.complete ? " (" + std::to_string(content->files_completed) + " completed from the Hub, " +
                                      admin::human_bytes(content->bytes_fetched) + " fetched)"
                                : "")
            << "; bad " << content->files_bad << " files and " << verified->bad << " blocks, purged"
            << "; refetched " << content->files_refetched << "; unverifiable " << content->files_incomplete
            << " files (" << admin::human_bytes(content->unverifiable_bytes) << ")";
  if (content->files_unmappable > 0) std::cout << ", " << content->files_unmappable << " with no Hub URL";
  std::cout << "\n";
  if (content->files_incomplete > 0) {
    std::cout << (config.complete
                      ? "the unverifiable files could not be completed (see why above): fix that and run "
                        "`hubfs cache verify --complete` again\n"
                      : "partly cached files are UNVERIFIED: their blocks passed only the checksum of what was "
                        "written, not a hash of the Hub's content; `hubfs cache verify --complete` fetches "
                        "what they lack and verifies them whole\n");
  }
  if (bad > 0) return kVerifyBadFound;
  return content->files_incomplete > 0 ? kVerifyUnverified : kVerifyClean;
}

}  // namespace hubfs
