// h5chunk's command line: the CLI11 tables and the parse, in h5chunk_args.cc alone. That file
// compiles plain at -O0 in every build (tools/CMakeLists.txt): CLI11 is header-only, and its
// tables cost the most of any code here to compile, more so sanitized or optimized
// (docs/benchmarks.md, "Session 30: suite41" and "Session 31: suite41"). The option parsing is
// third-party code run once per process, unsanitized as libcurl and libhdf5 are; the values it
// fills are checked where the program uses them.
#pragma once

#include <sys/types.h>

#include <optional>
#include <string>

namespace h5chunk_cli {

// Where hf:// files come from (the same options and defaults as `hubfs cat`).
struct HubOptions {
  std::optional<std::string> revision;
  std::string endpoint, cache_dir;
};

enum class Command { kRead, kInfo, kBench, kHelper };

// A command line as parsed: the command and its arguments (those it does not take keep their
// defaults).
struct Args {
  Command command = Command::kRead;
  std::string file, dataset, selection, out, route = "auto";
  unsigned threads = 0;
  int repeat = 5;
  bool as_json = false;
  pid_t helper_parent = 0;  // h5dread-helper's --parent
  HubOptions hub;
};

// Parses argv into `args`. -1: run the command; otherwise the process's exit code, with what
// the command line asked for printed (--help, --help-man, --help-completion) or what is wrong
// with it (CLI11's message).
int parse_args(int argc, char** argv, Args& args);

}  // namespace h5chunk_cli
