// Sizes and shapes as h5chunk's messages write them ("12.6 MB", "(4, 512, 512)"). Pure
// functions: thread-safe.
#pragma once

#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

namespace h5chunk {

inline std::string human_bytes(uint64_t n) {
  const char* units[] = {"B", "KB", "MB", "GB", "TB", "PB", "EB"};
  double v = static_cast<double>(n);
  int u = 0;
  while (v >= 1000 && u < 6) {
    v /= 1000;
    ++u;
  }
  char buf[32];
  std::snprintf(buf, sizeof buf, u ? "%.1f %s" : "%.0f %s", v, units[u]);
  return buf;
}

inline std::string shape_text(const std::vector<uint64_t>& shape) {
  std::string s = "(";
  for (size_t i = 0; i < shape.size(); ++i) s += (i ? ", " : "") + std::to_string(shape[i]);
  return s + (shape.size() == 1 ? ",)" : ")");
}

}  // namespace h5chunk
