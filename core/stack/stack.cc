#include "stack/stack.h"

#include <algorithm>

#include "cache/cache_admin.h"
#include "cache/cache_index.h"
#include "cache/cache_key.h"
#include "common/log.h"
#include "hub/environment.h"

namespace hubfs {

namespace {

// An hf:// file's head is also read through Xet, beside the bridge's answer (the check behind
// it: XetRouter::read_head_through_bridge). A Xet read holds a transport slot and a Xet thread
// from its plan to its last byte, and that one may still be out when h5chunk's hint sends
// --max-requests reads at once: one of each more for it, or the hint's last read waits for it to
// end (docs/xet.md, "The head of an hf:// file").
int head_check_reads(const SessionConfig& config) { return config.xet_head_from_probe ? 1 : 0; }

// The shared block tier, unless the repo is private or gated and shared_cache_private was not
// given (whoever reaches the servers could read its blocks). Contacts no server: a tier that is
// down costs Hub fetches, never the session.
Status open_shared_tier(const SessionConfig& config, const PinnedRevision& info, const std::string& repo_label,
                        uint32_t block_size, Stack& s) {
  if (config.shared_cache.empty()) return Status::Ok();
  if ((info.is_private || info.gated) && !config.shared_cache_private) {
    log_info("shared cache: not used for " + repo_label + ", which is " + (info.is_private ? "private" : "gated") +
             " (anyone who can reach the cache servers could read its blocks); --shared-cache-private "
             "shares it anyway");
    return Status::Ok();
  }
  MemcachedStoreOptions options;
  options.servers = config.shared_cache;
  options.env = s.env;
  auto tier = MemcachedStore::create(options);
  if (!tier.ok()) return tier.status();
  s.shared_tier = std::move(tier).value();
  s.shared_blocks = std::make_unique<SharedBlocks>(*s.shared_tier, block_size, *s.shared_key);
  log_info("shared cache: " + s.shared_tier->describe());
  return Status::Ok();
}

}  // namespace

void Stack::shutdown() {
  // Retries waiting out a long Retry-After would hold up the reader's shutdown (it waits for
  // fetches in flight): answer them now, and fail what is still on the wire. Then the reader
  // drains while everything its tasks reach (fetcher, cache, hub) still exists.
  if (xet_router) xet_router->shutdown();  // first: what fails from here on is the shutdown
  if (transport) transport->shutdown();
  if (curl) curl->shutdown();
  if (fetcher) fetcher->shutdown();  // fetches waiting to re-ask a refusing CDN end now
  if (reader) reader->shutdown();
  if (xet) xet->shutdown();  // after the reader: its last fetches may still be reading here
}

Status build_stack(const SessionConfig& config, Stack& s) {
  if (!config.shared_cache.empty()) {
    // First, before any request: a tier nobody can trust is refused, not used.
    if (config.shared_cache_key_file.empty())
      return InvalidArgument(
          "--shared-cache needs --shared-cache-key-file F (-o shared_cache_key_file=F): a key every machine "
          "of the cluster shares, which authenticates the blocks in the tier (memcached lets anyone who "
          "reaches it write, and a forged block would be served); make one with `head -c 32 /dev/urandom > F; "
          "chmod 600 F` and copy it to every machine");
    auto key = SharedStoreKey::from_file(config.shared_cache_key_file);
    if (!key.ok()) return key.status();
    s.shared_key = std::move(key).value();
  }
  CurlOptions curl_options;
  curl_options.env = s.env;
  curl_options.max_in_flight = config.max_requests + head_check_reads(config);
  curl_options.receive_buffer_bytes = config.receive_buffer_bytes;
  if (Status ca = choose_ca_bundle(config.ca_bundle, curl_options); !ca.ok()) return ca;
  curl_options.hedge = true;  // a CDN stalling on a cold object costs a duplicate, not the stall
  // HF_HUB_DOWNLOAD_TIMEOUT: huggingface_hub's read timeout of a download, i.e. how long a
  // transfer may go without a byte; the first byte keeps its own allowance unless that is shorter.
  if (config.stall_timeout_s) {
    curl_options.stall_timeout_ms = *config.stall_timeout_s * 1000L;
    curl_options.first_byte_timeout_ms = std::max(curl_options.first_byte_timeout_ms, curl_options.stall_timeout_ms);
  }
  s.curl = std::make_unique<CurlTransport>(curl_options);
  // A reader is waiting on every request: retry soon (200 ms doubling to 4 s, full jitter: ~3 s
  // at most over 5 attempts) rather than the library's 1 s to 8 s. A server that asks for more
  // (Retry-After, RateLimit) still gets what it asks.
  RetryPolicy retry_policy;
  retry_policy.base_delay = std::chrono::milliseconds(200);
  retry_policy.max_delay = std::chrono::milliseconds(4000);
  // The Hub's quotas: waited out (up to rate_limit_wait_s per request), approached slowly.
  QuotaGateOptions quota_options;
  quota_options.endpoint = config.endpoint;
  quota_options.max_wait = std::chrono::seconds(config.rate_limit_wait_s);
  quota_options.env = s.env;
  s.quota = std::make_unique<QuotaGate>(quota_options);
  retry_policy.quota = s.quota.get();
  s.transport = std::make_unique<RetryingTransport>(*s.curl, retry_policy, *s.env);
  HubConfig hub_config;
  hub_config.endpoint = config.endpoint;
  hub_config.env = s.env;
  if (config.metadata_timeout_s) hub_config.metadata_timeout = std::chrono::seconds(*config.metadata_timeout_s);
  // Followed while the session lives: a token file rewritten (a refreshed or new login) is used
  // from the next request on. A token the caller gave wins over the environment's.
  s.tokens = std::make_shared<TokenWatcher>(*s.env);
  if (config.token) {
    hub_config.token_source = [token = *config.token]() -> std::optional<std::string> {
      if (token.empty()) return std::nullopt;
      return token;
    };
  } else {
    hub_config.token_source = [tokens = s.tokens] { return tokens->current(); };
    if (implicit_token_disabled()) {
      log_info("HF_HUB_DISABLE_IMPLICIT_TOKEN is set: no token is sent (private and gated repos cannot be read)");
    }
  }
  s.hub = std::make_unique<HubClient>(hub_config, *s.transport);
  // Here, not with the reader: an hf:// session's probe may start its first file's head through
  // it before the pin is in (open_repo_session, SessionConfig::xet_head_from_probe).
  RangeFetcherOptions fetcher_options;
  fetcher_options.env = s.env;
  s.fetcher = std::make_unique<RangeFetcher>(*s.transport, fetcher_options);
  return Status::Ok();
}

Status build_reader(const SessionConfig& config, Stack& s, const PinnedRevision* repo, const std::string& repo_label) {
  if (Status st = check_block_size(config.block_size); !st.ok()) return st;
  if (config.cache_size == 0) {
    // cache_size 0: no disk cache at all (nothing is written to the cache directory); blocks
    // live only in the reader's memory cache.
    log_info("--cache-size 0: no disk cache; every block not in memory is fetched again");
  } else {
    CacheOptions cache_options;
    cache_options.dir = config.cache_dir;
    cache_options.budget_bytes = config.cache_size;
    cache_options.env = s.env;
    auto cache = BlockCache::open(cache_options);
    if (!cache.ok()) return cache.status();
    s.cache = std::move(cache).value();
    // The budget tells `hubfs cache info` what this cache is held to (best effort).
    (void)cache_index::write_budget(config.cache_dir, config.cache_size);
  }
  ReaderOptions reader_options;
  reader_options.read_timeout = std::chrono::seconds(config.read_timeout_s);
  reader_options.verify_whole_files = config.verify_whole_files;
  reader_options.quota_wait_end = [quota = s.quota.get()] { return quota->last_wait_end(); };
  reader_options.quota_max_wait = std::chrono::seconds(config.rate_limit_wait_s);
  reader_options.parallel_requests = static_cast<uint32_t>(config.max_requests);
  reader_options.memory_cache_bytes = config.memory_cache_bytes;
  reader_options.block_size = config.block_size;
  reader_options.max_ahead_bytes = config.read_ahead_bytes;
  // The read-ahead budget is not cut with a small memory tier: blocks take memory only while
  // their transfer runs (reader/block_slots.h) and until written to disk, and a training loop's
  // planner (a 32 MiB tier) hints 150 MB at once, which a 32 MiB budget cut to a fifth.
  reader_options.max_deferred_write_bytes = std::min(reader_options.max_deferred_write_bytes, config.memory_cache_bytes);
  if (!config.shared_cache.empty()) {
    if (repo) {
      if (Status st = open_shared_tier(config, *repo, repo_label, reader_options.block_size, s); !st.ok()) return st;
    } else if (!config.shared_cache_private) {
      // A whole-Hub mount pins repos as they are touched, public and private alike, behind one
      // reader: without a per-repo decision, sharing must be asked for explicitly.
      return InvalidArgument("--shared-cache with --hub needs --shared-cache-private: a whole-Hub mount "
                             "cannot keep private and gated repos out of the shared tier (anyone who can "
                             "reach the cache servers could read their blocks)");
    } else {
      PinnedRevision any;
      if (Status st = open_shared_tier(config, any, "the whole Hub", reader_options.block_size, s); !st.ok())
        return st;
    }
  }
  s.reader = std::make_unique<BlockReader>(s.cache.get(), *s.fetcher, reader_options, s.shared_blocks.get());
  return Status::Ok();
}

namespace {
// Bytes [offset, offset + length) of the file whose blocks `cache` keeps under `key`, blocks of
// block_size, into out; false unless every block holding them is there. Read without the blocks' own
// checksums: the chunk cache checks every chunk it reads back against its BLAKE3 hash.
bool read_cached_bytes(BlockCache& cache, const std::string& key, uint32_t block_size, uint64_t offset,
                       uint64_t length, char* out) {
  for (uint64_t at = offset, end = offset + length; at < end;) {
    const uint64_t index = at / block_size, in = at - index * block_size;
    const uint64_t n = std::min<uint64_t>(block_size - in, end - at);
    if (!cache.read_part(key, index, in, out + (at - offset), n)) return false;
    at += n;
  }
  return true;
}
}  // namespace

void build_xet(const SessionConfig& config, Stack& s, const RepoRef& pinned, FsOptions& fs_options) {
  if (xet_disabled()) {
    log_info("HF_HUB_DISABLE_XET is set: Xet-stored files are read through the Hub's bridge");
    return;
  }
  xet::XetReaderOptions options;
  options.threads = std::max(1, config.max_requests) + head_check_reads(config);
  options.env = s.env;
  const uint32_t block_size = s.reader ? s.reader->options().block_size : 0;
  if (config.cache_size != 0) {
    // Beside the blocks (docs/xet.md, "The chunk cache"): a fetched chunk is recorded where it
    // lies in a file the block cache holds, and read back from there; bounded by a quarter of
    // --cache-size (locations take a few hundred bytes per run; copies, written without a block
    // cache, their chunks' size).
    xet::ChunkCache::FileBytes file_bytes;
    if (s.cache && block_size != 0) {
      // In the blocks the location's key names (cache/cache_key.h): a location another session
      // recorded in blocks of another size (hf://'s block_size) reads back at that size.
      file_bytes = [cache = s.cache.get()](const std::string& key, uint64_t offset, uint64_t length, char* out) {
        return read_cached_bytes(*cache, key, parse_cache_key(key).block_size, offset, length, out);
      };
    }
    s.chunk_cache = std::make_unique<xet::ChunkCache>(config.cache_dir + "/" + cache_admin::kXetChunkDir,
                                                      config.cache_size / 4, std::move(file_bytes));
    options.chunk_cache = s.chunk_cache.get();
  }
  xet::TokenSource tokens = [hub = s.hub.get(), pinned]() -> Result<xet::XetToken> {
    auto t = hub->xet_read_token(pinned);
    if (!t.ok()) return t.status();
    return xet::XetToken{t->cas_url, t->access_token, t->expires};
  };
  s.xet = std::make_unique<xet::XetReader>(*s.transport, std::move(tokens), options);
  s.xet_router = std::make_shared<XetRouter>(*s.xet, *s.fetcher);
  const bool locations = s.chunk_cache && s.chunk_cache->keeps_locations();
  fs_options.range_source = [router = s.xet_router, locations, block_size](const TreeEntry& e, const Locator& locate) {
    return router->source_for(e, locate, locations ? BlockReader::disk_key(e.content_id(), block_size) : std::string());
  };
  // A listing from the Hub that shows a Xet file: its token now, beside the rest of the mount
  // (docs/xet.md, the read path, step 1). Stored listings (a warm remount) ask for nothing.
  fs_options.on_hub_listing = [xet = s.xet.get()](const std::vector<TreeEntry>& entries) {
    for (const TreeEntry& e : entries) {
      if (!e.is_dir && e.xet_hash) {
        xet->warm_token();
        return;
      }
    }
  };
}

}  // namespace hubfs
