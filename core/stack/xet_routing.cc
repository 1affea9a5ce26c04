#include "stack/xet_routing.h"

#include <optional>

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

// The one head read of a file (XetRouter::read_head_through_bridge): the bridge's answer and
// Xet's, asked at once. The read takes the first good one; the file's Xet verdict stands for the
// bridge's bytes only once Xet's equal them.
struct HeadRead {
  std::mutex mu;
  RangeSource::Callback done;  // empty once called
  std::optional<Result<std::string>> bridge, xet;
  // What checks Xet's answer: kPlain when the Xet read itself fell back to the bridge (a service
  // error), whose bytes then confirm nothing and are handed on as the bridge's.
  Provenance xet_provenance = Provenance::kFileHashed;
  std::atomic<bool> served_from_bridge{false};
  std::atomic<bool> confirmed{false};
};

// Bytes [base, ...) of another buffer, as a buffer of their own: the rest of a range.
class OffsetBuffer : public RangeBuffer {
 public:
  OffsetBuffer(std::shared_ptr<RangeBuffer> to, uint64_t base) : to_(std::move(to)), base_(base) {}
  void write(uint64_t offset, const char* data, size_t n) override { to_->write(base_ + offset, data, n); }
  void read(uint64_t offset, char* out, size_t n) const override { to_->read(base_ + offset, out, n); }

 private:
  const std::shared_ptr<RangeBuffer> to_;
  const uint64_t base_;
};

class XetRouter::FileSource : public RangeSource {
 public:
  static void from_bridge(XetRouter& r, const Locator& locate, uint64_t file_size, ByteRange range, Callback done,
                          const Deadline& deadline) {
    r.bridge_.fetch_async(locate, file_size, range, with_provenance(std::move(done), Provenance::kPlain), deadline);
  }

  FileSource(std::shared_ptr<XetRouter> router, xet::MerkleHash hash, Locator locate, std::string block_key,
             uint64_t head, std::shared_ptr<PrefetchedHead> prefetched)
      : router_(std::move(router)), hash_(hash), locate_(std::move(locate)), block_key_(std::move(block_key)),
        head_(head), prefetched_(std::move(prefetched)),
        head_read_(head != 0 ? std::make_shared<HeadRead>() : nullptr) {}

  void fetch_async(uint64_t file_size, ByteRange range, Callback done, Deadline deadline) override {
    XetRouter* r = router_.get();
    if (r->bridge_now()) return from_bridge(*r, locate_, file_size, range, std::move(done), deadline);
    if (range.length != 0 && range.offset + range.length <= head_ && !head_taken_.exchange(true))
      return head_read(file_size, range, std::move(done), deadline);
    from_xet(file_size, range, std::move(done), deadline);
  }

  // As fetch_async, into `into`: Xet's reads report their bytes as they are decoded. A head read
  // goes as fetch_async does (the default: a string, copied in). After a Xet failure the bridge
  // brings only what Xet did not report ready, into the same buffer past it: what was reported
  // may be served already, and is never written again.
  void fetch_into_async(uint64_t file_size, ByteRange range, std::shared_ptr<RangeBuffer> into, Progress progress,
                        DoneInto done, Deadline deadline) override {
    XetRouter* r = router_.get();
    if (r->bridge_now()) {
      r->bridge_.fetch_into_async(
          locate_, file_size, range, std::move(into), [done = std::move(done)](Status s) { done(s, Provenance::kPlain); },
          deadline);
      return;
    }
    if (range.length != 0 && range.offset + range.length <= head_ && !head_taken_.load())
      return RangeSource::fetch_into_async(file_size, range, std::move(into), nullptr, std::move(done), deadline);
    auto ready = std::make_shared<std::atomic<uint64_t>>(0);
    router_->xet_.fetch_into_async(
        hash_, file_size, range, into,
        [ready, progress = std::move(progress)](uint64_t n) {
          ready->store(n);
          if (progress) progress(n);
        },
        [router = router_, locate = locate_, file_size, range, into, ready, done = std::move(done),
         deadline](Status s) mutable {
          if (s.ok() || !is_storage_service_error(s) || router->stopping_.load()) {
            done(s, Provenance::kFileHashed);
            return;
          }
          router->note_failure(s);
          const uint64_t have = ready->load();
          if (have >= range.length) {  // every byte was in before the failure (past the range's end)
            done(Status::Ok(), Provenance::kFileHashed);
            return;
          }
          router->bridge_.fetch_into_async(
              locate, file_size, ByteRange{range.offset + have, range.length - have},
              std::make_shared<OffsetBuffer>(into, have),
              [done = std::move(done)](Status s) { done(s, Provenance::kPlain); }, deadline);
        },
        deadline, block_key_);
  }

  // Over the bytes Xet served: the bridge's are the reader's to hash. A head the bridge served
  // counts as Xet's once Xet's own bytes for it were the same.
  FileVerdict file_verdict() override {
    const FileVerdict v = router_->xet_.file_verdict(hash_);
    if (v == FileVerdict::kMatch && head_read_ && head_read_->served_from_bridge.load() &&
        !head_read_->confirmed.load())
      return FileVerdict::kUnknown;
    return v;
  }

 private:
  void from_xet(uint64_t file_size, ByteRange range, Callback done, const Deadline& deadline) {
    router_->xet_.fetch_async(
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

  // Both at once: the bridge's range (its location is known: one round trip) and Xet's (plan,
  // then range, or the bridge again after a service error, as any Xet read).
  void head_read(uint64_t file_size, ByteRange range, Callback done, const Deadline& deadline) {
    const std::shared_ptr<HeadRead>& h = head_read_;
    {
      std::lock_guard<std::mutex> lock(h->mu);
      h->done = std::move(done);
    }
    router_->head_reads_.fetch_add(1);
    if (prefetched_ && range.offset + range.length <= prefetched_->length()) {
      prefetched_->then([h, router = router_, range](const Result<std::string>& head) {
        auto got = std::make_shared<Result<std::string>>(
            head.ok() ? Result<std::string>(head->substr(range.offset, range.length)) : Result<std::string>(head.status()));
        auto hand_over = [h, router, got] { settle(*h, *router, got.get(), nullptr); };
        if (!router->heads_executor_->post(hand_over)) hand_over();  // drained: the shutdown's thread
      });
    } else {
      router_->bridge_.fetch_async(
          locate_, file_size, range,
          [h, router = router_](Result<std::string> got) { settle(*h, *router, &got, nullptr); }, deadline);
    }
    from_xet(file_size, range,
             [h, router = router_](Result<std::string> got, Provenance provenance) {
               settle(*h, *router, nullptr, &got, provenance);
             },
             deadline);
  }

  // One of the two answers is in (the other pointer is null).
  static void settle(HeadRead& h, XetRouter& router, Result<std::string>* bridge, Result<std::string>* xet,
                     Provenance xet_provenance = Provenance::kFileHashed) {
    Callback done;
    Result<std::string> give = Unavailable("not answered");
    Provenance given = Provenance::kFileHashed;
    {
      std::lock_guard<std::mutex> lock(h.mu);
      if (bridge) h.bridge = std::move(*bridge);
      if (xet) {
        h.xet = std::move(*xet);
        h.xet_provenance = xet_provenance;
      }
      // The first good answer is the read's: the bridge's (kept, to compare Xet's with), or
      // Xet's (nothing to confirm then). Both failed: Xet's error.
      if (h.done && h.bridge && h.bridge->ok()) {
        give = **h.bridge;
        h.served_from_bridge.store(true);
        done = std::move(h.done);
      } else if (h.done && h.xet && (h.xet->ok() || h.bridge)) {
        give = std::move(*h.xet);
        given = h.xet_provenance;
        h.xet.reset();
        done = std::move(h.done);
      }
      // Served from the bridge, Xet's answer in: only Xet's own bytes (not a fallback's, not an
      // error) can confirm it; either way both copies go.
      if (h.served_from_bridge.load() && h.xet) {
        if (h.xet->ok() && h.xet_provenance == Provenance::kFileHashed) {
          if (**h.xet == **h.bridge) {
            h.confirmed.store(true);
            router.heads_confirmed_.fetch_add(1);
            log_debug("the head of an hf:// file: Xet's bytes equal the bridge's, so its Xet check stands for them");
          } else {
            log_warning("the bridge and the Xet storage service served different bytes for the head of a file; "
                        "the reader hashes the whole file itself");
          }
        }
        h.bridge.reset();
        h.xet.reset();
      }
    }
    if (done) done(std::move(give), given);
  }

  std::shared_ptr<XetRouter> router_;
  xet::MerkleHash hash_;
  Locator locate_;
  std::string block_key_;
  const uint64_t head_;
  const std::shared_ptr<PrefetchedHead> prefetched_;  // or null
  std::atomic<bool> head_taken_{false};
  const std::shared_ptr<HeadRead> head_read_;  // with a head: its one read
};

XetRouter::XetRouter(xet::XetReader& xet, RangeFetcher& bridge, std::chrono::seconds fallback_for)
    : xet_(xet), bridge_(bridge), fallback_for_(fallback_for) {}

std::shared_ptr<RangeSource> XetRouter::source_for(const TreeEntry& entry, const Locator& locate,
                                                   std::string block_key) {
  if (entry.is_dir || !entry.xet_hash) return nullptr;
  auto hash = xet::MerkleHash::from_hex(*entry.xet_hash);
  if (!hash) return nullptr;
  Head head;
  {
    std::lock_guard<std::mutex> lock(heads_mu_);
    for (const Head& h : heads_)
      if (h.hash == *hash) head = h;
  }
  return std::make_shared<FileSource>(shared_from_this(), *hash, locate, std::move(block_key), head.bytes,
                                      std::move(head.prefetched));
}

void XetRouter::read_head_through_bridge(const std::string& xet_hash, uint64_t head,
                                         std::shared_ptr<PrefetchedHead> prefetched) {
  auto hash = xet::MerkleHash::from_hex(xet_hash);
  if (!hash || head == 0) return;
  std::lock_guard<std::mutex> lock(heads_mu_);
  if (prefetched && !heads_executor_) heads_executor_ = bridge_.env().new_executor(1);
  heads_.push_back(Head{*hash, head, std::move(prefetched)});
}

void XetRouter::shutdown() {
  stopping_.store(true);
  Executor* heads = nullptr;
  {
    std::lock_guard<std::mutex> lock(heads_mu_);
    heads = heads_executor_.get();  // never replaced once made
  }
  if (heads) heads->drain();
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
