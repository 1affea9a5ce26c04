#include "common/counter_file.h"

#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <sstream>

namespace hubfs::counter_file {
namespace {

// The whole file from offset 0 ("" on a read error).
std::string read_fd(int fd) {
  std::string out;
  char buf[4096];
  off_t off = 0;
  for (;;) {
    ssize_t n = ::pread(fd, buf, sizeof buf, off);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return "";
    if (n == 0) return out;
    out.append(buf, static_cast<size_t>(n));
    off += n;
    if (out.size() > (1u << 20)) return "";  // not ours: far larger than any ledger
  }
}

// Strict: every line "name value" with a name of [a-z_] and a decimal value; anything else
// makes the whole file read as zeros (a torn or foreign file is not half-trusted).
Totals parse(const std::string& text) {
  Totals out;
  std::istringstream in(text);
  std::string line;
  while (std::getline(in, line)) {
    if (line.empty()) continue;
    const size_t space = line.find(' ');
    if (space == std::string::npos || space == 0 || space + 1 == line.size()) return {};
    const std::string name = line.substr(0, space), value = line.substr(space + 1);
    for (char c : name)
      if (!(c == '_' || (c >= 'a' && c <= 'z'))) return {};
    if (value.size() > 19) return {};
    uint64_t v = 0;
    for (char c : value) {
      if (c < '0' || c > '9') return {};
      v = v * 10 + static_cast<uint64_t>(c - '0');
    }
    out[name] = v;
  }
  return out;
}

std::string format(const Totals& totals) {
  std::string out;
  for (const auto& [name, value] : totals) out += name + " " + std::to_string(value) + "\n";
  return out;
}

}  // namespace

Totals read(const std::string& path) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return {};
  ::flock(fd, LOCK_SH);  // a reader never sees a writer's half-written file
  Totals out = parse(read_fd(fd));
  ::close(fd);
  return out;
}

Status add(const std::string& path, const Totals& delta) {
  int fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
  if (fd < 0) return IoError("cannot open " + path + ": " + std::strerror(errno));
  int rc;
  while ((rc = ::flock(fd, LOCK_EX)) != 0 && errno == EINTR) {
  }
  if (rc != 0) {
    const int err = errno;
    ::close(fd);
    return IoError("cannot lock " + path + ": " + std::strerror(err));
  }
  Totals totals = parse(read_fd(fd));
  for (const auto& [name, value] : delta) totals[name] += value;
  const std::string text = format(totals);
  bool ok = ::ftruncate(fd, 0) == 0;
  size_t done = 0;
  while (ok && done < text.size()) {
    ssize_t n = ::pwrite(fd, text.data() + done, text.size() - done, static_cast<off_t>(done));
    if (n < 0 && errno == EINTR) continue;
    ok = n > 0;
    if (ok) done += static_cast<size_t>(n);
  }
  const int err = errno;
  ::close(fd);  // also releases the lock
  if (!ok) return IoError("cannot write " + path + ": " + std::strerror(err));
  return Status::Ok();
}

}  // namespace hubfs::counter_file
