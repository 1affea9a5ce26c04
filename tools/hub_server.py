#!/usr/bin/python3
"""A local stand-in for the Hugging Face Hub, so hubfs tests, the demo and the benchmarks run
offline: this script runs the hub_server package next to it, whose __init__.py documents the
routes, faults and stats. Run with --help for options."""

import os
import sys

# The package sits next to this script; a package directory wins over this same-named module.
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from hub_server.server import main  # noqa: E402

if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
