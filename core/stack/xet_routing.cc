#include "stack/xet_routing.h"

#include "common/log.h"

namespace hubfs {

bool is_storage_service_error(const Status& s) {
  switch (s.code()) {
    case Code::kUnavailable:
    case Code::kIo:
    case Code::kPermissionDenied:
    case Code::kNotFound:
    case Code::kUnsupported:
      return true;
    default:
      return false;
  }
}

class XetRouter::FileSource : public RangeSource {
 public:
  static void from_bridge(XetRouter& r, const Locator& locate, uint64_t file_size, ByteRange range, Callback done,
                          const Deadline& deadline) {
    r.bridge_.fetch_async(locate, file_size, range, with_provenance(std::move(done), Provenance::kPlain), deadline);
  }

  FileSource(std::shared_ptr<XetRouter> router, xet::MerkleHash hash, Locator locate, std::string block_key)
      : router_(std::move(router)), hash_(hash), locate_(std::move(locate)), block_key_(std::move(block_key)) {}

  void fetch_async(uint64_t file_size, ByteRange range, Callback done, Deadline deadline) override {
    XetRouter* r = router_.get();
    if (r->bridge_now()) return from_bridge(*r, locate_, file_size, range, std::move(done), deadline);
    r->xet_.fetch_async(
        hash_, file_size, range,
        [router = router_, locate = locate_, file_size, range, done = std::move(done),
         deadline](Result<std::string> got) mutable {
          // A read failed by the stack's own shutdown (the transport refusing or dropping it)
          // says nothing about the storage service: no warning, no bridge for the next minute.
          if (got.ok() || !is_storage_service_error(got.status()) || router->stopping_.load()) {
            done(std::move(got), Provenance::kFileHashed);
            return;
          }
          router->note_failure(got.status());
          from_bridge(*router, locate, file_size, range, std::move(done), deadline);
        },
        deadline, block_key_);
  }

  // Over the bytes Xet served: the bridge's are the reader's to hash.
  FileVerdict file_verdict() override { return router_->xet_.file_verdict(hash_); }

 private:
  std::shared_ptr<XetRouter> router_;
  xet::MerkleHash hash_;
  Locator locate_;
  std::string block_key_;
};

XetRouter::XetRouter(xet::XetReader& xet, RangeFetcher& bridge, std::chrono::seconds fallback_for)
    : xet_(xet), bridge_(bridge), fallback_for_(fallback_for) {}

std::shared_ptr<RangeSource> XetRouter::source_for(const TreeEntry& entry, const Locator& locate,
                                                   std::string block_key) {
  if (entry.is_dir || !entry.xet_hash) return nullptr;
  auto hash = xet::MerkleHash::from_hex(*entry.xet_hash);
  if (!hash) return nullptr;
  return std::make_shared<FileSource>(shared_from_this(), *hash, locate, std::move(block_key));
}

bool XetRouter::bridge_now() const {
  return bridge_.env().now().time_since_epoch().count() < bridge_until_.load();
}

void XetRouter::note_failure(const Status& s) {
  ++fallbacks_;
  bridge_until_.store((bridge_.env().now() + fallback_for_).time_since_epoch().count());
  if (!logged_.exchange(true)) {
    log_warning("the Xet storage service failed (" + s.message() + "); Xet-stored files are read through the Hub's "
                "bridge for the next " + std::to_string(fallback_for_.count()) + " s, then Xet is tried again "
                "(this is logged once)");
  }
}

}  // namespace hubfs
