// `hubfs mount`'s options, declared once: one table gives each its command-line names, the name
// of its value, its help (what --help prints, and what the man page and the bash completion are
// generated from: tools/cli_docs.h reads them back from CLI11) and the one setter that both the
// command line (`--cache-dir D`) and `-o cache_dir=D` (fstab, `mount -t fuse.hubfs`, the mount
// helper form) go through, so no option takes a value one way that the other refuses. The -o
// key is the option's long name without its dashes, '-' as '_'.
#pragma once

#include <CLI/CLI.hpp>

#include <optional>
#include <string>
#include <vector>

#include "mount.h"

namespace hubfs {

// A mount's options as given; finish_and_mount (hubfs_main.cc) fills the defaults.
struct MountArgs {
  MountConfig config;
  std::string cache_size = "10G";  // parse_size'd last, so a bad one is reported with the others
};

// The table's options on `mount` (the positionals and -o are the caller's). After parsing,
// apply() runs the setter of each option given.
class MountCli {
 public:
  explicit MountCli(CLI::App* mount);
  // "" or what is wrong, naming the option as given.
  std::string apply(MountArgs& args) const;

 private:
  struct Given {
    const CLI::Option* option = nullptr;
    size_t row = 0;
    std::string value;  // what CLI11 stored (a flag's: unused)
  };
  std::vector<Given> given_;  // one per table row, in table order; values kept stable by reserve
};

// Every -o value, split at commas: a table key (KEY or KEY=VALUE) goes to its setter; mount(8)'s
// and systemd's own options (_netdev, nofail, x-*, ...) and rw are dropped (the mount is always
// read-only); anything else is a FUSE option (allow_other, nonempty, ...). "" or what is wrong.
std::string apply_o_options(const std::vector<std::string>& groups, MountArgs& args);

// "endpoint, cache_dir, ...; foreground, debug, ... take no value": the -o keys, for --help.
std::string o_keys_text();

}  // namespace hubfs
