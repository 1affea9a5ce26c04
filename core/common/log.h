// A minimal process-wide log: timestamped lines to stderr (or wherever the daemon points it).
// Never pass a token to it.
#pragma once

#include <cstdio>
#include <string>

namespace hubfs {

enum class LogLevel { kDebug = 0, kInfo = 1, kWarning = 2, kError = 3 };

void set_log_level(LogLevel level);
// HUBFS_LOG_LEVEL=debug|info|warning|error, if set and valid (else the level stays); false when
// set to anything else.
bool set_log_level_from_env();
// Whether a line at `level` would be written: check before building an expensive debug line.
bool log_enabled(LogLevel level);
void set_log_file(std::FILE* file);  // not owned; default stderr
// kJson (`--log-format json`): one JSON object per line, for log shippers, with the stable fields
// "time" (UTC, ISO 8601 with milliseconds), "level", "program" ("hubfs"), "pid" and "message".
enum class LogFormat { kText, kJson };
void set_log_format(LogFormat format);
void log_line(LogLevel level, const std::string& message);

inline void log_debug(const std::string& m) { log_line(LogLevel::kDebug, m); }
inline void log_info(const std::string& m) { log_line(LogLevel::kInfo, m); }
inline void log_warning(const std::string& m) { log_line(LogLevel::kWarning, m); }
inline void log_error(const std::string& m) { log_line(LogLevel::kError, m); }

}  // namespace hubfs
