"""Shared pytest setup for the Python packages: makes the built packages importable (build/python,
or $HUBFS_BUILD_DIR/python) and provides h5py-written fixture files."""

import os
import sys

import pytest

REPO_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
BUILD_DIR = os.environ.get("HUBFS_BUILD_DIR", os.path.join(REPO_ROOT, "build"))
PYTHON_DIR = os.path.join(BUILD_DIR, "python")
if PYTHON_DIR not in sys.path:
    sys.path.insert(0, PYTHON_DIR)

# Fail loudly, not by skipping, when the build is missing: a green run must have tested something.
if not os.path.isfile(os.path.join(PYTHON_DIR, "h5chunk", "__init__.py")):
    raise RuntimeError(f"h5chunk is not built in {PYTHON_DIR}: run ./scripts/build.sh first")

