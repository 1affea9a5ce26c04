#include "cache/shared_tier.h"

#include <algorithm>
#include <cstring>

#include "cache/crc32c.h"

namespace hubfs {

std::string SharedBlockKey::str() const {
  // "v1" names the envelope format: a future format gets new keys rather than misreading old
  // values.
  return "hubfs:v1:" + content_id + ":" + std::to_string(block_size) + ":" + std::to_string(index);
}

namespace shared_envelope {
namespace {

constexpr char kMagic[8] = {'H', 'U', 'B', 'F', 'S', 'S', 'B', 1};
constexpr size_t kFixed = 8 + 8 + 4 + 4 + 2;

template <typename T>
void put_le(std::string& out, T v) {
  for (size_t i = 0; i < sizeof(T); ++i) out.push_back(static_cast<char>((static_cast<uint64_t>(v) >> (8 * i)) & 0xff));
}

template <typename T>
T get_le(const char* p) {
  uint64_t v = 0;
  for (size_t i = 0; i < sizeof(T); ++i) v |= uint64_t(static_cast<unsigned char>(p[i])) << (8 * i);
  return static_cast<T>(v);
}

}  // namespace

size_t size(const std::string& key, size_t block_length) { return kFixed + key.size() + block_length; }

std::string wrap(const std::string& key, std::string_view block) {
  std::string out;
  out.reserve(size(key, block.size()));
  out.append(kMagic, sizeof(kMagic));
  put_le<uint64_t>(out, block.size());
  put_le<uint32_t>(out, crc32c::value(block));
  put_le<uint32_t>(out, crc32c::value(key));
  put_le<uint16_t>(out, static_cast<uint16_t>(key.size()));
  out.append(key);
  out.append(block);
  return out;
}

std::optional<std::string_view> unwrap(const std::string& key, size_t block_length, std::string_view value) {
  if (key.size() > UINT16_MAX || value.size() != size(key, block_length)) return std::nullopt;
  const char* p = value.data();
  if (std::memcmp(p, kMagic, sizeof(kMagic)) != 0) return std::nullopt;
  if (get_le<uint64_t>(p + 8) != block_length) return std::nullopt;
  const uint32_t block_crc = get_le<uint32_t>(p + 16);
  if (get_le<uint32_t>(p + 20) != crc32c::value(key)) return std::nullopt;
  if (get_le<uint16_t>(p + 24) != key.size()) return std::nullopt;
  if (value.substr(kFixed, key.size()) != key) return std::nullopt;
  std::string_view block = value.substr(kFixed + key.size());
  if (crc32c::value(block) != block_crc) return std::nullopt;
  return block;
}

}  // namespace shared_envelope

CircuitBreaker::CircuitBreaker(Options options, Clock clock)
    : options_(options), clock_(std::move(clock)), current_open_for_(options.open_for) {}

std::chrono::steady_clock::time_point CircuitBreaker::now() const {
  return clock_ ? clock_() : std::chrono::steady_clock::now();
}

bool CircuitBreaker::allow() {
  std::lock_guard<std::mutex> lock(mu_);
  if (!is_open_) return true;
  if (probing_ || now() < reopen_at_) return false;
  probing_ = true;  // half-open: this caller is the probe
  return true;
}

void CircuitBreaker::success() {
  std::lock_guard<std::mutex> lock(mu_);
  failures_ = 0;
  is_open_ = false;
  probing_ = false;
  current_open_for_ = options_.open_for;
}

void CircuitBreaker::failure() {
  std::lock_guard<std::mutex> lock(mu_);
  if (is_open_) {
    // A failed probe (or a late failure of a call let through before the breaker opened):
    // stay open, longer each time the probe fails.
    if (probing_) {
      probing_ = false;
      current_open_for_ = std::min(current_open_for_ * 2, options_.max_open_for);
      reopen_at_ = now() + current_open_for_;
    }
    return;
  }
  if (++failures_ >= std::max(1, options_.failures_to_open)) {
    is_open_ = true;
    probing_ = false;
    reopen_at_ = now() + current_open_for_;
  }
}

bool CircuitBreaker::open() const {
  std::lock_guard<std::mutex> lock(mu_);
  return is_open_;
}

}  // namespace hubfs
