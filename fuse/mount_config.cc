#include "mount.h"

#include <stdlib.h>

#include <cctype>
#include <cmath>

#include "hub/environment.h"

namespace hubfs {
namespace {

std::string env_or(const char* name, const std::string& fallback) {
  const char* v = getenv(name);
  return v && *v ? std::string(v) : fallback;
}

}  // namespace

std::string default_endpoint() { return find_endpoint(); }

Status apply_environment_timeouts(MountConfig& config) {
  auto env = env_timeouts();
  if (!env.ok()) return env.status();
  if (!config.metadata_timeout_s && env->etag) config.metadata_timeout_s = static_cast<int>(env->etag->count());
  if (!config.stall_timeout_s && env->download) config.stall_timeout_s = static_cast<int>(env->download->count());
  return Status::Ok();
}

std::string default_cache_dir() {
  if (const char* d = getenv("HUBFS_CACHE_DIR"); d && *d) return d;
  if (const char* x = getenv("XDG_CACHE_HOME"); x && *x) return std::string(x) + "/hubfs";
  return env_or("HOME", "/root") + "/.cache/hubfs";
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
