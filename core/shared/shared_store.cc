#include "shared/shared_store.h"

#include <fcntl.h>
#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

namespace hubfs {
namespace {

constexpr size_t kMacBytes = 32;  // HMAC-SHA-256

std::string how_to_make_one(const std::string& path) {
  return "make one with `head -c 32 /dev/urandom > " + path + "; chmod 600 " + path +
         "` and copy it to every machine that mounts with this shared cache";
}

}  // namespace

Result<SharedStoreKey> SharedStoreKey::from_bytes(std::string secret) {
  if (secret.size() < kMinBytes || secret.size() > kMaxBytes)
    return InvalidArgument("a shared cache key must hold " + std::to_string(kMinBytes) + " to " +
                           std::to_string(kMaxBytes) + " bytes, not " + std::to_string(secret.size()));
  SharedStoreKey k;
  k.secret_ = std::move(secret);
  static const char kLabel[] = "hubfs shared tier key id";
  unsigned char mac[EVP_MAX_MD_SIZE];
  unsigned int n = 0;
  HMAC(EVP_sha256(), k.secret_.data(), static_cast<int>(k.secret_.size()),
       reinterpret_cast<const unsigned char*>(kLabel), sizeof(kLabel) - 1, mac, &n);
  static const char kHex[] = "0123456789abcdef";
  for (int i = 0; i < 4; ++i) {
    k.id_ += kHex[mac[i] >> 4];
    k.id_ += kHex[mac[i] & 15];
  }
  return k;
}

Result<SharedStoreKey> SharedStoreKey::from_file(const std::string& path) {
  const std::string what = "--shared-cache-key-file " + path;
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
  if (fd < 0) {
    const int e = errno;
    return Status(e == EACCES ? Code::kPermissionDenied : Code::kNotFound,
                  what + ": cannot open it (" + std::strerror(e) + "); " + how_to_make_one(path));
  }
  struct stat st{};
  std::string secret;
  Status bad;
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    bad = InvalidArgument(what + ": not a regular file; " + how_to_make_one(path));
  } else if ((st.st_mode & (S_IROTH | S_IWOTH)) != 0) {
    // Whoever can read the key can plant blocks every machine of the cluster accepts.
    bad = PermissionDenied(what + ": other users can read or write it; `chmod 600 " + path +
                           "` (whoever holds the key can plant blocks every mount accepts)");
  } else if (st.st_size > static_cast<off_t>(kMaxBytes)) {
    bad = InvalidArgument(what + ": " + std::to_string(st.st_size) + " bytes is not a key (at most " +
                          std::to_string(kMaxBytes) + "); " + how_to_make_one(path));
  } else {
    secret.resize(kMaxBytes + 1);
    size_t got = 0;
    for (;;) {
      const ssize_t n = ::read(fd, secret.data() + got, secret.size() - got);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) {
        if (n < 0) bad = IoError(what + ": " + std::strerror(errno));
        break;
      }
      got += static_cast<size_t>(n);
      if (got == secret.size()) break;
    }
    secret.resize(got);
  }
  ::close(fd);
  if (!bad.ok()) return bad;
  if (secret.size() < kMinBytes || secret.size() > kMaxBytes)
    return InvalidArgument(what + ": " + std::to_string(secret.size()) + " bytes is too " +
                           (secret.size() < kMinBytes ? "short" : "long") + " for a key (" +
                           std::to_string(kMinBytes) + " to " + std::to_string(kMaxBytes) + "); " +
                           how_to_make_one(path));
  return from_bytes(std::move(secret));
}

std::string SharedBlockKey::str() const {
  // "v2" names the envelope format (v1 had a CRC where v2 has a MAC): a new format gets new keys
  // rather than misreading old values. The key id keeps clusters with different keys apart.
  return "hubfs:v2:" + key_id + ":" + content_id + ":" + std::to_string(block_size) + ":" + std::to_string(index);
}

namespace shared_envelope {
namespace {

constexpr char kMagic[8] = {'H', 'U', 'B', 'F', 'S', 'S', 'B', 2};
constexpr size_t kFixed = 8 + 8 + 2;

// HMAC-SHA-256 of `data` under the key's secret.
void mac_of(const SharedStoreKey& secret, std::string_view data, unsigned char out[kMacBytes]) {
  unsigned int n = 0;
  HMAC(EVP_sha256(), secret.secret().data(), static_cast<int>(secret.secret().size()),
       reinterpret_cast<const unsigned char*>(data.data()), data.size(), out, &n);
}

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

size_t size(const std::string& key, size_t block_length) {
  return kFixed + key.size() + block_length + kMacBytes;
}

std::string wrap(const SharedStoreKey& secret, const std::string& key, std::string_view block) {
  std::string out;
  out.reserve(size(key, block.size()));
  out.append(kMagic, sizeof(kMagic));
  put_le<uint64_t>(out, block.size());
  put_le<uint16_t>(out, static_cast<uint16_t>(key.size()));
  out.append(key);
  out.append(block);
  unsigned char mac[kMacBytes];
  mac_of(secret, out, mac);
  out.append(reinterpret_cast<const char*>(mac), kMacBytes);
  return out;
}

std::optional<std::string_view> unwrap(const SharedStoreKey& secret, const std::string& key, size_t block_length,
                                       std::string_view value) {
  if (key.size() > UINT16_MAX || value.size() != size(key, block_length)) return std::nullopt;
  const char* p = value.data();
  if (std::memcmp(p, kMagic, sizeof(kMagic)) != 0) return std::nullopt;
  if (get_le<uint64_t>(p + 8) != block_length) return std::nullopt;
  if (get_le<uint16_t>(p + 16) != key.size()) return std::nullopt;
  if (value.substr(kFixed, key.size()) != key) return std::nullopt;
  const std::string_view covered = value.substr(0, value.size() - kMacBytes);
  unsigned char mac[kMacBytes];
  mac_of(secret, covered, mac);
  if (CRYPTO_memcmp(mac, value.data() + covered.size(), kMacBytes) != 0) return std::nullopt;
  return value.substr(kFixed + key.size(), block_length);
}

}  // namespace shared_envelope

CircuitBreaker::CircuitBreaker(Options options, Env& env)
    : options_(options), env_(env), current_open_for_(options.open_for) {}

MonotonicClock::time_point CircuitBreaker::now() const {
  return env_.now();
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
