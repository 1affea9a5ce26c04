// The composition root: the fetch stack every door into a repo owns (a mount, hubfs.open and
// hf:// in Python, `hubfs cat|cp`, h5hub), built from one SessionConfig and one Env. Transport,
// quota gate, Hub client, block cache, shared tier, reader and Xet are all chosen and wired
// here, once, so a file read through a mount is warm for hubfs.open and the other way round;
// core/fs sees only the interfaces it uses (HubClient, BlockReader, FsOptions::range_source).
//
// No FUSE here: core/ never links it (docs/architecture.md).
#pragma once

#include <memory>
#include <optional>
#include <string>

#include "cache/block_cache.h"
#include "common/env.h"
#include "common/status.h"
#include "fs/filesystem.h"
#include "hub/hub_client.h"
#include "hub/repo_ref.h"
#include "net/curl_transport.h"
#include "net/quota_gate.h"
#include "net/range_fetcher.h"
#include "net/retrying_transport.h"
#include "reader/block_reader.h"
#include "reader/shared_blocks.h"
#include "shared/memcached/memcached_store.h"
#include "stack/config.h"
#include "stack/lazy_threads.h"
#include "stack/xet_routing.h"
#include "xet/chunk_cache.h"
#include "xet/xet_source.h"

namespace hubfs {

// The fetch stack every door owns, in construction order (destroyed in reverse). shutdown()
// (also run by the destructor) answers retries waiting out a long Retry-After and fails what is
// on the wire, then drains the reader while everything its tasks reach still exists.
struct Stack {
  // The Env a door builds the stack on (common/env.h): the process's real one (the mains pass
  // it), or a test's. Required; must outlive the stack.
  // Every piece below is handed `env`: the same, except that its executors start their threads
  // on first use (stack/lazy_threads.h). Declared first: it outlives every piece.
  LazyThreadsEnv lazy_env;
  Env* const env;
  std::unique_ptr<QuotaGate> quota;  // consulted by transport: outlives it
  std::shared_ptr<TokenWatcher> tokens;
  std::unique_ptr<CurlTransport> curl;
  std::unique_ptr<RetryingTransport> transport;
  std::unique_ptr<HubClient> hub;
  std::unique_ptr<BlockCache> cache;  // null: cache_size 0
  std::unique_ptr<RangeFetcher> fetcher;
  std::optional<SharedStoreKey> shared_key;      // shared_cache_key_file, read before anything else
  std::unique_ptr<MemcachedStore> shared_tier;   // null: no shared tier, or a private repo
  std::unique_ptr<SharedBlocks> shared_blocks;  // the reader's view of shared_tier
  // Xet-stored files read natively (one repo's: its read token), with the chunk cache beside
  // the blocks; null without a pinned repo, offline, or with HF_HUB_DISABLE_XET.
  std::unique_ptr<xet::ChunkCache> chunk_cache;
  std::unique_ptr<xet::XetReader> xet;
  std::shared_ptr<XetRouter> xet_router;
  std::unique_ptr<BlockReader> reader;

  explicit Stack(Env& e) : lazy_env(e), env(&lazy_env) {}
  Stack(const Stack&) = delete;
  Stack& operator=(const Stack&) = delete;
  ~Stack() { shutdown(); }
  void shutdown();
};

// Transport, quota gate, token, Hub client and range fetcher (no cache, no reader yet).
Status build_stack(const SessionConfig& config, Stack& s);
// The Xet read path for one pinned repo (stack/xet_routing.h): chunk cache, XetReader, router.
// Call after build_reader; fills fs_options.range_source. Does nothing offline or with
// HF_HUB_DISABLE_XET.
void build_xet(const SessionConfig& config, Stack& s, const RepoRef& pinned, FsOptions& fs_options);
// Block cache, shared tier and reader (the fetcher is build_stack's). `repo`: the one repo these blocks belong to
// (decides whether they may go to the shared tier); null for a whole-Hub mount.
Status build_reader(const SessionConfig& config, Stack& s, const PinnedRevision* repo = nullptr,
                    const std::string& repo_label = "");

}  // namespace hubfs
