// h5chunk's option tables and their parse (h5chunk_args.h says why this file is apart).
#include "h5chunk_args.h"

#include <CLI/CLI.hpp>
#include <cstring>
#include <iostream>

#include "cli_docs.h"

namespace h5chunk_cli {

int parse_args(int argc, char** argv, Args& args) {
  CLI::App app{"h5chunk: fast parallel reads of chunked HDF5 datasets"};
  app.require_subcommand(1);
  std::string& file = args.file;
  std::string& dataset = args.dataset;
  std::string& selection = args.selection;

  auto* read = app.add_subcommand("read", "Read a selection; print one JSON line about it");
  read->add_option("FILE", file, "HDF5 file: local, on a mount, or hf://[datasets/|spaces/]ORG/NAME[@REVISION]/PATH")->required();
  read->add_option("DATASET", dataset, "dataset path, e.g. /data/raw_data")->required();
  read->add_option("SELECTION", selection,
                   "numpy syntax, orthogonal per axis as in h5py: '0:4' '3' '-1' '...,5:9' '::-2' "
                   "'[0,2,5]' '[3,1],:,[2,0,2]' (default: all)");
  read->add_option("-o,--output", args.out, "write the elements as raw C-order bytes in the native dtype");
  read->add_option("--threads", args.threads, "worker threads (default min(16, cores))")->check(CLI::Range(1u, 256u));
  read->add_option("--route", args.route,
                   "auto: the fast path for reads of 1 MiB and more (default); fast: the fast path "
                   "whatever the size, or an error saying why it cannot; h5dread: HDF5's reader")
      ->check(CLI::IsMember({"auto", "fast", "h5dread"}));

  auto* info = app.add_subcommand("info", "Datasets, shapes, dtypes, chunking, filters, fast path");
  info->add_option("FILE", file)->required();
  info->add_option("DATASET", dataset);
  info->add_flag("--json", args.as_json, "one JSON object per dataset");

  auto* bench = app.add_subcommand("bench", "h5chunk vs H5Dread, same run, same output buffer");
  bench->add_option("FILE", file)->required();
  bench->add_option("DATASET", dataset)->required();
  bench->add_option("SELECTION", selection);
  bench->add_option("--threads", args.threads)->check(CLI::Range(1u, 256u));
  bench->add_option("--repeat", args.repeat, "best of R runs each")->check(CLI::Range(1, 1000));

  // Hidden (the empty group): the helper process of h5chunk_helper.h, started by `read` only.
  auto* helper = app.add_subcommand("h5dread-helper", "")->group("");
  helper->add_option("FILE", file)->required();
  helper->add_option("DATASET", dataset)->required();
  helper->add_option("--parent", args.helper_parent)->required();

  for (CLI::App* cmd : {read, info, bench, helper}) {
    cmd->add_option("--revision", args.hub.revision, "hf:// only: branch, tag, commit sha or refs/pr/N (or @REVISION in the URL)");
    cmd->add_option("--endpoint", args.hub.endpoint, "hf:// only: Hub URL (default $HF_ENDPOINT, else https://huggingface.co)");
    cmd->add_option("--cache-dir", args.hub.cache_dir,
                    "hf:// only: block cache directory, the hubfs mounts' (default $HUBFS_CACHE_DIR, else "
                    "$XDG_CACHE_HOME/hubfs, else ~/.cache/hubfs)");
  }

  // Set after the subcommands (they copy their parent's footer when added): shown once, here.
  app.footer(
      "hf:// files are read in this process through hubfs's reader, block cache and verification "
      "(the mounts' cache directory); the token is found as huggingface_hub finds it ($HF_TOKEN, the "
      "token file). HUBFS_LOG_LEVEL=debug (or info, warning, error) sets what is logged to stderr: at "
      "debug, every request the reader sends and every hint, with millisecond timestamps.");
  // Selections like '-1' look like options to a parser; everything after the dataset is
  // positional for read and bench.
  app.allow_extras(false);
  // Hidden: the man page and the bash completion, generated from the tables above (scripts/package.sh).
  if (argc == 2 && std::strcmp(argv[1], "--help-man") == 0) {
    std::cout << hubfs::cli_docs::man_page(app, "h5chunk", HUBFS_VERSION, "fast parallel reads of chunked HDF5 datasets",
                                           "hubfs(1), h5dump(1)");
    return 0;
  }
  if (argc == 2 && std::strcmp(argv[1], "--help-completion") == 0) {
    std::cout << hubfs::cli_docs::bash_completion(app, "h5chunk");
    return 0;
  }
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e);
  }
  args.command = *helper ? Command::kHelper : *read ? Command::kRead : *info ? Command::kInfo : Command::kBench;
  return -1;
}

}  // namespace h5chunk_cli
