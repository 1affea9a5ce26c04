#include "xet/plan_cache.h"

#include <algorithm>

namespace hubfs::xet {

PlanCache::PlanCache(Env& env, std::chrono::seconds ttl, size_t max_plans)
    : env_(env), ttl_(ttl), max_plans_(std::max<size_t>(1, max_plans)) {}

std::optional<PlannedRange> PlanCache::find_locked(const MerkleHash& file, hubfs::ByteRange range) {
  auto it = kept_.find(file);
  if (it == kept_.end()) return std::nullopt;
  const auto now = env_.now();
  auto& list = it->second;
  for (auto k = list.begin(); k != list.end();) {
    if (now - k->fetched >= ttl_) {  // its URLs may be about to expire: asked again
      --count_;
      k = list.erase(k);
      continue;
    }
    const hubfs::ByteRange c = k->planned.covered;
    if (c.offset <= range.offset && range.offset + range.length <= c.offset + c.length) return k->planned;
    ++k;
  }
  if (list.empty()) kept_.erase(it);
  return std::nullopt;
}

Result<PlannedRange> PlanCache::get(const MerkleHash& file, hubfs::ByteRange range, const Deadline& deadline,
                                    bool fresh, const Ask& ask) {
  if (fresh) forget(file);
  const std::string key = file.hex() + ":" + std::to_string(range.offset) + "+" + std::to_string(range.length);
  auto ticket = flights_.join(key, [&]() -> std::optional<Result<PlannedRange>> {
    std::lock_guard<std::mutex> lock(mu_);
    if (auto p = find_locked(file, range)) return Result<PlannedRange>(*p);
    return std::nullopt;
  });
  if (ticket.stored) return *flights_.wait(ticket.flight, deadline);
  if (!ticket.leader) {
    ++joined_;
    auto got = flights_.wait(ticket.flight, deadline);
    if (!got) return Timeout("waiting for a Xet reconstruction of " + file.hex() + ": no answer before the read's deadline");
    return *got;
  }
  ++requests_;
  int version = 2;
  auto plan = ask(file, range, deadline, &version);
  Result<PlannedRange> answer = plan.ok() ? Result<PlannedRange>(PlannedRange{*plan, version, range})
                                           : Result<PlannedRange>(plan.status());
  if (plan.ok()) {
    const PlannedRange& p = *answer;
    std::lock_guard<std::mutex> lock(mu_);
    if (count_ >= max_plans_) {  // rare; plans are cheap to ask again
      kept_.clear();
      count_ = 0;
    }
    kept_[file].push_back(Kept{p, env_.now()});
    ++count_;
  }
  flights_.complete(key, answer);
  return answer;
}

void PlanCache::forget(const MerkleHash& file) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = kept_.find(file);
  if (it == kept_.end()) return;
  count_ -= it->second.size();
  kept_.erase(it);
}

size_t PlanCache::size() const {
  std::lock_guard<std::mutex> lock(mu_);
  return count_;
}

}  // namespace hubfs::xet
