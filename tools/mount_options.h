// `hubfs mount`'s options, declared once: one table gives each its command-line names, the name
// of its value, its help (what --help prints, and what the man page and the bash completion are
// generated from: tools/cli_docs.h reads them back from CLI11) and the one setter that both the
// command line (`--cache-dir D`) and `-o cache_dir=D` (fstab, `mount -t fuse.hubfs`, the mount
// helper form) go through, so no option takes a value one way that the other refuses. The -o
// key is the option's long name without its dashes, '-' as '_'. The table is plain data: the
// command line's parse (hubfs_args.cc, the one file that compiles CLI11) reads it to declare the
// options.
#pragma once

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

using MountValue = std::optional<std::string>;  // nullopt: a flag, or -o KEY without '='

// One option. `names` are CLI11's ("-f,--foreground"; "--follow{60}": a flag with an optional
// value, 60 when given bare). `value` names its value in --help; "" makes it a flag. `set` takes
// the value and returns "" or why it is refused (the caller names the option).
struct MountOption {
  const char* names;
  const char* value;
  const char* help;
  std::string (*set)(MountArgs&, const MountValue&);

  bool takes_value() const { return *value || has_default(); }
  bool has_default() const;            // "--follow{60}"
  std::string long_name() const;       // "--follow" (what an error names)
};

// The table, in --help's order.
const std::vector<MountOption>& mount_options();

// Every -o value, split at commas: a table key (KEY or KEY=VALUE) goes to its setter; mount(8)'s
// and systemd's own options (_netdev, nofail, x-*, ...) and rw are dropped (the mount is always
// read-only); anything else is a FUSE option (allow_other, nonempty, ...). "" or what is wrong.
std::string apply_o_options(const std::vector<std::string>& groups, MountArgs& args);

// "endpoint, cache_dir, ...; foreground, debug, ... take no value": the -o keys, for --help.
std::string o_keys_text();

}  // namespace hubfs
