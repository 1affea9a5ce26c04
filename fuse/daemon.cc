#include "daemon.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <iostream>

#include "common/log.h"

namespace hubfs {
namespace {

void write_all(int fd, const std::string& s) {
  size_t off = 0;
  while (off < s.size()) {
    ssize_t n = write(fd, s.data() + off, s.size() - off);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return;
    off += static_cast<size_t>(n);
  }
}

}  // namespace

int run_daemonized(const std::string& mountpoint, const std::string& log_file, const std::function<Status()>& start,
                   const std::function<int()>& serve) {
  // Background: fork before any thread exists (curl, cache and FUSE threads all start in the
  // child); the parent waits on a pipe for the child's verdict and then for the mount to answer.
  int pipefd[2];
  if (pipe2(pipefd, O_CLOEXEC) != 0) {
    std::cerr << "hubfs: pipe: " << strerror(errno) << "\n";
    return 1;
  }
  pid_t pid = fork();
  if (pid < 0) {
    std::cerr << "hubfs: fork: " << strerror(errno) << "\n";
    return 1;
  }
  if (pid > 0) {
    close(pipefd[1]);
    std::string verdict;
    char buf[4096];
    ssize_t n;
    while ((n = read(pipefd[0], buf, sizeof buf)) != 0) {
      if (n < 0 && errno == EINTR) continue;
      if (n < 0) break;
      verdict.append(buf, static_cast<size_t>(n));
    }
    close(pipefd[0]);
    if (verdict.rfind("OK", 0) != 0) {
      int status = 0;
      waitpid(pid, &status, 0);
      std::cerr << "hubfs: " << (verdict.empty() ? "the mount process died while starting" : verdict.substr(4))
                << "\n";
      return 1;
    }
    // The kernel answers this stat only once the daemon serves requests: when it returns, the
    // mount is usable.
    struct stat st {};
    if (stat(mountpoint.c_str(), &st) != 0) {
      std::cerr << "hubfs: the mount at " << mountpoint << " does not answer: " << strerror(errno) << "\n";
      return 1;
    }
    return 0;
  }

  close(pipefd[0]);
  setsid();
  // In the background the log goes to --log-file or nowhere: never to the user's terminal,
  // which has moved on. Startup errors reach the user through the pipe instead.
  std::FILE* log = nullptr;
  if (!log_file.empty()) log = std::fopen(log_file.c_str(), "a");
  set_log_file(log ? log : std::fopen("/dev/null", "a"));
  int rc = 1;
  Status st = start();
  if (!st.ok()) {
    if (log) log_error(st.message());  // the parent prints it to the user's stderr
    write_all(pipefd[1], "ERR " + st.message());
    close(pipefd[1]);
  } else {
    // Detach from the terminal: stdio to /dev/null (the log file, if any, keeps its own stream).
    int devnull = open("/dev/null", O_RDWR);
    if (devnull >= 0) {
      dup2(devnull, 0);
      dup2(devnull, 1);
      dup2(devnull, 2);
      if (devnull > 2) close(devnull);
    }
    if (chdir("/") != 0) {}
    write_all(pipefd[1], "OK\n");
    close(pipefd[1]);
    rc = serve();
  }
  _exit(rc);
}

}  // namespace hubfs
