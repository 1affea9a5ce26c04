#include "stack/config.h"

#include <fcntl.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cctype>
#include <cerrno>
#include <cmath>
#include <cstring>
#include <fstream>

#include "common/log.h"
#include "hub/environment.h"
#include "net/curl_transport.h"

namespace hubfs {

namespace {

std::string env_or(const char* name, const std::string& fallback) {
  const char* v = getenv(name);
  return v && *v ? std::string(v) : fallback;
}

// Whether `path` opens for reading and is not a directory (libcurl's CAINFO is a file of PEM
// text); errno says why not. A look, not a read, and no iostream: the first std::ifstream of a
// process builds its locale's facets (~0.5 ms), on an hf:// session's way to its pin's request.
bool bundle_opens(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return false;
  struct stat st {};
  const bool is_dir = ::fstat(fd, &st) == 0 && S_ISDIR(st.st_mode);
  ::close(fd);
  if (is_dir) errno = EISDIR;
  return !is_dir;
}

}  // namespace

// The CA certificates TLS connections trust: the ca_bundle option alone, else every bundle the
// environment names (find_ca_bundles: REQUESTS_CA_BUNDLE, CURL_CA_BUNDLE, SSL_CERT_FILE; one is
// passed as a file, several as the union of their PEM text), else libcurl's built-in store. A
// named bundle that cannot be read fails here, naming where it came from, rather than as a TLS
// error later.
Status choose_ca_bundle(const std::string& flag, CurlOptions& options) {
  std::vector<CaBundle> bundles;
  if (!flag.empty()) {
    bundles.push_back(CaBundle{flag, "--ca-bundle"});
  } else {
    bundles = find_ca_bundles();
  }
  // Names the bundle, where it came from and errno's cause, with the fix.
  auto unreadable = [](const CaBundle& b) {
    return InvalidArgument("the CA bundle " + b.path + " (from " + b.source + ") cannot be read (" + strerror(errno) +
                           "); point " + b.source + " at a PEM file of trusted CA certificates, or unset it to "
                           "use the system's");
  };
  std::string pem;
  for (const CaBundle& b : bundles) {
    if (!bundle_opens(b.path)) return unreadable(b);
    // One bundle is passed by its name (libcurl reads it at its first TLS connection, never for
    // plain http): its ~200 KB are read here only to join several.
    if (bundles.size() == 1) break;
    std::ifstream in(b.path, std::ios::binary);
    if (!in.is_open()) return unreadable(b);
    pem.append(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
    if (!pem.empty() && pem.back() != '\n') pem += '\n';
  }
  if (bundles.size() == 1) {
    options.ca_bundle = bundles[0].path;
  } else if (bundles.size() > 1) {
    options.ca_pem = std::move(pem);
    std::string names;
    for (const CaBundle& b : bundles) names += (names.empty() ? "" : ", ") + b.source;
    log_info("trusting the CA certificates of " + names + " together");
  }
  return Status::Ok();
}

std::string default_endpoint() { return find_endpoint(); }

std::string default_cache_dir() {
  if (const char* d = getenv("HUBFS_CACHE_DIR"); d && *d) return d;
  if (const char* x = getenv("XDG_CACHE_HOME"); x && *x) return std::string(x) + "/hubfs";
  return env_or("HOME", "/root") + "/.cache/hubfs";
}

Status apply_environment_timeouts(SessionConfig& config) {
  auto env = env_timeouts();
  if (!env.ok()) return env.status();
  if (!config.metadata_timeout_s && env->etag) config.metadata_timeout_s = static_cast<int>(env->etag->count());
  if (!config.stall_timeout_s && env->download) config.stall_timeout_s = static_cast<int>(env->download->count());
  return Status::Ok();
}

Status check_block_size(uint64_t bytes) {
  if (bytes >= kMinBlockSize && bytes <= kMaxBlockSize && (bytes & (bytes - 1)) == 0) return Status::Ok();
  return InvalidArgument("block size " + std::to_string(bytes) + " is not taken: give a power of two from 64K to 1M "
                         "(65536 to 1048576 bytes), e.g. 256K");
}

Result<uint64_t> parse_size(const std::string& text) {
  if (text.empty()) return InvalidArgument("empty size");
  size_t pos = 0;
  double value = 0;
  try {
    value = std::stod(text, &pos);
  } catch (...) {
    return InvalidArgument("'" + text + "' is not a size (examples: 4096, 512M, 10G)");
  }
  std::string suffix = text.substr(pos);
  if (!suffix.empty() && (suffix.back() == 'B' || suffix.back() == 'b')) suffix.pop_back();
  if (!suffix.empty() && (suffix.back() == 'i')) suffix.pop_back();
  double scale = 1;
  if (suffix.size() > 1) return InvalidArgument("'" + text + "' has an unknown suffix (use K, M, G or T)");
  if (!suffix.empty()) {
    switch (toupper(suffix[0])) {
      case 'K': scale = 1024.0; break;
      case 'M': scale = 1024.0 * 1024; break;
      case 'G': scale = 1024.0 * 1024 * 1024; break;
      case 'T': scale = 1024.0 * 1024 * 1024 * 1024; break;
      default: return InvalidArgument("'" + text + "' has an unknown suffix (use K, M, G or T)");
    }
  }
  if (!(value >= 0) || value * scale > 1.8e19) return InvalidArgument("'" + text + "' is out of range");
  return static_cast<uint64_t>(std::llround(value * scale));
}

}  // namespace hubfs
