#include "common/log.h"

#include <atomic>
#include <chrono>
#include <ctime>
#include <mutex>

namespace hubfs {

namespace {
std::atomic<int> g_level{static_cast<int>(LogLevel::kInfo)};
std::atomic<std::FILE*> g_file{nullptr};
std::mutex g_mu;
const char* name(LogLevel l) {
  switch (l) {
    case LogLevel::kDebug: return "debug";
    case LogLevel::kInfo: return "info";
    case LogLevel::kWarning: return "warning";
    case LogLevel::kError: return "error";
  }
  return "?";
}
}  // namespace

void set_log_level(LogLevel level) { g_level = static_cast<int>(level); }
void set_log_file(std::FILE* file) { g_file = file; }

void log_line(LogLevel level, const std::string& message) {
  if (static_cast<int>(level) < g_level.load()) return;
  std::FILE* out = g_file.load();
  if (!out) out = stderr;
  auto now = std::chrono::system_clock::to_time_t(std::chrono::system_clock::now());
  std::tm tm{};
  gmtime_r(&now, &tm);
  char stamp[32];
  std::strftime(stamp, sizeof stamp, "%Y-%m-%dT%H:%M:%SZ", &tm);
  std::lock_guard<std::mutex> lock(g_mu);
  std::fprintf(out, "%s hubfs %s: %s\n", stamp, name(level), message.c_str());
  std::fflush(out);
}

}  // namespace hubfs
