#include "fs/invalidation_sink.h"

namespace hubfs {

void InvalidationSink::deliver(const ViewChange& first, const ViewChange& second) {
  std::lock_guard<std::mutex> lock(mu_);
  if (!callback_) return;
  if (!first.empty()) callback_(first);
  if (!second.empty()) callback_(second);
}

void InvalidationSink::close() {
  std::lock_guard<std::mutex> lock(mu_);  // waits for a delivery under way
  callback_ = nullptr;
}

}  // namespace hubfs
