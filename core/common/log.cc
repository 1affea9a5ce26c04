#include "common/log.h"

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <mutex>

#include <pthread.h>
#include <unistd.h>

namespace hubfs {

namespace {
std::atomic<int> g_level{static_cast<int>(LogLevel::kInfo)};
std::atomic<std::FILE*> g_file{nullptr};
std::atomic<bool> g_json{false};
std::mutex g_mu;
// Held across a fork, so a child forked while another thread logs can log (its copy is free).
[[maybe_unused]] const int g_fork_handlers = pthread_atfork([] { g_mu.lock(); }, [] { g_mu.unlock(); }, [] { g_mu.unlock(); });
const char* name(LogLevel l) {
  switch (l) {
    case LogLevel::kDebug: return "debug";
    case LogLevel::kInfo: return "info";
    case LogLevel::kWarning: return "warning";
    case LogLevel::kError: return "error";
  }
  return "?";
}
// A JSON string's contents: quotes, backslashes and control characters escaped (bytes >= 0x80
// pass through: the messages are UTF-8 or ASCII).
std::string json_escaped(const std::string& s) {
  std::string out;
  out.reserve(s.size() + 8);
  for (unsigned char c : s) {
    if (c == '"' || c == '\\') {
      out += '\\';
      out += static_cast<char>(c);
    } else if (c == '\n') {
      out += "\\n";
    } else if (c == '\t') {
      out += "\\t";
    } else if (c < 0x20) {
      char buf[8];
      std::snprintf(buf, sizeof buf, "\\u%04x", c);
      out += buf;
    } else {
      out += static_cast<char>(c);
    }
  }
  return out;
}
}  // namespace

void set_log_format(LogFormat format) { g_json = format == LogFormat::kJson; }

void set_log_level(LogLevel level) { g_level = static_cast<int>(level); }
bool log_enabled(LogLevel level) { return static_cast<int>(level) >= g_level.load(std::memory_order_relaxed); }

bool set_log_level_from_env() {
  const char* v = std::getenv("HUBFS_LOG_LEVEL");
  if (!v || !*v) return true;
  for (LogLevel l : {LogLevel::kDebug, LogLevel::kInfo, LogLevel::kWarning, LogLevel::kError}) {
    if (std::strcmp(v, name(l)) == 0) {
      set_log_level(l);
      return true;
    }
  }
  return false;
}
void set_log_file(std::FILE* file) { g_file = file; }

void log_line(LogLevel level, const std::string& message) {
  if (static_cast<int>(level) < g_level.load()) return;
  std::FILE* out = g_file.load();
  if (!out) out = stderr;
  // Milliseconds: the debug lines of one read are tens of milliseconds apart.
  const auto now = std::chrono::system_clock::now();
  const auto t = std::chrono::system_clock::to_time_t(now);
  const auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(now.time_since_epoch()).count() % 1000;
  std::tm tm{};
  gmtime_r(&t, &tm);
  char stamp[48];
  const size_t n = std::strftime(stamp, sizeof stamp, "%Y-%m-%dT%H:%M:%S", &tm);
  std::snprintf(stamp + n, sizeof stamp - n, ".%03dZ", static_cast<int>(ms));
  std::lock_guard<std::mutex> lock(g_mu);
  if (g_json.load()) {
    std::fprintf(out, "{\"time\":\"%s\",\"level\":\"%s\",\"program\":\"hubfs\",\"pid\":%d,\"message\":\"%s\"}\n", stamp,
                 name(level), static_cast<int>(getpid()), json_escaped(message).c_str());
  } else {
    std::fprintf(out, "%s hubfs %s: %s\n", stamp, name(level), message.c_str());
  }
  std::fflush(out);
}

}  // namespace hubfs
