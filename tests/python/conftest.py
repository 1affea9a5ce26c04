"""Shared pytest setup for the Python packages: makes the built packages importable (build/python,
or $HUBFS_BUILD_DIR/python) and provides h5py-written fixture files."""

import os
import signal
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



@pytest.fixture(autouse=True)
def ctrl_c_raises():
    # A shell starts a background job (`./scripts/test.sh &`, a CI runner's step) with SIGINT
    # ignored, and Python then leaves it ignored: the tests of what Ctrl-C does need it to raise
    # KeyboardInterrupt, as in a terminal (and children they start then get SIGINT's default
    # action, not an inherited "ignore"). What was there is put back after each test.
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    yield
    signal.signal(signal.SIGINT, previous)
