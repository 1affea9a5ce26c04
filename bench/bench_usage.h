// The positional arguments of a bench program (a count or a path): `-h`/`--help` prints its
// usage and exits 0; any other argument starting with '-' is an option it does not have, so it
// prints the usage to stderr and exits 2, rather than reading "--help" as 0 MiB or creating a
// directory of that name.
#pragma once

#include <cstdio>
#include <cstdlib>
#include <cstring>

namespace hubfs::bench {

inline void positional_args_only(int argc, char** argv, const char* usage) {
  for (int i = 1; i < argc; ++i) {
    if (argv[i][0] != '-' || argv[i][1] == '\0') continue;
    const bool help = std::strcmp(argv[i], "-h") == 0 || std::strcmp(argv[i], "--help") == 0;
    if (!help) std::fprintf(stderr, "%s: unknown option %s\n", argv[0], argv[i]);
    std::fprintf(help ? stdout : stderr, "usage: %s %s\n", argv[0], usage);
    std::exit(help ? 0 : 2);
  }
}

}  // namespace hubfs::bench
